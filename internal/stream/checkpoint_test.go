package stream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/filestore"
	"github.com/cairnmq/cairn/internal/vfs"
)

// ckptOps returns the operations of a stream's life from step from to to
// (exclusive), a pure function of the step: publishes with Nats-Msg-Ids
// (some repeated), a schedule every 20 steps, deletes of messages that
// carry an id, expiry passes that move the duplicate window and fire
// schedules, and config updates that change the window and the limits.
func ckptOps(from, to int) []Op {
	var ops []Op
	for i := from; i < to; i++ {
		at := t0 + int64(i)*int64(100*time.Millisecond)
		switch {
		case i%20 == 5:
			ops = append(ops, &Publish{Entries: []Entry{{Subject: fmt.Sprintf("c.sched.%d", i%3), Header: hdrBlock("Nats-Schedule:@every 1s|Nats-Schedule-Target:c.target"), Data: []byte("tick"), Time: at}}})
		case i%17 == 3:
			ops = append(ops, &DeleteMsg{Seq: uint64(i / 2)})
		case i%13 == 0:
			ops = append(ops, &Expire{Time: at}, &FireSchedules{Time: at})
		case i == 70 || i == 140:
			ops = append(ops, &UpdateConfig{Config: ckptConfig(time.Duration(i/70)*time.Second, int64(2+i/70))})
		default:
			ops = append(ops, &Publish{Entries: []Entry{
				{Subject: fmt.Sprintf("c.%d", i%4), Header: hdrBlock(fmt.Sprintf("Nats-Msg-Id:m%d", i%37)), Data: fmt.Appendf(nil, "p%d", i), Time: at},
				{Subject: "c.plain", Data: fmt.Appendf(nil, "q%d", i), Time: at},
			}})
		}
	}
	return ops
}

// ckptConfig is the stream of the checkpoint tests with a duplicate
// window and a per-subject limit.
func ckptConfig(window time.Duration, perSubject int64) Config {
	c := Config{Name: "C", Subjects: []string{"c.>"}, Storage: FileStorage, DuplicateWindow: window + 2*time.Second,
		MaxMsgsPerSubject: perSubject, AllowMsgSchedules: true, AllowRollup: true}
	c.SetDefaults()
	return c
}

func applyAll(t *testing.T, s *Stream, ops []Op) {
	t.Helper()
	var out Outcome
	for _, op := range ops {
		s.ApplyOp(op, &out)
		if out.StoreErr != nil && !errors.Is(out.StoreErr, store.ErrNotFound) {
			t.Fatalf("%T: %v", op, out.StoreErr)
		}
	}
}

// A stream restored from its store rolled back to a position and the
// checkpoint taken with it has the state of the stream at that point,
// byte for byte, and, given the same operations, reaches the same state
// as the stream that never stopped; Rebuild does not (the ids of deleted
// messages, the parked and moved schedules).
func TestCheckpointRestore(t *testing.T) {
	for _, at := range []int{40, 100, 170} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			fs := vfs.NewCrashFS()
			fcfg := filestore.Config{Dir: "/c", FS: fs, BlockSize: 1024, RollbackMode: true}
			cfg := ckptConfig(0, 2)
			st, err := filestore.Open(fcfg, cfg.StoreConfig())
			if err != nil {
				t.Fatal(err)
			}
			s := New(cfg, st)
			applyAll(t, s, ckptOps(0, at))
			pos, err := st.Position()
			if err != nil {
				t.Fatal(err)
			}
			ck, err := s.AppendCheckpoint(nil)
			if err != nil {
				t.Fatal(err)
			}
			want := s.AppendState(nil)
			st.PositionSaved(pos)
			applyAll(t, s, ckptOps(at, 220))
			final := s.AppendState(nil)
			crashed := fs.Crash(vfs.CrashOptions{Tail: vfs.TailAny})
			st.Close()

			rcfg, err := CheckpointConfig(ck)
			if err != nil {
				t.Fatal(err)
			}
			fcfg.FS, fcfg.RollbackTo = crashed, &pos
			st2, err := filestore.Open(fcfg, rcfg.StoreConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			rebuilt := New(rcfg, st2)
			if err := rebuilt.Rebuild(); err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(rebuilt.AppendState(nil), want) {
				t.Fatal("Rebuild alone restores the state: the checkpoint proves nothing")
			}
			s2 := New(rcfg, st2)
			if err := s2.RestoreCheckpoint(ck); err != nil {
				t.Fatal(err)
			}
			if got := s2.AppendState(nil); !bytes.Equal(got, want) {
				t.Fatalf("restored:\n%s\nat the checkpoint:\n%s", got, want)
			}
			applyAll(t, s2, ckptOps(at, 220))
			if got := s2.AppendState(nil); !bytes.Equal(got, final) {
				t.Fatalf("restored, then the same operations:\n%s\nthe stream that never stopped:\n%s", got, final)
			}
		})
	}
}

// Damaged or foreign bytes are refused and leave the stream as it was.
func TestCheckpointRefusesDamage(t *testing.T) {
	s := newTestStream(t, `{"name":"D","subjects":["d.>"],"duplicate_window":60000000000}`)
	wantSeq(t, apply(s, "d.a", "Nats-Msg-Id:x", "1", t0), 1, false)
	ck, err := s.AppendCheckpoint(nil)
	if err != nil {
		t.Fatal(err)
	}
	other := newTestStream(t, `{"name":"D","subjects":["d.>"],"duplicate_window":60000000000}`)
	before := other.AppendState(nil)
	reCRC := func(b []byte) []byte {
		b = b[:len(b)-4]
		return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	}
	flipped := bytes.Clone(ck)
	flipped[len(flipped)/2] ^= 0x10
	version := bytes.Clone(ck)
	version[0] = 2
	for name, b := range map[string][]byte{
		"empty":     nil,
		"flipped":   flipped,
		"truncated": ck[:len(ck)-1],
		"version":   reCRC(version),
		"trailing":  reCRC(append(bytes.Clone(ck[:len(ck)-4]), 0, 0, 0, 0, 0)),
		"short":     reCRC(bytes.Clone(ck[:10])),
	} {
		if err := other.RestoreCheckpoint(b); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := CheckpointConfig(b); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("%s: config: %v", name, err)
		}
		if !bytes.Equal(other.AppendState(nil), before) {
			t.Fatalf("%s: the stream changed", name)
		}
	}
	if err := other.RestoreCheckpoint(ck); err != nil {
		t.Fatal(err)
	}
	// The window came across: the id is a duplicate of the message at 1.
	wantSeq(t, apply(other, "d.b", "Nats-Msg-Id:x", "2", t0+1), 1, true)
}
