package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// A replicated stream's log config is the config of its AssignStream: an
// UpdateStream replaces its config but not the config its group's log
// starts from (the replicas apply the update through that log); a stream
// with one replica has no group log, and its log config follows its
// config. The snapshot keeps both.
func TestLogConfig(t *testing.T) {
	st := NewState()
	for _, n := range []string{"s1", "s2", "s3"} {
		mustApply(t, st, &AddServer{Name: servers(n)[0], Cluster: "C1", Incarnation: inc(n[1])})
	}
	v1, v2 := streamJSON("R3", "a.>"), streamJSON("R3", "a.>", "b.>")
	mustApply(t, st, &AssignStream{Account: "A", Name: "R3", Config: v1, Servers: servers("s1", "s2", "s3")})
	r := mustApply(t, st, &UpdateStream{Account: "A", Name: "R3", Config: v2, Servers: servers("s1", "s2", "s3")})
	if !bytes.Equal(r.Stream.Config, v2) || !bytes.Equal(r.Stream.LogConfig, v1) {
		t.Fatalf("after update: config %s, log config %s", r.Stream.Config, r.Stream.LogConfig)
	}
	o1, o2 := streamJSON("R1", "c"), streamJSON("R1", "c", "d")
	mustApply(t, st, &AssignStream{Account: "A", Name: "R1", Config: o1, Servers: servers("s2")})
	r = mustApply(t, st, &UpdateStream{Account: "A", Name: "R1", Config: o2, Servers: servers("s2")})
	if !bytes.Equal(r.Stream.LogConfig, o2) {
		t.Fatalf("one replica: log config %s, want %s", r.Stream.LogConfig, o2)
	}
	back, err := DecodeSnapshot(st.AppendSnapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"R3", "R1"} {
		a, _ := st.Stream("A", name)
		b, _ := back.Stream("A", name)
		if !bytes.Equal(a.Config, b.Config) || !bytes.Equal(a.LogConfig, b.LogConfig) {
			t.Fatalf("%s after a snapshot: %s / %s, want %s / %s", name, b.Config, b.LogConfig, a.Config, a.LogConfig)
		}
	}
}

// A version 1 snapshot (before log configs) still decodes: its streams'
// log config is their config. A log config that does not name its stream
// is refused.
func TestSnapshotVersion1(t *testing.T) {
	st := NewState()
	mustApply(t, st, &AddServer{Name: "s1", Cluster: "C1", Incarnation: inc(1)})
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: streamJSON("S", "s"), Servers: servers("s1")})
	v2 := st.AppendSnapshot(nil)
	// The stream record ends with an empty log config (one byte, 0), its
	// consumer count (one byte, 0), no move (one byte, 0) and no
	// excluded servers (one byte, 0): version 1 is the same bytes without
	// the first and the last two.
	body := bytes.Clone(v2[:len(v2)-4])
	if !bytes.HasSuffix(body, []byte{0, 0, 0, 0}) {
		t.Fatalf("unexpected tail %x", body[len(body)-4:])
	}
	body = append(body[:len(body)-4], 0)
	body[0] = snapVersionV1
	v1 := binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
	back, err := DecodeSnapshot(v1)
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := back.Stream("A", "S")
	if !bytes.Equal(sa.LogConfig, sa.Config) || !bytes.Equal(back.AppendSnapshot(nil), v2) {
		t.Fatalf("version 1: log config %s, config %s", sa.LogConfig, sa.Config)
	}
	// A log config naming another stream.
	bad := bytes.Clone(v2[:len(v2)-4])
	other := streamJSON("T", "s")
	bad = append(bad[:len(bad)-4], byte(len(other)))
	bad = append(append(bad, other...), 0, 0, 0)
	if _, err := DecodeSnapshot(binary.LittleEndian.AppendUint32(bad, crc32.Checksum(bad, castagnoli))); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("a log config of another stream: %v", err)
	}
}

// A consumer's initial replica count is the count it was created with,
// kept when it scales (its later replicas join the group its first
// started: docs/cluster.md, "Scaling consumers"), and kept by the
// snapshot; a version 2 snapshot (before initial counts) gives every
// consumer its next replica ID less one, since none had scaled then.
func TestConsumerInitial(t *testing.T) {
	st := NewState()
	for _, n := range []string{"s1", "s2", "s3"} {
		mustApply(t, st, &AddServer{Name: servers(n)[0], Cluster: "C1", Incarnation: inc(n[1])})
	}
	mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: streamJSON("S", "s"), Servers: servers("s1", "s2", "s3")})
	cfg := consumerJSON("C", "")
	mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Config: cfg, Servers: servers("s2")})
	r := mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Action: Update, Config: cfg, Servers: servers("s2", "s1", "s3")})
	if r.Consumer.Initial != 1 || r.Consumer.Replicas[0].ID != 1 || r.Consumer.NextReplica != 4 || r.PrevConsumer == nil {
		t.Fatalf("scaled up from one: %+v", r.Consumer)
	}
	mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "D", Config: consumerJSON("D", ""), Servers: servers("s1", "s2", "s3")})
	snap := st.AppendSnapshot(nil)
	back, err := DecodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"C": 1, "D": 3} {
		if ca, _ := back.Consumer("A", "S", name); ca.Initial != want {
			t.Fatalf("%s after a snapshot: initial %d, want %d", name, ca.Initial, want)
		}
	}
	// Version 2: D (the last consumer of the last stream) without its
	// initial count, its last byte before the stream's move and excluded
	// servers (none: one byte each, which version 2 has not either).
	mustApply(t, st, &RemoveConsumer{Account: "A", Stream: "S", Name: "C"})
	body := bytes.Clone(st.AppendSnapshot(nil))
	body = body[:len(body)-7]
	body[0] = snapVersionV2
	back, err = DecodeSnapshot(binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli)))
	if err != nil {
		t.Fatal(err)
	}
	if ca, _ := back.Consumer("A", "S", "D"); ca.Initial != 3 {
		t.Fatalf("version 2: initial %d, want 3", ca.Initial)
	}
	// An initial count past the replica IDs given is damage.
	bad := bytes.Clone(st.AppendSnapshot(nil))
	bad = bad[:len(bad)-4]
	bad[len(bad)-3] = 9
	if _, err := DecodeSnapshot(binary.LittleEndian.AppendUint32(bad, crc32.Checksum(bad, castagnoli))); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("initial 9 of 3 replica IDs: %v", err)
	}
}
