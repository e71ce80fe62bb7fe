package stream

import (
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
)

// In a cluster an update may change num_replicas (the cluster decides
// whether it can scale); the other rules are the single server's, in
// its order.
func TestCheckClusteredUpdate(t *testing.T) {
	base := func() *Config {
		c := &Config{Name: "S", Subjects: []string{"s"}, Replicas: 3}
		c.SetDefaults()
		return c
	}
	next := base()
	next.Replicas = 1
	if err := CheckClusteredUpdate(base(), next); err != nil {
		t.Fatalf("replicas 3 -> 1: %v", err)
	}
	if err := CheckUpdate(base(), base()); err == nil || err.ErrCode != uint16(jserr.StreamReplicasNotSupported) {
		t.Fatalf("single server, 3 replicas: %v", err)
	}
	for _, tc := range []struct {
		change func(*Config)
		text   string
	}{
		{func(c *Config) { c.Name = "T" }, "stream configuration name must match original"},
		{func(c *Config) { c.Storage = MemoryStorage }, "stream configuration update can not change storage type"},
		{func(c *Config) { c.Retention = WorkQueuePolicy }, "stream configuration update can not change retention policy to/from workqueue"},
		{func(c *Config) { c.AllowMsgCounter = true }, "stream configuration update can not change message counter setting"},
	} {
		next := base()
		tc.change(next)
		if err := CheckClusteredUpdate(base(), next); err == nil || err.Description != tc.text {
			t.Errorf("%s: %v", tc.text, err)
		}
	}
	sealed := base()
	sealed.Sealed = true
	sealed.MaxAge = 1e9
	if err := CheckClusteredUpdate(base(), sealed); err != nil || sealed.MaxAge != 0 || !sealed.DenyDelete {
		t.Fatalf("seal: %v %+v", err, sealed)
	}
}
