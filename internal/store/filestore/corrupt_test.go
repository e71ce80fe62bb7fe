package filestore

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// image is a closed store's files, to damage copies of.
type image struct {
	files map[string][]byte
	msgs  map[uint64]store.Msg
	segs  []string // segment paths, ascending
}

// buildImage makes a store of n messages, each acknowledged alone, in
// segments of blockSize bytes, with a consumer, and returns its files.
func buildImage(t testing.TB, n int, blockSize int64) image {
	return buildImageWith(t, n, blockSize, false)
}

// buildImageWith is buildImage; with s2, every payload is stored
// compressed, and every other one is long enough for S2 to find repeats.
func buildImageWith(t testing.TB, n int, blockSize int64, s2 bool) image {
	fs := vfs.NewCrashFS()
	cfg := memConfig(fs, blockSize)
	cfg.forceS2 = s2
	s := mustOpen(t, cfg, store.Config{})
	im := image{files: map[string][]byte{}, msgs: map[uint64]store.Msg{}}
	for i := range n {
		m := msgN(fmt.Sprintf("s.%d", i%3), i)
		if i%4 == 1 {
			m.Header = []byte("NATS/1.0\r\nA: b\r\n\r\n")
		}
		if s2 && i%2 == 0 {
			m.Data = fmt.Appendf(m.Data, "%s", bytes.Repeat([]byte("abc"), 12))
		}
		im.msgs[appendSync(t, s, m)] = m
	}
	cs, err := s.ConsumerStore("c")
	if err != nil {
		t.Fatal(err)
	}
	st := &store.ConsumerState{Delivered: store.SequencePair{Consumer: 9, Stream: 12}, AckFloor: store.SequencePair{Consumer: 3, Stream: 4},
		Pending: []store.StreamPending{{Stream: 5, Pending: store.Pending{Sequence: 4, Timestamp: 77}}, {Stream: 9, Pending: store.Pending{Sequence: 8, Timestamp: 78}}}, Redelivered: map[uint64]uint64{5: 2}}
	if err := cs.Update(st); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.ReadDir("/store/msgs")
	for _, name := range names {
		im.segs = append(im.segs, "/store/msgs/"+name)
	}
	for _, p := range append(slices.Clone(im.segs), "/store/meta", "/store/"+ckptName, "/store/consumers/c/state") {
		b, err := fs.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		im.files[p] = b
	}
	return im
}

// withoutCheckpoint returns the image without its checkpoint file: a
// store written before checkpoints (or whose checkpoint was removed).
func (im image) withoutCheckpoint() image {
	out := im
	out.files = maps.Clone(im.files)
	delete(out.files, "/store/"+ckptName)
	return out
}

// fs returns a new file system holding the image, all of it durable.
func (im image) fs(t testing.TB) *vfs.CrashFS {
	fs := vfs.NewCrashFS()
	for p, b := range im.files {
		if err := fs.WriteFile(p, b); err != nil {
			t.Fatal(err)
		}
	}
	return fs
}

// recInfo is one record of a segment file.
type recInfo struct {
	off, size int
	typ       byte
	seq       uint64
	packed    bool
}

// records lists the records of a segment of the image.
func (im image) records(p string) []recInfo {
	base, _ := parseSegmentName(path.Base(p))
	data := im.files[p]
	good, _ := scanRecords(data, base, nil)
	var out []recInfo
	for _, off := range good {
		r := decodeRecord(data[off:])
		out = append(out, recInfo{int(off), r.size, r.typ, r.seq, r.packed})
	}
	return out
}

// outcome is what a damaged image recovered to.
type outcome struct {
	lost, dropped []uint64 // reported lost; missing and not reported (torn tail)
	corruptLog    bool     // recovery logged corruption
	tornLog       bool     // recovery logged a dropped torn tail
}

