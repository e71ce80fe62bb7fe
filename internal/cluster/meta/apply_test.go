package meta

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
)

func inc(b byte) raftnode.Incarnation { return raftnode.Incarnation{0: b} }

// testState is a state whose catalogue holds s1..s5 in cluster C1
// (incarnation i for si).
func testState() *State {
	st := NewState()
	for i := 1; i <= 5; i++ {
		st.Apply(&AddServer{Name: raftnode.ServerID("s" + string(rune('0'+i))), Cluster: "C1", Incarnation: inc(byte(i))})
	}
	return st
}

// mustApply applies op and fails on an outcome error.
func mustApply(t *testing.T, st *State, op Op) Result {
	t.Helper()
	r := st.Apply(op)
	if r.Err != nil {
		t.Fatalf("%T: %v", op, r.Err)
	}
	return r
}

// wantErr applies op and requires the outcome error code.
func wantErr(t *testing.T, st *State, op Op, code jserr.ErrCode) {
	t.Helper()
	before := st.AppendSnapshot(nil)
	r := st.Apply(op)
	if r.Err == nil || r.Err.ErrCode != uint16(code) {
		t.Fatalf("%T: outcome %v, want %d", op, r.Err, code)
	}
	if after := st.AppendSnapshot(nil); string(after) != string(before) {
		t.Fatalf("%T: an outcome error changed the state", op)
	}
}

// A stream gets a new group and one replica per server in order, bound to
// each server's incarnation; a create with the same config is
// idempotent, with another is 10058; groups and replica IDs are never
// reused, through updates, removals and re-creations.
func TestApplyStreams(t *testing.T) {
	st := testState()
	cfg := streamJSON("ORDERS", "orders.>")
	r := mustApply(t, st, &AssignStream{Account: "A", Name: "ORDERS", Config: cfg, Created: 42, Servers: servers("s2", "s1", "s3")})
	sa := r.Stream
	if sa.Group != FirstGroup || sa.Created != 42 || sa.NextReplica != 4 {
		t.Fatalf("assignment %+v", sa)
	}
	want := []Replica{{1, "s2", inc(2)}, {2, "s1", inc(1)}, {3, "s3", inc(3)}}
	if !slices.Equal(sa.Replicas, want) {
		t.Fatalf("replicas %+v, want %+v", sa.Replicas, want)
	}

	// Idempotent create: the existing assignment, nothing allocated.
	r = mustApply(t, st, &AssignStream{Account: "A", Name: "ORDERS", Config: cfg, Created: 99, Servers: servers("s4", "s5", "s1")})
	if !r.Existed || r.Stream.Group != FirstGroup || r.Stream.Created != 42 || st.NextGroup() != FirstGroup+1 {
		t.Fatalf("idempotent create: %+v, next group %d", r, st.NextGroup())
	}
	wantErr(t, st, &AssignStream{Account: "A", Name: "ORDERS", Config: streamJSON("ORDERS", "other.>"), Servers: servers("s1")}, jserr.StreamNameExist)
	// Overlapping subjects in the same account: 10065; another account is free.
	wantErr(t, st, &AssignStream{Account: "A", Name: "ALL", Config: streamJSON("ALL", ">"), Servers: servers("s1")}, jserr.StreamSubjectOverlap)
	mustApply(t, st, &AssignStream{Account: "B", Name: "ALL", Config: streamJSON("ALL", ">"), Servers: servers("s1")})
	// A server not in the catalogue: 10005.
	wantErr(t, st, &AssignStream{Account: "A", Name: "X", Config: streamJSON("X", "x"), Servers: servers("s1", "s9")}, jserr.ClusterNoPeers)

	// Scale R3 -> R5 and peer-remove s1: kept servers keep their replica,
	// new ones get new IDs; the group stays.
	r = mustApply(t, st, &UpdateStream{Account: "A", Name: "ORDERS", Config: cfg, Servers: servers("s2", "s3", "s4", "s5")})
	if r.PrevStream == nil || len(r.PrevStream.Replicas) != 3 {
		t.Fatalf("previous assignment %+v", r.PrevStream)
	}
	want = []Replica{{1, "s2", inc(2)}, {3, "s3", inc(3)}, {4, "s4", inc(4)}, {5, "s5", inc(5)}}
	if got, _ := st.Stream("A", "ORDERS"); !slices.Equal(got.Replicas, want) || got.Group != FirstGroup {
		t.Fatalf("after update %+v, want replicas %+v", got, want)
	}
	// s1 back: a new replica ID, never 2 again.
	mustApply(t, st, &UpdateStream{Account: "A", Name: "ORDERS", Config: cfg, Servers: servers("s2", "s1")})
	if got, _ := st.Stream("A", "ORDERS"); !slices.Equal(got.Replicas, []Replica{{1, "s2", inc(2)}, {6, "s1", inc(1)}}) {
		t.Fatalf("re-added s1: %+v", got.Replicas)
	}
	wantErr(t, st, &UpdateStream{Account: "A", Name: "NOPE", Config: streamJSON("NOPE"), Servers: servers("s1")}, jserr.StreamNotFound)

	// Remove, and create again: a new group.
	mustApply(t, st, &AssignConsumer{Account: "A", Stream: "ORDERS", Name: "C", Config: consumerJSON("C", ""), Servers: servers("s2")})
	r = mustApply(t, st, &RemoveStream{Account: "A", Name: "ORDERS"})
	if r.Stream.Name != "ORDERS" || len(r.Consumers) != 1 || r.Consumers[0].Name != "C" {
		t.Fatalf("removal result %+v", r)
	}
	wantErr(t, st, &RemoveStream{Account: "A", Name: "ORDERS"}, jserr.StreamNotFound)
	r = mustApply(t, st, &AssignStream{Account: "A", Name: "ORDERS", Config: cfg, Servers: servers("s1")})
	if r.Stream.Group != FirstGroup+3 || r.Stream.Replicas[0].ID != 1 {
		t.Fatalf("re-created %+v", r.Stream)
	}
	if got := st.Streams("A"); len(got) != 1 || len(st.Consumers("A", "ORDERS")) != 0 {
		t.Fatalf("streams of A %+v", got)
	}
}

