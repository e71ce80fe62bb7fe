package filestore

import (
	"fmt"
	"runtime"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// batch is what the flusher takes in one round: the new bytes of each
// segment, in segment order.
type batch struct {
	items  []flushItem
	gen    uint64     // the batch number
	seq    uint64     // LastSeq when the batch was taken
	doomed []*segment // to remove once the batch is durable
	file   vfs.File   // the file the batch wrote last, which the syncer syncs
	pos    Position   // the end of the log once the batch is written
	bytes  uint64     // the bytes of the items' data (SyncStats)
}

// flushItem is the new bytes of one segment.
type flushItem struct {
	seg    *segment
	create bool   // create the file and write its header first
	header []byte // the header, when create
	data   []byte // bytes to append
	end    int64  // the segment's size once data is written
}

// syncQueueLen bounds the batches written but not yet synced.
const syncQueueLen = 64

// startFlusher starts the flusher: a writer goroutine and a syncer
// goroutine; Close stops both.
func (s *Store) startFlusher() {
	s.syncedSeq = s.mu.last
	q := make(chan batch, syncQueueLen)
	s.wg.Add(2)
	go s.flushLoop(q)
	go s.syncLoop(q)
}

// flushLoop is the flusher's writer: whenever woken (SyncAlways), on every
// tick (SyncEveryInterval), and once more when the store closes, it takes
// a batch, writes it and queues it for the syncer. Writing while the
// syncer's fsync runs means each fsync covers what was written during the
// one before. A kick that comes while a run of appends is held
// (BeginBatch) is dropped: the run's EndBatch kicks again.
func (s *Store) flushLoop(q chan<- batch) {
	defer s.wg.Done()
	defer close(q)
	var tick <-chan time.Time
	if s.cfg.Sync == SyncEveryInterval {
		t := time.NewTicker(s.cfg.SyncInterval)
		defer t.Stop()
		tick = t.C
	}
	w := &writer{s: s}
	for {
		closing := false
		select {
		case <-s.kick:
			if s.note.held.Load() > 0 {
				continue
			}
		case <-s.note.urgent:
		case <-tick:
		case <-s.quit:
			closing = true
		}
		w.writeOnce(q)
		if closing {
			return
		}
	}
}

// BeginBatch tells the store that a run of appends follows at once, such
// as the publishes a stream's apply loop took from its queue together:
// until the matching EndBatch, Append does not wake the flusher, so that
// the run is written and fsynced once instead of from its first message
// on (then two fsyncs in a row for one run of publishes were common).
// Whatever waits for its own change still wakes the flusher at once:
// Delete, Purge, Compact, ExpireUpTo, UpdateConfig, and Append when it
// waits for the flusher to catch up. WaitDurable does not: a sequence
// appended in the run becomes durable only after EndBatch, so the caller
// must not wait for one between the two calls. Runs may overlap; the
// flusher starts when the last one ends. A cairn addition to the
// group commit of docs/durability.md item 1; the durability of a PubAck is
// unchanged.
func (s *Store) BeginBatch() { s.note.held.Add(1) }

// EndBatch ends the run of appends BeginBatch began and wakes the flusher
// if that was the last run held and something waits to be written.
func (s *Store) EndBatch() {
	if s.note.held.Add(-1) > 0 {
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if g := s.activeLocked(); g.written < g.size || len(s.mu.sealedOut) > 0 {
		s.kickLocked()
	}
}

// writer is the state of the flusher's writer goroutine: the segment it
// wrote to last, whose file may not be synced yet.
type writer struct {
	s    *Store
	last *segment
}

// writeOnce takes a batch, writes it and queues it. An I/O error fences
// the store.
func (w *writer) writeOnce(q chan<- batch) {
	// Let the appenders the last batch woke append before this batch is
	// taken, so that one write covers them all instead of a few.
	runtime.Gosched()
	b, ok := w.s.takeBatch()
	if !ok {
		return
	}
	if err := w.writeBatch(&b); err != nil {
		w.s.fence(err)
		return
	}
	w.s.releaseWritten(&b)
	if w.s.note.wrote(b.seq) { // before the send, which waits while the syncer is behind
		w.yieldToWaiters()
	}
	q <- b
}

// yieldToWaiters lets the waiters of WaitWritten that the writer's last
// write woke (the PubAcks of persist_mode async and of a replicated
// stream) run before the syncer: the send that hands the batch to the
// syncer readies it in their place on this P, where its fsync would hold
// them until the runtime takes the P back or another thread steals them
// (on the loaded 2-core machine, 93 and 116 µs, medians of two runs,
// from the write to a replicated stream's PubAck; docs/benchmarks.md,
// "Where a synchronous publish's time goes").
func (w *writer) yieldToWaiters() {
	if y := w.s.cfg.yield; y != nil {
		y()
		return
	}
	runtime.Gosched()
}

// syncLoop is the flusher's syncer: it fsyncs the file of the newest
// batch written, which covers every batch queued before it, then
// publishes them and removes the segments they made removable. With
// Config.DeferSync it keeps the batches written (their data dropped)
// until an fsync is wanted (syncDue), and fsyncs them all once the
// channel closes.
func (s *Store) syncLoop(q <-chan batch) {
	defer s.wg.Done()
	var held []batch // Config.DeferSync: written, not yet fsynced
	for b := range q {
		bs := append(held, b)
		for more := true; more; {
			select {
			case b, ok := <-q:
				if ok {
					bs = append(bs, b)
				} else {
					more = false
				}
			default:
				more = false
			}
		}
		if s.cfg.DeferSync && !s.syncDue(bs) {
			held = stripped(bs)
			continue
		}
		held = nil
		s.syncBatches(bs)
	}
	if len(held) > 0 {
		s.syncBatches(held) // Close: everything written is made durable
	}
}

// deferMaxBatches bounds the batches a store with Config.DeferSync
// writes between two fsyncs: the segments emptied meanwhile are removed
// only once a batch after them is durable.
const deferMaxBatches = 4096

// syncDue reports whether a store with Config.DeferSync fsyncs the
// batches bs (written, oldest first) now: someone waits for one of them
// to be durable (Position, the append throttle: waitGen), or there are
// deferMaxBatches of them. A wait for a batch not written yet waits for
// its batch, which the wait's wake of the writer brings.
func (s *Store) syncDue(bs []batch) bool {
	want, gen := s.note.wanted()
	return len(bs) >= deferMaxBatches || want > gen && bs[len(bs)-1].gen >= want
}

// stripped drops the written data of the batches bs (the syncer keeps
// them for their segments, ends, files and positions only) and returns
// bs.
func stripped(bs []batch) []batch {
	for i := range bs {
		for j := range bs[i].items {
			bs[i].items[j].data, bs[i].items[j].header = nil, nil
		}
	}
	return bs
}

// syncBatches makes queued batches durable, records the newest one's
// LastSeq in the checkpoint file (a write without fsync, before any of
// them is acknowledged) and publishes them; then, once the checkpoint
// file has grown past ckptCompactMax, it replaces it. Syncing the newest
// file written is enough: the writer synced every older segment before
// it wrote to a newer one.
func (s *Store) syncBatches(bs []batch) {
	for i := len(bs) - 1; i >= 0; i-- {
		if f := bs[i].file; f != nil {
			start := time.Now()
			if err := f.Sync(); err != nil {
				s.fence(fmt.Errorf("sync: %w", err))
				return
			}
			s.observeSync(time.Since(start), bs)
			break
		}
	}
	if err := s.noteCheckpoint(bs[len(bs)-1].seq); err != nil {
		s.fence(err)
		return
	}
	for _, b := range bs {
		s.publish(b)
		if err := s.removeSegments(b.doomed); err != nil {
			s.fence(err)
			return
		}
	}
	if s.ckpt.full() {
		if err := s.ckpt.replace(0); err != nil {
			s.fence(err)
		}
	}
}

// observeSync records a group commit in Config.SyncStats: its fsync took
// d and made the batches bs durable. It runs on the syncer, which owns
// syncedSeq.
func (s *Store) observeSync(d time.Duration, bs []batch) {
	last := bs[len(bs)-1].seq
	msgs := last - min(s.syncedSeq, last)
	s.syncedSeq = last
	if s.cfg.SyncStats == nil {
		return
	}
	var bytes uint64
	for _, b := range bs {
		bytes += b.bytes
	}
	s.cfg.SyncStats.ObserveSync(d, msgs, bytes)
}

// noteCheckpoint records seq, which the syncer has just made durable, in
// the checkpoint file, unless the store is fenced: after a failed fsync a
// batch that wrote nothing (and so synced nothing) is not durable, though
// it is published (to waiters that the fence already failed).
func (s *Store) noteCheckpoint(seq uint64) error {
	s.mu.RLock()
	fenced := s.mu.fenced != nil
	s.mu.RUnlock()
	if fenced {
		return nil
	}
	return s.ckpt.note(seq)
}

// takeBatch takes everything not yet handed to the flusher. It returns
// false when the store is fenced.
func (s *Store) takeBatch() (batch, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.fenced != nil {
		return batch{}, false
	}
	s.closeBatchLocked()
	var b batch
	for _, g := range s.mu.sealedOut {
		b.items = append(b.items, takeItem(g))
	}
	s.mu.sealedOut = nil
	if g := s.activeLocked(); g.written < g.size {
		b.items = append(b.items, takeItem(g))
	}
	for _, it := range b.items {
		b.bytes += uint64(len(it.data))
	}
	s.mu.taken++
	s.mu.changesTaken = s.mu.changes
	b.gen, b.seq = s.mu.taken, s.mu.last
	b.doomed = s.takeDoomedLocked(b.gen)
	g := s.activeLocked()
	b.pos = Position{Base: g.base, Offset: uint64(g.size), LastSeq: s.mu.last}
	return b, true
}

// closeBatchLocked ends the active segment's new bytes with the records
// the batch needs: a compact record when the low water rose, and a
// syncmark recording how much of the file is durable.
func (s *Store) closeBatchLocked() {
	g := s.activeLocked()
	s.reserveLocked(g, 2*RecordOverhead)
	if s.mu.lw > s.mu.lwWritten {
		g.appendMarker(recCompact, s.mu.lw)
		s.mu.lwWritten = s.mu.lw
	}
	if g.bufOff+int64(len(g.buf)) == max(g.written, SegmentHeaderSize) {
		return // nothing new
	}
	g.appendMarker(recSyncMark, uint64(max(g.synced, SegmentHeaderSize)))
}

// takeItem hands the segment's new bytes to the flusher.
func takeItem(g *segment) flushItem {
	it := flushItem{seg: g, create: !g.created, end: g.size}
	from := g.written
	if it.create {
		it.header = g.buf[:SegmentHeaderSize] // bufOff is 0: nothing was written
		from = max(from, SegmentHeaderSize)
	}
	it.data = g.buf[from-g.bufOff : g.size-g.bufOff]
	g.written = g.size
	return it
}

// takeDoomedLocked removes from the doomed list the segments that may go
// once batch gen is durable.
func (s *Store) takeDoomedLocked(gen uint64) []*segment {
	var out []*segment
	keep := s.mu.doomed[:0]
	for _, d := range s.mu.doomed {
		if d.gen <= gen && s.removableLocked(d) {
			out = append(out, d.seg)
		} else {
			keep = append(keep, d)
		}
	}
	s.mu.doomed = keep
	return out
}

// writeBatch writes every item, in order. Before writing to a segment
// other than the one it wrote last, it fsyncs that one: a segment is
// durable before anything is written to a newer one.
func (w *writer) writeBatch(b *batch) error {
	for _, it := range b.items {
		if w.last != nil && w.last != it.seg {
			if err := w.syncLast(); err != nil {
				return err
			}
			// The writer moves on only from a sealed segment, now all
			// written and durable: its index can be written.
			w.s.writeIndex(w.last, w.last.ix)
			w.last.ix = nil
		}
		f, err := w.s.itemFile(it)
		if err != nil {
			return err
		}
		w.last = it.seg
		if it.create {
			it.seg.ix = newIdxBuilder(it.header)
		}
		if len(it.data) == 0 {
			continue
		}
		if _, err := f.Write(it.data); err != nil {
			return fmt.Errorf("write %s: %w", it.seg.path, err)
		}
		if x := it.seg.ix; x != nil {
			x.addRecords(it.data, it.end-int64(len(it.data)))
		}
		b.file = f
	}
	return nil
}

// syncLast fsyncs the segment the writer wrote to last. That segment is
// still open: a segment is removed only after a newer one was created,
// which makes the newer one the writer's last.
func (w *writer) syncLast() error {
	w.s.mu.RLock()
	f := w.last.f
	w.s.mu.RUnlock()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", w.last.path, err)
	}
	return nil
}

// itemFile returns the open file of the item's segment, creating it when
// the item says so.
func (s *Store) itemFile(it flushItem) (vfs.File, error) {
	if !it.create {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return it.seg.f, nil
	}
	f, err := s.createSegmentFile(it.seg.path, it.header)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	it.seg.f, it.seg.created, it.seg.synced = f, true, SegmentHeaderSize
	s.mu.Unlock()
	return f, nil
}

// createSegmentFile creates a segment file holding only its header, and
// makes the file and its directory entry durable.
func (s *Store) createSegmentFile(name string, header []byte) (vfs.File, error) {
	f, err := s.fs.Create(name)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	if err := writeSync(f, name, header); err != nil {
		f.Close()
		return nil, err
	}
	if err := s.fs.SyncDir(s.msgsDir); err != nil {
		f.Close()
		return nil, fmt.Errorf("sync directory %s: %w", s.msgsDir, err)
	}
	return f, nil
}

// writeSync writes b to f and fsyncs it.
func writeSync(f vfs.File, name string, b []byte) error {
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", name, err)
	}
	return nil
}

