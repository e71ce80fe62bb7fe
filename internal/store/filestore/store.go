package filestore

import (
	"fmt"
	"math"
	"path"
	"sync"
	"sync/atomic"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// maxSealedBacklog is the number of sealed segments waiting for the
// flusher after which Append waits for it (backpressure).
const maxSealedBacklog = 4

// initialBufCap is the first capacity of a new segment's image.
const initialBufCap = 64 << 10

// Store is a durable store.Store. Open it with Open; it is safe for
// concurrent use.
type Store struct {
	cfg     Config
	fs      vfs.FS
	msgsDir string
	cache   *chunkCache
	mcache  matchCache
	note    *notifier
	ckpt    *checkpoint
	kick    chan struct{} // wakes the flusher; capacity 1
	quit    chan struct{} // closed by Close
	wg      sync.WaitGroup
	// packing says Append compresses payloads: compression is on and the
	// active segment may hold compressed records. Written under Store.mu
	// (setPackingLocked), read by Append before it takes the lock.
	packing atomic.Bool

	acks *journal // confirmed acknowledgements of the consumers

	// syncedSeq is the last sequence a group commit made durable, for
	// Config.SyncStats; owned by the syncer (set before it starts).
	syncedSeq uint64

	cons struct { // the open consumer stores
		sync.Mutex
		m      map[string]*consumerStore
		closed bool
	}

	mu struct {
		sync.RWMutex
		limits    store.Config
		closed    bool
		fenced    error
		segs      []*segment // ascending base; the last one is active
		sealedOut []*segment // sealed segments with bytes not yet taken, oldest first
		doomed    []doomedSeg
		subj      subjects
		msgs      uint64
		bytes     uint64
		first     uint64 // State.FirstSeq
		last      uint64 // State.LastSeq
		lastTime  int64
		spare     []byte // a written-out image to reuse
		lw        uint64 // low water: every sequence below it was removed
		lwWritten uint64 // low water already in a compact record of the active segment
		lost      []lostSpan
		taken     uint64 // batches taken by the flusher
		changes   uint64 // bumped by every change the flusher must write
		// changesTaken is changes when the flusher took its last batch.
		changesTaken uint64
		removals     uint64 // messages removed since Open (Removals)
		expiry       store.ExpireState
		// durablePos is the end of the log after the newest durable
		// batch; posTaken numbers the positions handed out, posSaved is
		// the newest one saved (position.go).
		durablePos Position
		posTaken   uint64
		posSaved   uint64
		// setAside are the files this Open's rollback set aside
		// (position.go), removed once a position taken after the
		// rollback is saved.
		setAside []string
	}
}

var _ store.Store = (*Store)(nil)

// doomedSeg is a segment to remove once batch gen is durable (and, in
// rollback mode, once a position taken after it was doomed is saved:
// after counts the positions taken before).
type doomedSeg struct {
	seg   *segment
	gen   uint64
	after uint64
}

// Append stores m at LastSeq+1 after the admission rules of
// store.CheckAppend, removes what the limits push out, and returns the
// sequence. It does no I/O: WaitDurable(seq) waits for the disk.
func (s *Store) Append(m store.Msg) (uint64, error) {
	if err := checkShape(m); err != nil {
		return 0, err
	}
	if err := s.throttle(); err != nil {
		return 0, err
	}
	var packed *[]byte
	if s.packing.Load() {
		packed = pack(m.Data, s.cfg.forceS2)
		defer release(packed) // after the unlock below
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return 0, err
	}
	occ := store.Occupancy{Msgs: s.mu.msgs, Bytes: s.mu.bytes, SubjectMsgs: s.subjectMsgsLocked(m.Subject)}
	oldest := func() uint64 { return s.oldestSizeLocked(m.Subject) }
	if err := store.CheckAppend(s.mu.limits, occ, m, oldest); err != nil {
		return 0, err
	}
	seq := s.addLocked(m, packed)
	err := store.EnforceAfterAppend(s.mu.limits, m.Subject, enforcer{s})
	s.kickLocked()
	if err != nil {
		return 0, err
	}
	return seq, nil
}

// checkShape refuses a message the record format cannot hold.
func checkShape(m store.Msg) error {
	if len(m.Subject) == 0 || len(m.Subject) > MaxSubjectLen {
		return fmt.Errorf("%w: subject length %d", store.ErrBadRequest, len(m.Subject))
	}
	if recordSize(m.Subject, m.Header, m.Data) > MaxRecordSize {
		return fmt.Errorf("%w: record larger than %d bytes", store.ErrMaxMsgSize, MaxRecordSize)
	}
	return nil
}

// throttle makes Append wait for the flusher when too many sealed
// segments are waiting to be written.
func (s *Store) throttle() error {
	s.mu.RLock()
	over := len(s.mu.sealedOut) >= maxSealedBacklog
	gen := s.mu.taken + 1
	s.mu.RUnlock()
	if !over {
		return nil
	}
	s.kickFlusher()
	return s.note.waitGen(gen)
}

// Fenced returns the error that fenced the store (it wraps
// store.ErrFenced), or nil while the store takes changes.
func (s *Store) Fenced() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.fenced
}

