package filestore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// TestSkipRecordShape checks that only a skip record of the drawn shape
// (doc.go, record type 5) is valid, even with a matching CRC.
func TestSkipRecordShape(t *testing.T) {
	var p8, p16 [16]byte
	le.PutUint64(p8[:], 3)
	cases := []struct {
		name string
		rec  []byte
		ok   bool
	}{
		{"valid", appendSkipRecord(nil, 1, 3, 10), true},
		{"one sequence", appendSkipRecord(nil, 1, 9, 10), true},
		{"first not below seq", appendSkipRecord(nil, 1, 10, 10), false},
		{"first above seq", appendSkipRecord(nil, 1, 11, 10), false},
		{"first zero", appendSkipRecord(nil, 1, 0, 10), false},
		{"long payload", appendRecord(nil, 1, recSkip, 10, 0, "", nil, p16[:]), false},
		{"short payload", appendRecord(nil, 1, recSkip, 10, 0, "", nil, p8[:4]), false},
		{"subject", appendRecord(nil, 1, recSkip, 10, 0, "abcdefgh", nil, nil), false},
		{"header", appendRecord(nil, 1, recSkip, 10, 0, "", p8[:8], nil), false},
	}
	for _, c := range cases {
		n, err := checkRecord(c.rec, 1, 0)
		if c.ok != (err == nil) || c.ok && n != skipRecordSize {
			t.Errorf("%s: checkRecord = %d, %v; want valid %v", c.name, n, err, c.ok)
		}
	}
	if _, err := checkRecord(appendSkipRecord(nil, 1, 3, 10), 2, 0); !errors.Is(err, errCRC) {
		t.Errorf("a skip record read at another base: %v, want errCRC", err)
	}
}

// skipImage builds a store that a mirror would make: messages between
// skips that fill slots, skips past the slot budget (between segments),
// a skip that the next one continues, and a last skip with nothing after
// it; every step acknowledged. It returns the files and the skipped spans.
func skipImage(t *testing.T) (image, []seqSpan) {
	fs := vfs.NewCrashFS()
	s := mustOpen(t, memConfig(fs, 700), store.Config{})
	im := image{files: map[string][]byte{}, msgs: map[uint64]store.Msg{}}
	var spans []seqSpan
	n := 0
	skip := func(to uint64) {
		from := s.State(false).LastSeq + 1
		if err := s.SkipTo(to); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitDurable(to - 1); err != nil {
			t.Fatal(err)
		}
		spans = append(spans, seqSpan{from, to - 1})
	}
	add := func(k int) {
		for range k {
			m := msgN(fmt.Sprintf("s.%d", n%3), n)
			n++
			im.msgs[appendSync(t, s, m)] = m
		}
	}
	add(3)
	skip(8)
	add(2)
	skip(400) // past the budget of 10 slots: no slot
	add(4)
	skip(410)
	skip(420)
	add(6)
	skip(430)
	add(1)
	skip(1000)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.ReadDir("/store/msgs")
	for _, name := range names {
		im.segs = append(im.segs, "/store/msgs/"+name)
	}
	for _, p := range append(slices.Clone(im.segs), "/store/meta") {
		b, err := fs.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		im.files[p] = b
	}
	return im, spans
}

