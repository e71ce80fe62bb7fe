package consumer

import (
	"encoding/json"
	"maps"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// CheckUpdate decides whether a consumer whose config is old may take the
// config next, with nats-server v2.15.2's rules, texts and order
// (nats-server v2.15.2 configUpdateCheck, what an update may change; server/consumer.go checkNewConsumerConfig).
// Both configs must have passed SetDefaults and Validate. A refusal is
// 10012 with the text of the first field that may not change:
// deliver_policy, mem_storage, direct, sourcing, opt_start_seq,
// opt_start_time (compared as instants), ack_policy, replay_policy,
// idle_heartbeat, flow_control, push to pull or back, max_waiting; then
// 10116 for more backoff entries than max_deliver.
//
// When both are push consumers with different deliver subjects, CheckUpdate
// accepts the move; the caller must first refuse it with 10013 while the
// old deliver subject still has subscribers (nats-server checks that
// interest at this point of the sequence, and nothing after it can fail
// for a validated config). pause_until is not compared: the caller copies
// it from old, as nats-server does for any create or update of an
// existing consumer.
func CheckUpdate(old, next *Config) *jserr.Error {
	if text := frozenChange(old, next); text != "" {
		return jserr.New(jserr.ConsumerCreate, jserr.Sub("err", text))
	}
	return next.checkBackOff()
}

// frozenChange returns nats-server's text for the first field that
// differs between old and next and may not be updated, or "".
func frozenChange(old, next *Config) string {
	for _, f := range []struct {
		changed bool
		text    string
	}{
		{old.DeliverPolicy != next.DeliverPolicy, "deliver policy can not be updated"},
		{old.MemoryStorage != next.MemoryStorage, "storage type can not be updated"},
		{old.Direct != next.Direct, "direct can not be updated"},
		{old.Sourcing != next.Sourcing, "sourcing can not be updated"},
		{old.OptStartSeq != next.OptStartSeq, "start sequence can not be updated"},
		{!sameInstant(old, next), "start time can not be updated"},
		{old.AckPolicy != next.AckPolicy, "ack policy can not be updated"},
		{old.ReplayPolicy != next.ReplayPolicy, "replay policy can not be updated"},
		{old.Heartbeat != next.Heartbeat, "heart beats can not be updated"},
		{old.FlowControl != next.FlowControl, "flow control can not be updated"},
		{!old.IsPush() && next.IsPush(), "can not update pull consumer to push based"},
		{old.IsPush() && !next.IsPush(), "can not update push consumer to pull based"},
		{old.MaxWaiting != next.MaxWaiting, "max waiting can not be updated"},
	} {
		if f.changed {
			return f.text
		}
	}
	return ""
}

// sameInstant reports whether old and next have the same opt_start_time:
// both unset, or both set to the same instant in any time zone.
func sameInstant(old, next *Config) bool {
	a, b := old.OptStartTime, next.OptStartTime
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// EqualForCreate reports whether c, a new config after SetDefaults, is the
// same as existing, the stored config of the consumer with that name: the
// test for an idempotent create with action "create" (nats-server v2.15.2 consumer create, jsConsumerCreateRequest; nats-server addConsumerWithAssignment), where false means 10148.
// It ignores pause_until (a create never changes it) and the versioning
// metadata keys nats-server manages (stream.MetaRequiredLevel,
// MetaServerVersion, MetaServerLevel; copyConsumerMetadata), and treats
// empty metadata as none. Like stream.Config.Equal it compares the JSON
// encodings, which differs from nats-server's reflect.DeepEqual only for
// a list sent empty rather than left out (nats-server, until it restarts,
// tells filter_subjects [] from no filter_subjects and answers 10148).
//
// An ephemeral's stored inactive_threshold carries the default that
// SetEphemeralThreshold stamps, so an identical re-create that leaves it
// out is not equal, as in nats-server.
func (c *Config) EqualForCreate(existing *Config) bool {
	a, b := c.forCompare(), existing.forCompare()
	x, errX := json.Marshal(&a)
	y, errY := json.Marshal(&b)
	return errX == nil && errY == nil && string(x) == string(y)
}

// forCompare returns a copy of c without pause_until and the versioning
// metadata, with an empty metadata map as nil.
func (c *Config) forCompare() Config {
	n := *c
	n.PauseUntil = nil
	n.Metadata = maps.Clone(c.Metadata)
	delete(n.Metadata, stream.MetaRequiredLevel)
	delete(n.Metadata, stream.MetaServerVersion)
	delete(n.Metadata, stream.MetaServerLevel)
	if len(n.Metadata) == 0 {
		n.Metadata = nil
	}
	return n
}
