package consumer

import (
	"maps"
	"strconv"

	"github.com/cairnmq/cairn/internal/stream"
)

// RequiredAPILevel returns the JetStream API level c's features need: 1
// for a pause_until or priority settings (nats-server 2.11), 4 for ack
// policy flow_control (2.14), else 0 (nats-server v2.15.2
// setStaticConsumerMetadata).
func (c *Config) RequiredAPILevel() int {
	level := 0
	need := func(on bool, l int) {
		if on && l > level {
			level = l
		}
	}
	need(c.PauseUntil != nil && !c.PauseUntil.IsZero(), 1)
	need(c.PriorityPolicy != PriorityNone || c.PinnedTTL != 0 || len(c.PriorityGroups) > 0, 1)
	need(c.AckPolicy == AckFlowControl, 4)
	return level
}

// SetStaticMetadata prepares c's metadata for storing, as nats-server
// v2.15.2 does on every consumer create request before defaults and
// validation (setStaticConsumerMetadata): it removes the server version
// and level keys (stream.MetaServerVersion, stream.MetaServerLevel) a
// client may have echoed back and sets stream.MetaRequiredLevel to
// RequiredAPILevel, creating the map if needed. The key counts towards
// the 128 KiB metadata limit (10135), as in nats-server.
func (c *Config) SetStaticMetadata() {
	if c.Metadata == nil {
		c.Metadata = make(map[string]string)
	}
	delete(c.Metadata, stream.MetaServerVersion)
	delete(c.Metadata, stream.MetaServerLevel)
	c.Metadata[stream.MetaRequiredLevel] = strconv.Itoa(c.RequiredAPILevel())
}

// WithServerMetadata returns a copy of c, for an API response, whose
// metadata (a new map) also holds stream.MetaServerVersion = version and
// stream.MetaServerLevel = level (nats-server setDynamicConsumerMetadata).
// c is not modified; the copy shares c's other slices and pointers.
func (c *Config) WithServerMetadata(version string, level int) Config {
	n := *c
	n.Metadata = maps.Clone(c.Metadata)
	if n.Metadata == nil {
		n.Metadata = make(map[string]string, 2)
	}
	n.Metadata[stream.MetaServerVersion] = version
	n.Metadata[stream.MetaServerLevel] = strconv.Itoa(level)
	return n
}