// TestSkipBitFlips flips every bit of every skip record, one at a time:
// recovery never takes the damaged range for skipped. It reports every
// sequence of the range lost, or, for the last batch of the last segment
// (a torn write to recovery), drops the skip with a log. No message is
// lost either way.
func TestSkipBitFlips(t *testing.T) {
	im, spans := skipImage(t)
	last := spans[len(spans)-1].last
	var flips, lost, dropped int
	for k, p := range im.segs {
		for _, rec := range im.records(p) {
			if rec.typ != recSkip {
				continue
			}
			sp := spans[slices.IndexFunc(spans, func(sp seqSpan) bool { return sp.last == rec.seq-1 })]
			for bit := int64(rec.off) * 8; bit < int64(rec.off+rec.size)*8; bit++ {
				fs := im.fs(t)
				if err := fs.FlipBit(p, bit); err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("%s bit %d (skip %d-%d)", p, bit, sp.first, sp.last)
				switch o := openSkipDamaged(t, im, fs, what, sp); {
				case o == "lost":
					lost++
				case o == "dropped" && k == len(im.segs)-1 && sp.last == last:
					dropped++
				default:
					t.Fatalf("%s: outcome %q", what, o)
				}
				flips++
			}
		}
	}
	if lost == 0 || dropped == 0 {
		t.Fatalf("%d flips: %d lost, %d dropped; the image should give both", flips, lost, dropped)
	}
	t.Logf("%d single-bit flips in skip records: %d reported the range lost, %d dropped the last skip as a torn batch (logged)", flips, lost, dropped)
}

// openSkipDamaged opens a damaged skip image, checks that every message
// is served intact, and returns "lost" when the span was reported lost
// (and logged corrupt), "dropped" when LastSeq went back below it with a
// torn tail logged, or what else it found.
func openSkipDamaged(t *testing.T, im image, fs *vfs.CrashFS, what string, sp seqSpan) string {
	t.Helper()
	lg := &testLog{}
	cfg := memConfig(fs, 700)
	cfg.Logf = lg.logf
	s, err := Open(cfg, store.Config{})
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer s.Close()
	mustCheck(t, s, what)
	for seq, want := range im.msgs {
		got, err := s.Load(seq)
		if err != nil || got.Subject != want.Subject || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("%s: Load(%d) = %+v, %v", what, seq, got, err)
		}
	}
	st := s.State(false)
	switch {
	case st.Lost != nil && slices.Equal(st.Lost.Msgs, seqsIn(sp)) && lg.has("corrupt data"):
		if _, err := s.Load(sp.first); !errors.Is(err, store.ErrCorrupt) {
			return fmt.Sprintf("Load(%d) of a lost sequence: %v", sp.first, err)
		}
		return "lost"
	case st.Lost == nil && st.LastSeq == sp.first-1 && lg.has("torn tail"):
		return "dropped"
	}
	return fmt.Sprintf("state %+v", st)
}

// seqsIn returns the sequences of sp.
func seqsIn(sp seqSpan) []uint64 {
	var out []uint64
	for seq := sp.first; seq <= sp.last; seq++ {
		out = append(out, seq)
	}
	return out
}

// TestSkipPowerLoss cuts the power while a skip is being written (before
// the n-th segment write, fsync, creation or directory fsync after it, or
// right after SkipTo returned), with every tail mode, for each shape of
// skip: of an empty store, filling slots, past the slot budget, and one
// that starts a new segment. Recovery finds the store before the skip or
// after it, never in between and never with anything lost; an
// acknowledged skip is always there; the next append gets the right
// sequence.
func TestSkipPowerLoss(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 100
	}
	shapes := map[string]int{}
	for i := range n {
		shape := skipCrashRun(t, rand.New(rand.NewPCG(uint64(i), 17)), i)
		shapes[shape]++
	}
	for _, shape := range []string{"empty", "fill", "no slot", "new segment"} {
		if shapes[shape] == 0 {
			t.Errorf("no run skipped with shape %q: %v", shape, shapes)
		}
	}
	t.Logf("%d power losses around a skip: %v", n, shapes)
}

