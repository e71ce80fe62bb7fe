package consumer

import (
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
)

// TestCheckUpdate: each field that may not change, with nats-server's
// 10012 text (checkNewConsumerConfig), and fields that may.
func TestCheckUpdate(t *testing.T) {
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	sameInstant := t0.In(time.FixedZone("", 2*3600))
	later := t0.Add(time.Second)
	base := func() *Config {
		return &Config{Durable: "D", Name: "D", AckPolicy: AckExplicit, AckWait: DefaultAckWait,
			MaxDeliver: -1, MaxWaiting: DefaultMaxWaiting, MaxAckPending: DefaultMaxAckPending}
	}
	push := func(c *Config) { c.DeliverSubject, c.MaxWaiting, c.Heartbeat = "d1", 0, time.Second }
	cases := []struct {
		name      string
		old, next func(c *Config)
		want      jserr.ErrCode
		text      string
	}{
		{"unchanged", nil, nil, 0, ""},
		{"allowed changes", nil, func(c *Config) {
			c.Description, c.AckWait, c.MaxDeliver, c.BackOff = "d", time.Second, 5, []time.Duration{time.Second}
			c.FilterSubjects, c.SampleFrequency, c.MaxAckPending, c.HeadersOnly = []string{"a", "b"}, "5%", 7, true
			c.MaxRequestBatch, c.MaxRequestExpires, c.MaxRequestMaxBytes = 3, time.Second, 99
			c.InactiveThreshold, c.Metadata, c.Replicas = time.Minute, map[string]string{"a": "b"}, 1
			c.RateLimit, c.PriorityGroups = 100, []string{"A"}
		}, 0, ""},
		{"deliver policy", nil, func(c *Config) { c.DeliverPolicy = DeliverNew }, jserr.ConsumerCreate, "deliver policy can not be updated"},
		{"mem_storage", nil, func(c *Config) { c.MemoryStorage = true }, jserr.ConsumerCreate, "storage type can not be updated"},
		{"direct", nil, func(c *Config) { c.Direct = true }, jserr.ConsumerCreate, "direct can not be updated"},
		{"sourcing", nil, func(c *Config) { c.Sourcing = true }, jserr.ConsumerCreate, "sourcing can not be updated"},
		{"start sequence", func(c *Config) { c.OptStartSeq = 5 }, func(c *Config) { c.OptStartSeq = 6 }, jserr.ConsumerCreate, "start sequence can not be updated"},
		{"start time set", nil, func(c *Config) { c.OptStartTime = &t0 }, jserr.ConsumerCreate, "start time can not be updated"},
		{"start time removed", func(c *Config) { c.OptStartTime = &t0 }, func(c *Config) { c.OptStartTime = nil }, jserr.ConsumerCreate, "start time can not be updated"},
		{"start time moved", func(c *Config) { c.OptStartTime = &t0 }, func(c *Config) { c.OptStartTime = &later }, jserr.ConsumerCreate, "start time can not be updated"},
		{"start time same instant", func(c *Config) { c.OptStartTime = &t0 }, func(c *Config) { c.OptStartTime = &sameInstant }, 0, ""},
		{"ack policy", nil, func(c *Config) { c.AckPolicy = AckAll }, jserr.ConsumerCreate, "ack policy can not be updated"},
		{"replay policy", nil, func(c *Config) { c.ReplayPolicy = ReplayOriginal }, jserr.ConsumerCreate, "replay policy can not be updated"},
		{"heartbeat", push, func(c *Config) { push(c); c.Heartbeat = 2 * time.Second }, jserr.ConsumerCreate, "heart beats can not be updated"},
		{"flow control", push, func(c *Config) { push(c); c.FlowControl = true }, jserr.ConsumerCreate, "flow control can not be updated"},
		{"pull to push", nil, func(c *Config) { c.DeliverSubject = "d" }, jserr.ConsumerCreate, "can not update pull consumer to push based"},
		{"push to pull", func(c *Config) { c.DeliverSubject, c.MaxWaiting = "d", 0 }, func(c *Config) { c.DeliverSubject = "" }, jserr.ConsumerCreate, "can not update push consumer to pull based"},
		{"push moved", push, func(c *Config) { push(c); c.DeliverSubject, c.DeliverGroup = "d2", "g" }, 0, ""},
		{"max waiting", nil, func(c *Config) { c.MaxWaiting = 100 }, jserr.ConsumerCreate, "max waiting can not be updated"},
		{"backoff over max_deliver", nil, func(c *Config) { c.MaxDeliver, c.BackOff = 2, []time.Duration{1, 2, 3} }, jserr.ConsumerMaxDeliverBackoff, "max deliver is required to be > length of backoff values"},
		{"first refusal wins", nil, func(c *Config) { c.AckPolicy, c.DeliverPolicy, c.MemoryStorage = AckAll, DeliverLast, true }, jserr.ConsumerCreate, "deliver policy can not be updated"},
		{"pause_until not compared", nil, func(c *Config) { c.PauseUntil = &later }, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, next := base(), base()
			if tc.old != nil {
				tc.old(old)
				tc.old(next)
			}
			if tc.next != nil {
				tc.next(next)
			}
			err := CheckUpdate(old, next)
			if tc.want == 0 {
				if err != nil {
					t.Fatalf("CheckUpdate: %v", err)
				}
				return
			}
			if err == nil || jserr.ErrCode(err.ErrCode) != tc.want || err.Description != tc.text {
				t.Fatalf("CheckUpdate = %v, want %d %q", err, tc.want, tc.text)
			}
			if tc.want == jserr.ConsumerCreate && err.Code != 500 {
				t.Fatalf("code %d, want 500", err.Code)
			}
		})
	}
}