// usableLocked returns why the store takes no more changes, if it does
// not.
func (s *Store) usableLocked() error {
	if s.mu.closed {
		return store.ErrClosed
	}
	return s.mu.fenced
}

// addLocked stores m at the next sequence in the active segment, with
// its payload compressed when packed holds the compressed form and the
// segment may hold it.
func (s *Store) addLocked(m store.Msg, packed *[]byte) uint64 {
	seq := s.mu.last + 1
	data, flags := m.Data, byte(0)
	if packed != nil {
		data, flags = *packed, flagS2
	}
	n := recordSize(m.Subject, m.Header, data)
	g := s.activeForLocked(seq, n)
	if flags != 0 && !g.s2 {
		data, flags = m.Data, 0
		n = recordSize(m.Subject, m.Header, data)
	}
	s.reserveLocked(g, n)
	off := g.appendRec(recMsg, flags, seq, m.Time, m.Subject, m.Header, data)
	info := s.mu.subj.add(m.Subject)
	length := uint32(n)
	if len(m.Header) > 0 {
		length |= hdrBit
	}
	g.addSlot(uint32(off), length, info.id)
	if flags != 0 {
		g.setPlain(uint32(recordSize(m.Subject, m.Header, m.Data)))
	}
	g.maxTime = max(g.maxTime, m.Time)
	s.linkLocked(info, seq)
	s.mu.last, s.mu.lastTime = seq, m.Time
	s.mu.msgs++
	s.mu.bytes += store.MsgSize(m.Subject, m.Header, m.Data)
	if s.mu.msgs == 1 && len(s.mu.lost) == 0 {
		s.mu.first = seq
	}
	s.mu.changes++
	if s.mu.limits.MsgTTL {
		s.mu.expiry.TTL.Add(seq, m.Time, m.Header)
		s.mu.expiry.TTL.MaybePrune(s.mu.msgs, s.liveLocked)
	}
	return seq
}

// linkLocked records seq as the subject's newest message, linking it from
// the previous newest one.
func (s *Store) linkLocked(info *subjInfo, seq uint64) {
	if info.msgs == 0 {
		info.first = seq
	} else if !info.lastStale && seq-info.last < math.MaxUint32 {
		if g, i, ok := s.slotLocked(info.last); ok {
			g.next[i] = uint32(seq - info.last)
		}
	}
	info.last, info.lastStale = seq, false
	info.msgs++
}

// activeLocked returns the active segment.
func (s *Store) activeLocked() *segment { return s.mu.segs[len(s.mu.segs)-1] }

