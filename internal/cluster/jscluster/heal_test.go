package jscluster

import (
	"testing"

	"github.com/cairnmq/cairn/internal/cluster/meta"
)

// A settled replicated consumer is short when it has fewer replicas than
// it wants and its stream has a server it lacks; one of one replica, an
// unsettled one, or one its stream cannot grow is not (heal.go
// growShortConsumers tries those short again).
func TestConsumerShort(t *testing.T) {
	three := meta.StreamAssignment{Config: []byte(`{"name":"S","num_replicas":3}`), Replicas: []meta.Replica{{ID: 1, Server: "n1"}, {ID: 2, Server: "n2"}, {ID: 3, Server: "n3"}}}
	two := []meta.Replica{{ID: 1, Server: "n1"}, {ID: 2, Server: "n2"}}
	cases := []struct {
		name string
		sa   meta.StreamAssignment
		ca   meta.ConsumerAssignment
		want bool
	}{
		{"two of three inherited", three, meta.ConsumerAssignment{Config: []byte(`{"durable_name":"D"}`), Replicas: two}, true},
		{"two of an explicit three", three, meta.ConsumerAssignment{Config: []byte(`{"num_replicas":3}`), Replicas: two}, true},
		{"two of an explicit two", three, meta.ConsumerAssignment{Config: []byte(`{"durable_name":"D","num_replicas":2}`), Replicas: two}, false},
		{"one replica", three, meta.ConsumerAssignment{Config: []byte(`{"durable_name":"D"}`), Replicas: two[:1]}, false},
		{"the stream has no other server", meta.StreamAssignment{Config: three.Config, Replicas: two}, meta.ConsumerAssignment{Config: []byte(`{"durable_name":"D"}`), Replicas: two}, false},
		{"an ephemeral of two (it wants one)", three, meta.ConsumerAssignment{Config: []byte(`{}`), Replicas: two}, false},
		{"bad config", three, meta.ConsumerAssignment{Config: []byte(`{`), Replicas: two}, false},
	}
	for _, tc := range cases {
		if got := consumerShort(tc.sa, tc.ca); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The meta leader asks every consumer whether it is short at every
// housekeeping round (250 ms): one on every server of its stream, the
// idle cluster's every consumer, is answered without decoding its
// configs (trial 37, finding 5: the decoding was the largest part of an
// idle meta leader's CPU); and short reads a stream's num_replicas.
func TestShortCheapWhenWhole(t *testing.T) {
	three := []meta.Replica{{ID: 1, Server: "n1"}, {ID: 2, Server: "n2"}, {ID: 3, Server: "n3"}}
	sa := meta.StreamAssignment{Config: []byte(`{"name":"S","subjects":["S.>"],"retention":"limits","storage":"file","num_replicas":3,"compression":"s2"}`), Replicas: three}
	ca := meta.ConsumerAssignment{Config: []byte(`{"durable_name":"D","ack_policy":"explicit","deliver_policy":"all"}`), Replicas: three}
	if allocs := testing.AllocsPerRun(100, func() { consumerShort(sa, ca) }); allocs != 0 {
		t.Errorf("consumerShort of a consumer on every server of its stream: %v allocations a call, want 0 (no decoding)", allocs)
	}
	if short(sa) {
		t.Errorf("a stream of 3 with 3 replicas is short")
	}
	sa.Replicas = three[:2]
	if !short(sa) {
		t.Errorf("a stream of 3 with 2 replicas is not short")
	}
	sa.Config = []byte(`{"name":"S"}`) // num_replicas defaults to 1
	if short(sa) {
		t.Errorf("a stream without num_replicas with 2 replicas is short")
	}
}
