package config

import (
	"strings"
	"time"
)

// JetStream is the jetstream block (docs/configuration.md, Keys) and the
// top-level store_dir.
type JetStream struct {
	Enabled  bool   `key:"jetstream"` // -js; a jetstream block enables it unless it says enabled: false
	StoreDir string `key:"store_dir"` // -sd; data goes in <StoreDir>/jetstream; "" = the temporary directory
	// MaxMemoryStore and MaxFileStore are the server's storage limits in
	// bytes: Unset (the default) sizes them from the machine, as
	// nats-server does (server.Options.MaxMemoryStore); 0 allows no stream
	// of that storage type (nats-server's meaning: the Helm chart writes
	// max_memory_store: 0 to turn memory storage off).
	MaxMemoryStore int64 `key:"max_memory_store"`
	MaxFileStore   int64 `key:"max_file_store"`
	// AckBeforeSyncInterval, when positive, trades durability for speed:
	// a PubAck is sent before the message is fsynced, and the file store
	// syncs every interval, so a power loss can take back up to an
	// interval of acknowledged messages. 0 (the default) acknowledges only
	// fsynced messages, which is nats-server's sync_interval: always.
	AckBeforeSyncInterval time.Duration `key:"ack_before_sync_interval"`
	// Domain is the JetStream domain (nats-server's jetstream { domain }):
	// the API also answers under $JS.<Domain>.API, and PubAcks, stream
	// infos, account info and advisories name it. "" for none.
	Domain string `key:"domain"`
	// DefaultMaxConsumers is limits { default_max_consumers }: the
	// consumers a stream may have when neither its max_consumers nor its
	// account's sets a cap (nats-server v2.15.2 JSLimitOpts). 0 (unset)
	// is nats-server's 1000, negative is no cap.
	DefaultMaxConsumers int `key:"default_max_consumers"`
	// UniqueTag is unique_tag, lowercased and trimmed: the prefix of the
	// server tag no two replicas of a stream may share (nats-server
	// v2.15.2 JetStreamUniqueTag; docs/cluster.md, "The meta group" (placement)). ""
	// for no such rule.
	UniqueTag string `key:"unique_tag"`
	// MaxBufferedSize and MaxBufferedMsgs bound each stream's ingest
	// queue: the bytes (subject, reply, header and data) and the
	// publishes it holds before it answers 429 / 10167 (nats-server
	// v2.15.2 StreamMaxBufferedSize and StreamMaxBufferedMsgs). 0 (unset)
	// is nats-server's default, 128 MiB and 100,000; negative is no bound,
	// as in nats-server.
	MaxBufferedSize int64 `key:"max_buffered_size"`
	MaxBufferedMsgs int64 `key:"max_buffered_msgs"`
}

// jetstreamKeys are the top-level JetStream keys.
var jetstreamKeys = keyTable{
	"jetstream": jetstreamKey,
	"store_dir": storeDirKey,
	"storedir":  storeDirKey,
}

// jetstreamBlockKeys are the keys of the jetstream block in nats-server
// v2.15.2 (server/opts.go parseJetStream), and cairn's
// ack_before_sync_interval. The tuning keys ignored are those of
// nats-server's internal queues cairn has no counterpart of.
var jetstreamBlockKeys = keyTable{
	"enable":                   jsEnableKey,
	"enabled":                  jsEnableKey,
	"strict":                   jsStrictKey,
	"store":                    storeDirKey,
	"store_dir":                storeDirKey,
	"storedir":                 storeDirKey,
	"sync":                     syncIntervalKey,
	"sync_interval":            syncIntervalKey,
	"ack_before_sync_interval": ackBeforeSyncKey,
	"max_memory_store":         maxMemKey,
	"max_mem_store":            maxMemKey,
	"max_mem":                  maxMemKey,
	"max_file_store":           maxFileKey,
	"max_file":                 maxFileKey,
	"domain":                   domainKey,
	"key":                      unsupportedYet,
	"ek":                       unsupportedYet,
	"encryption_key":           unsupportedYet,
	"prev_key":                 unsupportedYet,
	"prev_ek":                  unsupportedYet,
	"prev_encryption_key":      unsupportedYet,
	"cipher":                   unsupportedYet,
	"tpm":                      unsupportedYet,
	"limits":                   jsLimitsKey,
	"extension_hint":           ignoredKey(leafExtension),
	"unique_tag":               uniqueTagKey,
	"max_outstanding_catchup":  ignoredKey(noSuchTuning),
	"max_buffered_size":        maxBufferedSizeKey,
	"max_buffered_msgs":        maxBufferedMsgsKey,
	"request_queue_limit":      ignoredKey(noSuchTuning),
	"info_queue_limit":         ignoredKey(noSuchTuning),
	"meta_compact":             ignoredKey(noSuchTuning),
	"meta_compact_size":        ignoredKey(noSuchTuning),
	"meta_compact_sync":        ignoredKey(noSuchTuning),
	"max_concurrent_io":        ignoredKey(noSuchTuning),
}

