package filestore

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// dump returns everything a reader of s can see, as text: the state with
// its gaps and lost sequences, the subjects, and every message.
func dump(t testing.TB, s *Store) string {
	t.Helper()
	var b strings.Builder
	st := s.State(true)
	fmt.Fprintf(&b, "state %+v lost %+v\n", st, st.Lost)
	subj := s.SubjectsState(">")
	for _, k := range slices.Sorted(maps.Keys(subj)) {
		fmt.Fprintf(&b, "subject %s %+v\n", k, subj[k])
	}
	for seq := st.FirstSeq; seq <= st.LastSeq && seq > 0; {
		m, err := s.LoadNext(nil, seq)
		if errors.Is(err, store.ErrEOF) {
			break
		}
		if err != nil {
			t.Fatalf("LoadNext(%d): %v", seq, err)
		}
		fmt.Fprintf(&b, "msg %d %d %s %q %q\n", m.Seq, m.Time, m.Subject, m.Header, m.Data)
		seq = m.Seq + 1
	}
	return b.String()
}

// quarantined returns the files a rollback set aside.
func quarantined(t testing.TB, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.ReadDir(path.Join(dir, "msgs"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.Contains(n, ".rolledback") {
			out = append(out, n)
		}
	}
	return out
}

// afterPosition returns the segments of the store in dir that hold
// bytes after position p: p's own when it is longer than p.Offset, and
// every later one. A rollback to p sets aside one file for each.
func afterPosition(t testing.TB, fs vfs.FS, dir string, p Position) []string {
	t.Helper()
	names, err := fs.ReadDir(path.Join(dir, "msgs"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		var base uint64
		if _, err := fmt.Sscanf(n, "%020d.blk", &base); err != nil || n != segmentName(base) {
			continue
		}
		f, err := fs.Open(path.Join(dir, "msgs", n))
		if err != nil {
			t.Fatal(err)
		}
		size, err := f.Size()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if base > p.Base || (base == p.Base && uint64(size) > p.Offset) {
			out = append(out, n)
		}
	}
	return out
}

// workload applies n random changes to s: appends (half of them waited
// for), deletes, compacts of the front, purges of a subject, skips and
// purges of everything; what waits for durability is the store's.
func workload(t testing.TB, s *Store, r *rand.Rand, n int) {
	t.Helper()
	for range n {
		st := s.State(false)
		var err error
		switch k := r.IntN(40); {
		case k < 30:
			m := store.Msg{Subject: fmt.Sprintf("w.%d", r.IntN(5)), Data: fmt.Appendf(nil, "%d-%s", st.LastSeq+1, strings.Repeat("x", r.IntN(200))), Time: int64(st.LastSeq+1) * 1e6}
			var seq uint64
			if seq, err = s.Append(m); err == nil && k%2 == 0 {
				err = s.WaitDurable(seq)
			}
		case k < 34 && st.Msgs > 0:
			err = s.Delete(st.FirstSeq + r.Uint64N(st.LastSeq-st.FirstSeq+1))
			if errors.Is(err, store.ErrNotFound) {
				err = nil
			}
		case k < 36 && st.Msgs > 0:
			_, err = s.Compact(st.FirstSeq + r.Uint64N(min(st.LastSeq-st.FirstSeq+1, 20)))
		case k < 37:
			_, err = s.Purge(store.PurgeRequest{Subject: fmt.Sprintf("w.%d", r.IntN(5))})
		case k < 38:
			err = s.SkipTo(st.LastSeq + 1 + r.Uint64N(5))
		case k < 39 && r.IntN(4) == 0:
			_, err = s.Purge(store.PurgeRequest{})
		}
		if err != nil {
			t.Fatalf("workload: %v", err)
		}
	}
}

// Encoding: a position round-trips; bytes that are not a position are
// refused.
func TestPositionEncoding(t *testing.T) {
	p := Position{Base: 7, Offset: 4096, LastSeq: 99}
	b := AppendPosition([]byte("x"), p)
	if len(b) != 1+PositionSize {
		t.Fatalf("%d bytes", len(b))
	}
	got, err := DecodePosition(b[1:])
	if err != nil || got != p {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	bad := [][]byte{
		nil,
		b[1:PositionSize],
		append([]byte{2}, b[2:]...),
		AppendPosition(nil, Position{Base: 0, Offset: 4096}),
		AppendPosition(nil, Position{Base: 1, Offset: SegmentHeaderSize - 1}),
		append(b[1:], 0),
	}
	for i, c := range bad {
		if _, err := DecodePosition(c); !errors.Is(err, ErrBadPosition) {
			t.Errorf("case %d: %v", i, err)
		}
	}
}

// A store reopened with RollbackTo is exactly what it was at the
// position, whatever was appended, removed, skipped or purged after it,
// across segments; what came after is set aside, not deleted; LastSeq
// continues from the position's.
func TestRollbackToPosition(t *testing.T) {
	for _, bs := range []int64{256, 1024, 1 << 20} {
		t.Run(fmt.Sprint(bs), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(bs), 1))
			fs := vfs.NewCrashFS()
			cfg := Config{Dir: "/s", FS: fs, BlockSize: bs, RollbackMode: true}
			s := mustOpen(t, cfg, store.Config{})
			workload(t, s, r, 150)
			p, err := s.Position()
			if err != nil {
				t.Fatal(err)
			}
			want := dump(t, s)
			s.PositionSaved(p)
			workload(t, s, r, 300)
			if dump(t, s) == want {
				t.Fatal("the workload after the position changed nothing")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			enc, _ := DecodePosition(AppendPosition(nil, p))
			for round := range 2 { // a second rollback to the same position changes nothing
				lg := &testLog{}
				cfg.RollbackTo, cfg.Logf = &enc, lg.logf
				s2 := mustOpen(t, cfg, store.Config{})
				mustCheck(t, s2, "rollback")
				if got := dump(t, s2); got != want {
					t.Fatalf("round %d: after the rollback:\n%s\nat the position:\n%s", round, got, want)
				}
				if round == 0 && (len(quarantined(t, fs, "/s")) == 0 || !lg.has("set aside")) {
					t.Fatalf("nothing set aside: %v, log %v", quarantined(t, fs, "/s"), lg.lines)
				}
				if err := s2.Close(); err != nil {
					t.Fatal(err)
				}
			}
			s3 := mustOpen(t, cfg, store.Config{})
			if seq := appendSync(t, s3, msgN("after", 1)); seq != p.LastSeq+1 {
				t.Fatalf("append after the rollback got %d, want %d", seq, p.LastSeq+1)
			}
			s3.Close()
		})
	}
}

// A power loss at any moment after a saved position, with or without a
// later position taken (a checkpoint cut short) or saved, leaves files a
// rollback returns to the saved position. Segments emptied after it are
// still there: without rollback mode the same runs lose them.
// With DeferSync (a replica's store: nothing fsynced between positions
// but for a segment left for a newer one) the same holds.
func TestRollbackAfterPowerLoss(t *testing.T) {
	for _, deferSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("defer=%v", deferSync), func(t *testing.T) { rollbackAfterPowerLoss(t, deferSync) })
	}
}

