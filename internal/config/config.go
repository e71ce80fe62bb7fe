package config

import "time"

// Defaults that checks in this package need, from nats-server v2.15.2
// (server/const.go, opts.go setBaselineOptions). The components apply
// their own defaults to zero values; these must agree with them.
const (
	DefaultMaxPayload          = 1 << 20  // bytes
	DefaultMaxPending          = 64 << 20 // bytes
	DefaultLameDuckDuration    = 2 * time.Minute
	DefaultLameDuckGracePeriod = 10 * time.Second
	// MaxPayloadWarn is the payload size above which nats-server warns
	// that large payloads are discouraged (MAX_PAYLOAD_MAX_SIZE, 8 MiB).
	MaxPayloadWarn = 8 << 20
)

// Unset is the value of a size or limit that was not configured, where 0
// has a meaning of its own (JetStream.MaxMemoryStore, MaxFileStore).
const Unset = -1

// Config is every setting of a cairn server. Zero values mean the
// component's default unless the field says otherwise; Default returns the
// Config that an empty file gives. Every field carries a `key` tag with
// the configuration key it comes from (`-` for fields no key sets), which
// Changes reports.
type Config struct {
	// File is the configuration file given with -c, "" without one.
	File string `key:"-"`
	// Digest is "sha256:<hex>" of the parsed file, as nats-server
	// computes its config_digest; "" without a file.
	Digest string `key:"-"`

	Host            string `key:"host"`             // client listen address; "" = 0.0.0.0
	Port            int    `key:"port"`             // client port; 0 = 4222, -1 = a free port
	ServerName      string `key:"server_name"`      // "" = the server id
	ClientAdvertise string `key:"client_advertise"` // "host" or "host:port" sent in INFO host and port instead of the listener's
	// Tags are server_tags: lowercased, trimmed, without duplicates or
	// empty ones, in the order written (nats-server v2.15.2 jwt.TagList).
	// Monitoring shows them and stream placement matches them
	// (docs/cluster.md, "The meta group" (placement)).
	Tags []string `key:"server_tags"`

	Limits    Limits    // the client protocol limits (limits.go)
	Log       Log       // logging (logging.go)
	Process   Process   // pid file, profiling, lame duck (process.go)
	Monitor   Monitor   // HTTP monitoring (monitoring.go)
	JetStream JetStream // the jetstream block (jetstream.go)
	Cluster   Cluster   // the cluster block (cluster.go)
	Auth      Auth      // the authorization block, no_auth_user and the accounts (auth.go, accounts.go)
	TLS       TLS       // the tls block of the client listener (tls.go)
	Operator  Operator  // JWT authentication: operators and preloaded accounts (operator.go)
}

// Default returns the Config of an empty file: every field zero except
// those whose default is not their zero value (log timestamps on, the
// JetStream storage limits Unset).
func Default() *Config {
	return &Config{
		Log:       Log{Time: true},
		JetStream: JetStream{MaxMemoryStore: Unset, MaxFileStore: Unset},
	}
}

// Clone returns a copy of c. It shares only the slices and pointers of
// Auth, which nothing modifies once set (Auth).
func (c *Config) Clone() *Config {
	cp := *c
	return &cp
}
