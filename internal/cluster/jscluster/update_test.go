package jscluster

import (
	"testing"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/stream"
)

// A change of consumer_limits is checked against the assigned consumers
// only when a limit is set and changed, and names every consumer over it,
// sorted (nats-server v2.15.2's text).
func TestCheckConsumerLimits(t *testing.T) {
	cs := []meta.ConsumerAssignment{
		{Name: "b", Config: []byte(`{"durable_name":"b","max_ack_pending":500}`)},
		{Name: "a", Config: []byte(`{"durable_name":"a","max_ack_pending":2000,"inactive_threshold":5000000000}`)},
		{Name: "c", Config: []byte(`{"durable_name":"c","max_ack_pending":100}`)},
	}
	if err := checkConsumerLimits(stream.ConsumerLimits{}, stream.ConsumerLimits{MaxAckPending: 400}, cs); err == nil ||
		err.Description != "change to limits violates consumers: a, b" {
		t.Fatalf("max_ack_pending 400: %v", err)
	}
	if err := checkConsumerLimits(stream.ConsumerLimits{MaxAckPending: 400}, stream.ConsumerLimits{MaxAckPending: 400}, cs); err != nil {
		t.Fatalf("unchanged limit: %v", err)
	}
	if err := checkConsumerLimits(stream.ConsumerLimits{}, stream.ConsumerLimits{InactiveThreshold: 1e9}, cs); err == nil ||
		err.Description != "change to limits violates consumers: a" {
		t.Fatalf("inactive_threshold 1s: %v", err)
	}
}

// A replicated stream's replica starts from the config its group's log
// starts with; a stream with one replica from its assigned config.
func TestStartConfig(t *testing.T) {
	three := []meta.Replica{{ID: 1, Server: "a"}, {ID: 2, Server: "b"}, {ID: 3, Server: "c"}}
	sa := meta.StreamAssignment{Config: []byte("new"), LogConfig: []byte("old"), Replicas: three}
	if got := string(startConfig(sa)); got != "old" {
		t.Fatalf("replicated: %s", got)
	}
	sa.Replicas = three[:1]
	if got := string(startConfig(sa)); got != "new" {
		t.Fatalf("one replica: %s", got)
	}
}