func rollbackAfterPowerLoss(t *testing.T, deferSync bool) {
	n := 60
	if testing.Short() {
		n = 20
	}
	for seed := range uint64(n) {
		r := rand.New(rand.NewPCG(seed, 2))
		fs := vfs.NewCrashFS()
		cfg := Config{Dir: "/s", FS: fs, BlockSize: int64(256 + r.IntN(2048)), RollbackMode: true, DeferSync: deferSync}
		s := mustOpen(t, cfg, store.Config{})
		workload(t, s, r, 50+r.IntN(100))
		p, err := s.Position()
		if err != nil {
			t.Fatal(err)
		}
		want := dump(t, s)
		s.PositionSaved(p)
		workload(t, s, r, 50+r.IntN(200))
		switch r.IntN(3) {
		case 1: // a later position taken, not saved: the rollback is still to p
			if _, err := s.Position(); err != nil {
				t.Fatal(err)
			}
			workload(t, s, r, r.IntN(50))
		case 2: // a later position saved: the rollback goes there
			if p, err = s.Position(); err != nil {
				t.Fatal(err)
			}
			want = dump(t, s)
			s.PositionSaved(p)
			workload(t, s, r, r.IntN(100))
		}
		opts := vfs.CrashOptions{Rand: rand.New(rand.NewPCG(seed, 3)), Tail: vfs.TailAny, ZeroFill: r.IntN(2) == 0}
		crashed := fs.Crash(opts)
		s.Close()
		p.id = 0
		cfg.FS, cfg.RollbackTo = crashed, &p
		s2, err := Open(cfg, store.Config{})
		if err != nil {
			t.Fatalf("seed %d: rollback to %v: %v", seed, p, err)
		}
		mustCheck(t, s2, "rollback")
		if got := dump(t, s2); got != want {
			t.Fatalf("seed %d: after the rollback:\n%s\nat the position:\n%s", seed, got, want)
		}
		s2.Close()
	}
}