// openDamaged opens the image after damage and checks that no message is
// ever served with other bytes than it was stored with; it returns what
// was lost, and how.
func (im image) openDamaged(t *testing.T, fs *vfs.CrashFS, what string) outcome {
	t.Helper()
	lg := &testLog{}
	cfg := memConfig(fs, 512)
	cfg.Logf = lg.logf
	s, err := Open(cfg, store.Config{})
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer s.Close()
	mustCheck(t, s, what)
	o := outcome{corruptLog: lg.has("corrupt data") || lg.has("corrupt segment header"), tornLog: lg.has("torn tail")}
	st := s.State(false)
	for _, seq := range slices.Sorted(mapKeysU64(im.msgs)) {
		got, err := s.Load(seq)
		switch {
		case err == nil:
			want := im.msgs[seq]
			if got.Subject != want.Subject || !bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Header, want.Header) || got.Time != want.Time {
				t.Fatalf("%s: seq %d served wrong bytes %+v", what, seq, got)
			}
		case errors.Is(err, store.ErrCorrupt):
			if st.Lost == nil || !slices.Contains(st.Lost.Msgs, seq) {
				t.Fatalf("%s: seq %d corrupt but not in State().Lost %+v", what, seq, st.Lost)
			}
			o.lost = append(o.lost, seq)
		case errors.Is(err, store.ErrNotFound) && seq > st.LastSeq:
			o.dropped = append(o.dropped, seq)
		default:
			t.Fatalf("%s: Load(%d): %v", what, seq, err)
		}
	}
	checkUsable(t, s, 0)
	return o
}

