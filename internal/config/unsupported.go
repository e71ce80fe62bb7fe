package config

// unsupportedKeys are nats-server v2.15.2's top-level keys of features
// cairn does not have (see the package comment for the rule): the other
// engineers' blocks (authorization, accounts, tls) move out of this table
// into files of their own as they are implemented.
var unsupportedKeys = keyTable{
	// Features cairn will not have: a client of these listeners would find
	// nothing.
	"leafnodes": unsupported,
	"leaf":      unsupported,
	"gateway":   unsupported,
	"websocket": unsupported,
	"ws":        unsupported,
	"mqtt":      unsupported,

	// Features cairn does not have yet, whose absence a client would see
	// (no authentication where the file asks for it, no TLS, ...).
	"default_sentinel":  unsupportedYet,
	"ocsp":              unsupportedYet,
	"ocsp_cache":        unsupportedYet,
	"mappings":          unsupportedYet,
	"maps":              unsupportedYet,
	"default_js_domain": unsupportedYet,
	"proxies":           unsupportedYet,
	"proxy_protocol":    zeroOnlyBool,
	"no_header_support": zeroOnlyBool,

	// Settings whose absence a client does not see.
	"connect_error_reports":   ignoredKey("it paces the logging of route, gateway and leafnode connection errors, which cairn does not have"),
	"reconnect_error_reports": ignoredKey("it paces the logging of route, gateway and leafnode connection errors, which cairn does not have"),
	"server_metadata":         ignoredKey("cairn's monitoring does not show server metadata yet"),
	"disable_sublist_cache":   ignoredKey("cairn's subject index cache cannot be turned off"),
	"no_sublist_cache":        ignoredKey("cairn's subject index cache cannot be turned off"),
	"no_fast_producer_stall":  ignoredKey("cairn slows a publisher for at most a few milliseconds while a receiver catches up"),
	"feature_flags":           ignoredKey("it switches nats-server's experimental features"),
}

// unsupported refuses a key of a feature cairn will not have.
func unsupported(_ *Config, it item, r *report) {
	r.errorf(it, "field %q is not supported by cairn", it.key)
}

// unsupportedYet refuses a key of a feature cairn does not have yet.
func unsupportedYet(_ *Config, it item, r *report) {
	r.errorf(it, "field %q is not supported by cairn yet", it.key)
}

// zeroOnlyBool accepts false (what cairn does) and refuses true.
func zeroOnlyBool(_ *Config, it item, r *report) {
	if b, ok := r.boolOf(it); ok && b {
		unsupportedYet(nil, it, r)
	}
}

// ignoredKey accepts any value with a warning saying why it changes
// nothing a client sees.
func ignoredKey(why string) keyFunc {
	return func(_ *Config, it item, r *report) { r.ignored(it, why) }
}