// Consumers: the stream must exist (10059); Create, Update and
// CreateOrUpdate as nats-server decides them (10148, 10149); servers only
// among the stream's (10023); removal (10014).
func TestApplyConsumers(t *testing.T) {
	st := testState()
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: streamJSON("S", "s.>"), Servers: servers("s1", "s2", "s3")})
	cfg := consumerJSON("C", "")
	wantErr(t, st, &AssignConsumer{Account: "A", Stream: "T", Name: "C", Config: cfg, Servers: servers("s1")}, jserr.StreamNotFound)
	wantErr(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Action: Update, Config: cfg, Servers: servers("s1")}, jserr.ConsumerDoesNotExist)
	wantErr(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Config: cfg, Servers: servers("s1", "s4")}, jserr.InsufficientResources)

	r := mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Action: Create, Config: cfg, Created: 5, Servers: servers("s3")})
	if r.Consumer.Group != FirstGroup+1 || !slices.Equal(r.Consumer.Replicas, []Replica{{1, "s3", inc(3)}}) || r.Stream.Name != "S" {
		t.Fatalf("consumer %+v", r.Consumer)
	}
	if r = mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Action: Create, Config: cfg, Servers: servers("s1")}); !r.Existed {
		t.Fatalf("same create: %+v", r)
	}
	wantErr(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Action: Create, Config: consumerJSON("C", `,"max_deliver":2`), Servers: servers("s3")}, jserr.ConsumerAlreadyExists)

	// Update: new config, scaled to R3, the kept replica keeps its ID.
	cfg2 := consumerJSON("C", `,"max_deliver":2`)
	r = mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Action: Update, Config: cfg2, Created: 99, Servers: servers("s3", "s1", "s2")})
	if r.PrevConsumer == nil || string(r.PrevConsumer.Config) != string(cfg) || r.Consumer.Created != 5 ||
		!slices.Equal(r.Consumer.Replicas, []Replica{{1, "s3", inc(3)}, {2, "s1", inc(1)}, {3, "s2", inc(2)}}) {
		t.Fatalf("update %+v", r)
	}
	if r = mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Config: cfg2, Servers: servers("s3", "s1", "s2")}); !r.Existed {
		t.Fatalf("create-or-update with nothing new: %+v", r)
	}

	if got := st.Consumers("A", "S"); len(got) != 1 || got[0].Name != "C" {
		t.Fatalf("consumers %+v", got)
	}
	wantErr(t, st, &RemoveConsumer{Account: "A", Stream: "S", Name: "D"}, jserr.ConsumerNotFound)
	wantErr(t, st, &RemoveConsumer{Account: "A", Stream: "T", Name: "C"}, jserr.StreamNotFound)
	mustApply(t, st, &RemoveConsumer{Account: "A", Stream: "S", Name: "C"})
	if _, ok := st.Consumer("A", "S", "C"); ok {
		t.Fatal("consumer still there")
	}
}

