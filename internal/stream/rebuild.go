package stream

import (
	"errors"
	"fmt"

	"github.com/cairnmq/cairn/internal/store"
)

// Rebuild restores what the stream remembers besides its store, after it
// was created over a store that already holds messages (a restart): the
// table of message schedules (a stream with allow_msg_schedules; every
// message is read, schedule.go), the
// Nats-Msg-Id of the message at the last sequence, for
// Nats-Expected-Last-Msg-Id, and the Nats-Msg-Ids of the stored messages
// within duplicate_window of the newest stored message's time, so that
// duplicates are still detected across a restart (nats-server
// rebuildDedupe, with the newest message's time in place of the clock).
// Call ExpireDedupe with the current time afterwards to drop the ids the
// clock says have expired, or use RebuildAt, which does not read them.
//
// Rebuild reads only the messages in the window, finding the first one
// by a binary search on time (message times are taken to grow with the
// sequence, as nats-server also assumes). Damaged messages (an error
// wrapping store.ErrCorrupt; the store reports them) are skipped: their
// ids are lost, the rest of the stream is served. On another load error
// it returns the error, wrapped, keeping the ids read before it.
func (s *Stream) Rebuild() error { return s.RebuildAt(0) }

// RebuildAt is Rebuild followed by ExpireDedupe(now) (unix nanoseconds;
// 0: no clock), without reading the messages whose ids that expiry would
// drop: the window read starts at the later of the newest message's time
// and now, less duplicate_window, as nats-server v2.15.2's rebuildDedupe
// starts at the clock's. A restart of a stream of large messages
// published more than duplicate_window ago reads none of them (it read
// the whole window before: 1 GiB of 128 KiB messages took a second).
func (s *Stream) RebuildAt(now int64) error {
	if err := s.rebuild(now); err != nil {
		return err
	}
	if now != 0 {
		s.ExpireDedupe(now)
	}
	return nil
}

// rebuild is Rebuild reading no id that ExpireDedupe(now) would drop.
func (s *Stream) rebuild(now int64) error {
	if s.sched != nil {
		if err := s.rebuildSchedules(); err != nil {
			return fmt.Errorf("stream %s: rebuild schedules: %w", s.cfg.Name, err)
		}
	}
	s.dedupe.reset()
	s.lastMsgID = ""
	last, err := s.store.LoadLast(store.FilterAll)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if errors.Is(err, store.ErrCorrupt) {
		// No time to bound the window with: read every id, and let
		// ExpireDedupe drop those the clock says have expired.
		return s.rebuildErr(s.readIDs(s.store.State(false).FirstSeq))
	}
	if err != nil {
		return s.rebuildErr(err)
	}
	if last.Seq == s.store.State(false).LastSeq {
		s.lastMsgID = headerString(last.Header, hdrMsgID)
	}
	window := int64(s.cfg.DuplicateWindow)
	if window <= 0 {
		return nil
	}
	start, err := s.firstAfter(max(last.Time, now)-window, last.Seq)
	if err != nil {
		return s.rebuildErr(err)
	}
	return s.rebuildErr(s.readIDs(start))
}

// firstAfter returns the lowest sequence from which the next stored
// message has a time after t, searching up to last (a stored sequence).
func (s *Stream) firstAfter(t int64, last uint64) (uint64, error) {
	lo, hi := s.store.State(false).FirstSeq, last
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := s.loadNext(mid)
		if errors.Is(err, store.ErrEOF) {
			return lo, nil
		}
		if err != nil {
			return 0, err
		}
		if m.Time > t {
			hi = mid
		} else {
			lo = m.Seq + 1
		}
	}
	return lo, nil
}

// readIDs records the Nats-Msg-Id of every stored message from start on.
func (s *Stream) readIDs(start uint64) error {
	for seq := start; ; {
		m, err := s.loadNext(seq)
		if errors.Is(err, store.ErrEOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if id := headerString(m.Header, hdrMsgID); id != "" {
			s.dedupe.add(id, m.Seq, m.Time)
		}
		seq = m.Seq + 1
	}
}

// loadNext is store.LoadNext over every subject, stepping over damaged
// ranges.
func (s *Stream) loadNext(seq uint64) (*store.StoredMsg, error) {
	for {
		m, err := s.store.LoadNext(nil, seq)
		var ce *store.CorruptError
		if !errors.As(err, &ce) || ce.Last < seq {
			return m, err
		}
		seq = ce.Last + 1
	}
}

// rebuildErr wraps a Rebuild error with the stream's name; nil stays nil.
func (s *Stream) rebuildErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("stream %s: rebuild dedupe window: %w", s.cfg.Name, err)
}
