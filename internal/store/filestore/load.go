package filestore

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// errGone says a record's segment was removed while it was being read;
// the caller looks again.
var errGone = errors.New("filestore: segment removed during read")

// recordRef says where a stored record is: a copy of its bytes when they
// were in memory, else its file and offset.
type recordRef struct {
	seg *segment
	seq uint64
	off int64
	n   int
	buf []byte
	f   vfs.File
	// final says the segment was sealed and all written when ref was
	// taken: its file never grows again, so its last, partial chunk may
	// be cached.
	final bool
}

// Load returns a copy of the message at seq, store.ErrNotFound, or a
// *store.CorruptError when the sequence is lost or its record fails its
// checks.
func (s *Store) Load(seq uint64) (*store.StoredMsg, error) {
	for {
		s.mu.RLock()
		ref, err := s.loadRefLocked(seq)
		s.mu.RUnlock()
		if err != nil {
			return nil, err
		}
		m, err := s.readMsg(ref)
		if err != errGone {
			return m, err
		}
	}
}

// loadRefLocked locates the stored message at seq.
func (s *Store) loadRefLocked(seq uint64) (recordRef, error) {
	if s.mu.closed {
		return recordRef{}, store.ErrClosed
	}
	if g, i, ok := s.slotLocked(seq); ok && !g.isDead(i) {
		return s.refLocked(g, i)
	}
	if l, ok := s.lostAtLocked(seq); ok {
		return recordRef{}, l.corruptError(seq)
	}
	return recordRef{}, store.ErrNotFound
}

// refLocked returns the location of the live slot i of g. After a fence,
// messages past the durable sequence are not served: they never will be
// durable.
func (s *Store) refLocked(g *segment, i int) (recordRef, error) {
	ref := recordRef{seg: g, seq: g.base + uint64(i), off: int64(g.offs[i]), n: g.recordLen(i), f: g.f}
	if s.mu.fenced != nil && ref.seq > s.note.durable() {
		return recordRef{}, s.mu.fenced
	}
	if b, ok := g.inImage(ref.off, ref.n); ok {
		ref.buf = append([]byte(nil), b...)
	}
	// A sealed segment's file is complete only once its image is dropped
	// (Store.releaseWritten): until then its tail may wait for the writer.
	ref.final = g.sealed && g.buf == nil
	return ref, nil
}

// readMsg reads and verifies the record of ref and returns its message.
// A record that fails its checks is reported lost from then on.
func (s *Store) readMsg(ref recordRef) (*store.StoredMsg, error) {
	b, err := s.readRecord(ref)
	if err != nil {
		return nil, err
	}
	r := decodeRecord(b)
	data, err := unpack(r)
	if err != nil {
		return nil, s.corrupt(ref, err)
	}
	m := &store.StoredMsg{Subject: string(r.subj), Seq: r.seq, Time: r.time}
	if len(r.hdr) > 0 {
		m.Header = r.hdr
	}
	if len(data) > 0 {
		m.Data = data
	}
	return m, nil
}

// readRecord returns the verified bytes of ref's record.
func (s *Store) readRecord(ref recordRef) ([]byte, error) {
	b := ref.buf
	if b == nil {
		if ref.f == nil {
			return nil, s.goneOr(ref, errGone)
		}
		var err error
		if b, err = s.cache.read(ref.seg, ref.f, ref.off, ref.n, ref.final); err != nil {
			return nil, s.goneOr(ref, fmt.Errorf("filestore: read %s: %w", ref.seg.path, err))
		}
	}
	if err := verifyMsg(b, ref); err != nil {
		return nil, s.corrupt(ref, err)
	}
	return b, nil
}

// corrupt reports ref's message, whose record failed a check with err,
// as lost from now on and returns the error a load returns.
func (s *Store) corrupt(ref recordRef, err error) *store.CorruptError {
	cerr := &store.CorruptError{First: ref.seq, Last: ref.seq, Where: fmt.Sprintf("%s@%d", ref.seg.path, ref.off), Reason: err.Error()}
	s.noteCorrupt(ref, cerr)
	return cerr
}

// verifyMsg checks that b is a valid message record for ref.
func verifyMsg(b []byte, ref recordRef) error {
	n, err := checkRecord(b, ref.seg.base, ref.off)
	switch {
	case err != nil:
		return err
	case n != ref.n || b[4] != recMsg:
		return errType
	case le.Uint64(b[8:]) != ref.seq:
		return errors.New("sequence differs from the index")
	}
	return nil
}