// The catalogue: a removed server takes no new replica (10005, 10023 for
// a consumer), keeps the ones it has, and comes back with AddServer under
// a new incarnation, which new replicas bind to.
func TestApplyServers(t *testing.T) {
	st := testState()
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: streamJSON("S"), Servers: servers("s1", "s2", "s3")})
	mustApply(t, st, &RemoveServer{Name: "s3"})
	wantErr(t, st, &RemoveServer{Name: "s3"}, jserr.ClusterServerNotMember)
	wantErr(t, st, &RemoveServer{Name: "s9"}, jserr.ClusterServerNotMember)
	wantErr(t, st, &AssignStream{Account: "A", Name: "T", Config: streamJSON("T"), Servers: servers("s3")}, jserr.ClusterNoPeers)
	wantErr(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Config: []byte(`{}`), Servers: servers("s3")}, jserr.InsufficientResources)
	// An update may keep the replica on s3 but not add one there.
	mustApply(t, st, &UpdateStream{Account: "A", Name: "S", Config: streamJSON("S"), Servers: servers("s3", "s2")})
	ss, _ := st.Assigned("s3")
	if len(ss) != 1 {
		t.Fatalf("s3 runs %+v", ss)
	}
	mustApply(t, st, &UpdateStream{Account: "A", Name: "S", Config: streamJSON("S"), Servers: servers("s2", "s1")})
	wantErr(t, st, &UpdateStream{Account: "A", Name: "S", Config: streamJSON("S"), Servers: servers("s2", "s1", "s3")}, jserr.ClusterNoPeers)

	mustApply(t, st, &AddServer{Name: "s3", Cluster: "C1", Tags: []string{"ssd"}, Incarnation: inc(33)})
	if sv, _ := st.Server("s3"); sv.Removed || sv.Incarnation != inc(33) {
		t.Fatalf("s3 back: %+v", sv)
	}
	r := mustApply(t, st, &AssignStream{Account: "A", Name: "T", Config: streamJSON("T"), Servers: servers("s3")})
	if r.Stream.Replicas[0].Incarnation != inc(33) {
		t.Fatalf("new replica bound to %v", r.Stream.Replicas[0].Incarnation)
	}
	// Replicas keep the binding they were made with: one made before s3's
	// store changed is fenced by raftnode there.
	mustApply(t, st, &AddServer{Name: "s2", Cluster: "C1", Incarnation: inc(22)})
	if sa, _ := st.Stream("A", "S"); sa.Replicas[0].Server != "s2" || sa.Replicas[0].Incarnation != inc(2) {
		t.Fatalf("old replica rebound: %+v", sa.Replicas[0])
	}
}

