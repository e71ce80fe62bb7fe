package consumer

import (
	"maps"
	"time"
)

// Clone returns an exact, independent copy of the state: every pending
// delivery with its deadline, delivery count and flags, the deadline
// heap, the redelivery queue, the messages out of deliveries, the
// dead-letter marks, the pause and the policy. Applying the same
// operations to s and to its clone gives equal states (and equal
// outcomes). A replicated consumer's leader delivers from a clone of the
// state its log committed and keeps the committed one beside it, so that
// a lost leadership drops exactly what it proposed and never committed
// (docs/cluster.md, "Replicated consumers"). It costs a copy of every
// pending entry (40 bytes each).
func (s *State) Clone() *State {
	c := *s
	c.pending = s.pending.clone()
	c.firstPos = pendingPos{} // a hint into s's blocks; nextFirst searches again
	c.deadlines = append(deadlineHeap(nil), s.deadlines...)
	c.rdq = append([]uint64(nil), s.rdq...)
	c.exhausted = maps.Clone(s.exhausted)
	c.marks = maps.Clone(s.marks)
	if s.held != nil {
		c.held = make(map[uint64]*pendingMsg, len(s.held))
		for k, m := range s.held {
			cp := *m
			c.held[k] = &cp
		}
	}
	c.policy.BackOff = append([]time.Duration(nil), s.policy.BackOff...)
	return &c
}

// clone returns a deep copy of the list (blocks copied; no spare).
func (p *pendingList) clone() pendingList {
	c := pendingList{live: p.live, holes: p.holes, blocks: make([]*pendingBlock, len(p.blocks))}
	for i, b := range p.blocks {
		e := make([]pendingMsg, len(b.e), pendingBlockLen)
		copy(e, b.e)
		c.blocks[i] = &pendingBlock{e: e, head: b.head, live: b.live}
	}
	return c
}