// activeForLocked returns the segment the message seq of n record bytes
// goes to, starting a new one when the active one is full or seq does not
// follow its last slot.
func (s *Store) activeForLocked(seq uint64, n int) *segment {
	g := s.activeLocked()
	full := len(g.offs) > 0 && g.size+int64(n) > s.cfg.BlockSize
	if full || seq != g.end() {
		g = s.rollLocked(seq)
	}
	return g
}

// rollLocked seals the active segment and starts a new one at base. The
// new segment's header records the low water and last time; the next
// batch also writes the low water in a compact record of the new segment,
// so that it never rests on a header alone.
func (s *Store) rollLocked(base uint64) *segment {
	old := s.activeLocked()
	old.sealed = true
	if old.written < old.size {
		s.mu.sealedOut = append(s.mu.sealedOut, old)
	}
	g := s.newSegment(base)
	h := segHeader{base: base, lowWater: s.mu.lw, lastTime: s.mu.lastTime, s2: s.packingWanted()}
	g.s2 = h.s2
	want := initialBufCap
	if old.size+int64(initialBufCap) > s.cfg.BlockSize {
		want = cap(old.buf) // it filled up: the next one likely will too
		g.reserveSlots(len(old.offs))
	}
	g.buf = append(s.takeSpareLocked(want), h.encode()...)
	g.grown()
	s.mu.lwWritten = 0
	s.mu.segs = append(s.mu.segs, g)
	s.mu.changes++
	s.setPackingLocked()
	return g
}

// reserveLocked makes room for n more bytes in g's image, doubling its
// capacity so that an image is copied about once in all as it grows.
func (s *Store) reserveLocked(g *segment, n int) {
	if cap(g.buf)-len(g.buf) >= n {
		return
	}
	buf := make([]byte, len(g.buf), max(2*cap(g.buf), len(g.buf)+n))
	copy(buf, g.buf)
	g.buf = buf
}

// takeSpareLocked returns an empty buffer of capacity at least want,
// reusing the image of a segment that was written out.
func (s *Store) takeSpareLocked(want int) []byte {
	if cap(s.mu.spare) >= want {
		b := s.mu.spare[:0]
		s.mu.spare = nil
		return b
	}
	return make([]byte, 0, want)
}

// newSegment returns an empty in-memory segment.
func (s *Store) newSegment(base uint64) *segment {
	return &segment{base: base, path: path.Join(s.msgsDir, segmentName(base)), maxTime: math.MinInt64}
}

// slotLocked returns the segment and slot of seq.
func (s *Store) slotLocked(seq uint64) (*segment, int, bool) {
	g := s.segmentForLocked(seq)
	if g == nil {
		return nil, 0, false
	}
	i, ok := g.slot(seq)
	return g, i, ok
}

// segmentForLocked returns the segment whose range holds seq (the last
// with base <= seq), or nil.
func (s *Store) segmentForLocked(seq uint64) *segment {
	i := s.segIndexLocked(seq)
	if i < 0 {
		return nil
	}
	return s.mu.segs[i]
}