func mapKeysU64[V any](m map[uint64]V) func(func(uint64) bool) {
	return func(yield func(uint64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestBitFlipsInRecords flips every bit of every record of every segment,
// one at a time (docs/durability.md section 5, bit flips): the damaged
// message is never served,
// it is reported lost, or, in the last batch of the last segment (which
// recovery cannot tell from a torn write), dropped with a log; no other
// message is lost. With compressed records too: the CRC catches the flip
// before anything is decoded.
func TestBitFlipsInRecords(t *testing.T) {
	t.Run("plain", func(t *testing.T) { bitFlipsInRecords(t, buildImage(t, 24, 700)) })
	t.Run("s2", func(t *testing.T) {
		im := buildImageWith(t, 12, 700, true)
		packed := 0
		for _, p := range im.segs {
			for _, rec := range im.records(p) {
				if rec.packed {
					packed++
				}
			}
		}
		if packed != 12 {
			t.Fatalf("%d compressed records in the image, want 12", packed)
		}
		bitFlipsInRecords(t, im)
	})
}

func bitFlipsInRecords(t *testing.T, im image) {
	var flips, lost, tail, other int
	for k, p := range im.segs {
		last := k == len(im.segs)-1
		for _, rec := range im.records(p) {
			for bit := int64(rec.off) * 8; bit < int64(rec.off+rec.size)*8; bit++ {
				fs := im.fs(t)
				if err := fs.FlipBit(p, bit); err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("%s bit %d (record type %d seq %d)", p, bit, rec.typ, rec.seq)
				o := im.openDamaged(t, fs, what)
				flips++
				switch {
				case rec.typ != recMsg:
					if len(o.lost)+len(o.dropped) > 0 || !o.corruptLog && !o.tornLog {
						t.Fatalf("%s: a flip outside messages lost %v %v", what, o.lost, o.dropped)
					}
					other++
				case reflect.DeepEqual(o.lost, []uint64{rec.seq}) && o.corruptLog:
					lost++
				case last && reflect.DeepEqual(o.lost, []uint64{rec.seq}) && len(o.dropped) == 0 && o.tornLog:
					tail++
				default:
					t.Fatalf("%s: outcome %+v", what, o)
				}
			}
		}
	}
	t.Logf("%d single-bit flips in records: %d reported lost, %d in the last batch cut as a torn tail and reported lost by the checkpoint, %d in syncmarks (logged, nothing lost); 100%% detected",
		flips, lost, tail, other)
}

// TestBitFlipsInHeaders flips every bit of every segment header and of the
// metadata file: recovery logs it and loses nothing.
func TestBitFlipsInHeaders(t *testing.T) {
	im := buildImage(t, 12, 700)
	n := 0
	for _, p := range append(slices.Clone(im.segs), "/store/meta") {
		size := int64(SegmentHeaderSize)
		if p == "/store/meta" {
			size = metaSize
		}
		for bit := range size * 8 {
			fs := im.fs(t)
			if err := fs.FlipBit(p, bit); err != nil {
				t.Fatal(err)
			}
			o := im.openDamaged(t, fs, fmt.Sprintf("%s bit %d", p, bit))
			if len(o.lost)+len(o.dropped) > 0 {
				t.Fatalf("%s bit %d: lost %v dropped %v", p, bit, o.lost, o.dropped)
			}
			n++
		}
	}
	t.Logf("%d header and metadata bit flips: all logged, nothing lost", n)
}

// TestMultipleBitFlips flips 2 and 8 random bits inside random records:
// no message is ever served with wrong bytes, and the damaged ones are
// reported.
func TestMultipleBitFlips(t *testing.T) {
	t.Run("plain", func(t *testing.T) { multipleBitFlips(t, buildImage(t, 24, 700)) })
	t.Run("s2", func(t *testing.T) { multipleBitFlips(t, buildImageWith(t, 24, 700, true)) })
}

func multipleBitFlips(t *testing.T, im image) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, nbits := range []int{2, 8} {
		for trial := range 500 {
			fs := im.fs(t)
			p := im.segs[r.IntN(len(im.segs)-1)] // a sealed segment: every flip is corruption
			recs := im.records(p)
			rec := recs[r.IntN(len(recs))]
			for _, bit := range r.Perm(rec.size * 8)[:nbits] { // distinct bits
				if err := fs.FlipBit(p, int64(rec.off*8+bit)); err != nil {
					t.Fatal(err)
				}
			}
			o := im.openDamaged(t, fs, fmt.Sprintf("%d flips, trial %d", nbits, trial))
			if !o.corruptLog || rec.typ == recMsg && !slices.Equal(o.lost, []uint64{rec.seq}) {
				t.Fatalf("%d flips in seq %d not reported: %+v", nbits, rec.seq, o)
			}
		}
	}
}

// TestTruncateLastSegment cuts the last segment at every byte offset of its
// last two message records (and the records after them), and at 200
// random earlier offsets (docs/durability.md section 5, torn tail):
// recovery cuts the torn tail
// with a log, keeps the prefix, and the store is usable. Every message of
// the image was acknowledged, so the checkpoint reports each one cut off
// lost, and LastSeq stays; without a checkpoint (a store from before
// them), the cut messages are dropped and their sequences assigned again.
func TestTruncateLastSegment(t *testing.T) {
	im := buildImage(t, 30, 1<<20)
	t.Run("checkpoint", func(t *testing.T) { truncateLastSegment(t, im, true) })
	t.Run("no-checkpoint", func(t *testing.T) { truncateLastSegment(t, im.withoutCheckpoint(), false) })
}

func truncateLastSegment(t *testing.T, im image, ckpt bool) {
	p := im.segs[len(im.segs)-1]
	recs := im.records(p)
	var msgs []recInfo
	for _, rec := range recs {
		if rec.typ == recMsg {
			msgs = append(msgs, rec)
		}
	}
	from := msgs[len(msgs)-2].off
	size := len(im.files[p])
	cuts := make([]int, 0, size-from+200)
	for c := from; c < size; c++ {
		cuts = append(cuts, c)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		cuts = append(cuts, SegmentHeaderSize+r.IntN(from-SegmentHeaderSize))
	}
	for _, c := range cuts {
		fs := im.fs(t)
		if err := fs.TruncateFile(p, int64(c)); err != nil {
			t.Fatal(err)
		}
		o := im.openDamaged(t, fs, fmt.Sprintf("cut at %d", c))
		want := 0
		for _, m := range msgs {
			if m.off+m.size > c {
				want++
			}
		}
		boundary := slices.ContainsFunc(recs, func(r recInfo) bool { return r.off+r.size == c })
		lost, dropped := len(o.lost), len(o.dropped)
		if ckpt {
			lost, dropped = dropped, lost
		}
		if lost != 0 || dropped != want || o.tornLog == boundary {
			t.Fatalf("cut at %d: %+v, want %d cut off (lost with a checkpoint: %v), a log unless at a record boundary (%v)", c, o, want, ckpt, boundary)
		}
	}
	t.Logf("%d truncations of the last segment: prefix kept, tail cut with a log (checkpoint %v)", len(cuts), ckpt)
}

// TestGarbageAfterLastRecord appends zeros, random bytes and partial
// records to the last segment: recovery drops them with a log and loses
// nothing.
func TestGarbageAfterLastRecord(t *testing.T) {
	im := buildImage(t, 10, 1<<20)
	p := im.segs[len(im.segs)-1]
	r := rand.New(rand.NewPCG(5, 6))
	rec := im.records(p)[1]
	whole := im.files[p][rec.off : rec.off+rec.size]
	tails := [][]byte{make([]byte, 1), make([]byte, 700), whole[:10], whole[:RecordOverhead], whole[:len(whole)-1]}
	for range 50 {
		b := make([]byte, 1+r.IntN(2000))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		tails = append(tails, b)
	}
	for i, tail := range tails {
		fs := im.fs(t)
		if err := fs.WriteFile(p, append(slices.Clone(im.files[p]), tail...)); err != nil {
			t.Fatal(err)
		}
		o := im.openDamaged(t, fs, fmt.Sprintf("tail %d", i))
		if len(o.lost)+len(o.dropped) > 0 || !o.tornLog {
			t.Fatalf("tail %d: %+v", i, o)
		}
	}
}

// TestTruncateSealedSegment cuts a sealed segment at every offset: the
// sequences whose records were cut are reported lost, exactly, and
// nothing else is.
func TestTruncateSealedSegment(t *testing.T) {
	im := buildImage(t, 24, 700)
	p := im.segs[1]
	recs := im.records(p)
	for c := range len(im.files[p]) {
		fs := im.fs(t)
		if err := fs.TruncateFile(p, int64(c)); err != nil {
			t.Fatal(err)
		}
		o := im.openDamaged(t, fs, fmt.Sprintf("cut sealed at %d", c))
		var want []uint64
		for _, rec := range recs {
			if rec.typ == recMsg && rec.off+rec.size > c {
				want = append(want, rec.seq)
			}
		}
		if !slices.Equal(o.lost, want) || len(o.dropped) > 0 {
			t.Fatalf("cut sealed at %d: lost %v, want %v (dropped %v)", c, o.lost, want, o.dropped)
		}
	}
}

// TestMissingSegment removes a sealed segment: its sequences are reported
// lost; nothing is deleted.
func TestMissingSegment(t *testing.T) {
	im := buildImage(t, 24, 700)
	for k := range len(im.segs) - 1 {
		fs := im.fs(t)
		if err := fs.Remove(im.segs[k]); err != nil {
			t.Fatal(err)
		}
		o := im.openDamaged(t, fs, fmt.Sprintf("segment %d missing", k))
		var want []uint64
		for _, rec := range im.records(im.segs[k]) {
			if rec.typ == recMsg {
				want = append(want, rec.seq)
			}
		}
		if !slices.Equal(o.lost, want) {
			t.Fatalf("segment %d missing: lost %v, want %v", k, o.lost, want)
		}
	}
}

// TestRuntimeCorruption damages a record while the store runs: the load
// fails with a CorruptError, State().Lost reports it from then on, other
// loads are unaffected, and Delete acknowledges the loss.
func TestRuntimeCorruption(t *testing.T) {
	im := buildImage(t, 24, 700)
	fs := im.fs(t)
	cfg := memConfig(fs, 700)
	cfg.CacheBytes = -1
	s := mustOpen(t, cfg, store.Config{})
	defer s.Close()
	rec := im.records(im.segs[0])[2]
	if err := fs.FlipBit(im.segs[0], int64(rec.off+rec.size-10)*8); err != nil {
		t.Fatal(err)
	}
	_, err := s.Load(rec.seq)
	var cerr *store.CorruptError
	if !errors.As(err, &cerr) || cerr.First != rec.seq {
		t.Fatalf("Load of damaged seq %d: %v", rec.seq, err)
	}
	if st := s.State(false); st.Lost == nil || !slices.Equal(st.Lost.Msgs, []uint64{rec.seq}) {
		t.Fatalf("Lost = %+v", st.Lost)
	}
	if _, err := s.LoadNext(nil, rec.seq-1); err != nil {
		t.Fatalf("LoadNext before the damaged sequence: %v", err)
	}
	if _, err := s.LoadNext([]string{"s.*"}, rec.seq); !errors.As(err, &cerr) {
		t.Fatalf("LoadNext over the damaged sequence: %v", err)
	}
	if _, err := s.Load(rec.seq + 1); err != nil {
		t.Fatalf("Load(%d): %v", rec.seq+1, err)
	}
	if err := s.Delete(rec.seq); err != nil {
		t.Fatalf("Delete of the lost sequence: %v", err)
	}
	if st := s.State(false); st.Lost != nil {
		t.Fatalf("Lost after Delete = %+v", st.Lost)
	}
	mustCheck(t, s, "delete lost")
}

// TestConsumerStateDamage flips every bit of a consumer state file and
// cuts it at every length: State fails with ErrCorrupt every time, never
// returning an empty or other state.
func TestConsumerStateDamage(t *testing.T) {
	im := buildImage(t, 3, 700)
	p := "/store/consumers/c/state"
	size := len(im.files[p])
	n := 0
	damage := func(what string, fn func(fs *vfs.CrashFS) error) {
		fs := im.fs(t)
		if err := fn(fs); err != nil {
			t.Fatal(err)
		}
		s := mustOpen(t, memConfig(fs, 700), store.Config{})
		defer s.Close()
		cs, err := s.ConsumerStore("c")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if st, err := cs.State(); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("%s: State() = %+v, %v; want ErrCorrupt", what, st, err)
		}
		n++
	}
	for bit := range int64(size * 8) {
		damage(fmt.Sprintf("bit %d", bit), func(fs *vfs.CrashFS) error { return fs.FlipBit(p, bit) })
	}
	for c := range size {
		damage(fmt.Sprintf("cut %d", c), func(fs *vfs.CrashFS) error { return fs.TruncateFile(p, int64(c)) })
	}
	damage("missing", func(fs *vfs.CrashFS) error { return fs.Remove(p) })
	t.Logf("%d damaged consumer states: all refused with ErrCorrupt", n)
}

// TestNoSegments: a store whose segments are all gone opens when its
// checkpoint says how far the log was durable: those sequences are
// reported lost and the next append gets the one after them, never an
// acknowledged sequence again (issue 12, finding 1, for a stream with a
// single segment). Without the checkpoint too, nothing tells how far the
// log went: Open refuses it.
func TestNoSegments(t *testing.T) {
	im := buildImage(t, 3, 1<<20)
	fs := im.fs(t)
	for _, p := range im.segs {
		if err := fs.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(memConfig(fs, 0), store.Config{})
	if err != nil {
		t.Fatalf("Open without segments, with the checkpoint: %v", err)
	}
	st := s.State(false)
	if st.LastSeq != 3 || st.Msgs != 0 || st.Lost == nil || !slices.Equal(st.Lost.Msgs, []uint64{1, 2, 3}) {
		t.Fatalf("state %+v, lost %+v; want last 3, no messages, 1-3 lost", st, st.Lost)
	}
	if seq := appendSync(t, s, msgN("s.x", 9)); seq != 4 {
		t.Fatalf("the next append got sequence %d, want 4", seq)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, memConfig(fs, 0), store.Config{})
	if st := s.State(false); st.LastSeq != 4 || st.Msgs != 1 || st.Lost == nil || len(st.Lost.Msgs) != 3 {
		t.Fatalf("after a restart: %+v, lost %+v", st, st.Lost)
	}
	s.Close()

	im = buildImage(t, 3, 1<<20)
	fs = im.fs(t)
	for _, p := range append(im.segs, "/store/checkpoint") {
		if err := fs.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(memConfig(fs, 0), store.Config{}); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Open without segments and checkpoint: %v", err)
	}
}

// lowWaterImage returns the closed files of a store whose low water is
// above 1 (shape says how it got there), and the limits it runs with.
func lowWaterImage(t *testing.T, shape string) (*vfs.CrashFS, store.Config) {
	fs := vfs.NewCrashFS()
	var limits store.Config
	switch shape {
	case "first-seq":
		limits.FirstSeq = 1000
	case "max-msgs":
		limits.MaxMsgs = 5
	}
	blockSize := int64(400)
	if shape == "first-seq" {
		blockSize = 1 << 20 // one segment: its header is the only one
	}
	s := mustOpen(t, memConfig(fs, blockSize), limits)
	for i := range 20 {
		appendSync(t, s, msgN(fmt.Sprintf("s.%d", i%3), i))
	}
	var err error
	switch shape {
	case "purged":
		_, err = s.Purge(store.PurgeRequest{})
	case "compacted-past-end":
		_, err = s.Compact(1 << 40)
	}
	if err != nil {
		t.Fatal(err)
	}
	if shape != "purged" {
		appendSync(t, s, msgN("s.0", 21))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return fs, limits
}

// TestBitFlipsInHeadersLowWater flips every bit of every segment header
// of stores whose low water is above 1: made with a first sequence, after
// a purge that removed every segment, after a compact far past the end,
// under max_msgs. The low water is never kept by a header alone, so
// recovery loses nothing and reports nothing lost (a header damaged in
// its low water once reported every sequence below the segment lost, and
// after a compact to 1<<40 recovery never ended).
func TestBitFlipsInHeadersLowWater(t *testing.T) {
	for _, shape := range []string{"first-seq", "purged", "compacted-past-end", "max-msgs"} {
		fs, limits := lowWaterImage(t, shape)
		names, err := fs.ReadDir("/store/msgs")
		if err != nil {
			t.Fatal(err)
		}
		ref := mustOpen(t, memConfig(fs.Crash(vfs.CrashOptions{}), 400), limits)
		want, wantMsgs := ref.State(true), loadAll(ref)
		ref.Close()
		for _, name := range names {
			for bit := range int64(SegmentHeaderSize * 8) {
				damaged := fs.Crash(vfs.CrashOptions{})
				if err := damaged.FlipBit("/store/msgs/"+name, bit); err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("%s: %s bit %d", shape, name, bit)
				s := openWithin(t, memConfig(damaged, 400), limits, what)
				got := s.State(true)
				got.LastTime, want.LastTime = 0, 0 // the header of an empty active segment holds it
				if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(loadAll(s), wantMsgs) {
					t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
				}
				s.Close()
			}
		}
	}
}

// openWithin opens a store, failing the test if Open fails or takes more
// than ten seconds.
func openWithin(t *testing.T, cfg Config, limits store.Config, what string) *Store {
	t.Helper()
	done := make(chan struct{})
	var s *Store
	var err error
	go func() {
		defer close(done)
		s, err = Open(cfg, limits)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Open does not return", what)
	}
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	return s
}

// loadAll returns every stored message, by LoadNext.
func loadAll(s *Store) []*store.StoredMsg {
	var out []*store.StoredMsg
	for seq := uint64(0); ; seq = out[len(out)-1].Seq + 1 {
		m, err := s.LoadNext(nil, seq)
		if err != nil {
			return out
		}
		out = append(out, m)
	}
}

// TestDamagedFrontSegmentKept damages the last three messages of the
// front segment, whose other messages were removed: recovery reports
// them lost and keeps the file that holds them (it once removed it, as a
// front segment without messages, while still reporting the sequences
// lost in it); once Delete acknowledges the loss, the file goes.
func TestDamagedFrontSegmentKept(t *testing.T) {
	fs := vfs.NewCrashFS()
	cfg := memConfig(fs, 700)
	s := mustOpen(t, cfg, store.Config{})
	for i := range 30 {
		appendSync(t, s, msgN("s", i))
	}
	front := "/store/msgs/" + segmentName(1)
	b, err := fs.ReadFile(front)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []recInfo
	for _, rec := range (image{files: map[string][]byte{front: b}}).records(front) {
		if rec.typ == recMsg {
			msgs = append(msgs, rec)
		}
	}
	damaged := msgs[len(msgs)-3:]
	if _, err := s.Compact(damaged[0].seq); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for _, rec := range damaged {
		if err := fs.FlipBit(front, int64(rec.off+rec.size/2)*8); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec.seq)
	}
	s = mustOpen(t, cfg, store.Config{})
	if st := s.State(false); st.Lost == nil || !slices.Equal(st.Lost.Msgs, want) {
		t.Fatalf("Lost = %+v, want %v", st.Lost, want)
	}
	s.Close() // the flusher has removed what it removes
	if _, err := fs.ReadFile(front); err != nil {
		t.Fatalf("the file holding lost sequences %v was removed: %v", want, err)
	}
	s = mustOpen(t, cfg, store.Config{})
	for _, seq := range want {
		if err := s.Delete(seq); err != nil {
			t.Fatalf("Delete(%d): %v", seq, err)
		}
	}
	mustCheck(t, s, "deletes of lost sequences")
	s.Close()
	if _, err := fs.ReadFile(front); !vfs.IsNotExist(err) {
		t.Fatalf("front segment after its lost sequences were deleted: %v", err)
	}
}
