package meta

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// An evacuated server no other could replace (ExcludeServer) stays
// excluded while its stream is short or still on it, through a
// snapshot, and is cleared once the stream is back at its num_replicas
// on other servers (docs/cluster.md, "Evacuating a server").
func TestExcludeServer(t *testing.T) {
	st := testState()
	cfg := streamJSON("S", "s")
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s1", "s2", "s3")})
	wantErr(t, st, &ExcludeServer{Account: "A", Stream: "T", Server: "s1"}, jserr.StreamNotFound)
	wantErr(t, st, &ExcludeServer{Account: "A", Stream: "S", Server: "s9"}, jserr.ClusterServerNotMember)
	mustApply(t, st, &ExcludeServer{Account: "A", Stream: "S", Server: "s3"})
	r := mustApply(t, st, &ExcludeServer{Account: "A", Stream: "S", Server: "s1"})
	mustApply(t, st, &ExcludeServer{Account: "A", Stream: "S", Server: "s3"}) // again: no change
	if want := servers("s1", "s3"); !reflect.DeepEqual(r.Stream.Excluded, want) {
		t.Fatalf("excluded %v, want %v", r.Stream.Excluded, want)
	}
	// Still on s3 and s1 at its count: kept. Dropped to two: kept.
	r = mustApply(t, st, &UpdateStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s1", "s2")})
	if len(r.Stream.Excluded) != 2 {
		t.Fatalf("short: excluded %v", r.Stream.Excluded)
	}
	snap := st.AppendSnapshot(nil)
	back, err := DecodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	if sa, _ := back.Stream("A", "S"); !reflect.DeepEqual(sa.Excluded, servers("s1", "s3")) || !bytes.Equal(back.AppendSnapshot(nil), snap) {
		t.Fatalf("after a snapshot: excluded %v", sa.Excluded)
	}
	// Back at three, but s1 still holds a replica: kept.
	r = mustApply(t, st, &UpdateStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s1", "s2", "s4")})
	if len(r.Stream.Excluded) != 2 {
		t.Fatalf("on s1 again: excluded %v", r.Stream.Excluded)
	}
	// s1's replica moves to s5: three, none excluded: cleared.
	s1, _ := On(r.Stream.Replicas, "s1")
	r = mustApply(t, st, &MoveReplica{Account: "A", Stream: "S", Replica: s1.ID, To: "s5"})
	if r.Stream.Excluded != nil {
		t.Fatalf("healed: excluded %v", r.Stream.Excluded)
	}
	// A scale-down to the servers left clears it too.
	mustApply(t, st, &ExcludeServer{Account: "A", Stream: "S", Server: "s2"})
	r = mustApply(t, st, &UpdateStream{Account: "A", Name: "S", Config: streamJSONReplicas("S", 2), Servers: servers("s4", "s5")})
	if r.Stream.Excluded != nil {
		t.Fatalf("scaled down to two: excluded %v", r.Stream.Excluded)
	}
}

// A version 4 snapshot (before excluded servers) decodes with none; an
// excluded list out of order is damage.
func TestSnapshotVersion4(t *testing.T) {
	st := testState()
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: streamJSON("S", "s"), Servers: servers("s1", "s2")})
	v5 := st.AppendSnapshot(nil)
	body := bytes.Clone(v5[:len(v5)-4])
	if body[len(body)-1] != 0 {
		t.Fatalf("unexpected tail %x", body[len(body)-1:])
	}
	body = body[:len(body)-1]
	body[0] = snapVersionV4
	back, err := DecodeSnapshot(binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli)))
	if err != nil || !bytes.Equal(back.AppendSnapshot(nil), v5) {
		t.Fatalf("version 4: %v", err)
	}
	for name, list := range map[string][]raftnode.ServerID{"out of order": servers("s2", "s1"), "repeated": servers("s1", "s1"), "empty": {""}} {
		bad := bytes.Clone(v5[:len(v5)-5])
		bad = binary.AppendUvarint(bad, uint64(len(list)))
		for _, sv := range list {
			bad = appendString(bad, string(sv))
		}
		if _, err := DecodeSnapshot(binary.LittleEndian.AppendUint32(bad, crc32.Checksum(bad, castagnoli))); err == nil {
			t.Errorf("excluded %s decoded", name)
		}
	}
}

// streamJSONReplicas is streamJSON("name", "s") with num_replicas n.
func streamJSONReplicas(name string, n int) []byte {
	return fmt.Appendf(nil, `{"name":%q,"subjects":["s"],"num_replicas":%d,"storage":"file"}`, name, n)
}
