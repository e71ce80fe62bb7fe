package filestore

import (
	"fmt"
	"path"
	"time"

	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// region is a range [start, end) of bytes of a segment that holds no valid
// record.
type region struct{ start, end int }

// recovery is the state of one Open's scan of the segments.
type recovery struct {
	s           *Store
	lw          uint64           // largest low water found
	lastMsgSeq  uint64           // sequence of the last message record
	lastMsgTime int64            // its time
	hdrTimes    map[uint64]int64 // last time of each valid header, by base
	tombs       map[uint64]bool  // delete records whose target has no record
	start       time.Time
	truncated   int64     // bytes cut from the end of the last segment
	indexed     int       // sealed segments opened through their index
	corrupt     int       // bad regions found
	good        []uint32  // scratch: valid record offsets of a segment
	skips       []seqSpan // the spans of the skip records
	skipEnd     uint64    // the largest seq of a skip record
	ckpt        uint64    // the checkpoint: sequences through it were durable
	surviving   uint64    // LastSeq as the segments alone show it
}

// recover rebuilds the store from its segment files (the recovery rules
// of the package comment).
func (s *Store) recover(names []string, ck ckptScan) error {
	r := &recovery{s: s, tombs: make(map[uint64]bool), hdrTimes: make(map[uint64]int64), start: time.Now(), ckpt: ck.seq}
	if err := s.removeOrphanIndexes(names); err != nil {
		return err
	}
	// Sealed segments with a valid index are not read (package comment,
	// "Index files"); the read-ahead reads the others.
	indexed := make([]*segIndex, len(names))
	defer func() {
		for _, ix := range indexed {
			if ix != nil {
				ix.f.Close()
			}
		}
	}()
	var paths []string
	for k, name := range names {
		if k < len(names)-1 {
			base, _ := parseSegmentName(name)
			indexed[k] = s.openIndexed(name, base)
		}
		if indexed[k] == nil {
			paths = append(paths, path.Join(s.msgsDir, name))
		}
	}
	ra := startReadAhead(s.fs, paths)
	defer ra.stop()
	for k, name := range names {
		base, _ := parseSegmentName(name)
		next := uint64(0)
		if k+1 < len(names) {
			next, _ = parseSegmentName(names[k+1])
		}
		if ix := indexed[k]; ix != nil {
			indexed[k] = nil
			r.loadIndexed(base, next, ix)
			continue
		}
		rd := ra.next()
		if rd.err != nil {
			return rd.err
		}
		err := r.loadSegment(base, next, k == len(names)-1, rd.data, rd.f)
		ra.release(rd.data)
		if err != nil {
			return err
		}
	}
	return r.finish()
}

// loadSegment verifies and indexes one segment file, whose content is
// data and open file f. next is the following segment's base (0 for the
// last segment).
func (r *recovery) loadSegment(base, next uint64, last bool, data []byte, f vfs.File) error {
	s := r.s
	g := s.newSegment(base)
	g.f, g.created = f, true
	hdr, herr := parseSegHeader(data)
	if herr == errVersion {
		return fmt.Errorf("%s: %w", g.path, herr)
	}
	if herr == nil && hdr.base != base {
		herr = errMismatch
	}
	good, bad := scanRecords(data, base, r.good[:0])
	r.good = good
	cut := len(data)
	if last {
		cut = tailCut(data, good, bad, herr)
	}
	if last && cut < SegmentHeaderSize && len(s.mu.segs) > 0 {
		return r.dropTornSegment(g)
	}
	r.report(g, herr, bad, cut, len(data))
	if herr == nil {
		r.lw = max(r.lw, hdr.lowWater)
		r.hdrTimes[base] = hdr.lastTime
		g.s2 = hdr.s2
	}
	s.mu.segs = append(s.mu.segs, g)
	g.reserveSlots(countMsgs(data, good, cut))
	for _, off := range good {
		if int(off) < cut {
			r.apply(g, int(off), decodeRecord(data[off:]), next)
		}
	}
	if !last {
		g.size, g.written, g.synced, g.sealed = int64(len(data)), int64(len(data)), int64(len(data)), true
		g.dropImage()
		if len(bad) == 0 && herr == nil {
			s.writeIndex(g, r.indexOf(data, cut))
		}
		return nil
	}
	if err := r.settleLast(g, data, cut); err != nil {
		return err
	}
	if cut >= SegmentHeaderSize && herr == nil && len(bad) == 0 {
		g.ix = r.indexOf(data, cut) // the writer adds what it appends
	}
	return nil
}

// indexOf builds the index of the valid records of data (r.good) below
// cut.
func (r *recovery) indexOf(data []byte, cut int) *idxBuilder {
	x := newIdxBuilder(data)
	for _, off := range r.good {
		if int(off) >= cut {
			break
		}
		x.add(data[off:int(off)+int(le.Uint32(data[off:]))], int64(off))
	}
	return x
}

// loadIndexed indexes the sealed segment ix opened through its index
// file, reading nothing more of it. next is the following segment's base.
func (r *recovery) loadIndexed(base, next uint64, ix *segIndex) {
	s := r.s
	g := s.newSegment(base)
	g.f, g.created, g.s2 = ix.f, true, ix.hdr.s2
	r.lw = max(r.lw, ix.hdr.lowWater)
	r.hdrTimes[base] = ix.hdr.lastTime
	s.mu.segs = append(s.mu.segs, g)
	g.reserveSlots(ix.msgs)
	_ = ix.records(func(off int, rec record) { r.apply(g, off, rec, next) }) // count checked every entry
	g.size, g.written, g.synced, g.sealed = ix.size, ix.size, ix.size, true
	g.dropImage()
	r.indexed++
}

// countMsgs returns the number of message records among good below cut.
func countMsgs(data []byte, good []uint32, cut int) int {
	n := 0
	for _, off := range good {
		if int(off) < cut && data[off+4] == recMsg {
			n++
		}
	}
	return n
}

// scanRecords returns the offsets of the valid records after the header
// and the bad regions between them. After an invalid record the scan
// resumes at the next offset where a valid record starts.
func scanRecords(data []byte, base uint64, good []uint32) ([]uint32, []region) {
	var bad []region
	p := SegmentHeaderSize
	for p < len(data) {
		if n, err := checkRecord(data[p:], base, int64(p)); err == nil {
			good = append(good, uint32(p))
			p += n
			continue
		}
		q := resync(data, base, p+1)
		bad = append(bad, region{p, q})
		p = q
	}
	return good, bad
}

// resync returns the first offset >= p where a valid record starts, or
// len(data).
func resync(data []byte, base uint64, p int) int {
	for ; p+RecordOverhead <= len(data); p++ {
		if !knownTypeFlags(data[p+4], data[p+5]) {
			continue
		}
		if _, err := checkRecord(data[p:], base, int64(p)); err == nil {
			return p
		}
	}
	return len(data)
}

// tailCut returns where the last segment's durable content ends (rule 4
// of the package comment): at the first bad region that no syncmark
// proves was fsynced, or at 0 when the header itself was never fsynced.
func tailCut(data []byte, good []uint32, bad []region, herr error) int {
	var synced uint64
	for _, off := range good {
		if data[off+4] == recSyncMark {
			synced = max(synced, le.Uint64(data[off+8:]))
		}
	}
	if herr != nil && synced < SegmentHeaderSize {
		return 0
	}
	for _, b := range bad {
		if uint64(b.start) >= synced {
			return b.start
		}
	}
	return len(data)
}

// report logs what the scan of g found wrong.
func (r *recovery) report(g *segment, herr error, bad []region, cut, size int) {
	logf := r.s.cfg.Logf
	if herr != nil && cut >= SegmentHeaderSize {
		logf("filestore: %s: corrupt segment header (%v); using the base in the file name", g.path, herr)
	}
	for _, b := range bad {
		if b.start < cut {
			r.corrupt++
			logf("filestore: %s: corrupt data at bytes %d-%d (%d bytes); the sequences it held are reported lost", g.path, b.start, b.end, b.end-b.start)
		}
	}
	if cut < size {
		r.truncated += int64(size - cut)
		logf("filestore: %s: dropping %d bytes at offset %d: a torn tail that no sync mark covers (a write cut off before its fsync completed, or a file cut short by hand; sequences the checkpoint shows were durable are reported lost)", g.path, size-cut, cut)
	}
}

// dropTornSegment removes a last segment whose header never became
// durable (no record in it was ever fsynced): its creation was
// interrupted, and the segment before it is the end of the log.
func (r *recovery) dropTornSegment(g *segment) error {
	r.s.cfg.Logf("filestore: %s: removing a segment whose creation never completed (no durable byte)", g.path)
	g.f.Close()
	if err := r.s.removeIndex(g.base); err != nil {
		return err
	}
	if err := r.s.fs.Remove(g.path); err != nil {
		return err
	}
	if err := r.s.fs.SyncDir(r.s.msgsDir); err != nil {
		return err
	}
	last := r.s.mu.segs[len(r.s.mu.segs)-1]
	last.f.Close()
	f, err := r.s.fs.OpenAppend(last.path)
	if err != nil {
		return err
	}
	last.f = f
	data := make([]byte, last.size)
	if err := readFull(f, data, 0); err != nil {
		return err
	}
	last.sealed = false
	return r.settleLast(last, data, len(data))
}

// settleLast makes the last segment the active one: it cuts the torn tail
// (or writes the header again after a torn creation), fsyncs, and keeps
// the chunk being filled in memory.
func (r *recovery) settleLast(g *segment, data []byte, cut int) error {
	if cut < len(data) {
		if err := g.f.Truncate(int64(cut)); err != nil {
			return err
		}
		data = data[:cut]
	}
	if cut < SegmentHeaderSize {
		h := segHeader{base: g.base, lowWater: r.firstSegLowWater(g.base), s2: r.s.packingWanted()}
		g.s2 = h.s2
		data = h.encode()
		r.lw = max(r.lw, h.lowWater)
		r.s.cfg.Logf("filestore: %s: writing the header of a segment whose creation never completed", g.path)
		if _, err := g.f.Write(data); err != nil {
			return err
		}
	}
	if err := g.f.Sync(); err != nil {
		return err
	}
	// Only the chunk being filled stays in memory (segment.trimImage).
	g.bufOff = int64(len(data)) &^ (chunkSize - 1)
	g.buf = append(make([]byte, 0, initialBufCap), data[g.bufOff:]...)
	g.size, g.written, g.synced = int64(len(data)), int64(len(data)), int64(len(data))
	return nil
}

// firstSegLowWater is the low water of an only segment whose header was
// lost: everything below its base, as in a new store.
func (r *recovery) firstSegLowWater(base uint64) uint64 {
	if base == 1 && r.s.mu.limits.FirstSeq == 0 {
		return 0
	}
	return base
}

// apply replays one valid record of g. next is the following segment's
// base, 0 for the last segment.
func (r *recovery) apply(g *segment, off int, rec record, next uint64) {
	switch rec.typ {
	case recMsg:
		r.addMsg(g, off, rec, next)
	case recDelete:
		r.tomb(rec.seq)
	case recCompact:
		r.lw = max(r.lw, rec.seq)
	case recSkip:
		r.skip(rec)
	}
}

// addMsg indexes a message record. Sequences skipped inside a segment get
// slots without a record; recovery decides at the end whether they are
// lost.
func (r *recovery) addMsg(g *segment, off int, rec record, next uint64) {
	s := r.s
	seq := rec.seq
	if seq < g.end() || (next != 0 && seq >= next) || seq-g.end() > maxSlotGap {
		s.cfg.Logf("filestore: %s@%d: message record with out-of-order sequence %d ignored", g.path, off, seq)
		return
	}
	for g.end() < seq {
		g.addSlot(0, 0, 0)
	}
	info := s.mu.subj.getBytes(rec.subj)
	if info == nil {
		info = s.mu.subj.add(string(rec.subj))
	}
	length := uint32(rec.size)
	if len(rec.hdr) > 0 {
		length |= hdrBit
	}
	g.addSlot(uint32(off), length, info.id)
	if rec.packed {
		g.setPlain(uint32(rec.plainSize()))
	}
	g.maxTime = max(g.maxTime, rec.time)
	s.linkLocked(info, seq)
	s.mu.msgs++
	s.mu.bytes += g.msgSize(len(g.offs) - 1)
	r.lastMsgSeq, r.lastMsgTime = seq, rec.time
	if s.mu.limits.MsgTTL {
		s.mu.expiry.TTL.Add(seq, rec.time, rec.hdr)
	}
}

// maxSlotGap bounds the sequences a segment may skip between two message
// records: a larger jump is not something this package writes.
const maxSlotGap = 1 << 24

// tomb replays a delete record.
func (r *recovery) tomb(seq uint64) {
	s := r.s
	g, i, ok := s.slotLocked(seq)
	if !ok || g.offs[i] == 0 {
		r.tombs[seq] = true
		return
	}
	if !g.isDead(i) {
		s.dropLocked(g, i, seq)
	}
}

// finish completes recovery: LastSeq, the low water, lost sequences,
// FirstSeq and LastTime; then it fsyncs the directory.
func (r *recovery) finish() error {
	s := r.s
	active := s.activeLocked()
	active.sealed = false
	s.mu.last = max(r.lastMsgSeq, active.base-1)
	if r.lw > 0 {
		s.mu.last = max(s.mu.last, r.lw-1)
	}
	if r.skipEnd > 0 {
		s.mu.last = max(s.mu.last, r.skipEnd-1)
	}
	r.surviving = s.mu.last
	s.mu.last = max(s.mu.last, r.ckpt) // never assign a durable sequence again
	s.mu.lw, s.mu.lwWritten = r.lw, 0  // the first batch writes it in a compact record
	r.dropBelowLowWater()
	r.accountLost()
	r.setFirst()
	s.mu.lastTime = r.lastMsgTime
	if t, ok := r.hdrTimes[active.base]; ok && len(active.offs) == 0 {
		s.mu.lastTime = t
	}
	if err := s.fs.SyncDir(s.msgsDir); err != nil {
		return err
	}
	r.summary()
	return nil
}

// dropBelowLowWater removes the messages a compact record or header
// removed.
func (r *recovery) dropBelowLowWater() {
	s := r.s
	for _, g := range s.mu.segs {
		if g.base >= s.mu.lw {
			return
		}
		for j := g.nextLive(0); j >= 0 && g.base+uint64(j) < s.mu.lw; j = g.nextLive(j + 1) {
			s.dropLocked(g, j, g.base+uint64(j))
		}
	}
}

// setFirst sets FirstSeq and raises the low water to it, so that front
// segments emptied by delete records can go.
func (r *recovery) setFirst() {
	s := r.s
	switch {
	case s.mu.msgs > 0 || len(s.mu.lost) > 0:
		s.mu.first = max(s.mu.lw, 1)
		s.advanceFirstLocked()
	case s.mu.last == 0 && s.mu.lw == 0:
		s.mu.first = 0
	default:
		s.mu.first = s.mu.last + 1
	}
	if s.mu.first > s.mu.lw {
		s.raiseLowWaterLocked(s.mu.first)
	}
	s.doomFrontLocked()
}

// accountLost reports as lost every sequence from the low water to
// LastSeq that no message, delete, compact or skip record accounts for.
func (r *recovery) accountLost() {
	s := r.s
	r.sortSkips()
	from := max(s.mu.lw, 1)
	segs := s.mu.segs
	r.lostRange(from, segs[0].base-1, segs[0].path, "missing before the first segment")
	for k, g := range segs {
		run := uint64(0)
		for i, off := range g.offs {
			seq := g.base + uint64(i)
			if off == 0 && run == 0 {
				run = seq
			}
			if off != 0 && run != 0 {
				r.lostRange(max(run, from), seq-1, g.path, "records damaged")
				run = 0
			}
		}
		end := s.mu.last + 1
		if k+1 < len(segs) {
			end = segs[k+1].base
		}
		if run == 0 {
			run = g.end()
		}
		if k+1 < len(segs) {
			r.lostRange(max(run, from), end-1, g.path, "records missing at the end of the segment")
			continue
		}
		r.lostRange(max(run, from), min(end-1, r.surviving), g.path, "records missing at the end of the segment")
		r.lostRange(max(run, from, r.surviving+1), end-1, s.msgsDir, tailLost)
	}
}

// tailLost is the reason given for the sequences the checkpoint shows were
// durable but no segment holds.
const tailLost = "durable by the checkpoint but missing from the end of the log (the last segment was cut short or removed)"

// lostRange records first..last, minus the sequences named by a delete
// or skip record, as lost.
func (r *recovery) lostRange(first, last uint64, where, reason string) {
	for seq := max(first, 1); seq <= last; {
		if r.tombs[seq] {
			seq++
			continue
		}
		if end := r.skippedThrough(seq); end != 0 {
			seq = end + 1
			continue
		}
		end := seq
		for end < last && !r.tombs[end+1] && r.skippedThrough(end+1) == 0 {
			end++
		}
		l := lostSpan{first: seq, last: end, where: where, reason: reason}
		r.s.addLostLocked(l)
		r.s.cfg.Logf("filestore: %s: lost %v", r.s.cfg.Dir, l)
		seq = end + 1
	}
}

// summary logs what recovery found.
func (r *recovery) summary() {
	s := r.s
	logf := s.cfg.Infof
	if r.corrupt > 0 || len(s.mu.lost) > 0 {
		logf = s.cfg.Logf
	}
	logf("filestore: %s: recovered %s, %s, in %s (%d opened through their index) in %v (%s, %s, %s dropped)",
		path.Clean(s.cfg.Dir), logger.Count(int(s.mu.msgs), "message"), s.seqRangeLocked(), logger.Count(len(s.mu.segs), "segment"), r.indexed, time.Since(r.start).Round(time.Millisecond),
		logger.Count(r.corrupt, "corrupt region"), logger.Count(int(lostCount(s.mu.lost)), "lost sequence"), logger.Count(int(r.truncated), "torn byte"))
}

// seqRangeLocked describes the sequences the store holds, for logs: a
// range only when it holds a message or a lost sequence (an emptied store
// has FirstSeq = LastSeq+1).
func (s *Store) seqRangeLocked() string {
	switch {
	case s.mu.msgs > 0 || len(s.mu.lost) > 0:
		return store.SeqRange(s.mu.first, s.mu.last)
	case s.mu.last == 0:
		return "no sequence assigned yet"
	}
	return fmt.Sprintf("none left, last sequence %d", s.mu.last)
}

// lostCount returns the number of sequences in spans.
func lostCount(spans []lostSpan) uint64 {
	var n uint64
	for _, l := range spans {
		n += l.last - l.first + 1
	}
	return n
}