// releaseWritten lets the in-memory images drop what the writer just
// wrote: reads of those bytes go to the file from now on (a written byte
// is read back the same before and after its fsync). A sealed segment
// whose bytes are all written drops its image; the active one keeps its
// newest bytes (segment.trimImage). It runs on the writer goroutine after
// the batch's writes and before the next batch is taken, so nothing else
// refers to the images' bytes. Bounding the images this way keeps a
// stream's memory independent of BlockSize (before, every stream held its
// whole active segment and a spare one: 16 MiB with the default).
func (s *Store) releaseWritten(b *batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range b.items {
		g := it.seg
		if g.sealed && it.end == g.size {
			if cap(g.buf) > cap(s.mu.spare) && cap(g.buf) <= keepImageCap {
				s.mu.spare = g.buf // nothing refers to it any more
			}
			g.dropImage()
			continue
		}
		g.trimImage(it.end)
	}
}

// publish records that the batch is durable and wakes its waiters.
func (s *Store) publish(b batch) {
	s.mu.Lock()
	for _, it := range b.items {
		it.seg.synced = max(it.seg.synced, it.end)
	}
	s.mu.durablePos = b.pos
	s.mu.Unlock()
	s.note.advance(b.seq, b.gen)
}

// removeSegments closes and removes the files of segments whose removal
// is now justified by a durable record, then fsyncs the directory.
func (s *Store) removeSegments(segs []*segment) error {
	if len(segs) == 0 {
		return nil
	}
	for _, g := range segs {
		s.cache.dropSegment(g)
		s.mu.Lock()
		f := g.f
		g.f = nil
		s.mu.Unlock()
		if f != nil {
			f.Close()
		}
		if err := s.removeIndex(g.base); err != nil {
			return fmt.Errorf("remove the index of %s: %w", g.path, err)
		}
		if err := s.fs.Remove(g.path); err != nil && !vfs.IsNotExist(err) {
			return fmt.Errorf("remove %s: %w", g.path, err)
		}
	}
	if err := s.fs.SyncDir(s.msgsDir); err != nil {
		return fmt.Errorf("sync directory %s: %w", s.msgsDir, err)
	}
	return nil
}

// fence stops every further change: nothing is acknowledged after an I/O
// error until the store is reopened and recovery has decided from the
// log what is durable.
func (s *Store) fence(cause error) {
	err := fmt.Errorf("%w: %w", store.ErrFenced, cause)
	s.mu.Lock()
	if s.mu.fenced == nil {
		s.mu.fenced = err
	}
	s.mu.Unlock()
	s.cfg.Logf("filestore: %s: fenced: %v", s.cfg.Dir, cause)
	s.note.fail(err)
}