// In rollback mode a front segment emptied after the last saved position
// stays on disk until a position taken after its removal is saved; out
// of rollback mode it goes once its compact record is durable.
func TestRollbackModeKeepsEmptiedSegments(t *testing.T) {
	for _, mode := range []bool{false, true} {
		fs := vfs.NewCrashFS()
		s := mustOpen(t, Config{Dir: "/s", FS: fs, BlockSize: 256, RollbackMode: mode}, store.Config{})
		for i := range 40 {
			appendSync(t, s, msgN("k", i))
		}
		p, err := s.Position()
		if err != nil {
			t.Fatal(err)
		}
		s.PositionSaved(p)
		before := segCount(t, fs)
		if _, err := s.Compact(35); err != nil {
			t.Fatal(err)
		}
		appendSync(t, s, msgN("k", 41)) // one more batch: removals happen after the syncs
		if mode {
			if got := segCount(t, fs); got < before {
				t.Fatalf("rollback mode: %d segments before the compact, %d after", before, got)
			}
		} else {
			// The flusher removes them after the batch's sync, which may
			// be after the append returned: wait, bounded.
			waitSegs(t, fs, func(n int) bool { return n < before }, "emptied segments removed without rollback mode")
		}
		if !mode {
			s.Close()
			continue
		}
		p2, err := s.Position()
		if err != nil {
			t.Fatal(err)
		}
		appendSync(t, s, msgN("k", 42))
		if got := segCount(t, fs); got < before {
			t.Fatalf("segments removed before the later position was saved: %d, was %d", got, before)
		}
		s.PositionSaved(p2)
		appendSync(t, s, msgN("k", 43))
		waitSegs(t, fs, func(n int) bool { return n < before }, "emptied segments removed once a later position was saved")
		s.Close()
	}
}

// waitSegs waits, at most 10 s, until the store's segment count satisfies
// ok (the flusher removes segments after a batch's sync, which can come
// after the append that caused it returned).
func waitSegs(t testing.TB, fs vfs.FS, ok func(int) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n := segCount(t, fs); !ok(n); n = segCount(t, fs) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d segments", what, n)
		}
		time.Sleep(time.Millisecond) // polling a condition, bounded by the deadline
	}
}

func segCount(t testing.TB, fs vfs.FS) int {
	t.Helper()
	names, err := fs.ReadDir("/s/msgs")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range names {
		if _, ok := parseSegmentName(name); ok {
			n++
		}
	}
	return n
}

// A position that does not match the files fails Open with
// ErrBadPosition, and, when the segment itself does not fit it, leaves
// every file as it was.
func TestRollbackBadPosition(t *testing.T) {
	fs := vfs.NewCrashFS()
	cfg := Config{Dir: "/s", FS: fs, BlockSize: 512, RollbackMode: true}
	s := mustOpen(t, cfg, store.Config{})
	for i := range 30 {
		appendSync(t, s, msgN("k", i))
	}
	p, err := s.Position()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		appendSync(t, s, msgN("k", 30+i))
	}
	s.Close()
	files := func() map[string]string {
		out := map[string]string{}
		names, _ := fs.ReadDir("/s/msgs")
		for _, n := range names {
			b, _ := fs.ReadFile(path.Join("/s/msgs", n))
			out[n] = string(b)
		}
		return out
	}
	before := files()
	for name, q := range map[string]Position{
		"no such segment":  {Base: p.Base + 1000, Offset: p.Offset, LastSeq: p.LastSeq},
		"past the end":     {Base: p.Base, Offset: 1 << 20, LastSeq: p.LastSeq},
		"inside a record":  {Base: p.Base, Offset: p.Offset - 3, LastSeq: p.LastSeq},
		"before the start": {Base: p.Base, Offset: 7, LastSeq: p.LastSeq},
	} {
		cfg.RollbackTo = &q
		if _, err := Open(cfg, store.Config{}); !errors.Is(err, ErrBadPosition) {
			t.Errorf("%s: %v", name, err)
		}
		if !maps.Equal(files(), before) {
			t.Fatalf("%s: the files changed", name)
		}
	}
	q := p
	q.LastSeq--
	cfg.RollbackTo = &q
	if _, err := Open(cfg, store.Config{}); !errors.Is(err, ErrBadPosition) {
		t.Errorf("LastSeq below the segments': %v", err)
	}
	cfg.RollbackMode = false
	if _, err := Open(cfg, store.Config{}); err == nil {
		t.Error("RollbackTo without RollbackMode opened")
	}
}

