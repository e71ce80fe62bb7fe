package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/vfs"
)

// busyOps builds a state with many accounts, streams, consumers and
// servers, outcome errors included, so that map order would show.
func busyOps() []Op {
	ops := []Op{&AddServer{Name: "s0", Cluster: "C1", Tags: []string{"az:1", "ssd"}, Incarnation: inc(9)}}
	for i := range 6 {
		ops = append(ops, &AddServer{Name: raftnode.ServerID(fmt.Sprintf("s%d", i+1)), Cluster: "C1", Incarnation: inc(byte(i + 1))})
	}
	for a := range 4 {
		acc := fmt.Sprintf("ACC%d", 3-a)
		for s := range 5 {
			name := fmt.Sprintf("S%d", (s*7)%5)
			srv := servers(fmt.Sprintf("s%d", s%6+1), fmt.Sprintf("s%d", (s+1)%6+1), fmt.Sprintf("s%d", (s+2)%6+1))
			ops = append(ops, &AssignStream{Account: acc, Name: name, Config: streamJSON(name, acc+"."+name+".>"), Created: int64(a*10 + s), Servers: srv})
			for c := range 3 {
				cn := fmt.Sprintf("c%d", 2-c)
				ops = append(ops, &AssignConsumer{Account: acc, Stream: name, Name: cn, Config: consumerJSON(cn, ""), Servers: srv[c : c+1]})
			}
		}
		ops = append(ops, &RemoveConsumer{Account: acc, Stream: "S1", Name: "c1"}, &RemoveStream{Account: acc, Name: "S2"})
	}
	return append(ops, &RemoveServer{Name: "s6"}, &UpdateStream{Account: "ACC0", Name: "S0", Config: streamJSON("S0"), Servers: servers("s1")},
		&UpdateStream{Account: "ACC1", Name: "S3", Config: streamJSON("S3", "ACC1.S3.>", "more"), Servers: servers("s4", "s5", "s6")},
		&MoveStream{Account: "ACC2", Name: "S0", Config: streamJSON("S0", "ACC2.S0.>"), Servers: servers("s3", "s4", "s5"), Created: 7, OriginPlacement: []byte(`{"tags":["az:1"]}`)},
		&MoveStream{Account: "ACC3", Name: "S1", Config: streamJSON("S1", "ACC3.S1.>"), Servers: servers("s4", "s5", "s1"), Created: 8},
		&CancelMove{Account: "ACC3", Name: "S1", Config: streamJSON("S1", "ACC3.S1.>"), Created: 8, Members: []raftnode.ReplicaID{1}})
}

// Two states built by the same operations give the same snapshot bytes,
// whatever Go's map order did; DecodeSnapshot gives back an equal state,
// which snapshots to the same bytes and answers the same queries.
func TestSnapshotDeterministic(t *testing.T) {
	build := func() *State {
		st := NewState()
		for _, op := range busyOps() {
			st.Apply(op)
		}
		return st
	}
	a, b := build(), build()
	sa := a.AppendSnapshot(nil)
	for range 20 {
		if sb := b.AppendSnapshot(nil); !bytes.Equal(sa, sb) {
			t.Fatal("equal states give different snapshots")
		}
	}
	r, err := DecodeSnapshot(sa)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.AppendSnapshot(nil), sa) {
		t.Fatal("restored state snapshots differently")
	}
	if !reflect.DeepEqual(r, a) {
		t.Fatal("restored state differs from the original")
	}
	if r.NextGroup() != a.NextGroup() || !reflect.DeepEqual(r.Servers(), a.Servers()) || !reflect.DeepEqual(r.Load(), a.Load()) {
		t.Fatal("restored state answers differently")
	}
	for _, s := range []raftnode.ServerID{"s1", "s4", "s6"} {
		s1, c1 := a.Assigned(s)
		s2, c2 := r.Assigned(s)
		if !reflect.DeepEqual(s1, s2) || !reflect.DeepEqual(c1, c2) {
			t.Fatalf("Assigned(%s) differs after restore", s)
		}
	}
	// Apply goes on identically from a restored state (overlap index and
	// counters restored).
	for _, op := range []Op{
		&AssignStream{Account: "ACC1", Name: "NEW", Config: streamJSON("NEW", "ACC1.S3.x"), Servers: servers("s1")},
		&AssignStream{Account: "ACC1", Name: "NEW", Config: streamJSON("NEW", "new"), Servers: servers("s1")},
	} {
		if x, y := a.Apply(op), r.Apply(op); !reflect.DeepEqual(x, y) {
			t.Fatalf("%+v: %+v, restored %+v", op, x, y)
		}
	}
	if a.Apply(&AssignStream{Account: "ACC1", Name: "Q", Config: streamJSON("Q", "ACC1.S3.y"), Servers: servers("s1")}).Err == nil {
		t.Fatal("the restored overlap index lost subjects")
	}
}

