package meta

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// A move records its origin (the servers and placement the stream had),
// refuses a second move while recorded (10124), is turned back to its
// origin by a CancelMove naming it (10129 for another or none), and is
// closed by an EndMove naming it and the servers the stream has; a
// snapshot keeps the record (docs/cluster.md, "Moving a stream").
func TestMoveRecord(t *testing.T) {
	st := testState()
	cfg := streamJSON("S", "s")
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s1", "s2")})
	origin := []byte(`{"tags":["az:1"]}`)
	r := mustApply(t, st, &MoveStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s3", "s4"), Created: 10, OriginPlacement: origin})
	want := &MoveOrigin{Created: 10, Replicas: []Replica{{1, "s1", inc(1)}, {2, "s2", inc(2)}}, Placement: origin}
	if !reflect.DeepEqual(r.Stream.Move, want) || r.PrevStream.Move != nil || !reflect.DeepEqual(Servers(r.Stream.Replicas), servers("s3", "s4")) {
		t.Fatalf("move: %+v (prev %+v)", r.Stream, r.PrevStream)
	}
	codes := func(op Op, want jserr.ErrCode) {
		t.Helper()
		if r := st.Apply(op); r.Err == nil || r.Err.ErrCode != uint16(want) {
			t.Fatalf("%T: %v, want %d", op, r.Err, want)
		}
	}
	codes(&MoveStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s5", "s1"), Created: 11}, jserr.StreamMoveInProgress)
	codes(&MoveStream{Account: "A", Name: "X", Config: streamJSON("X"), Servers: servers("s5"), Created: 11}, jserr.StreamNotFound)
	codes(&CancelMove{Account: "A", Name: "S", Config: cfg, Created: 9}, jserr.StreamReconfigureNotInProgress)
	codes(&EndMove{Account: "A", Name: "S", Created: 10, Servers: servers("s1", "s2")}, jserr.StreamReconfigureNotInProgress)
	// An update keeps the record.
	if r := mustApply(t, st, &UpdateStream{Account: "A", Name: "S", Config: streamJSON("S", "s", "t"), Servers: servers("s3", "s4")}); r.Stream.Move == nil {
		t.Fatal("an update dropped the move")
	}
	snap := st.AppendSnapshot(nil)
	back, err := DecodeSnapshot(snap)
	if err != nil || !reflect.DeepEqual(back, st) {
		t.Fatalf("snapshot with a move: %v", err)
	}
	// The group still holds replica 2 (on s2), not replica 1: s1 gets a
	// new replica, s2 keeps its own.
	r = mustApply(t, st, &CancelMove{Account: "A", Name: "S", Config: cfg, Created: 10, Members: []raftnode.ReplicaID{2, 3, 4}})
	if !reflect.DeepEqual(r.Stream.Replicas, []Replica{{5, "s1", inc(1)}, {2, "s2", inc(2)}}) || r.Stream.Move == nil || !r.Stream.Move.Cancelled ||
		r.Stream.NextReplica != 6 || !bytes.Equal(r.Stream.Config, cfg) {
		t.Fatalf("cancel: %+v", r.Stream)
	}
	// Cancelled again (a repeat): the replicas stay.
	if r := mustApply(t, st, &CancelMove{Account: "A", Name: "S", Config: cfg, Created: 10, Members: []raftnode.ReplicaID{2, 3}}); !reflect.DeepEqual(r.Stream.Replicas, []Replica{{5, "s1", inc(1)}, {2, "s2", inc(2)}}) {
		t.Fatalf("cancel repeated: %+v", r.Stream)
	}
	codes(&MoveStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s5", "s1"), Created: 12}, jserr.StreamMoveInProgress)
	codes(&EndMove{Account: "A", Name: "S", Created: 10, Servers: servers("s3", "s4")}, jserr.StreamReconfigureNotInProgress)
	if r := mustApply(t, st, &EndMove{Account: "A", Name: "S", Created: 10, Servers: servers("s2", "s1")}); r.Stream.Move != nil || r.PrevStream.Move == nil {
		t.Fatalf("end: %+v", r.Stream)
	}
	codes(&CancelMove{Account: "A", Name: "S", Config: cfg, Created: 10}, jserr.StreamReconfigureNotInProgress)
	mustApply(t, st, &MoveStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s1", "s2"), Created: 13})
}

// A version 3 snapshot (before moves) still decodes, with no move in
// flight: it is the same bytes without each stream's last two (its move
// and its excluded servers).
func TestSnapshotVersion3(t *testing.T) {
	st := testState()
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: streamJSON("S", "s"), Servers: servers("s1", "s2")})
	v4 := st.AppendSnapshot(nil)
	body := bytes.Clone(v4[:len(v4)-4])
	if !bytes.HasSuffix(body, []byte{0, 0}) {
		t.Fatalf("unexpected tail %x", body[len(body)-2:])
	}
	body = body[:len(body)-2]
	body[0] = snapVersionV3
	back, err := DecodeSnapshot(binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli)))
	if err != nil || !bytes.Equal(back.AppendSnapshot(nil), v4) {
		t.Fatalf("version 3: %v", err)
	}
	// A move flag other than 0 or 1 is damage.
	bad := bytes.Clone(v4[:len(v4)-4])
	bad[len(bad)-2] = 2
	if _, err := DecodeSnapshot(binary.LittleEndian.AppendUint32(bad, crc32.Checksum(bad, castagnoli))); err == nil {
		t.Fatal("a move flag of 2 decoded")
	}
}

