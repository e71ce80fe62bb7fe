package stream

import (
	"maps"
	"strconv"
)

// The versioning keys nats-server keeps in a stream's metadata
// (server/jetstream_versioning.go). The required level is stored with the
// config; the server version and level are added to every config the API
// returns and never stored.
const (
	MetaRequiredLevel = "_nats.req.level"
	MetaServerVersion = "_nats.ver"
	MetaServerLevel   = "_nats.level"
)

// RequiredAPILevel returns the JetStream API level the features of c
// need: 1 for per-message TTLs or subject delete markers, 2 for counters,
// atomic batches, schedules or async persistence, 4 for fast batches,
// else 0 (nats-server setStaticStreamMetadata).
func (c *Config) RequiredAPILevel() int {
	level := 0
	need := func(on bool, l int) {
		if on && l > level {
			level = l
		}
	}
	need(c.AllowMsgTTL || c.SubjectDeleteMarkerTTL > 0, 1)
	need(c.AllowMsgCounter || c.AllowAtomicPublish || c.AllowMsgSchedules, 2)
	need(c.PersistMode == AsyncPersist, 2)
	need(c.AllowBatchPublish, 4)
	return level
}

// SetStaticMetadata prepares c's metadata for storing, as nats-server does
// on every create and update request before validation: it removes the
// server version and level keys a client may have echoed back and sets
// MetaRequiredLevel to RequiredAPILevel. The metadata map is created if
// needed (so a stored config always has metadata).
func (c *Config) SetStaticMetadata() {
	if c.Metadata == nil {
		c.Metadata = make(map[string]string)
	}
	delete(c.Metadata, MetaServerVersion)
	delete(c.Metadata, MetaServerLevel)
	c.Metadata[MetaRequiredLevel] = strconv.Itoa(c.RequiredAPILevel())
}

// WithServerMetadata returns a copy of c, for an API response, whose
// metadata (a new map) also holds MetaServerVersion = version and
// MetaServerLevel = level, the values a server advertises (nats-server
// setDynamicStreamMetadata). c is not modified.
func (c *Config) WithServerMetadata(version string, level int) Config {
	n := *c
	n.Metadata = maps.Clone(c.Metadata)
	if n.Metadata == nil {
		n.Metadata = make(map[string]string, 2)
	}
	n.Metadata[MetaServerVersion] = version
	n.Metadata[MetaServerLevel] = strconv.Itoa(level)
	return n
}

// CopyVersionMetadata makes c's versioning metadata that of prev, for the
// comparison of an identical re-create (nats-server copyStreamMetadata):
// it removes the server version and level keys and copies
// MetaRequiredLevel from prev, or removes it when prev has none. An
// emptied metadata map becomes nil.
func (c *Config) CopyVersionMetadata(prev *Config) {
	delete(c.Metadata, MetaServerVersion)
	delete(c.Metadata, MetaServerLevel)
	if v, ok := prev.Metadata[MetaRequiredLevel]; ok {
		if c.Metadata == nil {
			c.Metadata = make(map[string]string, 1)
		}
		c.Metadata[MetaRequiredLevel] = v
		return
	}
	delete(c.Metadata, MetaRequiredLevel)
	if len(c.Metadata) == 0 {
		c.Metadata = nil
	}
}