// resum rewrites a snapshot's checksum after tampering.
func resum(b []byte) []byte {
	body := b[:len(b)-4]
	return binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, castagnoli))
}

// A damaged snapshot is refused, never taken for a smaller state: every
// flipped bit and truncation (checksum), and, with a valid checksum,
// records out of order, repeated groups, IDs past their counters.
func TestSnapshotRefusesDamage(t *testing.T) {
	st := NewState()
	for _, op := range busyOps()[:20] {
		st.Apply(op)
	}
	good := st.AppendSnapshot(nil)
	for i := range len(good) * 8 {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		if _, err := DecodeSnapshot(b); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
	for n := range len(good) {
		if _, err := DecodeSnapshot(good[:n]); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}

	// Hand-made states with a valid checksum but broken invariants.
	mk := func(edit func(*State)) []byte {
		s := testState()
		s.Apply(&AssignStream{Account: "A", Name: "S", Config: streamJSON("S"), Servers: servers("s1", "s2")})
		s.Apply(&AssignStream{Account: "A", Name: "T", Config: streamJSON("T"), Servers: servers("s1")})
		edit(s)
		return s.AppendSnapshot(nil)
	}
	cases := map[string][]byte{
		"group repeated":     mk(func(s *State) { s.accounts["A"]["T"].sa.Group = s.accounts["A"]["S"].sa.Group }),
		"group past counter": mk(func(s *State) { s.nextGroup = FirstGroup + 1 }),
		"replica past next":  mk(func(s *State) { s.accounts["A"]["S"].sa.NextReplica = 2 }),
		"replica zero":       mk(func(s *State) { s.accounts["A"]["S"].sa.Replicas[0].ID = 0 }),
		"server twice":       mk(func(s *State) { s.accounts["A"]["S"].sa.Replicas[1].Server = "s1" }),
		"config renamed":     mk(func(s *State) { s.accounts["A"]["S"].sa.Config = streamJSON("U") }),
	}
	// Streams out of order: the records' names swapped in place (same
	// lengths), each config naming its record's new name.
	swapped := mk(func(s *State) {
		s.accounts["A"]["S"].sa.Config = streamJSON("T")
		s.accounts["A"]["T"].sa.Config = streamJSON("S")
	})
	swapped = bytes.Replace(swapped, []byte("\x01A\x01S"), []byte("\x01A\x01X"), 1)
	swapped = bytes.Replace(swapped, []byte("\x01A\x01T"), []byte("\x01A\x01S"), 1)
	swapped = bytes.Replace(swapped, []byte("\x01A\x01X"), []byte("\x01A\x01T"), 1)
	cases["streams out of order"] = resum(swapped)
	for name, b := range cases {
		if _, err := DecodeSnapshot(b); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The checkpoint file survives a crash once written, and a damaged one
// fails Open (the server must not join with a state it cannot trust).
func TestCheckpointFile(t *testing.T) {
	fs := vfs.NewCrashFS()
	st := testState()
	st.Apply(&AssignStream{Account: "A", Name: "S", Config: streamJSON("S"), Servers: servers("s1")})
	snap := st.AppendSnapshot(nil)
	if err := writeCheckpoint(fs, "meta", 17, snap); err != nil {
		t.Fatal(err)
	}
	fs = fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	l, err := Open(Config{FS: fs, Dir: "meta"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Applied() != 17 || l.StateMachine().Applied() != 17 {
		t.Fatalf("applied %d", l.Applied())
	}
	l.View(func(s *State) {
		if got := s.AppendSnapshot(nil); !bytes.Equal(got, snap) {
			t.Fatal("checkpoint state differs")
		}
	})
	if err := fs.FlipBit("meta/"+checkpointName, 8*20); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{FS: fs, Dir: "meta"}); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("damaged checkpoint: %v", err)
	}
	// No file: an empty state at 0.
	l, err = Open(Config{FS: vfs.NewCrashFS(), Dir: "meta"})
	if err != nil || l.Applied() != 0 {
		t.Fatalf("empty: %v %d", err, l.Applied())
	}
}

// FuzzDecodeSnapshot: never a panic, and what decodes (also once its
// checksum is made right, so the fuzzer gets past it) encodes again to a
// snapshot that decodes.
func FuzzDecodeSnapshot(f *testing.F) {
	st := NewState()
	for _, op := range busyOps()[:12] {
		st.Apply(op)
	}
	f.Add(st.AppendSnapshot(nil))
	f.Add(NewState().AppendSnapshot(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSnapshot(b)
		if err != nil {
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("error not wrapping ErrBadSnapshot: %v", err)
			}
			if len(b) <= 4 {
				return
			}
			if s, err = DecodeSnapshot(resum(b)); err != nil {
				return
			}
		}
		if _, err := DecodeSnapshot(s.AppendSnapshot(nil)); err != nil {
			t.Fatalf("a decoded snapshot does not decode again: %v", err)
		}
	})
}