const (
	leafExtension = "it says whether JetStream extends over leaf node connections, which cairn does not serve"
	noSuchTuning  = "it tunes an internal queue of nats-server that cairn does not have"
)

// jetstreamKey reads `jetstream: true|false|enabled|disabled` or a block.
func jetstreamKey(c *Config, it item, r *report) {
	switch v := it.val.(type) {
	case bool:
		c.JetStream.Enabled = v
	case string:
		switch strings.ToLower(v) {
		case "enabled", "enable":
			c.JetStream.Enabled = true
		case "disabled", "disable":
			c.JetStream.Enabled = false
		default:
			r.errorf(it, "Expected 'enabled' or 'disabled' for string value, got '%s'", v)
		}
	case map[string]any:
		c.JetStream.Enabled = true
		r.typeAt = &it // nats-server v2.15.2 reports them at the jetstream key
		block(c, v, it, jetstreamBlockKeys, r)
		r.typeAt = nil
		checkSyncConflict(c, v, it, r)
	default:
		r.errorf(it, "Expected map, bool or string to define JetStream, got %T", v)
	}
}

// jsLimitsKeys are the keys of jetstream { limits } in nats-server
// v2.15.2 (opts.go parseJetStreamLimits): cairn applies
// default_max_consumers and refuses the others.
var jsLimitsKeys = keyTable{
	"default_max_consumers": func(c *Config, it item, r *report) {
		if n, ok := r.intOf(it); ok {
			c.JetStream.DefaultMaxConsumers = n
		}
	},
	"max_ack_pending":   unsupportedYet,
	"max_ha_assets":     unsupportedYet,
	"max_request_batch": unsupportedYet,
	"duplicate_window":  unsupportedYet,
	"batch":             unsupportedYet,
}

// jsLimitsKey reads the jetstream block's limits map.
func jsLimitsKey(c *Config, it item, r *report) {
	m, ok := it.val.(map[string]any)
	if !ok {
		r.errorf(it, "Expected a map to define JetStreamLimits, got %T", it.val)
		return
	}
	block(c, m, it, jsLimitsKeys, r)
}

func jsEnableKey(c *Config, it item, r *report) { setBool(&c.JetStream.Enabled, it, r) }

// domainKey reads the JetStream domain with nats-server v2.15.2's checks
// (validateJetStreamOptions): $JS.<domain>.API must be a valid subject,
// and the name may not hold '.', '*' or '>'.
func domainKey(c *Config, it item, r *report) {
	d, ok := r.stringOf(it)
	if !ok {
		return
	}
	switch {
	case !validDomainSubject("$JS." + d + ".API"):
		r.errorf(it, "invalid domain name: derived %q is not a valid subject", "$JS."+d+".API")
	case strings.ContainsAny(d, ".*>"):
		r.errorf(it, "invalid domain name: may not contain ., * or >")
	default:
		c.JetStream.Domain = d
	}
}

// validDomainSubject reports whether s is a valid subject as nats-server's
// IsValidSubject sees one: no empty token and no whitespace.
func validDomainSubject(s string) bool {
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || strings.ContainsAny(tok, " \t\r\n\f") {
			return false
		}
	}
	return true
}

// jsStrictKey accepts strict either way: cairn answers API requests with
// unknown keys leniently (docs/compatibility.md), whatever strict says.
func jsStrictKey(_ *Config, it item, r *report) {
	if _, ok := it.val.(bool); !ok {
		// %s as nats-server's: an integer reads '%!s(int64=5)'.
		r.errorf(it, "Expected 'true' or 'false' for bool value, got '%s'", it.val)
	}
}

