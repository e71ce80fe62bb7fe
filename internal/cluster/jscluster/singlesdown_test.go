package jscluster

import (
	"slices"
	"testing"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// The kept server of a scale-down to one replica (singlesdown.go
// chooseKeep): of the servers, in the scale-down's order, where every
// consumer can run alone (its one replica there or movable there, a
// replicated one's replica there), the one needing the fewest moves of
// consumers of one replica, the first among equals; none when consumers
// of one replica that cannot move are on two servers.
func TestChooseKeep(t *testing.T) {
	on := func(name string, servers ...raftnode.ServerID) meta.ConsumerAssignment {
		ca := meta.ConsumerAssignment{Name: name}
		for i, s := range servers {
			ca.Replicas = append(ca.Replicas, meta.Replica{ID: raftnode.ReplicaID(i + 1), Server: s})
		}
		return ca
	}
	all := func(meta.ConsumerAssignment, raftnode.ServerID) bool { return true }
	order := []raftnode.ServerID{"a", "b", "c"}
	for _, tc := range []struct {
		name    string
		cas     []meta.ConsumerAssignment
		movable func(meta.ConsumerAssignment, raftnode.ServerID) bool
		keep    raftnode.ServerID // "": none
		shrink  []string
		move    []string
	}{
		{"no consumers: the first", nil, all, "a", nil, nil},
		{"one of one replica each on a and b: the first of them", []meta.ConsumerAssignment{on("X", "a"), on("Y", "b")}, all, "a", nil, []string{"Y"}},
		{"fewest moves over order", []meta.ConsumerAssignment{on("X", "a"), on("Y", "b"), on("Z", "b")}, all, "b", nil, []string{"X"}},
		{"a replicated consumer keeps its servers", []meta.ConsumerAssignment{on("R", "a", "c"), on("Y", "b"), on("Z", "b")}, all, "a", []string{"R"}, []string{"Y", "Z"}},
		{"one that cannot move keeps the stream on its server", []meta.ConsumerAssignment{on("X", "a"), on("Y", "b")},
			func(ca meta.ConsumerAssignment, _ raftnode.ServerID) bool { return ca.Name != "Y" }, "b", nil, []string{"X"}},
		{"nothing moves to a server that cannot take it", []meta.ConsumerAssignment{on("X", "c"), on("Y", "b"), on("Z", "b")},
			func(_ meta.ConsumerAssignment, to raftnode.ServerID) bool { return to != "b" }, "c", nil, []string{"Y", "Z"}},
		{"two that cannot move on two servers: none", []meta.ConsumerAssignment{on("X", "a"), on("Y", "b")},
			func(meta.ConsumerAssignment, raftnode.ServerID) bool { return false }, "", nil, nil},
		{"all on one server: no move", []meta.ConsumerAssignment{on("X", "c"), on("Y", "c")}, all, "c", nil, nil},
	} {
		ch, ok := chooseKeep(order, tc.cas, tc.movable)
		names := func(cas []meta.ConsumerAssignment) []string {
			var out []string
			for _, ca := range cas {
				out = append(out, ca.Name)
			}
			return out
		}
		if ok != (tc.keep != "") || ch.keep != tc.keep || !slices.Equal(names(ch.shrink), tc.shrink) || !slices.Equal(names(ch.move), tc.move) {
			t.Errorf("%s: keep %q (%v), shrink %v, move %v; want %q, %v, %v", tc.name, ch.keep, ok, names(ch.shrink), names(ch.move), tc.keep, tc.shrink, tc.move)
		}
	}
}