// RenameReplicas names on the renamed server every replica its store
// holds under the removed old name, with its replica ID kept (streams,
// consumers and a move's origin); a replica of another incarnation
// stays, so does one of a stream already holding a replica on the new
// name; the old name not removed, the new one removed, or the two of
// other stores are 10044, and a repeat changes nothing
// (docs/cluster.md, "A server renamed over its store").
func TestRenameReplicas(t *testing.T) {
	st := testState()
	mustApply(t, st, &AssignStream{Account: "A", Name: "R2", Config: streamJSON("R2", "r2"), Servers: servers("s1", "s3")})
	mustApply(t, st, &AssignConsumer{Account: "A", Stream: "R2", Name: "D", Config: consumerJSON("D", ""), Servers: servers("s3", "s1")})
	mustApply(t, st, &AssignStream{Account: "A", Name: "ONE", Config: streamJSON("ONE", "one"), Servers: servers("s3")})
	mustApply(t, st, &AssignStream{Account: "A", Name: "MOV", Config: streamJSON("MOV", "mov"), Servers: servers("s3", "s2")})
	mustApply(t, st, &MoveStream{Account: "A", Name: "MOV", Config: streamJSON("MOV", "mov"), Servers: servers("s4", "s2"), Created: 5})
	codes := func(op Op, want jserr.ErrCode) {
		t.Helper()
		if r := st.Apply(op); r.Err == nil || r.Err.ErrCode != uint16(want) {
			t.Fatalf("%+v: %v, want %d", op, r.Err, want)
		}
	}
	mustApply(t, st, &AddServer{Name: "s3x", Cluster: "C1", Incarnation: inc(3)})
	codes(&RenameReplicas{From: "s3", To: "s3x"}, jserr.ClusterServerNotMember) // s3 not removed
	mustApply(t, st, &RemoveServer{Name: "s3"})
	codes(&RenameReplicas{From: "s3", To: "s4"}, jserr.ClusterServerNotMember) // another store
	codes(&RenameReplicas{From: "s3", To: "nope"}, jserr.ClusterServerNotMember)
	before := st.AppendSnapshot(nil)
	mustApply(t, st, &RenameReplicas{From: "s3", To: "s3x"})
	r2, _ := st.Stream("A", "R2")
	d, _ := st.Consumer("A", "R2", "D")
	one, _ := st.Stream("A", "ONE")
	mov, _ := st.Stream("A", "MOV")
	if !reflect.DeepEqual(r2.Replicas, []Replica{{1, "s1", inc(1)}, {2, "s3x", inc(3)}}) || r2.NextReplica != 3 ||
		!reflect.DeepEqual(d.Replicas, []Replica{{1, "s3x", inc(3)}, {2, "s1", inc(1)}}) ||
		!reflect.DeepEqual(one.Replicas, []Replica{{1, "s3x", inc(3)}}) ||
		!reflect.DeepEqual(mov.Move.Replicas, []Replica{{1, "s3x", inc(3)}, {2, "s2", inc(2)}}) {
		t.Fatalf("renamed: %+v\n%+v\n%+v\n%+v", r2.Replicas, d.Replicas, one.Replicas, mov.Move)
	}
	if bytes.Equal(before, st.AppendSnapshot(nil)) {
		t.Fatal("the snapshot did not change")
	}
	after := st.AppendSnapshot(nil)
	mustApply(t, st, &RenameReplicas{From: "s3", To: "s3x"})
	if !bytes.Equal(after, st.AppendSnapshot(nil)) {
		t.Fatal("a repeated rename changed the state")
	}
	mustApply(t, st, &RemoveServer{Name: "s3x"})
	codes(&RenameReplicas{From: "s3", To: "s3x"}, jserr.ClusterServerNotMember) // the new name removed

	// A replica bound to another store (replaced since) stays, and a
	// stream already on the new name keeps its replica on the old one.
	st = testState()
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: streamJSON("S", "s"), Servers: servers("s1", "s3")})
	mustApply(t, st, &AssignStream{Account: "A", Name: "T", Config: streamJSON("T", "t"), Servers: servers("s3", "s2")})
	mustApply(t, st, &AddServer{Name: "s3", Cluster: "C1", Incarnation: inc(9)}) // s3's store replaced: S's replica still bound to inc(3)
	mustApply(t, st, &AssignStream{Account: "A", Name: "U", Config: streamJSON("U", "u"), Servers: servers("s3", "s1")})
	mustApply(t, st, &AddServer{Name: "s3x", Cluster: "C1", Incarnation: inc(9)})
	mustApply(t, st, &UpdateStream{Account: "A", Name: "U", Config: streamJSON("U", "u"), Servers: servers("s3", "s1", "s3x")})
	mustApply(t, st, &RemoveServer{Name: "s3"})
	mustApply(t, st, &RenameReplicas{From: "s3", To: "s3x"})
	s, _ := st.Stream("A", "S")
	u, _ := st.Stream("A", "U")
	if !reflect.DeepEqual(Servers(s.Replicas), servers("s1", "s3")) || !reflect.DeepEqual(Servers(u.Replicas), servers("s3", "s1", "s3x")) {
		t.Fatalf("kept: %+v %+v", s.Replicas, u.Replicas)
	}
}