// A power loss during the rollback itself (its copy, renames, truncation)
// leaves files that the same rollback, run again, returns to the
// position.
func TestRollbackInterrupted(t *testing.T) {
	ops := []struct{ op, path string }{{"create", "rolledback"}, {"write", "rolledback"}, {"sync", "rolledback"}, {"rename", ".blk"}, {"syncdir", "msgs"}, {"sync", ".blk"}}
	for i, op := range ops {
		for _, tail := range []vfs.TailMode{vfs.TailDrop, vfs.TailKeep, vfs.TailAny} {
			r := rand.New(rand.NewPCG(uint64(i), uint64(tail)))
			var (
				fs   *vfs.CrashFS
				cfg  Config
				s    *Store
				p    Position
				want string
			)
			// The rollback's ops on a ".rolledback" file need bytes after p
			// in p's segment; where the flusher's batches (and so the
			// segments' ends) fall depends on timing, so a run whose tail
			// started a new segment is made again.
			for attempt := 0; ; attempt++ {
				fs = vfs.NewCrashFS()
				cfg = Config{Dir: "/s", FS: fs, BlockSize: 4096, RollbackMode: true}
				s = mustOpen(t, cfg, store.Config{})
				workload(t, s, r, 100)
				var err error
				if p, err = s.Position(); err != nil {
					t.Fatal(err)
				}
				want = dump(t, s)
				s.PositionSaved(p)
				appendSync(t, s, msgN("tail", 1)) // bytes after p in p's segment
				p2, err := s.Position()
				if err != nil {
					t.Fatal(err)
				}
				if p2.Base == p.Base || attempt == 20 {
					break
				}
				s.Close()
			}
			workload(t, s, r, 200)
			s.Close()
			var crashed *vfs.CrashFS
			hook := &hookFS{FS: fs, op: op.op, path: op.path, at: 1, crash: func() {
				crashed = fs.Crash(vfs.CrashOptions{Rand: r, Tail: tail})
			}}
			hook.armed.Store(true)
			cfg.FS, cfg.RollbackTo = hook, &p
			if s2, err := Open(cfg, store.Config{}); err == nil {
				s2.Close()
			}
			if crashed == nil {
				t.Fatalf("%v: the rollback never did it", op)
			}
			cfg.FS = crashed
			s3, err := Open(cfg, store.Config{})
			if err != nil {
				t.Fatalf("%v %v: rollback again: %v", op, tail, err)
			}
			if got := dump(t, s3); got != want {
				t.Fatalf("%v %v: after the rollback:\n%s\nat the position:\n%s", op, tail, got, want)
			}
			s3.Close()
		}
	}
}

// What a rollback sets aside is the store's own and short-lived: it is
// logged once (one line, no "unknown file" for each at every start),
// removed once a position taken after the rollback is saved (the
// replica's next checkpoint), and a later rollback before that removes
// what the earlier one set aside once it has returned the store to its
// position, so files never pile up over repeated crashes: each rollback
// leaves exactly one file for each segment that held bytes after the
// position when it started (afterPosition).
//
// How many that is after the first rollback depends on where the
// position fell: with room left in its segment, the entry applied again
// and the compact record the flusher writes after each Open land there
// (one file: the segment's tail); at a segment's end the compact record
// may still fit, written before the entry starts a new segment (two
// files), or come with the entry in the new segment (one). Where the
// flusher's batches, and so the segments' ends, fall depends on timing;
// the test once counted one file at most and failed about 1 run in 150
// under -race.
func TestRollbackLeavesNoFiles(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fs := vfs.NewCrashFS()
	cfg := Config{Dir: "/s", FS: fs, BlockSize: 512, RollbackMode: true}
	s := mustOpen(t, cfg, store.Config{})
	workload(t, s, r, 100)
	p, err := s.Position()
	if err != nil {
		t.Fatal(err)
	}
	s.PositionSaved(p)
	workload(t, s, r, 200)
	s.Close()
	enc, _ := DecodePosition(AppendPosition(nil, p))
	cfg.RollbackTo = &enc

	var first []string
	for crash := range 3 { // crashes before any new checkpoint: each rolls back to p again
		lg := &testLog{}
		cfg.Logf = lg.logf
		after := afterPosition(t, fs, "/s", p)
		s = mustOpen(t, cfg, store.Config{})
		files := quarantined(t, fs, "/s")
		if len(files) == 0 {
			t.Fatalf("crash %d: nothing set aside", crash)
		}
		if crash == 0 {
			first = files
		}
		if len(files) != len(after) { // what followed p since the last rollback; the earlier ones gone
			t.Fatalf("crash %d: set aside %v for the segments holding bytes after the position %v (first rollback: %v)", crash, files, after, first)
		}
		lg.mu.Lock()
		var setAsideLines, unknown int
		for _, l := range lg.lines {
			if strings.Contains(l, "set aside until") {
				setAsideLines++
			}
			if strings.Contains(l, "unknown file") {
				unknown++
			}
		}
		lg.mu.Unlock()
		if (crash == 0 && setAsideLines != 1) || unknown != 0 {
			t.Fatalf("crash %d: log %q", crash, lg.lines)
		}
		appendSync(t, s, msgN("again", crash)) // the log's entries after p, applied again
		s.Close()
	}
	s = mustOpen(t, cfg, store.Config{})
	appendSync(t, s, msgN("again", 9))
	p2, err := s.Position()
	if err != nil {
		t.Fatal(err)
	}
	if len(quarantined(t, fs, "/s")) == 0 {
		t.Fatal("nothing set aside before the checkpoint (the test's premise)")
	}
	s.PositionSaved(p2)
	if got := quarantined(t, fs, "/s"); len(got) != 0 {
		t.Fatalf("left behind after the next saved position: %v", got)
	}
	s.Close()
	// Durably gone: a power loss does not bring them back.
	if got := quarantined(t, fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop}), "/s"); len(got) != 0 {
		t.Fatalf("back after a power loss: %v", got)
	}
}

