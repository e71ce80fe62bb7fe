package raftnode

import (
	"slices"
	"strings"
	"testing"
)

// Two groups share the WAL: group 1 writes a lot and compacts as it goes,
// group 2 writes a few entries and goes idle. Group 2's entries in the
// oldest segment keep it, and every newer segment, on disk however far
// group 1 compacts (trial 34: 16 segments kept for 10 minutes); WALPins
// names group 2 with the index it must compact through, and not group 1,
// and once group 2 compacts through it the sealed segments go.
func TestWALPinsIdleGroup(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.SegmentBytes = 64 << 10 })
	c.addGroup(1, 0)
	c.addGroup(2, 0)
	c.elect(0, 1)
	c.elect(0, 2)
	c.propose(0, 2, "a")
	p := c.propose(0, 2, "b")
	if _, err := p.Result(); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 8<<10)
	for i := range 100 {
		c.propose(0, 1, pad)
		if i%10 == 9 {
			for j := range c.nodes {
				if err := c.nodes[j].n.Compact(1, c.status(j, 1).Applied); err != nil {
					t.Fatal(err)
				}
			}
			c.stabilize()
		}
	}
	c.tick(2)
	idle := c.status(0, 2).LastIndex
	for i, tn := range c.nodes {
		segs, blocking := tn.n.WALStats()
		if segs < 10 || !slices.Equal(blocking, []GroupID{2}) {
			t.Fatalf("%s: %d segments, blocking %v: want group 2 to keep at least 10", tn.id, segs, blocking)
		}
		pins := tn.n.WALPins()
		if want := []WALPin{{Group: 2, Through: idle, Oldest: true}}; !slices.Equal(pins, want) {
			t.Fatalf("%s: pins %+v, want %+v", tn.id, pins, want)
		}
		if err := tn.n.Compact(2, c.status(i, 2).Applied); err != nil {
			t.Fatal(err)
		}
	}
	c.stabilize()
	for _, tn := range c.nodes {
		if segs, blocking := tn.n.WALStats(); segs > 2 || len(blocking) != 0 || len(tn.n.WALPins()) != 0 {
			t.Fatalf("%s: %d segments, blocking %v, pins %+v after group 2 compacted", tn.id, segs, blocking, tn.n.WALPins())
		}
	}
}