// goneOr returns errGone when ref's message is no longer stored (removed
// while read), else err.
func (s *Store) goneOr(ref recordRef, err error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.liveLocked(ref.seq) {
		return errGone
	}
	return err
}

// noteCorrupt reports, from now on, a stored message whose record failed
// its checks as lost.
func (s *Store) noteCorrupt(ref recordRef, cerr *store.CorruptError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markCorruptLocked(ref.seq, cerr)
}

// markCorruptLocked turns the stored message at seq into a lost sequence.
// Nothing is written: recovery finds the damage again.
func (s *Store) markCorruptLocked(seq uint64, cerr *store.CorruptError) {
	g, i, ok := s.slotLocked(seq)
	if !ok || g.isDead(i) {
		return
	}
	size := g.msgSize(i)
	s.dropLocked(g, i, seq)
	s.mu.removals++
	s.addLostLocked(lostSpan{first: seq, last: seq, bytes: size, where: cerr.Where, reason: cerr.Reason})
	s.cfg.Logf("filestore: %s: %v", s.cfg.Dir, cerr)
}

// LoadNext returns a copy of the first message at or after start whose
// subject matches any of filters, store.ErrEOF when there is none, or a
// *store.CorruptError when a lost sequence comes first: a lost message's
// subject is unknown, so it may have matched, and it is not skipped.
func (s *Store) LoadNext(filters []string, start uint64) (*store.StoredMsg, error) {
	for {
		s.mu.RLock()
		ref, err := s.nextRefLocked(filters, start)
		s.mu.RUnlock()
		if err != nil {
			return nil, err
		}
		m, err := s.readMsg(ref)
		if err != errGone {
			return m, err
		}
		start = ref.seq
	}
}

// nextRefLocked locates the message LoadNext returns.
func (s *Store) nextRefLocked(filters []string, start uint64) (recordRef, error) {
	if s.mu.closed {
		return recordRef{}, store.ErrClosed
	}
	start = max(start, 1)
	m := s.newMatcherLocked(filters)
	seq := s.nextMatchLocked(m, start)
	if l, ok := s.lostFromLocked(start); ok && (seq == 0 || l.first < seq) {
		return recordRef{}, l.corruptError(start)
	}
	if seq == 0 {
		return recordRef{}, store.ErrEOF
	}
	g, i, _ := s.slotLocked(seq)
	return s.refLocked(g, i)
}

// LoadLast returns a copy of the last message whose subject matches filter
// ("" or ">": the last stored message), or store.ErrNotFound.
func (s *Store) LoadLast(filter string) (*store.StoredMsg, error) {
	for {
		s.mu.Lock()
		ref, err := s.lastRefLocked(filter)
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		m, err := s.readMsg(ref)
		if err != errGone {
			return m, err
		}
	}
}

// lastRefLocked locates the message LoadLast returns.
func (s *Store) lastRefLocked(filter string) (recordRef, error) {
	if s.mu.closed {
		return recordRef{}, store.ErrClosed
	}
	seq := s.lastMatchLocked(filter)
	g, i, ok := s.slotLocked(seq)
	if seq == 0 || !ok {
		return recordRef{}, store.ErrNotFound
	}
	return s.refLocked(g, i)
}

// lastMatchLocked returns the last stored sequence matching filter, or 0.
func (s *Store) lastMatchLocked(filter string) uint64 {
	if store.IsFilterAll(filter) {
		return s.prevLiveLocked(s.mu.last)
	}
	var best uint64
	for subj, info := range s.mu.subj.byName {
		if store.MatchFilter(subj, filter) {
			best = max(best, s.subjectLastLocked(info))
		}
	}
	return best
}

// prevLiveLocked returns the highest stored sequence <= seq, or 0.
func (s *Store) prevLiveLocked(seq uint64) uint64 {
	for k := s.segIndexLocked(seq); k >= 0; k-- {
		g := s.mu.segs[k]
		i := len(g.offs) - 1
		if seq < g.end() {
			i = int(seq - g.base)
		}
		if j := g.prevLive(i); j >= 0 {
			return g.base + uint64(j)
		}
	}
	return 0
}

// SubjectsState returns the state of every stored subject matching filter
// ("" or ">" for all); nil after Close.
func (s *Store) SubjectsState(filter string) map[string]store.SubjectState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	out := make(map[string]store.SubjectState)
	for subj, info := range s.mu.subj.byName {
		if store.MatchFilter(subj, filter) {
			out[subj] = store.SubjectState{Msgs: info.msgs, First: info.first, Last: s.subjectLastLocked(info)}
		}
	}
	return out
}

