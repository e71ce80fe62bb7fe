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

// A scale records its origin as a move does, marked a scale: a move
// while it is recorded is 10226, a second scale stacks on it (its origin
// and start kept), a CancelMove returns the stream to the origin's
// replicas, an EndMove closes it, a scale down to one replica ends it,
// and a snapshot keeps the mark (docs/cluster.md, "Scaling").
func TestScaleRecord(t *testing.T) {
	st := testState()
	cfg := streamJSON("S", "s")
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s1", "s2")})
	r := mustApply(t, st, &ScaleStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s1", "s2", "s3"), Created: 10})
	want := &MoveOrigin{Created: 10, Replicas: []Replica{{1, "s1", inc(1)}, {2, "s2", inc(2)}}, Scale: true}
	if !reflect.DeepEqual(r.Stream.Move, want) || r.PrevStream.Move != nil || len(r.Stream.Replicas) != 3 {
		t.Fatalf("scale: %+v (prev %+v)", r.Stream, r.PrevStream)
	}
	codes := func(op Op, want jserr.ErrCode) {
		t.Helper()
		if r := st.Apply(op); r.Err == nil || r.Err.ErrCode != uint16(want) {
			t.Fatalf("%T: %v, want %d", op, r.Err, want)
		}
	}
	codes(&MoveStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s4", "s5"), Created: 11}, jserr.StreamReconfigureInProgress)
	// A second scale stacks: the origin and start stay.
	r = mustApply(t, st, &ScaleStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s1", "s2", "s3", "s4"), Created: 12})
	if !reflect.DeepEqual(r.Stream.Move, want) {
		t.Fatalf("stacked: %+v", r.Stream.Move)
	}
	snap := st.AppendSnapshot(nil)
	back, err := DecodeSnapshot(snap)
	if err != nil || !reflect.DeepEqual(back, st) {
		t.Fatalf("snapshot with a scale: %v", err)
	}
	// Cancelled while replica 4 (s4) is still in the group: back to s1, s2.
	r = mustApply(t, st, &CancelMove{Account: "A", Name: "S", Config: cfg, Created: 10, Members: []raftnode.ReplicaID{1, 2, 3, 4}})
	if !reflect.DeepEqual(r.Stream.Replicas, []Replica{{1, "s1", inc(1)}, {2, "s2", inc(2)}}) || r.Stream.Move == nil || !r.Stream.Move.Cancelled || !r.Stream.Move.Scale {
		t.Fatalf("cancel: %+v", r.Stream)
	}
	// A scale after the cancel stacks again, no longer cancelled.
	if r := mustApply(t, st, &ScaleStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s1", "s2", "s3"), Created: 13}); r.Stream.Move.Cancelled || r.Stream.Move.Created != 10 {
		t.Fatalf("scale after cancel: %+v", r.Stream.Move)
	}
	if r := mustApply(t, st, &EndMove{Account: "A", Name: "S", Created: 10, Servers: servers("s1", "s2", "s3")}); r.Stream.Move != nil {
		t.Fatalf("end: %+v", r.Stream)
	}
	// A scale during a move is 10124; down to one replica ends the record.
	mustApply(t, st, &MoveStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s4", "s5", "s3"), Created: 14})
	codes(&ScaleStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s4", "s5"), Created: 15}, jserr.StreamMoveInProgress)
	mustApply(t, st, &EndMove{Account: "A", Name: "S", Created: 14, Servers: servers("s4", "s5", "s3")})
	mustApply(t, st, &ScaleStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s4", "s5"), Created: 16})
	if r := mustApply(t, st, &ScaleStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s4"), Created: 17}); r.Stream.Move != nil {
		t.Fatalf("down to one replica: %+v", r.Stream.Move)
	}
}

// A version 5 snapshot (before the scale mark) still decodes, its
// recorded move a move: it is the same bytes without the move's last
// byte; a scale mark other than 0 or 1 is damage.
func TestSnapshotVersion5(t *testing.T) {
	st := testState()
	cfg := streamJSON("S", "s")
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s1", "s2")})
	mustApply(t, st, &MoveStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s3", "s4"), Created: 10})
	v6 := st.AppendSnapshot(nil)
	body := bytes.Clone(v6[:len(v6)-4])
	// The stream's tail: cancelled (0), scale (0), no excluded servers (0).
	if !bytes.HasSuffix(body, []byte{0, 0, 0}) {
		t.Fatalf("unexpected tail %x", body[len(body)-3:])
	}
	v5 := append(bytes.Clone(body[:len(body)-2]), 0)
	v5[0] = snapVersionV5
	back, err := DecodeSnapshot(binary.LittleEndian.AppendUint32(v5, crc32.Checksum(v5, castagnoli)))
	if err != nil || !bytes.Equal(back.AppendSnapshot(nil), v6) {
		t.Fatalf("version 5: %v", err)
	}
	bad := bytes.Clone(body)
	bad[len(bad)-2] = 2
	if _, err := DecodeSnapshot(binary.LittleEndian.AppendUint32(bad, crc32.Checksum(bad, castagnoli))); err == nil {
		t.Fatal("a scale mark of 2 decoded")
	}
}
