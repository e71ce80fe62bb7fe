package filestore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/vfs"
)

// modelFilters are the filters the model test loads with.
var modelFilters = [][]string{
	nil, {">"}, {"s.0"}, {"s.1"}, {"rare"}, {"s.*"}, {"*"}, {"s.>"}, {"rare", "s.2"},
	{"s.3", "s.4"}, {"nope"}, {"*", "s.0"}, {"s.*.x"},
}

// modelPurgeSubjects are the filters the model test purges with.
var modelPurgeSubjects = []string{"", ">", "s.0", "s.*", "rare", "nope", "s.1.x"}

// model runs the same operations on a file store and on memstore, the
// model, and compares everything observable after each one.
type model struct {
	t      *testing.T
	r      *rand.Rand
	fs     *vfs.CrashFS
	cfg    Config
	limits store.Config
	f      *Store
	m      *memstore.Store
	now    int64
	step   int
	last   string
	// mRemovals is the model's Removals when the file store was last
	// opened; the file store counts from 0 there.
	mRemovals uint64
}

// TestModel drives the file store and memstore with random operations,
// including close and reopen and power loss after every acknowledged
// change, and compares their states and loads after each operation.
func TestModel(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 11))
			x := newModel(t, r)
			defer x.f.Close()
			for x.step = 0; x.step < 500; x.step++ {
				x.op()
				x.compare()
			}
		})
	}
}

func newModel(t *testing.T, r *rand.Rand) *model {
	x := &model{t: t, r: r, fs: vfs.NewCrashFS()}
	x.limits = x.randomLimits()
	if r.IntN(3) == 0 {
		x.limits.FirstSeq = uint64(r.IntN(5))
	}
	x.cfg = Config{Dir: "/db/s", FS: x.fs, BlockSize: int64(200 + r.IntN(2000)), CacheBytes: int64(r.IntN(3)-1) * 1 << 16}
	x.f = mustOpen(t, x.cfg, x.limits)
	x.m = memstore.New(x.limits)
	return x
}

// randomLimits draws a stream configuration.
func (x *model) randomLimits() store.Config {
	r := x.r
	var c store.Config
	if r.IntN(3) == 0 {
		c.MaxMsgs = int64(5 + r.IntN(40))
	}
	if r.IntN(4) == 0 {
		c.MaxBytes = int64(500 + r.IntN(5000))
	}
	if r.IntN(3) == 0 {
		c.MaxMsgsPerSubject = int64(1 + r.IntN(5))
	}
	if r.IntN(4) == 0 {
		c.MaxAge = time.Duration(5+r.IntN(50)) * time.Second
	}
	if r.IntN(5) == 0 {
		c.MaxMsgSize = int64(100 + r.IntN(400))
	}
	if r.IntN(3) == 0 {
		c.Discard = store.DiscardNew
		c.DiscardNewPerSubject = r.IntN(2) == 0
	}
	c.MsgTTL = r.IntN(2) == 0
	c.SubjectDeleteMarkers = c.MsgTTL && r.IntN(2) == 0
	c.FirstSeq = x.limits.FirstSeq
	return c
}

// op performs one random operation on both stores.
func (x *model) op() {
	switch k := x.r.IntN(100); {
	case k < 50:
		x.append()
	case k < 55:
		x.skip()
	case k < 63:
		x.delete()
	case k < 68:
		x.purge()
	case k < 71:
		x.compact()
	case k < 76:
		x.expire()
	case k < 79:
		x.updateConfig()
	case k < 84:
		x.reopen()
	case k < 87:
		x.powerLoss()
	default:
		x.loads()
	}
}

func (x *model) randomMsg() store.Msg {
	r := x.r
	subj := fmt.Sprintf("s.%d", r.IntN(5))
	switch r.IntN(20) {
	case 0:
		subj = "rare"
	case 1:
		subj = "s.1.x"
	}
	m := store.Msg{Subject: subj, Data: make([]byte, r.IntN(200)), Time: x.now}
	for i := range m.Data {
		m.Data[i] = byte(r.Uint32())
	}
	switch r.IntN(10) {
	case 0:
		m.Header = []byte("NATS/1.0\r\nNats-Rollup: sub\r\n\r\n")
	case 1:
		m.Header = []byte("NATS/1.0\r\nA: b\r\n\r\n")
	case 2, 3:
		m.Header = fmt.Appendf(nil, "NATS/1.0\r\nNats-TTL: %ds\r\n\r\n", 1+r.IntN(30))
	case 4:
		m.Header = []byte("NATS/1.0\r\nNats-TTL: never\r\n\r\n")
	case 5:
		m.Header = []byte("NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 5\r\n\r\n")
	}
	x.now += int64(r.IntN(3)) * int64(time.Second)
	return m
}