// segIndexLocked returns the index of the last segment with base <= seq,
// or -1.
func (s *Store) segIndexLocked(seq uint64) int {
	segs := s.mu.segs
	lo, hi := 0, len(segs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if segs[m].base <= seq {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// liveLocked reports whether a message is stored at seq.
func (s *Store) liveLocked(seq uint64) bool {
	g, i, ok := s.slotLocked(seq)
	return ok && !g.isDead(i)
}

// subjectMsgsLocked returns the number of messages stored on subj.
func (s *Store) subjectMsgsLocked(subj string) uint64 {
	if info := s.mu.subj.get(subj); info != nil {
		return info.msgs
	}
	return 0
}

// oldestSizeLocked returns the size of the oldest message on subj, or 0.
func (s *Store) oldestSizeLocked(subj string) uint64 {
	info := s.mu.subj.get(subj)
	if info == nil {
		return 0
	}
	g, i, _ := s.slotLocked(info.first)
	return g.msgSize(i)
}

// kickLocked wakes the flusher when there is work for it now: always under
// SyncAlways, and under SyncEveryInterval only when sealed segments wait.
func (s *Store) kickLocked() {
	if s.cfg.Sync == SyncAlways || len(s.mu.sealedOut) > 0 {
		s.kickFlusher()
	}
}

// kickFlusher wakes the flusher without blocking.
func (s *Store) kickFlusher() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// WaitDurable blocks until every message through seq is durable under the
// sync policy. It returns store.ErrFenced (wrapping the cause) if that can
// no longer happen.
func (s *Store) WaitDurable(seq uint64) error {
	s.mu.RLock()
	err := s.usableLocked()
	last := s.mu.last
	s.mu.RUnlock()
	switch {
	case err != nil:
		return err
	case seq > last:
		return fmt.Errorf("%w: sequence %d was not appended", store.ErrBadRequest, seq)
	case s.cfg.Sync == SyncEveryInterval:
		return nil
	case s.cfg.DeferSync:
		return s.note.waitWritten(seq)
	}
	return s.note.waitSeq(seq)
}

// WaitWritten blocks until every message through seq is written to its
// segment file, before its fsync: a crash of the process no longer loses
// it, a crash of the operating system or a power loss still may. Under
// SyncEveryInterval, which writes only on its interval, it returns at
// once, as WaitDurable does. It returns store.ErrFenced (wrapping the
// cause) if the write failed or the store is fenced, and
// store.ErrBadRequest for a sequence never appended. The PubAcks of a
// stream with persist_mode async wait for it instead of WaitDurable
// (ADR-56; docs/durability.md). Like WaitDurable, it must not be called
// between BeginBatch and EndBatch by the one holding the run.
func (s *Store) WaitWritten(seq uint64) error {
	s.mu.RLock()
	err := s.usableLocked()
	last := s.mu.last
	s.mu.RUnlock()
	switch {
	case err != nil:
		return err
	case seq > last:
		return fmt.Errorf("%w: sequence %d was not appended", store.ErrBadRequest, seq)
	case s.cfg.Sync == SyncEveryInterval:
		return nil
	}
	return s.note.waitWritten(seq)
}

// DurableSeq returns the highest sequence through which every message is
// durable: the syncer publishes it after each fsync, so it trails the
// appends by a group commit under SyncAlways and by up to the interval
// under SyncEveryInterval (whose acknowledgements do not wait for it). It
// is LastSeq after Open and never exceeds it. Layers above deliver
// nothing past it: recovery cuts off a tail that was never fsynced and
// assigns its sequences again.
//
// With Config.DeferSync it is the written sequence: the caller's log
// holds what was not fsynced.
func (s *Store) DurableSeq() uint64 {
	if s.cfg.DeferSync {
		return s.note.writtenSeq()
	}
	return s.note.durable()
}

// Removals returns the number of messages removed since Open, by any
// means (store.Store.Removals), a message found corrupt on read
// included. Recovery's removals are not counted.
func (s *Store) Removals() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.removals
}

// markLocked records that the caller changed the store and returns the
// flusher batch that will hold the change, or 0 when nothing changed since
// before (the changes count the caller read first).
func (s *Store) markLocked(before uint64) uint64 {
	if s.mu.changes == before {
		return 0
	}
	s.kickLocked()
	return s.mu.taken + 1
}

// markSettledLocked is markLocked for a change whose result is a state
// (everything below a sequence removed, the stream purged) that other
// callers' changes may have reached first: when the caller changed
// nothing, the batch that holds every change made so far (the next one
// when some are not taken yet, else the one taken last), so that its
// success, like theirs, means durable (0 when nothing was ever changed).
func (s *Store) markSettledLocked(before uint64) uint64 {
	if gen := s.markLocked(before); gen != 0 {
		return gen
	}
	if s.mu.changes != s.mu.changesTaken {
		s.kickLocked()
		return s.mu.taken + 1
	}
	return s.mu.taken
}

// awaitGen waits for batch gen to be durable under SyncAlways without
// Config.DeferSync.
func (s *Store) awaitGen(gen uint64) error {
	if gen == 0 || s.cfg.Sync == SyncEveryInterval || s.cfg.DeferSync {
		return nil
	}
	return s.note.waitGen(gen)
}

// StoredBytes returns State().Bytes (the sum of store.MsgSize over the
// stored messages) without building the rest of the state.
func (s *Store) StoredBytes() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.bytes
}

// State returns the current state; Deleted is filled when withDeleted.
func (s *Store) State(withDeleted bool) store.State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := store.State{
		Msgs:        s.mu.msgs,
		Bytes:       s.mu.bytes,
		FirstSeq:    s.mu.first,
		LastSeq:     s.mu.last,
		LastTime:    s.mu.lastTime,
		NumSubjects: len(s.mu.subj.byName),
	}
	if s.mu.msgs > 0 {
		st.FirstTime = s.firstTimeLocked()
	}
	if s.mu.msgs > 0 || len(s.mu.lost) > 0 {
		st.NumDeleted = int(s.mu.last - s.mu.first + 1 - s.mu.msgs)
	}
	if withDeleted && st.NumDeleted > 0 {
		st.Deleted = s.gapsLocked()
	}
	st.Lost = s.lostReportLocked()
	return st
}