// MoveReplica gives the replica's place a new replica ID on its target,
// bound to the target's incarnation in the catalogue (the same server
// after its store changed, or another), and refuses what would break the
// assignment; proposed twice, the second changes nothing.
func TestApplyMoveReplica(t *testing.T) {
	st := testState()
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: streamJSON("S"), Servers: servers("s1", "s2", "s3")})
	mustApply(t, st, &AddServer{Name: "s2", Cluster: "C1", Incarnation: inc(22)}) // s2's store was wiped
	r := mustApply(t, st, &MoveReplica{Account: "A", Stream: "S", Replica: 2, To: "s2"})
	if want := []Replica{{1, "s1", inc(1)}, {4, "s2", inc(22)}, {3, "s3", inc(3)}}; !slices.Equal(r.Stream.Replicas, want) ||
		r.PrevStream == nil || r.PrevStream.Replicas[1].ID != 2 || r.Stream.NextReplica != 5 {
		t.Fatalf("rebind: %+v", r)
	}
	wantErr(t, st, &MoveReplica{Account: "A", Stream: "S", Replica: 2, To: "s2"}, jserr.ClusterPeerNotMember)
	wantErr(t, st, &MoveReplica{Account: "A", Stream: "T", Replica: 1, To: "s4"}, jserr.StreamNotFound)
	wantErr(t, st, &MoveReplica{Account: "A", Stream: "S", Replica: 1, To: "s3"}, jserr.ClusterNoPeers)
	wantErr(t, st, &MoveReplica{Account: "A", Stream: "S", Replica: 1, To: "s9"}, jserr.ClusterNoPeers)
	r = mustApply(t, st, &MoveReplica{Account: "A", Stream: "S", Replica: 1, To: "s4"})
	if r.Stream.Replicas[0] != (Replica{5, "s4", inc(4)}) {
		t.Fatalf("move: %+v", r.Stream.Replicas)
	}
}

// SettleStream gives a stream scaled down to one replica a new group whose
// only replica, ID 1 on the same server, can bootstrap a later scale-up;
// it refuses a stream that is not unsettled, so a repeat changes nothing.
func TestApplySettleStream(t *testing.T) {
	st := testState()
	r := mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: streamJSON("S"), Servers: servers("s1", "s2", "s3")})
	g := r.Stream.Group
	wantErr(t, st, &SettleStream{Account: "A", Stream: "S", Group: g, Replica: 2}, jserr.ClusterPeerNotMember) // three replicas
	r = mustApply(t, st, &UpdateStream{Account: "A", Name: "S", Config: streamJSON("S"), Servers: servers("s2")})
	if !r.Stream.Unsettled() || r.Stream.Group != g || r.Stream.Replicas[0].ID != 2 {
		t.Fatalf("scaled down: %+v", r.Stream)
	}
	wantErr(t, st, &SettleStream{Account: "A", Stream: "S", Group: g, Replica: 1}, jserr.ClusterPeerNotMember)
	wantErr(t, st, &SettleStream{Account: "A", Stream: "S", Group: g + 1, Replica: 2}, jserr.ClusterPeerNotMember)
	wantErr(t, st, &SettleStream{Account: "A", Stream: "T", Group: g, Replica: 2}, jserr.StreamNotFound)
	next := st.NextGroup()
	r = mustApply(t, st, &SettleStream{Account: "A", Stream: "S", Group: g, Replica: 2})
	if r.Stream.Unsettled() || r.Stream.Group != next || r.Stream.NextReplica != 2 ||
		!slices.Equal(r.Stream.Replicas, []Replica{{1, "s2", inc(2)}}) || !bytes.Equal(r.Stream.LogConfig, r.Stream.Config) {
		t.Fatalf("settled: %+v", r.Stream)
	}
	wantErr(t, st, &SettleStream{Account: "A", Stream: "S", Group: next, Replica: 1}, jserr.ClusterPeerNotMember)
	// A later scale-up: the kept replica is 1, the new ones 2 and 3.
	r = mustApply(t, st, &UpdateStream{Account: "A", Name: "S", Config: streamJSON("S"), Servers: servers("s2", "s1", "s3")})
	if ids := []raftnode.ReplicaID{r.Stream.Replicas[0].ID, r.Stream.Replicas[1].ID, r.Stream.Replicas[2].ID}; !slices.Equal(ids, []raftnode.ReplicaID{1, 2, 3}) {
		t.Fatalf("scaled up: %+v", r.Stream.Replicas)
	}
}