// msgTimeLocked returns the time of the stored message at seq.
func (s *Store) msgTimeLocked(seq uint64) (int64, *store.CorruptError, error) {
	rec, cerr, err := s.recordLocked(seq)
	return rec.time, cerr, err
}

// recordLocked reads and verifies the record of the stored message at
// seq. The record's slices are its own (a copy of the bytes).
func (s *Store) recordLocked(seq uint64) (record, *store.CorruptError, error) {
	g, i, _ := s.slotLocked(seq)
	ref, err := s.refLocked(g, i)
	if err != nil {
		return record{}, nil, err
	}
	b := ref.buf
	if b == nil {
		if b, err = s.cache.read(g, ref.f, ref.off, ref.n, ref.final); err != nil {
			return record{}, nil, fmt.Errorf("filestore: read %s: %w", g.path, err)
		}
	}
	if err := verifyMsg(b, ref); err != nil {
		where := fmt.Sprintf("%s@%d", g.path, ref.off)
		return record{}, &store.CorruptError{First: seq, Last: seq, Where: where, Reason: err.Error()}, nil
	}
	return decodeRecord(b), nil, nil
}

// firstTimeLocked returns the time of the first stored message, or 0 when
// it cannot be read.
func (s *Store) firstTimeLocked() int64 {
	t, cerr, err := s.msgTimeLocked(s.firstLiveLocked())
	if cerr != nil || err != nil {
		return 0
	}
	return t
}

// LoadRemoved returns the message at seq as Load does and, when it was
// removed, its record as long as the record is still on disk: a removal
// writes a tombstone and leaves the record where it was, until its
// segment is removed (only front segments emptied of messages are, and,
// in rollback mode, only once a position taken after they were emptied is
// saved: "Positions and rollback"). A replica that captured its state at
// some moment serves the messages of that moment to a replica catching up
// (docs/cluster.md, "Stream snapshots"), even those removed since.
// Errors: store.ErrNotFound (never stored, a skipped sequence, or the
// record is gone), a *store.CorruptError (its record fails its checks),
// store.ErrClosed.
func (s *Store) LoadRemoved(seq uint64) (*store.StoredMsg, error) {
	m, err := s.Load(seq)
	if !errors.Is(err, store.ErrNotFound) {
		return m, err
	}
	s.mu.RLock()
	ref, ok := s.removedRefLocked(seq)
	s.mu.RUnlock()
	if !ok {
		return nil, store.ErrNotFound
	}
	b := ref.buf
	if b == nil {
		if ref.f == nil {
			return nil, store.ErrNotFound
		}
		if b, err = s.cache.read(ref.seg, ref.f, ref.off, ref.n, ref.final); err != nil {
			return nil, store.ErrNotFound // its segment was removed meanwhile
		}
	}
	if err := verifyMsg(b, ref); err != nil {
		return nil, &store.CorruptError{First: seq, Last: seq, Where: fmt.Sprintf("%s@%d", ref.seg.path, ref.off), Reason: err.Error()}
	}
	r := decodeRecord(b)
	data, err := unpack(r)
	if err != nil {
		return nil, &store.CorruptError{First: seq, Last: seq, Where: fmt.Sprintf("%s@%d", ref.seg.path, ref.off), Reason: err.Error()}
	}
	m = &store.StoredMsg{Subject: string(r.subj), Seq: r.seq, Time: r.time}
	if len(r.hdr) > 0 {
		m.Header = bytes.Clone(r.hdr)
	}
	if len(data) > 0 {
		m.Data = bytes.Clone(data)
	}
	return m, nil
}

// removedRefLocked locates the record of seq in a segment still held
// (listed, or doomed and not yet removed), whether or not its message was
// removed; false when there is none.
func (s *Store) removedRefLocked(seq uint64) (recordRef, bool) {
	if s.mu.closed {
		return recordRef{}, false
	}
	g, i, ok := s.slotLocked(seq)
	if !ok {
		for _, d := range s.mu.doomed {
			if i, ok = d.seg.slot(seq); ok {
				g = d.seg
				break
			}
		}
	}
	if !ok || g.offs[i] == 0 {
		return recordRef{}, false
	}
	ref := recordRef{seg: g, seq: seq, off: int64(g.offs[i]), n: g.recordLen(i), f: g.f}
	if b, ok := g.inImage(ref.off, ref.n); ok {
		ref.buf = append([]byte(nil), b...)
	}
	ref.final = g.sealed && g.buf == nil
	return ref, true
}