func (x *model) append() {
	m := x.randomMsg()
	x.last = fmt.Sprintf("Append(%s, %d bytes)", m.Subject, len(m.Data))
	fs, ferr := x.f.Append(m)
	ms, merr := x.m.Append(m)
	if fs != ms || !sameErr(ferr, merr) {
		x.t.Fatalf("step %d: %s = %d, %v; model %d, %v", x.step, x.last, fs, ferr, ms, merr)
	}
	if ferr == nil {
		if err := x.f.WaitDurable(fs); err != nil {
			x.t.Fatalf("WaitDurable(%d): %v", fs, err)
		}
	}
}

// skip skips a few sequences, now and then none, many (past the
// segment's slot budget) or backwards (refused).
func (x *model) skip() {
	last := x.m.State(false).LastSeq
	seq := last + 1 + uint64(x.r.IntN(6))
	switch x.r.IntN(10) {
	case 0:
		seq = last + 50 + uint64(x.r.IntN(200))
	case 1:
		seq = uint64(x.r.IntN(int(last) + 1))
	}
	x.last = fmt.Sprintf("SkipTo(%d)", seq)
	ferr, merr := x.f.SkipTo(seq), x.m.SkipTo(seq)
	x.sameResult(0, ferr, 0, merr)
	if ferr == nil && seq > 1 {
		if err := x.f.WaitDurable(seq - 1); err != nil {
			x.t.Fatalf("WaitDurable(%d): %v", seq-1, err)
		}
	}
}

// seqNear returns a sequence around the stored range.
func (x *model) seqNear() uint64 {
	st := x.m.State(false)
	lo := max(int64(st.FirstSeq)-2, 0)
	return uint64(lo + x.r.Int64N(int64(st.LastSeq)-lo+4))
}

func (x *model) delete() {
	if x.r.IntN(3) == 0 {
		x.deleteMany()
		return
	}
	seq := x.seqNear()
	x.last = fmt.Sprintf("Delete(%d)", seq)
	ferr, merr := x.f.Delete(seq), x.m.Delete(seq)
	x.sameResult(0, ferr, 0, merr)
}

func (x *model) deleteMany() {
	seqs := make([]uint64, x.r.IntN(6))
	for i := range seqs {
		seqs[i] = x.seqNear()
	}
	x.last = fmt.Sprintf("DeleteMany(%v)", seqs)
	fn, ferr := x.f.DeleteMany(seqs)
	mn, merr := x.m.DeleteMany(seqs)
	x.sameResult(fn, ferr, mn, merr)
}

func (x *model) purge() {
	req := store.PurgeRequest{Subject: modelPurgeSubjects[x.r.IntN(len(modelPurgeSubjects))]}
	switch x.r.IntN(4) {
	case 0:
		req.Seq = x.seqNear()
	case 1:
		req.Keep = uint64(x.r.IntN(6))
	case 2:
		req.Seq, req.Keep = 3, 1 // bad request
	}
	x.last = fmt.Sprintf("Purge(%+v)", req)
	fn, ferr := x.f.Purge(req)
	mn, merr := x.m.Purge(req)
	x.sameResult(fn, ferr, mn, merr)
}

func (x *model) compact() {
	seq := x.seqNear()
	if x.r.IntN(5) == 0 {
		seq += uint64(x.r.IntN(20))
	}
	x.last = fmt.Sprintf("Compact(%d)", seq)
	fn, ferr := x.f.Compact(seq)
	mn, merr := x.m.Compact(seq)
	x.sameResult(fn, ferr, mn, merr)
}

func (x *model) expire() {
	x.now += int64(x.r.IntN(20)) * int64(time.Second)
	x.last = fmt.Sprintf("ExpireUpTo(%d)", x.now)
	fx, ferr := x.f.ExpireUpTo(x.now)
	mx, merr := x.m.ExpireUpTo(x.now)
	x.sameResult(fx.Removed, ferr, mx.Removed, merr)
	if !reflect.DeepEqual(fx, mx) {
		x.t.Fatalf("step %d: %s = %+v; model %+v", x.step, x.last, fx, mx)
	}
}

func (x *model) updateConfig() {
	x.limits = x.randomLimits()
	x.last = fmt.Sprintf("UpdateConfig(%+v)", x.limits)
	ferr, merr := x.f.UpdateConfig(x.limits), x.m.UpdateConfig(x.limits)
	x.sameResult(0, ferr, 0, merr)
}

// reopen closes the file store and opens it again.
func (x *model) reopen() {
	x.last = "reopen"
	if err := x.f.Close(); err != nil {
		x.t.Fatalf("Close: %v", err)
	}
	x.f = mustOpen(x.t, x.cfg, x.limits)
	x.mRemovals = x.m.Removals()
}