// ResetStream gives a replicated memory stream a new group whose
// replicas, on the same servers in the same order, are 1 to n (bound to
// the servers' incarnations now), and each of its consumers a new group
// the same way; config, created times and servers stay. A repeat (the
// old group), a file stream, a stream of one replica are refused with
// nothing changed, and the allocation does not depend on map order.
func TestApplyResetStream(t *testing.T) {
	mem := func(n int) []byte {
		return fmt.Appendf(nil, `{"name":"M","subjects":["m"],"storage":"memory","num_replicas":%d}`, n)
	}
	build := func() (*State, StreamAssignment) {
		st := testState()
		mustApply(t, st, &AssignStream{Account: "A", Name: "M", Config: mem(1), Created: 9, Servers: servers("s2")})
		mustApply(t, st, &UpdateStream{Account: "A", Name: "M", Config: mem(3), Servers: servers("s2", "s4", "s1")})
		r := mustApply(t, st, &MoveReplica{Account: "A", Stream: "M", Replica: 2, To: "s4"})
		for _, c := range []string{"Z", "B", "K"} {
			mustApply(t, st, &AssignConsumer{Account: "A", Stream: "M", Name: c, Config: consumerJSON(c, ""), Created: 5, Servers: servers("s4", "s1")})
		}
		mustApply(t, st, &AddServer{Name: "s4", Cluster: "C1", Incarnation: inc(44)})
		return st, *r.Stream
	}
	st, sa := build()
	if ids := []raftnode.ReplicaID{sa.Replicas[0].ID, sa.Replicas[1].ID, sa.Replicas[2].ID}; !slices.Equal(ids, []raftnode.ReplicaID{1, 4, 3}) {
		t.Fatalf("before: %+v", sa.Replicas)
	}
	wantErr(t, st, &ResetStream{Account: "A", Stream: "M", Group: sa.Group + 1}, jserr.ClusterPeerNotMember)
	wantErr(t, st, &ResetStream{Account: "A", Stream: "N", Group: sa.Group}, jserr.StreamNotFound)
	next := st.NextGroup()
	r := mustApply(t, st, &ResetStream{Account: "A", Stream: "M", Group: sa.Group})
	got := r.Stream
	want := []Replica{{1, "s2", inc(2)}, {2, "s4", inc(44)}, {3, "s1", inc(1)}}
	if got.Group != next || !slices.Equal(got.Replicas, want) || got.NextReplica != 4 || got.Created != 9 ||
		!bytes.Equal(got.Config, mem(3)) || !bytes.Equal(got.LogConfig, mem(3)) || r.PrevStream.Group != sa.Group {
		t.Fatalf("reset: %+v", got)
	}
	if len(r.Consumers) != 3 {
		t.Fatalf("consumers %+v", r.Consumers)
	}
	for i, name := range []string{"B", "K", "Z"} {
		ca, _ := st.Consumer("A", "M", name)
		if ca.Group != next+1+raftnode.GroupID(i) || ca.NextReplica != 3 || ca.Initial != 2 || ca.Created != 5 ||
			!slices.Equal(ca.Replicas, []Replica{{1, "s4", inc(44)}, {2, "s1", inc(1)}}) || !bytes.Equal(ca.Config, consumerJSON(name, "")) {
			t.Fatalf("consumer %s: %+v", name, ca)
		}
	}
	wantErr(t, st, &ResetStream{Account: "A", Stream: "M", Group: sa.Group}, jserr.ClusterPeerNotMember)
	// Pure: the same log gives the same bytes.
	st2, _ := build()
	mustApply(t, st2, &ResetStream{Account: "A", Stream: "M", Group: sa.Group})
	if !bytes.Equal(st.AppendSnapshot(nil), st2.AppendSnapshot(nil)) {
		t.Fatal("two applications of the same log differ")
	}
	// A file stream, a stream of one replica: never reset.
	mustApply(t, st, &AssignStream{Account: "A", Name: "F", Config: streamJSON("F", "f"), Servers: servers("s1", "s2", "s3")})
	f, _ := st.Stream("A", "F")
	wantErr(t, st, &ResetStream{Account: "A", Stream: "F", Group: f.Group}, jserr.ClusterPeerNotMember)
	one := []byte(`{"name":"O","subjects":["o"],"storage":"memory","num_replicas":1}`)
	mustApply(t, st, &AssignStream{Account: "A", Name: "O", Config: one, Servers: servers("s1")})
	o, _ := st.Stream("A", "O")
	wantErr(t, st, &ResetStream{Account: "A", Stream: "O", Group: o.Group}, jserr.ClusterPeerNotMember)
}

