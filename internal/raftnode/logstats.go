package raftnode

import (
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// The size and arrival time of each entry a group's log holds, for
// /raftz's wal part (GroupStatus.LogBytes, FirstTime, LastTime), as
// nats-server v2.15.2 reports the WAL of each of its Raft nodes
// (monitor.go Raftz: its FastState's bytes, first_ts and last_ts).
// cairn's groups share one WAL per server, so a group's part is counted
// over the entries its in-memory log holds: those since its last
// compaction, which the WAL holds too.

// entryOverhead is what the WAL writes for an entry besides its data:
// term (8 bytes), type (1) and data length (4) (walcodec.go, items.entries).
const entryOverhead = 8 + 1 + 4

// entryBytes is the bytes entry e takes in the WAL's entries item.
func entryBytes(e *pb.Entry) uint64 { return entryOverhead + uint64(len(e.GetData())) }

// logStats holds, for the entries first..first+len(sizes)-1 of a log,
// the bytes each takes in the WAL and when it was appended (Unix
// nanoseconds), and their sum; lastAt is when the last entry counted
// was appended, kept once it is compacted away (0: none since the node
// opened). It is the round's alone (storage).
type logStats struct {
	first  uint64
	sizes  []uint64
	times  []int64
	bytes  uint64
	lastAt int64
}

// next is the index after the last entry counted (first when none).
func (l *logStats) next() uint64 { return l.first + uint64(len(l.sizes)) }

// append counts ents, consecutive, appended at time at: entries they
// replace (at and after the first one's index) are dropped first; if
// they do not follow the ones counted, those are dropped.
func (l *logStats) append(ents []*pb.Entry, at int64) {
	if len(ents) == 0 {
		return
	}
	start := ents[0].GetIndex()
	if start < l.first || start > l.next() {
		l.reset(start)
	}
	l.cut(start)
	for _, e := range ents {
		n := entryBytes(e)
		l.sizes = append(l.sizes, n)
		l.times = append(l.times, at)
		l.bytes += n
	}
	l.lastAt = at
}

// reset drops every entry counted (lastAt stays); the next one counted
// is index.
func (l *logStats) reset(index uint64) {
	l.first, l.sizes, l.times, l.bytes = index, nil, nil, 0
}

// cut drops the entries at and after index.
func (l *logStats) cut(index uint64) {
	if index >= l.next() {
		return
	}
	k := int(max(index, l.first) - l.first)
	for _, n := range l.sizes[k:] {
		l.bytes -= n
	}
	l.sizes, l.times = l.sizes[:k], l.times[:k]
	l.lastAt = 0
	if k > 0 {
		l.lastAt = l.times[k-1]
	}
}

// trim keeps the entries first..last (the log's, after a compaction, a
// snapshot installed or a follower's log cut back).
func (l *logStats) trim(first, last uint64) {
	l.cut(last + 1)
	if first <= l.first {
		return
	}
	if first >= l.next() {
		l.reset(first)
		return
	}
	k := int(first - l.first)
	for _, n := range l.sizes[:k] {
		l.bytes -= n
	}
	l.first, l.sizes, l.times = first, l.sizes[k:], l.times[k:]
}

// span returns the bytes of the entries counted and when the first and
// the last of them were appended: with none counted, 0, the zero time
// and when the last one compacted away was appended (as nats-server's
// WAL keeps last_ts once empty), the zero time if none was.
func (l *logStats) span() (bytes uint64, firstTime, lastTime time.Time) {
	if l.lastAt != 0 {
		lastTime = time.Unix(0, l.lastAt).UTC()
	}
	if len(l.times) == 0 {
		return 0, time.Time{}, lastTime
	}
	return l.bytes, time.Unix(0, l.times[0]).UTC(), lastTime
}

// Append appends ents to the log (raft.MemoryStorage.Append) and counts
// them as appended now: for the entries the WAL replayed at the start,
// the time of the start.
func (s *storage) Append(ents []*pb.Entry) error {
	if err := s.MemoryStorage.Append(ents); err != nil {
		return err
	}
	s.stats.append(ents, time.Now().UnixNano())
	return nil
}

// logSpan brings the counts to the log's entries, first..last (entries
// put in place other than by Append, as a forced new cluster's, are
// counted as appended now), and returns them (logStats.span).
func (s *storage) logSpan(first, last uint64) (bytes uint64, firstTime, lastTime time.Time) {
	s.stats.trim(first, last)
	if from := max(s.stats.next(), first); from <= last {
		if ents, err := s.Entries(from, last+1, noLimit); err == nil {
			s.stats.append(ents, time.Now().UnixNano())
		}
	}
	return s.stats.span()
}
