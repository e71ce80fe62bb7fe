package jscluster

import (
	"testing"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// The first campaigner of a new group (firstleader.go): the same on
// every server with the same view, whatever the order of the voters;
// every server once in each n groups in a row; about evenly over
// regular patterns of creates too; a server seen offline skipped for
// the next, in name order.
func TestFirstCampaigner(t *testing.T) {
	voters := []raftnode.ServerID{"n2", "n3", "n1"}
	none := map[raftnode.ServerID]bool{}
	for g := raftnode.GroupID(2); g < 200; g++ {
		a := firstCampaigner(g, voters, none)
		if b := firstCampaigner(g, []raftnode.ServerID{"n1", "n2", "n3"}, nil); a != b {
			t.Fatalf("group %d: %s, %s in another order", g, a, b)
		}
	}
	// Any 2n-1 groups in a row hold an aligned block of n: each server
	// leads at least once.
	for from := raftnode.GroupID(2); from < 100; from++ {
		got := map[raftnode.ServerID]int{}
		for g := from; g < from+5; g++ {
			got[firstCampaigner(g, voters, none)]++
		}
		if len(got) != 3 {
			t.Fatalf("groups %d to %d: %v", from, from+4, got)
		}
	}
	// A stream and two consumers, or a stream and five, each time: the
	// streams' groups (a stride of 3 or 6) spread too.
	for _, stride := range []raftnode.GroupID{1, 2, 3, 4, 6} {
		got := map[raftnode.ServerID]int{}
		for i := range raftnode.GroupID(300) {
			got[firstCampaigner(2+i*stride, voters, none)]++
		}
		for _, s := range []raftnode.ServerID{"n1", "n2", "n3"} {
			if got[s] < 70 {
				t.Errorf("stride %d: %v", stride, got)
			}
		}
	}
	// Two voters (a stream of two replicas) and a stride of 2.
	two := map[raftnode.ServerID]int{}
	for i := range raftnode.GroupID(200) {
		two[firstCampaigner(2+2*i, []raftnode.ServerID{"a", "b"}, none)]++
	}
	if two["a"] < 70 || two["b"] < 70 {
		t.Errorf("two voters, stride 2: %v", two)
	}
	// Offline servers are skipped, in name order from the turn.
	for g := raftnode.GroupID(2); g < 50; g++ {
		turn := firstCampaigner(g, voters, none)
		next := map[raftnode.ServerID]raftnode.ServerID{"n1": "n2", "n2": "n3", "n3": "n1"}
		if got := firstCampaigner(g, voters, map[raftnode.ServerID]bool{turn: true}); got != next[turn] {
			t.Fatalf("group %d, %s offline: %s, want %s", g, turn, got, next[turn])
		}
		if got := firstCampaigner(g, voters, map[raftnode.ServerID]bool{turn: true, next[turn]: true}); got != next[next[turn]] {
			t.Fatalf("group %d, %s and %s offline: %s", g, turn, next[turn], got)
		}
		if got := firstCampaigner(g, voters, map[raftnode.ServerID]bool{"n1": true, "n2": true, "n3": true}); got != turn {
			t.Fatalf("group %d, all offline: %s, want the turn's %s", g, got, turn)
		}
	}
	if got := firstCampaigner(5, nil, none); got != "" {
		t.Fatalf("no voters: %q", got)
	}
	if got := firstCampaigner(5, []raftnode.ServerID{"x"}, map[raftnode.ServerID]bool{"x": true}); got != "x" {
		t.Fatalf("one voter: %q", got)
	}
}