// SettleConsumer gives a consumer scaled down to one replica a new group
// whose only replica, ID 1 on the same server, can bootstrap a later
// scale-up alone (Initial 1); it refuses a consumer that is not
// unsettled, so a repeat changes nothing.
func TestApplySettleConsumer(t *testing.T) {
	st := testState()
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: streamJSON("S"), Servers: servers("s1", "s2", "s3")})
	cfg := consumerJSON("C", "")
	r := mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Config: cfg, Servers: servers("s1", "s2", "s3")})
	g := r.Consumer.Group
	wantErr(t, st, &SettleConsumer{Account: "A", Stream: "S", Name: "C", Group: g, Replica: 2}, jserr.ClusterPeerNotMember) // three replicas
	r = mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Action: Update, Config: cfg, Servers: servers("s2")})
	if !r.Consumer.Unsettled() || r.Consumer.Group != g || r.Consumer.Replicas[0].ID != 2 || r.Consumer.Initial != 3 {
		t.Fatalf("scaled down: %+v", r.Consumer)
	}
	wantErr(t, st, &SettleConsumer{Account: "A", Stream: "S", Name: "C", Group: g, Replica: 1}, jserr.ClusterPeerNotMember)
	wantErr(t, st, &SettleConsumer{Account: "A", Stream: "S", Name: "C", Group: g + 1, Replica: 2}, jserr.ClusterPeerNotMember)
	wantErr(t, st, &SettleConsumer{Account: "A", Stream: "S", Name: "D", Group: g, Replica: 2}, jserr.ConsumerNotFound)
	wantErr(t, st, &SettleConsumer{Account: "A", Stream: "T", Name: "C", Group: g, Replica: 2}, jserr.StreamNotFound)
	next := st.NextGroup()
	r = mustApply(t, st, &SettleConsumer{Account: "A", Stream: "S", Name: "C", Group: g, Replica: 2})
	if r.Consumer.Unsettled() || r.Consumer.Group != next || r.Consumer.NextReplica != 2 || r.Consumer.Initial != 1 ||
		!slices.Equal(r.Consumer.Replicas, []Replica{{1, "s2", inc(2)}}) || r.PrevConsumer == nil || r.PrevConsumer.Group != g {
		t.Fatalf("settled: %+v", r.Consumer)
	}
	wantErr(t, st, &SettleConsumer{Account: "A", Stream: "S", Name: "C", Group: next, Replica: 1}, jserr.ClusterPeerNotMember)
	// A later scale-up: the kept replica is 1 and starts the group, the
	// new ones 2 and 3 join it.
	r = mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Action: Update, Config: cfg, Servers: servers("s2", "s1", "s3")})
	if ids := []raftnode.ReplicaID{r.Consumer.Replicas[0].ID, r.Consumer.Replicas[1].ID, r.Consumer.Replicas[2].ID}; !slices.Equal(ids, []raftnode.ReplicaID{1, 2, 3}) || r.Consumer.Initial != 1 {
		t.Fatalf("scaled up: %+v", r.Consumer)
	}
}