// TestEqualForCreate: what an action "create" of an existing consumer
// compares (nats-server: reflect.DeepEqual after copyConsumerMetadata,
// with pause_until copied from the existing consumer).
func TestEqualForCreate(t *testing.T) {
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	otherZone := t0.In(time.FixedZone("", 2*3600))
	base := func() *Config {
		return &Config{Durable: "D", Name: "D", AckPolicy: AckExplicit, AckWait: DefaultAckWait, MaxDeliver: -1,
			MaxWaiting: DefaultMaxWaiting, MaxAckPending: DefaultMaxAckPending,
			Metadata: map[string]string{"_nats.req.level": "0"}}
	}
	cases := []struct {
		name string
		edit func(c *Config)
		want bool
	}{
		{"same", func(*Config) {}, true},
		{"pause_until", func(c *Config) { c.PauseUntil = &t0 }, true},
		{"versioning keys", func(c *Config) {
			c.Metadata = map[string]string{"_nats.req.level": "3", "_nats.ver": "x", "_nats.level": "9"}
		}, true},
		{"no metadata", func(c *Config) { c.Metadata = nil }, true},
		{"other _nats key", func(c *Config) { c.Metadata["_nats.other"] = "x" }, false},
		{"user metadata", func(c *Config) { c.Metadata["a"] = "b" }, false},
		{"ack_wait", func(c *Config) { c.AckWait = time.Second }, false},
		{"description", func(c *Config) { c.Description = "d" }, false},
		{"filter", func(c *Config) { c.FilterSubject = "a" }, false},
		{"start time other zone", func(c *Config) { c.OptStartTime = &otherZone }, false},
		{"ephemeral default", func(c *Config) { c.InactiveThreshold = DefaultInactiveThreshold }, false},
	}
	for _, tc := range cases {
		stored, req := base(), base()
		tc.edit(req)
		if got := req.EqualForCreate(stored); got != tc.want {
			t.Errorf("%s: EqualForCreate = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Times compare in their zone, as nats-server's DeepEqual does.
	a, b := base(), base()
	a.OptStartTime, b.OptStartTime = &otherZone, &otherZone
	if !a.EqualForCreate(b) {
		t.Errorf("same start time in the same zone not equal")
	}
}