// gapsLocked returns the sequences between FirstSeq and LastSeq that hold
// no stored message, walking the segments: a skipped range between them
// is listed without a lookup per sequence (though with 8 bytes each).
func (s *Store) gapsLocked() []uint64 {
	last := s.mu.last
	out := make([]uint64, 0, last-s.mu.first+1-s.mu.msgs)
	at := s.mu.first
	for k := max(s.segIndexLocked(at), 0); k < len(s.mu.segs) && at <= last; k++ {
		g := s.mu.segs[k]
		for ; at < g.base && at <= last; at++ {
			out = append(out, at)
		}
		for ; at < g.end() && at <= last; at++ {
			if g.isDead(int(at - g.base)) {
				out = append(out, at)
			}
		}
	}
	for ; at <= last; at++ {
		out = append(out, at)
	}
	return out
}

// UpdateConfig applies new limits and removes what they push out
// (store.EnforceAfterUpdate); it returns once the removals are durable.
// cfg.FirstSeq is ignored.
func (s *Store) UpdateConfig(cfg store.Config) error {
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	before := s.mu.changes
	if cfg.MsgTTL != s.mu.limits.MsgTTL {
		s.rebuildTTLLocked(cfg.MsgTTL)
	}
	cfg.MemSizes = false
	s.mu.limits = cfg
	s.setPackingLocked()
	err := store.EnforceAfterUpdate(cfg, enforcer{s})
	gen := s.markLocked(before)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.awaitGen(gen)
}

// Close writes and syncs what is buffered, stops the flusher, fsyncs the
// checkpoint file and closes the files. It returns the fence error if the
// store was fenced (what was not durable then is not written), else the
// error of the checkpoint's fsync, if any. Further calls return
// store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.mu.closed = true
	s.mu.Unlock()
	s.closeConsumers()
	s.acks.close()
	close(s.quit)
	s.wg.Wait()
	cerr := s.ckpt.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeFilesLocked()
	if s.mu.fenced == nil && cerr != nil {
		return cerr
	}
	return s.mu.fenced
}

// closeConsumers closes the open consumer stores.
func (s *Store) closeConsumers() {
	s.cons.Lock()
	s.cons.closed = true
	open := s.cons.m
	s.cons.m = nil
	s.cons.Unlock()
	for _, cs := range open { // consumerStore.mu is taken before cons, never after
		cs.detach()
	}
}

// closeFilesLocked closes every open segment file.
func (s *Store) closeFilesLocked() {
	for _, g := range s.mu.segs {
		if g.f != nil {
			g.f.Close()
			g.f = nil
		}
	}
	for _, d := range s.mu.doomed {
		if d.seg.f != nil {
			d.seg.f.Close()
			d.seg.f = nil
		}
	}
}