// MoveConsumer replaces a consumer's replica by a new ID on a server of
// its stream, in its place; a repeat, a server holding another of its
// replicas or not holding the stream are refused.
func TestApplyMoveConsumer(t *testing.T) {
	st := testState()
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: streamJSON("S"), Servers: servers("s1", "s2", "s3", "s4")})
	r := mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Config: consumerJSON("C", ""), Servers: servers("s1", "s2", "s3")})
	wantErr(t, st, &MoveConsumer{Account: "A", Stream: "S", Name: "C", Replica: 2, To: "s3"}, jserr.ClusterNoPeers)
	wantErr(t, st, &MoveConsumer{Account: "A", Stream: "S", Name: "C", Replica: 2, To: "s5"}, jserr.ClusterNoPeers) // no replica of the stream
	wantErr(t, st, &MoveConsumer{Account: "A", Stream: "S", Name: "D", Replica: 2, To: "s4"}, jserr.ConsumerNotFound)
	r = mustApply(t, st, &MoveConsumer{Account: "A", Stream: "S", Name: "C", Replica: 2, To: "s2"})
	if !slices.Equal(r.Consumer.Replicas, []Replica{{1, "s1", inc(1)}, {4, "s2", inc(2)}, {3, "s3", inc(3)}}) || r.Consumer.Initial != 3 || r.PrevConsumer.Replicas[1].ID != 2 {
		t.Fatalf("moved in place: %+v", r.Consumer)
	}
	wantErr(t, st, &MoveConsumer{Account: "A", Stream: "S", Name: "C", Replica: 2, To: "s2"}, jserr.ClusterPeerNotMember) // a repeat
	r = mustApply(t, st, &MoveConsumer{Account: "A", Stream: "S", Name: "C", Replica: 3, To: "s4"})
	if !slices.Equal(r.Consumer.Replicas, []Replica{{1, "s1", inc(1)}, {4, "s2", inc(2)}, {5, "s4", inc(4)}}) {
		t.Fatalf("moved to s4: %+v", r.Consumer)
	}
}

// Assigned lists what a server must run, in a fixed order, consumers
// included; Load counts replicas per server.
func TestAssignedAndLoad(t *testing.T) {
	st := testState()
	mustApply(t, st, &AssignStream{Account: "B", Name: "Z", Config: streamJSON("Z", "z"), Servers: servers("s1", "s2", "s3")})
	mustApply(t, st, &AssignStream{Account: "A", Name: "Y", Config: streamJSON("Y", "y"), Servers: servers("s2")})
	mustApply(t, st, &AssignStream{Account: "A", Name: "X", Config: streamJSON("X", "x"), Servers: servers("s3", "s4", "s5")})
	mustApply(t, st, &AssignConsumer{Account: "B", Stream: "Z", Name: "c2", Config: []byte(`{}`), Servers: servers("s1")})
	mustApply(t, st, &AssignConsumer{Account: "B", Stream: "Z", Name: "c1", Config: []byte(`{}`), Servers: servers("s3", "s2", "s1")})
	ss, cs := st.Assigned("s1")
	if len(ss) != 1 || ss[0].Name != "Z" || len(cs) != 2 || cs[0].Name != "c1" || cs[1].Name != "c2" {
		t.Fatalf("s1: %+v %+v", ss, cs)
	}
	ss, _ = st.Assigned("s3")
	if len(ss) != 2 || ss[0].Name != "X" || ss[1].Name != "Z" {
		t.Fatalf("s3: %+v", ss)
	}
	load := st.Load()
	if load["s1"] != 3 || load["s2"] != 3 || load["s3"] != 3 || load["s4"] != 1 {
		t.Fatalf("load %v", load)
	}
	// Queries return copies.
	ss[0].Replicas[0].Server = "mutated"
	if sa, _ := st.Stream("A", "X"); sa.Replicas[0].Server != "s3" {
		t.Fatal("a query aliased the state")
	}
}

// A create that placed a consumer before an earlier create of it applied
// (a client's retry racing with its first request) does not move it:
// with the same config it existed, with another only the config changes.
// Moving it would start its replica afresh on another server, its
// delivery and ack state left behind.
func TestApplyConsumerRacingCreateKeepsServers(t *testing.T) {
	st := testState()
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: streamJSON("S", "s.>"), Servers: servers("s1", "s2", "s3")})
	cfg := consumerJSON("C", "")
	mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Config: cfg, Created: 5, Servers: servers("s3")})
	if r := mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Config: cfg, Created: 6, Servers: servers("s1")}); !r.Existed ||
		!slices.Equal(r.Consumer.Replicas, []Replica{{1, "s3", inc(3)}}) || r.Consumer.Created != 5 {
		t.Fatalf("racing create-or-update: %+v", r.Consumer)
	}
	cfg2 := consumerJSON("C", `,"max_deliver":2`)
	r := mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Action: Update, Config: cfg2, Servers: servers("s2")})
	if string(r.Consumer.Config) != string(cfg2) || !slices.Equal(r.Consumer.Replicas, []Replica{{1, "s3", inc(3)}}) {
		t.Fatalf("racing update: %+v", r.Consumer)
	}
}