// The names a rollback gives what it sets aside, and no other.
func TestIsSetAside(t *testing.T) {
	for name, want := range map[string]bool{
		"00000000000000000001.blk.rolledback":           true,
		"00000000000000000001.blk.rolledback.2":         true,
		"00000000000000000001.blk.from-48.rolledback":   true,
		"00000000000000000001.blk.from-48.rolledback.1": true,
		"00000000000000000001.blk":                      false,
		"00000000000000000001.blk.from-.rolledback":     false,
		"00000000000000000001.blk.rolledback.":          false,
		"00000000000000000001.blk.rolledback.x":         false,
		"notes.rolledback":                              false,
		"0000000000000000000x.blk.rolledback":           false,
	} {
		if got := isSetAside(name); got != want {
			t.Errorf("isSetAside(%q) = %v, want %v", name, got, want)
		}
	}
}

// LoadRemoved serves removed messages while their records are on disk:
// deleted in the middle, compacted at the front (the emptied segments
// kept in rollback mode until a later position is saved), in the
// in-memory image and in files; once a position taken after the removal
// is saved, the front segments go and so do their records.
func TestLoadRemoved(t *testing.T) {
	fs := vfs.NewCrashFS()
	s := mustOpen(t, Config{Dir: "/s", FS: fs, BlockSize: 256, RollbackMode: true}, store.Config{})
	defer s.Close()
	for n := 1; n <= 40; n++ {
		appendSync(t, s, msgN("a", n))
	}
	p, err := s.Position()
	if err != nil {
		t.Fatal(err)
	}
	s.PositionSaved(p)
	if err := s.Delete(30); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(21); err != nil {
		t.Fatal(err)
	}
	for n := 41; n <= 45; n++ {
		appendSync(t, s, msgN("a", n))
	}
	if err := s.Delete(44); err != nil { // in the active segment
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 5, 20, 30, 44} {
		if _, err := s.Load(seq); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Load(%d): %v", seq, err)
		}
		m, err := s.LoadRemoved(seq)
		if err != nil || m.Seq != seq || string(m.Data) != fmt.Sprintf("a#%d", seq) || m.Time != int64(seq)*1e9 {
			t.Fatalf("LoadRemoved(%d): %+v, %v", seq, m, err)
		}
	}
	if m, err := s.LoadRemoved(33); err != nil || m.Seq != 33 {
		t.Fatalf("LoadRemoved of a live message: %+v, %v", m, err)
	}
	if _, err := s.LoadRemoved(46); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("LoadRemoved past the end: %v", err)
	}
	p, err = s.Position()
	if err != nil {
		t.Fatal(err)
	}
	s.PositionSaved(p)
	appendSync(t, s, msgN("a", 46)) // a batch removes the doomed segments
	if _, err := s.LoadRemoved(1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("LoadRemoved after its segment went: %v", err)
	}
	if m, err := s.LoadRemoved(30); err != nil || m.Seq != 30 {
		t.Fatalf("LoadRemoved(30) in a kept segment: %+v, %v", m, err)
	}
}