// powerLoss drops whatever was not synced and reopens: every operation so
// far was acknowledged, so nothing may change.
func (x *model) powerLoss() {
	x.last = "power loss"
	tail := vfs.TailMode(x.r.IntN(int(vfs.TailAny) + 1))
	x.fs = x.fs.Crash(vfs.CrashOptions{Rand: rand.New(rand.NewPCG(x.r.Uint64(), 1)), Tail: tail})
	x.f.Close() // fails on the crashed file system; it only stops the flusher
	x.cfg.FS = x.fs
	x.f = mustOpen(x.t, x.cfg, x.limits)
	x.mRemovals = x.m.Removals()
}

// loads compares random loads.
func (x *model) loads() {
	x.last = "loads"
	for range 5 {
		seq := x.seqNear()
		fm, ferr := x.f.Load(seq)
		mm, merr := x.m.Load(seq)
		x.sameMsg(fmt.Sprintf("Load(%d)", seq), fm, ferr, mm, merr)
		filters := modelFilters[x.r.IntN(len(modelFilters))]
		fm, ferr = x.f.LoadNext(filters, seq)
		mm, merr = x.m.LoadNext(filters, seq)
		x.sameMsg(fmt.Sprintf("LoadNext(%q, %d)", filters, seq), fm, ferr, mm, merr)
		filter := ">"
		if len(filters) > 0 {
			filter = filters[0]
		}
		fm, ferr = x.f.LoadLast(filter)
		mm, merr = x.m.LoadLast(filter)
		x.sameMsg(fmt.Sprintf("LoadLast(%q)", filter), fm, ferr, mm, merr)
		if a, b := x.f.SubjectsState(filter), x.m.SubjectsState(filter); !reflect.DeepEqual(a, b) {
			x.t.Fatalf("step %d: SubjectsState(%q) = %v; model %v", x.step, filter, a, b)
		}
		x.samePending(filters, seq)
	}
}

// samePending compares NumPending from start to the end, over a short
// range and to start.
func (x *model) samePending(filters []string, start uint64) {
	x.t.Helper()
	end := start + uint64(x.r.IntN(8))
	for _, rg := range [][2]uint64{{start, 0}, {start, end}, {0, start}, {0, 0}} {
		if a, b := x.f.NumPending(filters, rg[0], rg[1]), x.m.NumPending(filters, rg[0], rg[1]); a != b {
			x.t.Fatalf("step %d: NumPending(%q, %d, %d) = %d; model %d", x.step, filters, rg[0], rg[1], a, b)
		}
	}
}

// compare checks the invariants and compares the states.
func (x *model) compare() {
	x.t.Helper()
	mustCheck(x.t, x.f, x.last)
	fs, ms := x.f.State(true), x.m.State(true)
	if !reflect.DeepEqual(fs, ms) {
		x.t.Fatalf("step %d after %s:\nfilestore %+v\nmodel     %+v", x.step, x.last, fs, ms)
	}
	if a, b := x.f.Removals(), x.m.Removals()-x.mRemovals; a != b {
		x.t.Fatalf("step %d after %s: Removals() = %d; model %d since the open", x.step, x.last, a, b)
	}
	// Every operation waited for durability (SyncAlways).
	if a, b := x.f.DurableSeq(), x.m.DurableSeq(); a != fs.LastSeq || b != ms.LastSeq {
		x.t.Fatalf("step %d after %s: DurableSeq() = %d, model %d; LastSeq %d", x.step, x.last, a, b, fs.LastSeq)
	}
}

func (x *model) sameResult(fn uint64, ferr error, mn uint64, merr error) {
	x.t.Helper()
	if fn != mn || !sameErr(ferr, merr) {
		x.t.Fatalf("step %d: %s = %d, %v; model %d, %v", x.step, x.last, fn, ferr, mn, merr)
	}
}

func (x *model) sameMsg(what string, fm *store.StoredMsg, ferr error, mm *store.StoredMsg, merr error) {
	x.t.Helper()
	if !sameErr(ferr, merr) || !reflect.DeepEqual(fm, mm) {
		x.t.Fatalf("step %d: %s = %+v, %v; model %+v, %v", x.step, what, fm, ferr, mm, merr)
	}
}

// sameErr reports whether two errors are both nil or the same store
// sentinel.
func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	for _, e := range []error{store.ErrNotFound, store.ErrEOF, store.ErrBadRequest, store.ErrMaxMsgs,
		store.ErrMaxBytes, store.ErrMaxMsgsPerSubject, store.ErrMaxMsgSize, store.ErrClosed} {
		if errors.Is(a, e) || errors.Is(b, e) {
			return errors.Is(a, e) && errors.Is(b, e)
		}
	}
	return a.Error() == b.Error()
}
