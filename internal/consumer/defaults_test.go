package consumer

import (
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/stream"
)

// TestSetDefaultsPinnedTTL: pinned_client gets a 2 min priority_timeout
// (observed: "priority_timeout":120000000000 in nats-server's response);
// other policies keep 0. Validate refuses both in cairn, so this is
// checked on SetDefaults alone.
func TestSetDefaultsPinnedTTL(t *testing.T) {
	s := streamConfig(t, oracleStreams["S"])
	for policy, want := range map[PriorityPolicy]time.Duration{
		PriorityPinnedClient: DefaultPinnedTTL,
		PriorityOverflow:     0,
		PriorityPrioritized:  0,
	} {
		c := &Config{PriorityPolicy: policy, PriorityGroups: []string{"A"}}
		if err := c.SetDefaults(s, false); err != nil {
			t.Fatal(err)
		}
		if c.PinnedTTL != want {
			t.Errorf("%v: priority_timeout %v, want %v", policy, c.PinnedTTL, want)
		}
	}
	c := &Config{PriorityPolicy: PriorityPinnedClient, PinnedTTL: time.Second}
	if err := c.SetDefaults(s, false); err != nil || c.PinnedTTL != time.Second {
		t.Errorf("set priority_timeout changed to %v (%v)", c.PinnedTTL, err)
	}
}

// TestSetDefaultsLeavesEphemeralThreshold: the 5 s ephemeral default is
// stamped after the create comparison, not by SetDefaults (nats-server
// updateInactiveThreshold; observed: an identical action "create" of an
// ephemeral that left inactive_threshold out gives 10148).
func TestSetDefaultsLeavesEphemeralThreshold(t *testing.T) {
	s := streamConfig(t, oracleStreams["S"])
	eph := &Config{Name: "E", InactiveThreshold: -time.Second}
	if err := eph.SetDefaults(s, false); err != nil {
		t.Fatal(err)
	}
	if eph.InactiveThreshold != 0 {
		t.Fatalf("SetDefaults set inactive_threshold %v", eph.InactiveThreshold)
	}
	eph.SetEphemeralThreshold()
	if eph.InactiveThreshold != DefaultInactiveThreshold {
		t.Fatalf("ephemeral inactive_threshold %v", eph.InactiveThreshold)
	}
	dur := &Config{Durable: "D", Name: "D"}
	dur.SetEphemeralThreshold()
	if dur.InactiveThreshold != 0 {
		t.Fatalf("durable inactive_threshold %v", dur.InactiveThreshold)
	}
	set := &Config{Name: "E", InactiveThreshold: time.Minute}
	set.SetEphemeralThreshold()
	if set.InactiveThreshold != time.Minute {
		t.Fatalf("set inactive_threshold changed to %v", set.InactiveThreshold)
	}
}

// TestSetDefaultsStreamLimitsFirst: a stream's consumer_limits apply
// before the 1000 default, and also to ack none (observed on stream "L":
// max_ack_pending 50 for ack none and explicit).
func TestSetDefaultsStreamLimitsFirst(t *testing.T) {
	s := streamConfig(t, oracleStreams["L"])
	for _, ack := range []AckPolicy{AckNone, AckExplicit, AckAll} {
		c := &Config{AckPolicy: ack}
		if err := c.SetDefaults(s, false); err != nil {
			t.Fatal(err)
		}
		if c.MaxAckPending != 50 || c.InactiveThreshold != 10*time.Second {
			t.Errorf("%v: max_ack_pending %d inactive_threshold %v", ack, c.MaxAckPending, c.InactiveThreshold)
		}
	}
}

