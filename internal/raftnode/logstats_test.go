package raftnode

import (
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

func statsEnts(first uint64, sizes ...int) []*pb.Entry {
	var ents []*pb.Entry
	for i, n := range sizes {
		ents = append(ents, &pb.Entry{Index: new(first + uint64(i)), Term: new(uint64(1)), Data: make([]byte, n)})
	}
	return ents
}

// The counts /raftz's wal part shows follow the log: entries appended,
// replaced by a new leader's, compacted away, or dropped by a snapshot;
// each entry's bytes are what the WAL writes of it (its data and 13
// bytes), its time when it was appended.
func TestLogStatsFollowTheLog(t *testing.T) {
	var l logStats
	check := func(what string, bytes uint64, first, last int64) {
		t.Helper()
		b, ft, lt := l.span()
		var wf, wl time.Time
		if first != 0 {
			wf = time.Unix(0, first).UTC()
		}
		if last != 0 {
			wl = time.Unix(0, last).UTC()
		}
		if b != bytes || !ft.Equal(wf) || !lt.Equal(wl) {
			t.Errorf("%s: %d bytes, %v..%v; want %d, %v..%v", what, b, ft, lt, bytes, wf, wl)
		}
	}
	check("empty", 0, 0, 0)
	l.append(statsEnts(5, 10, 20, 30), 100) // 5..7
	check("appended", 60+3*entryOverhead, 100, 100)
	l.append(statsEnts(8, 40), 200) // 5..8
	check("appended again", 100+4*entryOverhead, 100, 200)
	l.append(statsEnts(7, 1, 2), 300) // a new leader's 7..8 replace ours
	check("replaced", 33+4*entryOverhead, 100, 300)
	l.trim(6, 8) // compacted through 5
	check("compacted", 23+3*entryOverhead, 100, 300)
	l.trim(8, 8)
	check("compacted to 8", 2+entryOverhead, 300, 300)
	l.trim(9, 8) // every entry compacted: the last one's time stays
	check("none held", 0, 0, 300)
	l.trim(12, 11) // a snapshot at 11
	check("after a snapshot", 0, 0, 300)
	l.append(statsEnts(12, 5), 400)
	check("appended after a snapshot", 5+entryOverhead, 400, 400)
	l.append(statsEnts(13, 6), 500)
	l.trim(12, 12) // a follower's log cut back
	check("cut back", 5+entryOverhead, 400, 400)
	l.trim(12, 11)
	check("cut back to nothing", 0, 0, 0)
}

// storage counts what Append adds as it is added, and what reached its
// log otherwise (a forced new cluster's entries) when asked.
func TestStorageLogSpan(t *testing.T) {
	ms := raft.NewMemoryStorage()
	if err := ms.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(4)), Term: new(uint64(1)), ConfState: &pb.ConfState{}}}); err != nil {
		t.Fatal(err)
	}
	s := &storage{MemoryStorage: ms}
	if err := s.Append(statsEnts(5, 10, 20)); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	_ = s.MemoryStorage.Append(statsEnts(7, 30)) // not through storage.Append
	bytes, first, last := s.logSpan(5, 7)
	if bytes != 60+3*entryOverhead || first.IsZero() || last.Before(before) {
		t.Errorf("%d bytes, %v..%v", bytes, first, last)
	}
	if err := s.Compact(6); err != nil {
		t.Fatal(err)
	}
	if bytes, _, _ := s.logSpan(7, 7); bytes != 30+entryOverhead {
		t.Errorf("after compacting through 6: %d bytes", bytes)
	}
}
