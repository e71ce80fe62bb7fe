package raftnode

import (
	"cmp"
	"slices"
)

// WALPin is a group that keeps sealed segments of the WAL (those before
// the active one) on disk: it holds entries in them above its
// compaction point. A segment is deleted only when no group holds such
// entries in it or in an older segment (package comment, "Record"), so
// one idle group with a few entries in the oldest segment keeps every
// newer segment too, until it compacts through Through (Node.Compact;
// docs/cluster.md, "The WAL").
type WALPin struct {
	Group GroupID
	// Through is the highest entry index the group holds in a sealed
	// segment: compacting through it releases every sealed segment as far
	// as this group is concerned.
	Through uint64
	// Oldest is true when the group holds such entries in the oldest
	// segment, which it keeps on disk itself (WALStats names it).
	Oldest bool
}

// WALPins returns the groups with a live replica on this server that
// hold entries above their compaction point in a sealed segment of the
// WAL, by group ID. The cluster layer checkpoints those that stay so
// (jscluster, walpin.go), so that a group that goes idle between two of
// its checkpoints does not keep the WAL's segments forever.
func (n *Node) WALPins() []WALPin {
	n.walMu.Lock()
	defer n.walMu.Unlock()
	return n.wal.pins()
}

// pins returns the groups that hold entries above their compaction point
// in a sealed segment (Node.WALPins), by group ID.
func (w *wal) pins() []WALPin {
	if len(w.segs) < 2 {
		return nil
	}
	by := map[GroupID]*WALPin{}
	for i, s := range w.segs[:len(w.segs)-1] {
		for g, top := range s.maxIndex {
			m := w.meta[g]
			if m == nil || m.replica == 0 || top <= m.base.index {
				continue
			}
			p := by[g]
			if p == nil {
				p = &WALPin{Group: g}
				by[g] = p
			}
			p.Through = max(p.Through, top)
			p.Oldest = p.Oldest || i == 0
		}
	}
	return sortedPins(by)
}

// sortedPins returns the pins of by, by group ID.
func sortedPins(by map[GroupID]*WALPin) []WALPin {
	pins := make([]WALPin, 0, len(by))
	for _, p := range by {
		pins = append(pins, *p)
	}
	slices.SortFunc(pins, func(a, b WALPin) int { return cmp.Compare(a.Group, b.Group) })
	return pins
}