func TestRequiredAPILevel(t *testing.T) {
	future := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		c    Config
		want int
	}{
		{"plain", Config{AckPolicy: AckExplicit}, 0},
		{"zero pause_until", Config{PauseUntil: &time.Time{}}, 0},
		{"pause_until", Config{PauseUntil: &future}, 1},
		{"priority policy", Config{PriorityPolicy: PriorityOverflow}, 1},
		{"priority groups", Config{PriorityGroups: []string{"A"}}, 1},
		{"priority_timeout", Config{PinnedTTL: time.Second}, 1},
		{"ack flow_control", Config{AckPolicy: AckFlowControl, PauseUntil: &future}, 4},
	}
	for _, tc := range cases {
		if got := tc.c.RequiredAPILevel(); got != tc.want {
			t.Errorf("%s: level %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestSetStaticMetadata: echoed server keys are dropped, the required
// level is (re)computed, user keys stay; WithServerMetadata adds the
// server keys to a copy only.
func TestSetStaticMetadata(t *testing.T) {
	c := &Config{PriorityGroups: []string{"A"}, Metadata: map[string]string{
		"_nats.ver": "2.10.0", "_nats.level": "1", "_nats.req.level": "9", "owner": "ops",
	}}
	c.SetStaticMetadata()
	if got := mustJSON(t, c.Metadata); got != `{"_nats.req.level":"1","owner":"ops"}` {
		t.Fatalf("metadata %s", got)
	}
	out := c.WithServerMetadata("2.15.2", 5)
	if got := mustJSON(t, out.Metadata); got != `{"_nats.level":"5","_nats.req.level":"1","_nats.ver":"2.15.2","owner":"ops"}` {
		t.Fatalf("response metadata %s", got)
	}
	if len(c.Metadata) != 2 {
		t.Fatalf("WithServerMetadata changed c: %v", c.Metadata)
	}
	empty := &Config{}
	empty.SetStaticMetadata()
	if got := mustJSON(t, empty.Metadata); got != `{"_nats.req.level":"0"}` {
		t.Fatalf("metadata of an empty config %s", got)
	}
}

// TestEffectiveReplicas follows nats-server v2.15.2's
// ConsumerConfig.replicas: durables default to the stream's count,
// ephemerals of limits streams to one, those of interest and workqueue
// streams to the stream's; a set count stays.
func TestEffectiveReplicas(t *testing.T) {
	limits := &stream.Config{Replicas: 3, Retention: stream.LimitsPolicy}
	interest := &stream.Config{Replicas: 3, Retention: stream.InterestPolicy}
	r1 := &stream.Config{Replicas: 0}
	for _, tc := range []struct {
		name string
		c    Config
		s    *stream.Config
		want int
	}{
		{"durable default", Config{Durable: "D"}, limits, 3},
		{"durable R1", Config{Durable: "D", Replicas: 1}, limits, 1},
		{"durable R2", Config{Durable: "D", Replicas: 2}, limits, 2},
		{"ephemeral default", Config{}, limits, 1},
		{"named ephemeral default", Config{Name: "E"}, limits, 1},
		{"ephemeral R3", Config{Replicas: 3}, limits, 3},
		{"ephemeral of interest stream", Config{}, interest, 3},
		{"above the stream", Config{Durable: "D", Replicas: 5}, limits, 3},
		{"stream of one replica", Config{Durable: "D"}, r1, 1},
	} {
		if got := tc.c.EffectiveReplicas(tc.s); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestAccountMaxAckPending: the account's max_ack_pending lowers the
// 1000 default (never raises it) and refuses more with 10121 naming the
// limit, also when the stream's consumer_limits set more (nats-server
// v2.15.2 setConsumerConfigDefaults, checkConsumerCfg).
func TestAccountMaxAckPending(t *testing.T) {
	s := streamConfig(t, oracleStreams["S"])
	for _, c := range []struct {
		acc, set, want int
		ack            AckPolicy
		err            bool
	}{
		{acc: 50, want: 50, ack: AckExplicit},
		{acc: 5000, want: DefaultMaxAckPending, ack: AckExplicit},
		{acc: -1, want: DefaultMaxAckPending, ack: AckExplicit},
		{acc: 50, want: 0, ack: AckNone},
		{acc: 50, set: 50, want: 50, ack: AckAll},
		{acc: 50, set: 51, ack: AckExplicit, err: true},
		{acc: 50, set: -1, want: -1, ack: AckExplicit},
	} {
		cfg := &Config{Durable: "D", AckPolicy: c.ack, MaxAckPending: c.set}
		acc := AccountLimits{MaxAckPending: c.acc}
		if err := cfg.SetDefaultsIn(s, acc, false); err != nil {
			t.Fatal(err)
		}
		err := cfg.ValidateIn(s, acc, false)
		switch {
		case c.err && (err == nil || err.ErrCode != 10121 || err.Description != "consumer max ack pending exceeds system limit of 50"):
			t.Errorf("%+v: error %v, want 10121 naming 50", c, err)
		case !c.err && err != nil:
			t.Errorf("%+v: %v", c, err)
		case !c.err && cfg.MaxAckPending != c.want:
			t.Errorf("%+v: max_ack_pending %d, want %d", c, cfg.MaxAckPending, c.want)
		}
	}
	lim := *s
	lim.ConsumerLimits.MaxAckPending = 100
	cfg := &Config{Durable: "D", AckPolicy: AckExplicit}
	acc := AccountLimits{MaxAckPending: 50}
	if err := cfg.SetDefaultsIn(&lim, acc, false); err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateIn(&lim, acc, false); err == nil || err.ErrCode != 10121 {
		t.Errorf("stream consumer_limits 100 above the account's 50: %v, want 10121", err)
	}
}
