// Package memstore is the in-memory engine of store.Store. It keeps no
// data across Close, and it is the model the file store is checked
// against in randomized tests, so it favours plain, obviously correct
// code over speed, while keeping Append O(1) amortised and filtered
// LoadNext cheap on large streams.
//
// All limit, purge and filter decisions come from package store
// (limits.go, purge.go, filter.go), the same functions the file store
// uses. A Store is safe for concurrent use: one mutex guards everything.
package memstore

import (
	"sync"

	"github.com/cairnmq/cairn/internal/store"
)

// Store is an in-memory store.Store. Create it with New.
type Store struct {
	mu struct {
		sync.Mutex
		closed    bool
		cfg       store.Config
		log       msgLog                // messages by sequence
		subjects  map[string]*subjIndex // stored subjects; no empty entry
		bytes     uint64                // sum of entry.size over log
		lastTime  int64                 // time of the message at log.last when it was stored
		consumers map[string]*consumerRec
		removals  uint64 // messages removed since New (Removals)
		expiry    store.ExpireState
	}
}

var _ store.Store = (*Store)(nil)

// New returns an empty store with the limits of cfg. Its first message
// gets sequence cfg.FirstSeq (1 when zero).
func New(cfg store.Config) *Store {
	s := &Store{}
	s.mu.cfg = cfg
	s.mu.log = newLog(cfg.FirstSeq)
	s.mu.subjects = make(map[string]*subjIndex)
	s.mu.consumers = make(map[string]*consumerRec)
	return s
}

// Append stores m at LastSeq+1 after the admission rules of
// store.CheckAppend, then removes what the limits push out.
func (s *Store) Append(m store.Msg) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, store.ErrClosed
	}
	cfg := s.mu.cfg
	occ := store.Occupancy{Msgs: s.mu.log.count, Bytes: s.mu.bytes, SubjectMsgs: s.subjectMsgsLocked(m.Subject)}
	oldest := func() uint64 { return s.oldestSizeLocked(m.Subject) }
	if err := store.CheckAppend(cfg, occ, m, oldest); err != nil {
		return 0, err
	}
	seq := s.addLocked(m)
	if err := store.EnforceAfterAppend(cfg, m.Subject, enforcer{s}); err != nil {
		return 0, err
	}
	return seq, nil
}

// addLocked stores a copy of m at the next sequence.
func (s *Store) addLocked(m store.Msg) uint64 {
	e := &entry{
		subj: m.Subject,
		hdr:  clone(m.Header),
		data: clone(m.Data),
		time: m.Time,
		size: s.mu.cfg.MsgSize(m.Subject, m.Header, m.Data),
	}
	seq := s.mu.log.add(e)
	s.mu.bytes += e.size
	s.mu.lastTime = m.Time
	x := s.mu.subjects[m.Subject]
	if x == nil {
		x = &subjIndex{}
		s.mu.subjects[m.Subject] = x
	}
	x.add(seq)
	if s.mu.cfg.MsgTTL {
		s.mu.expiry.TTL.Add(seq, m.Time, m.Header)
		s.mu.expiry.TTL.MaybePrune(s.mu.log.count, s.mu.log.has)
	}
	return seq
}

// WaitDurable returns at once: memory holds nothing more durable.
func (s *Store) WaitDurable(seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return store.ErrClosed
	}
	return nil
}

// DurableSeq returns LastSeq: memory holds nothing more durable, and
// WaitDurable returns at once.
func (s *Store) DurableSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.log.last
}

// Removals returns the number of messages removed since New, by any
// means (store.Store.Removals).
func (s *Store) Removals() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.removals
}

// StoredBytes returns State().Bytes without building the rest of the
// state.
func (s *Store) StoredBytes() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.bytes
}

// State returns the current state; Deleted is filled when withDeleted.
func (s *Store) State(withDeleted bool) store.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &s.mu.log
	st := store.State{
		Msgs:        l.count,
		Bytes:       s.mu.bytes,
		FirstSeq:    l.first,
		LastSeq:     l.last,
		LastTime:    s.mu.lastTime,
		NumSubjects: len(s.mu.subjects),
		NumDeleted:  l.numDeleted(),
	}
	if l.count > 0 {
		st.FirstTime = l.get(l.first).time
	}
	if withDeleted && st.NumDeleted > 0 {
		st.Deleted = l.gaps()
	}
	return st
}

// UpdateConfig applies new limits and removes what they push out
// (store.EnforceAfterUpdate). cfg.FirstSeq is ignored.
func (s *Store) UpdateConfig(cfg store.Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return store.ErrClosed
	}
	if cfg.MsgTTL != s.mu.cfg.MsgTTL {
		s.rebuildTTLLocked(cfg.MsgTTL)
	}
	cfg.MemSizes = s.mu.cfg.MemSizes // fixed by New: the stored sizes follow it
	s.mu.cfg = cfg
	return store.EnforceAfterUpdate(cfg, enforcer{s})
}

// rebuildTTLLocked makes the TTL index hold the TTLs of the stored
// messages when on, nothing when off.
func (s *Store) rebuildTTLLocked(on bool) {
	s.mu.expiry = store.ExpireState{}
	if !on {
		return
	}
	l := &s.mu.log
	for seq := l.next(l.first); seq != 0; seq = l.next(seq + 1) {
		e := l.get(seq)
		s.mu.expiry.TTL.Add(seq, e.time, e.hdr)
	}
}

// Close marks the store closed; further calls return store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return store.ErrClosed
	}
	s.mu.closed = true
	return nil
}

// Reopen makes a closed store usable again, its messages as they were
// when it closed: a memory stream's store handed from the runtime that
// stopped to the next one (a clustered stream of one replica scaled up
// keeps its messages: docs/cluster.md, "Memory streams"). It does
// nothing to an open store.
func (s *Store) Reopen() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.closed = false
}

// subjectMsgsLocked returns the number of messages stored on subj.
func (s *Store) subjectMsgsLocked(subj string) uint64 {
	if x := s.mu.subjects[subj]; x != nil {
		return x.live
	}
	return 0
}

// oldestSizeLocked returns the size of the oldest message on subj, or 0.
func (s *Store) oldestSizeLocked(subj string) uint64 {
	x := s.mu.subjects[subj]
	if x == nil {
		return 0
	}
	return s.mu.log.get(x.first(&s.mu.log)).size
}

// clone copies b; nil and empty both give nil.
func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
