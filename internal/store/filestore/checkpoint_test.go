package filestore

import (
	"errors"
	"fmt"
	"hash/crc32"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// TestLostTailNeverReused loses the end of the log after every message
// was acknowledged: the last segment cut short or removed, after a clean
// shutdown or a kill -9 (the page cache survives: TailKeep). Recovery
// must report exactly the missing sequences lost (State().Lost, loads
// failing with ErrCorrupt, a log line naming the range), keep LastSeq at
// the highest acknowledged sequence and number the next message above it:
// a sequence once acknowledged is never assigned to another message
// (issue 12, finding 1). Without the checkpoint the next append reused
// the first missing sequence.
func TestLostTailNeverReused(t *testing.T) {
	for _, kill := range []bool{false, true} {
		for _, damage := range []string{"cut 40", "cut 100", "cut to header", "remove last"} {
			t.Run(fmt.Sprintf("kill=%v/%s", kill, damage), func(t *testing.T) { lostTail(t, kill, damage) })
		}
	}
}

func lostTail(t *testing.T, kill bool, damage string) {
	fs := vfs.NewCrashFS()
	cfg := memConfig(fs, 600)
	s := mustOpen(t, cfg, store.Config{})
	const n = 40
	for i := 1; i <= n; i++ {
		appendSync(t, s, msgN("s", i))
	}
	img := fs
	if kill {
		img = fs.Crash(vfs.CrashOptions{Tail: vfs.TailKeep})
	} else if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := img.ReadDir("/store/msgs")
	if err != nil || len(names) < 3 {
		t.Fatalf("segments %v, %v: want several", names, err)
	}
	last := "/store/msgs/" + names[len(names)-1]
	data, err := img.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	switch damage {
	case "cut 40":
		err = img.TruncateFile(last, int64(len(data)-40))
	case "cut 100":
		err = img.TruncateFile(last, int64(len(data)-100))
	case "cut to header":
		err = img.TruncateFile(last, SegmentHeaderSize)
	case "remove last":
		if err = img.Remove(last); err == nil {
			err = img.SyncDir("/store/msgs")
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	lg := &testLog{}
	cfg.FS, cfg.Logf = img, lg.logf
	s2 := mustOpen(t, cfg, store.Config{})
	st := s2.State(false)
	if st.LastSeq != n {
		t.Fatalf("LastSeq %d after losing the tail, want %d (the highest acknowledged)", st.LastSeq, n)
	}
	if st.Lost == nil || len(st.Lost.Msgs) == 0 || st.Msgs+uint64(len(st.Lost.Msgs)) != n {
		t.Fatalf("%d messages and lost %+v: want the missing tail reported lost", st.Msgs, st.Lost)
	}
	first := st.Lost.Msgs[0]
	if want := seqsFrom(first, n); !slices.Equal(st.Lost.Msgs, want) {
		t.Fatalf("lost %v, want %v", st.Lost.Msgs, want)
	}
	for seq := uint64(1); seq < first; seq++ {
		if _, err := s2.Load(seq); err != nil {
			t.Fatalf("Load(%d) below the lost tail: %v", seq, err)
		}
	}
	var cerr *store.CorruptError
	if _, err := s2.Load(n); !errors.As(err, &cerr) || cerr.First != n {
		t.Fatalf("Load(%d) of a lost sequence: %v, want a CorruptError", n, err)
	}
	if want := "lost " + store.SeqRange(first, n) + " at /store/msgs"; !lg.has(want) {
		t.Fatalf("no log line %q in %q", want, lg.lines)
	}
	mustCheck(t, s2, "lost tail")
	seq := appendSync(t, s2, msgN("after", 1))
	if seq != n+1 {
		t.Fatalf("the next append got sequence %d, want %d: an acknowledged sequence assigned again", seq, n+1)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	// The loss stays reported, and the new message stays above it.
	s3 := mustOpen(t, Config{Dir: cfg.Dir, FS: img, BlockSize: cfg.BlockSize}, store.Config{})
	defer s3.Close()
	st = s3.State(false)
	if st.LastSeq != n+1 || st.Lost == nil || !slices.Equal(st.Lost.Msgs, seqsFrom(first, n)) {
		t.Fatalf("after another reopen: %+v, lost %+v", st, st.Lost)
	}
	if m, err := s3.Load(n + 1); err != nil || m.Subject != "after" {
		t.Fatalf("Load(%d): %v, %v", n+1, m, err)
	}
}

// seqsFrom returns first..last.
func seqsFrom(first, last uint64) []uint64 {
	var out []uint64
	for seq := first; seq <= last; seq++ {
		out = append(out, seq)
	}
	return out
}

// A deleted lost sequence stops being reported, across a reopen; a purge
// clears the whole lost tail.
func TestLostTailDeleteAndPurge(t *testing.T) {
	fs := vfs.NewCrashFS()
	cfg := memConfig(fs, 600)
	s := mustOpen(t, cfg, store.Config{})
	for i := 1; i <= 20; i++ {
		appendSync(t, s, msgN("s", i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.ReadDir("/store/msgs")
	if err := fs.Remove("/store/msgs/" + names[len(names)-1]); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, cfg, store.Config{})
	st := s.State(false)
	if st.Lost == nil || st.LastSeq != 20 {
		t.Fatalf("after removing the last segment: %+v, lost %+v", st, st.Lost)
	}
	lost := st.Lost.Msgs
	if err := s.Delete(lost[0]); err != nil {
		t.Fatalf("Delete(%d) of a lost sequence: %v", lost[0], err)
	}
	s.Close()
	s = mustOpen(t, cfg, store.Config{})
	if st = s.State(false); st.LastSeq != 20 || st.Lost == nil || !slices.Equal(st.Lost.Msgs, lost[1:]) {
		t.Fatalf("after deleting %d and reopening: %+v lost %+v, want lost %v", lost[0], st, st.Lost, lost[1:])
	}
	if _, err := s.Purge(store.PurgeRequest{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = mustOpen(t, cfg, store.Config{})
	defer s.Close()
	if st = s.State(false); st.LastSeq != 20 || st.Lost != nil || st.FirstSeq != 21 {
		t.Fatalf("after a purge and reopen: %+v lost %+v", st, st.Lost)
	}
}

// The checkpoint file stays small: past ckptCompactMax the syncer
// replaces it, and a clean reopen keeps appending to it without a create
// or an fsync of its own.
func TestCheckpointStaysSmall(t *testing.T) {
	inner := vfs.NewCrashFS()
	cfg := memConfig(inner, 1<<20)
	s := mustOpen(t, cfg, store.Config{})
	const n = 3 * ckptCompactMax / ckptRecordSize
	for i := range n {
		appendSync(t, s, msgN("s", i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := inner.ReadFile("/store/" + ckptName)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > ckptCompactMax+ckptRecordSize {
		t.Fatalf("checkpoint file of %d bytes after %d appends", len(b), n)
	}
	if sc, err := scanCheckpoint(inner, "/store"); err != nil || !sc.clean || sc.seq != n {
		t.Fatalf("checkpoint %+v, %v: want %d", sc, err, n)
	}
	ffs := vfs.NewFaultFS(inner)
	var ckptSyncs atomic.Int64 // Match runs under the FaultFS lock: count, never fail
	ffs.Inject(vfs.Rule{Op: vfs.OpSync, Match: func(name string) bool {
		if path.Base(name) == ckptName {
			ckptSyncs.Add(1)
		}
		return false
	}})
	cfg.FS = ffs
	s = mustOpen(t, cfg, store.Config{})
	defer s.Close()
	// The flusher may write and fsync a segment after the reopen (the low
	// water's compact record); what must not happen is a new checkpoint
	// file or an fsync of it, before or after the next acknowledged append.
	appendSync(t, s, msgN("s", n+1))
	if w, c := ckptSyncs.Load(), ffs.Calls(vfs.OpCreate); c != 0 || w != 0 {
		t.Fatalf("a clean reopen and an append made %d fsyncs of the checkpoint file and %d creates, want none", w, c)
	}
}

// A damaged checkpoint file is no reason to refuse the store: a torn
// record (power loss) or a damaged header is skipped, logged when it is
// not a torn tail, and the file is written again. One of an unknown
// version fails Open.
func TestCheckpointDamaged(t *testing.T) {
	build := func() (*vfs.CrashFS, Config) {
		fs := vfs.NewCrashFS()
		cfg := memConfig(fs, 600)
		s := mustOpen(t, cfg, store.Config{})
		for i := 1; i <= 10; i++ {
			appendSync(t, s, msgN("s", i))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return fs, cfg
	}
	name := "/store/" + ckptName
	for _, tc := range []struct {
		what   string
		damage func(b []byte) []byte
		log    string
	}{
		{"torn record", func(b []byte) []byte { return append(b, 1, 2, 3) }, ""},
		{"flipped record", func(b []byte) []byte { b[len(b)-10] ^= 4; return b }, ""},
		{"flipped header", func(b []byte) []byte { b[3] ^= 1; return b }, "header is damaged"},
		{"empty", func(b []byte) []byte { return nil }, "header is damaged"},
	} {
		fs, cfg := build()
		b, _ := fs.ReadFile(name)
		if err := fs.WriteFile(name, tc.damage(b)); err != nil {
			t.Fatal(err)
		}
		lg := &testLog{}
		cfg.Logf = lg.logf
		s := mustOpen(t, cfg, store.Config{})
		if st := s.State(false); st.LastSeq != 10 || st.Msgs != 10 || st.Lost != nil {
			t.Fatalf("%s: %+v", tc.what, st)
		}
		if tc.log != "" && !lg.has(tc.log) {
			t.Fatalf("%s: no log %q in %q", tc.what, tc.log, lg.lines)
		}
		s.Close()
		if sc, err := scanCheckpoint(fs, "/store"); err != nil || !sc.clean || sc.seq != 10 {
			t.Fatalf("%s: checkpoint after reopen %+v, %v: want it written again", tc.what, sc, err)
		}
	}
	fs, cfg := build()
	h := encodeCkptHeader()
	le.PutUint32(h[8:], 9)
	le.PutUint32(h[12:], crc32.Checksum(h[:12], crcTable))
	if err := fs.WriteFile(name, h); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(cfg, store.Config{}); err == nil || !strings.Contains(err.Error(), "unsupported") {
		t.Fatalf("Open with a checkpoint of version 9: %v, want an error", err)
	}
}
