package consumer

import (
	"errors"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// The values nats-server v2.15.2 fills into a consumer config
// (nats-server v2.15.2 defaults, setStreamConfigDefaults and setConsumerConfigDefaults; server/consumer.go and server/stream.go
// constants named in each comment).
const (
	// DefaultAckWait is the ack_wait of an explicit or all ack consumer
	// that sets none (JsAckWaitDefault).
	DefaultAckWait = 30 * time.Second
	// DefaultMaxWaiting is the max_waiting, in queued pull requests, of
	// a pull consumer that sets none (JSWaitQueueDefaultMax).
	DefaultMaxWaiting = 512
	// DefaultMaxAckPending is the max_ack_pending, in messages, of a
	// consumer with an ack policy other than none that sets none and
	// whose stream has no consumer_limits.max_ack_pending
	// (JsDefaultMaxAckPending).
	DefaultMaxAckPending = 1000
	// DefaultInactiveThreshold is the inactive_threshold an ephemeral
	// consumer gets when neither it nor its stream's consumer_limits set
	// one (JsDeleteWaitTimeDefault); see SetEphemeralThreshold.
	DefaultInactiveThreshold = 5 * time.Second
	// DefaultPinnedTTL is the priority_timeout of a pinned_client
	// consumer that sets none (JsDefaultPinnedTTL).
	DefaultPinnedTTL = 2 * time.Minute
	// FlowControlHeartbeat is the idle_heartbeat an ack policy
	// flow_control consumer gets, and the only one it may have
	// (sourceHealthHB).
	FlowControlHeartbeat = time.Second
)

// SetDefaults fills in c's defaults against its stream s, in the order
// of nats-server v2.15.2 setConsumerConfigDefaults (nats-server v2.15.2 ConsumerConfig; nats-server v2.15.2 defaults, setStreamConfigDefaults and setConsumerConfigDefaults). It is the first of the steps a create request takes with
// this package, in nats-server's order (jsConsumerCreateRequest,
// addConsumerWithAssignment):
//
//  1. the API layer's subject and name checks, then, if the consumer
//     exists, pause_until copied from it; SetStaticMetadata;
//  2. SetDefaults, then Validate;
//  3. if it exists: EqualForCreate for action "create" (else 10148),
//     CheckWorkQueueUpdate on a workqueue stream, CheckUpdate (and 10013
//     for a moved deliver subject that still has interest);
//  4. if not: 10149 for action "update", max_consumers (10026, counting
//     Limitable consumers), CheckWorkQueue on a workqueue stream,
//     CheckDurableLength;
//  5. SetEphemeralThreshold on the config that is stored.
//
// SetDefaults itself does this:
//
//   - max_deliver 0 or below -1 becomes -1 (unlimited); negative
//     max_waiting, max_batch, max_expires, max_bytes, idle_heartbeat,
//     inactive_threshold and priority_timeout become 0, and
//     max_ack_pending below -1 becomes -1;
//   - a pull consumer's max_waiting 0 becomes DefaultMaxWaiting;
//   - ack_wait 0 becomes DefaultAckWait for ack policy explicit or all,
//     and a non-empty backoff sets ack_wait to backoff[0];
//   - max_ack_pending 0 and inactive_threshold 0 take the stream's
//     consumer_limits, then a max_ack_pending still 0 becomes
//     DefaultMaxAckPending unless the ack policy is none;
//   - priority_timeout 0 becomes DefaultPinnedTTL for pinned_client;
//   - ack policy flow_control sets flow_control and an idle_heartbeat of
//     FlowControlHeartbeat (not in pedantic mode).
//
// deliver_policy "all", replay_policy "instant" and num_replicas 0 (the
// stream's) are the zero values and need nothing. The ephemeral
// inactive_threshold is not set here: see SetEphemeralThreshold.
//
// With pedantic set, correcting an out-of-range value, overriding
// ack_wait with backoff[0] and inheriting a stream consumer_limit are
// error 10157 instead ("pedantic mode: ...", nats-server's texts), and ack
// policy flow_control sets nothing; the other defaults are still filled.
// On error c may be partly defaulted. SetDefaults applies no account
// limits: it is SetDefaultsIn with none. (nats-server also takes
// defaults from the server's jetstream limits, which cairn does not
// have.)
func (c *Config) SetDefaults(s *stream.Config, pedantic bool) *jserr.Error {
	return c.SetDefaultsIn(s, AccountLimits{}, pedantic)
}

// AccountLimits are the JetStream limits of a consumer's account that
// bound its config (nats-server v2.15.2 JetStreamAccountLimits, the
// accounts block's jetstream { max_ack_pending } or an account JWT's
// jetstream limits): MaxAckPending, in messages, 0 or below for none.
type AccountLimits struct {
	MaxAckPending int
}

// SetDefaultsIn is SetDefaults for a consumer of an account with limits
// acc: the max_ack_pending a consumer with an ack policy other than none
// gets when neither it nor its stream's consumer_limits set one is
// DefaultMaxAckPending or acc.MaxAckPending, whichever is smaller, as in
// nats-server v2.15.2 setConsumerConfigDefaults.
func (c *Config) SetDefaultsIn(s *stream.Config, acc AccountLimits, pedantic bool) *jserr.Error {
	if err := c.clampLimits(pedantic); err != nil {
		return err
	}
	if err := c.fillAckDefaults(pedantic); err != nil {
		return err
	}
	if err := c.inheritLimits(&s.ConsumerLimits, pedantic); err != nil {
		return err
	}
	if c.MaxAckPending == 0 && c.AckPolicy != AckNone {
		c.MaxAckPending = DefaultMaxAckPending
		if acc.MaxAckPending > 0 && acc.MaxAckPending < c.MaxAckPending {
			c.MaxAckPending = acc.MaxAckPending
		}
	}
	if c.PriorityPolicy == PriorityPinnedClient && c.PinnedTTL == 0 {
		c.PinnedTTL = DefaultPinnedTTL
	}
	if c.AckPolicy == AckFlowControl && !pedantic {
		c.FlowControl = true
		c.Heartbeat = FlowControlHeartbeat
	}
	return nil
}

// SetEphemeralThreshold gives an ephemeral consumer (no durable_name)
// whose inactive_threshold is 0 or negative the DefaultInactiveThreshold,
// as nats-server v2.15.2 does when it creates the consumer or changes its
// threshold (consumer.go updateInactiveThreshold). Call it on the config
// that is stored, after SetDefaults, Validate and the action "create"
// comparison: nats-server compares before it stamps the default, so an
// ephemeral re-created with the same config that left inactive_threshold
// out gets 10148. Durables are left as they are (0 means never).
func (c *Config) SetEphemeralThreshold() {
	if !c.IsDurable() && c.InactiveThreshold <= 0 {
		c.InactiveThreshold = DefaultInactiveThreshold
	}
}

// EffectiveReplicas returns how many replicas a consumer with config c
// of a stream with config s has in a cluster, as nats-server v2.15.2
// computes it (consumer.go ConsumerConfig.replicas): num_replicas when it
// is set and at most the stream's; otherwise the stream's, except that an
// ephemeral (no durable_name) of a limits stream that left num_replicas 0
// has one. Validate refuses a num_replicas above the stream's (10126)
// before this matters.
func (c *Config) EffectiveReplicas(s *stream.Config) int {
	if c.Replicas == 0 || c.Replicas > s.Replicas {
		if !c.IsDurable() && s.Retention == stream.LimitsPolicy && c.Replicas == 0 {
			return 1
		}
		return max(s.Replicas, 1)
	}
	return c.Replicas
}

// IsDurable reports whether c is a durable consumer (it has a
// durable_name; nats-server isDurableConsumer).
func (c *Config) IsDurable() bool { return c.Durable != "" }

// pedanticError returns error 10157 "pedantic mode: <text>".
func pedanticError(text string) *jserr.Error {
	return jserr.New(jserr.Pedantic, jserr.Sub("err", errors.New(text)))
}

// clampLimits replaces out-of-range limits with their "unset" value, or
// reports the first one in pedantic mode.
func (c *Config) clampLimits(pedantic bool) *jserr.Error {
	for _, f := range []struct {
		bad  bool
		text string
		fix  func()
	}{
		{c.MaxDeliver < -1, "max_deliver must be set to -1", func() { c.MaxDeliver = -1 }},
		{c.MaxWaiting < 0, "max_waiting must not be negative", func() { c.MaxWaiting = 0 }},
		{c.MaxAckPending < -1, "max_ack_pending must be set to -1", func() { c.MaxAckPending = -1 }},
		{c.MaxRequestBatch < 0, "max_batch must not be negative", func() { c.MaxRequestBatch = 0 }},
		{c.MaxRequestExpires < 0, "max_expires must not be negative", func() { c.MaxRequestExpires = 0 }},
		{c.MaxRequestMaxBytes < 0, "max_bytes must not be negative", func() { c.MaxRequestMaxBytes = 0 }},
		{c.Heartbeat < 0, "idle_heartbeat must not be negative", func() { c.Heartbeat = 0 }},
		{c.InactiveThreshold < 0, "inactive_threshold must not be negative", func() { c.InactiveThreshold = 0 }},
		{c.PinnedTTL < 0, "priority_timeout must not be negative", func() { c.PinnedTTL = 0 }},
	} {
		if !f.bad {
			continue
		}
		if pedantic {
			return pedanticError(f.text)
		}
		f.fix()
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = -1
	}
	return nil
}

// fillAckDefaults sets max_waiting for pull consumers and ack_wait.
func (c *Config) fillAckDefaults(pedantic bool) *jserr.Error {
	if !c.IsPush() && c.MaxWaiting == 0 {
		c.MaxWaiting = DefaultMaxWaiting
	}
	if c.AckWait == 0 && (c.AckPolicy == AckExplicit || c.AckPolicy == AckAll) {
		c.AckWait = DefaultAckWait
	}
	if len(c.BackOff) > 0 {
		if pedantic && c.AckWait != c.BackOff[0] {
			return pedanticError("first backoff value has to equal batch AckWait")
		}
		c.AckWait = c.BackOff[0]
	}
	return nil
}

// inheritLimits takes max_ack_pending and inactive_threshold from the
// stream's consumer_limits when c leaves them 0.
func (c *Config) inheritLimits(lim *stream.ConsumerLimits, pedantic bool) *jserr.Error {
	if c.MaxAckPending == 0 {
		if pedantic && lim.MaxAckPending > 0 {
			return pedanticError("max_ack_pending must be set if it's configured in stream limits")
		}
		c.MaxAckPending = lim.MaxAckPending
	}
	if c.InactiveThreshold == 0 {
		if pedantic && lim.InactiveThreshold > 0 {
			return pedanticError("inactive_threshold must be set if it's configured in stream limits")
		}
		c.InactiveThreshold = lim.InactiveThreshold
	}
	return nil
}