// skipCrashRun is one run of TestSkipPowerLoss; it returns the shape of
// the skip.
func skipCrashRun(t *testing.T, r *rand.Rand, run int) string {
	fs := vfs.NewCrashFS()
	var crashed *vfs.CrashFS
	var once sync.Once
	var down atomic.Bool
	opts := vfs.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(run), 18)), Tail: vfs.TailMode(r.IntN(int(vfs.TailAny) + 1)), ZeroFill: r.IntN(2) == 0}
	crash := func() { once.Do(func() { crashed = fs.Crash(opts); down.Store(true) }) }
	trigger := []struct{ op, path string }{{"write", ".blk"}, {"sync", ".blk"}, {"create", ".blk"}, {"syncdir", ""}, {"none", ""}}[r.IntN(5)]
	hook := &hookFS{FS: fs, op: trigger.op, path: trigger.path, at: int64(1 + r.IntN(3)), crash: crash}
	cfg := Config{Dir: "/s", FS: hook, BlockSize: int64(300 + r.IntN(900))}
	s := mustOpen(t, cfg, store.Config{})
	for i := range r.IntN(12) {
		appendSync(t, s, store.Msg{Subject: "m", Data: bytes.Repeat([]byte("x"), r.IntN(120)), Time: int64(i)})
	}
	empty := r.IntN(4) == 0
	if empty {
		if _, err := s.Purge(store.PurgeRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	before := s.State(false)
	gap := uint64(1 + r.IntN(6))
	if r.IntN(3) == 0 {
		gap = 100_000
	}
	to := before.LastSeq + 1 + gap
	hook.armed.Store(true)
	// The power may go inside SkipTo (its own sync of the directory, or
	// a background flush's, comes first depending on scheduling): then
	// it fails, the store fenced, and nothing is acknowledged.
	skipErr := s.SkipTo(to)
	if skipErr != nil && !down.Load() {
		t.Fatalf("run %d: SkipTo(%d): %v", run, to, skipErr)
	}
	shape := "power lost in the skip"
	if skipErr == nil {
		shape = skipShape(s, before, to)
	}
	acked := false
	if r.IntN(4) != 0 && skipErr == nil {
		acked = s.WaitDurable(to-1) == nil && !down.Load()
	}
	crash()
	s.Close()
	cfg.FS = crashed
	s2 := mustOpen(t, cfg, store.Config{})
	defer s2.Close()
	what := fmt.Sprintf("run %d (%s, skip %d to %d, crash at %s #%d, acknowledged %v)", run, shape, before.LastSeq+1, to, trigger.op, hook.at, acked)
	mustCheck(t, s2, what)
	after := before
	after.LastSeq = to - 1
	if empty || before.Msgs == 0 {
		after.FirstSeq = to
	}
	after.NumDeleted = 0
	if after.Msgs > 0 {
		after.NumDeleted = int(after.LastSeq - after.FirstSeq + 1 - after.Msgs)
	}
	switch got := s2.State(false); {
	case got.Lost != nil:
		t.Fatalf("%s: lost %+v", what, got.Lost)
	case sameState(got, after):
	case acked:
		t.Fatalf("%s: the acknowledged skip is gone: %+v, want %+v", what, got, after)
	case !sameState(got, before):
		t.Fatalf("%s: recovered %+v; want before %+v or after %+v", what, got, before, after)
	}
	next := s2.State(false).LastSeq + 1
	if seq := appendSync(t, s2, store.Msg{Subject: "after"}); seq != next {
		t.Fatalf("%s: append after recovery got %d, want %d", what, seq, next)
	}
	return shape
}

// skipShape names the shape of the skip to seq just made by s, whose
// state before it was before.
func skipShape(s *Store, before store.State, seq uint64) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.activeLocked()
	switch {
	case before.Msgs == 0:
		return "empty"
	case g.end() == seq:
		if g.base == before.LastSeq+1 {
			return "new segment"
		}
		return "fill"
	case g.base == before.LastSeq+1 && len(g.offs) == 0:
		return "new segment"
	}
	return "no slot"
}

// sameState compares the fields a skip may change.
func sameState(a, b store.State) bool {
	return a.Msgs == b.Msgs && a.FirstSeq == b.FirstSeq && a.LastSeq == b.LastSeq && a.NumDeleted == b.NumDeleted &&
		a.Bytes == b.Bytes && a.LastTime == b.LastTime
}