// storeDirKey sets the store directory, which may be given once, at the
// top level or in the jetstream block.
func storeDirKey(c *Config, it item, r *report) {
	s, ok := r.stringOf(it)
	if !ok {
		return
	}
	if c.JetStream.StoreDir != "" {
		r.errorf(it, "Duplicate 'store_dir' configuration")
		return
	}
	c.JetStream.StoreDir = s
}

// syncIntervalKey accepts "always", which is what cairn does. Any
// interval would acknowledge messages before they are durable, which
// cairn does only under a name that says so (docs/durability.md item 7).
func syncIntervalKey(_ *Config, it item, r *report) {
	if s, ok := it.val.(string); ok && strings.EqualFold(s, "always") {
		return
	}
	d, ok := r.durationOf(it)
	if !ok {
		return
	}
	r.errorf(it, "%s %v would acknowledge messages before they are on disk, which cairn does only when told so: "+
		"remove it to keep cairn's default (a PubAck after the fsync, nats-server's sync_interval: always), "+
		"or write ack_before_sync_interval: %q to accept losing up to that much acknowledged data in a power loss", it.key, d, d.String())
}

func ackBeforeSyncKey(c *Config, it item, r *report) {
	d, ok := r.durationOf(it)
	if !ok {
		return
	}
	if d <= 0 {
		r.errorf(it, "%s must be positive", it.key)
		return
	}
	c.JetStream.AckBeforeSyncInterval = d
	r.warnf(it, "%s %v: PubAcks are sent before the fsync; a power loss can lose up to %v of acknowledged messages", it.key, d, d)
}

// checkSyncConflict refuses sync_interval: always beside
// ack_before_sync_interval, which contradict each other.
func checkSyncConflict(c *Config, m map[string]any, parent item, r *report) {
	if c.JetStream.AckBeforeSyncInterval == 0 {
		return
	}
	for _, it := range entries(m, parent) {
		k := strings.ToLower(it.key)
		if s, ok := it.val.(string); ok && (k == "sync" || k == "sync_interval") && strings.EqualFold(s, "always") {
			r.errorf(it, "%s always contradicts ack_before_sync_interval", it.key)
		}
	}
}

func maxMemKey(c *Config, it item, r *report) {
	setStorageSize(&c.JetStream.MaxMemoryStore, it, "max_mem_store", r)
}

func maxFileKey(c *Config, it item, r *report) {
	setStorageSize(&c.JetStream.MaxFileStore, it, "max_file_store", r)
}

// setStorageSize reads a storage limit; a negative one is Unset, as
// nats-server takes it to mean "size it from the machine".
func setStorageSize(dst *int64, it item, name string, r *report) {
	n, ok := r.storageSizeOf(it, name)
	if !ok {
		return
	}
	if n < 0 {
		n = Unset
	}
	*dst = n
}

// uniqueTagKey reads jetstream { unique_tag }: a string, kept lowercased
// and trimmed as nats-server v2.15.2 keeps it.
func uniqueTagKey(c *Config, it item, r *report) {
	if s, ok := r.stringOf(it); ok {
		c.JetStream.UniqueTag = strings.ToLower(strings.TrimSpace(s))
	}
}

// maxBufferedSizeKey reads jetstream { max_buffered_size } as nats-server
// v2.15.2 does (opts.go parseJetStream, getStorageSize): an integer (the
// parser's size suffixes, "4KB", allowed) or a string of digits and K, M,
// G or T, its errors prefixed with the key lowercased.
func maxBufferedSizeKey(c *Config, it item, r *report) {
	if n, ok := r.storageSizeOf(it, strings.ToLower(it.key)); ok {
		c.JetStream.MaxBufferedSize = n
	}
}

// maxBufferedMsgsKey reads jetstream { max_buffered_msgs }: an integer,
// anything else nats-server v2.15.2's error ("Expected a parseable size
// for "max_buffered_msgs", got 1K", the key as written).
func maxBufferedMsgsKey(c *Config, it item, r *report) {
	n, ok := it.val.(int64)
	if !ok {
		r.errorf(it, "Expected a parseable size for %q, got %v", it.key, it.val)
		return
	}
	c.JetStream.MaxBufferedMsgs = n
}
