package jscluster

import (
	"slices"
	"testing"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// The order a scale-down keeps a group's servers (keep.go): the leader,
// then online servers not known to lag, then online ones that lag, then
// offline ones, assignment order among equals; a leader whose server is
// offline (a view from before it went) goes with the offline ones.
func TestKeepOrder(t *testing.T) {
	ids := func(s ...string) []raftnode.ServerID {
		out := make([]raftnode.ServerID, len(s))
		for i, x := range s {
			out[i] = raftnode.ServerID(x)
		}
		return out
	}
	set := func(s ...string) map[raftnode.ServerID]bool {
		m := map[raftnode.ServerID]bool{}
		for _, x := range s {
			m[raftnode.ServerID(x)] = true
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		servers []raftnode.ServerID
		view    groupView
		want    []raftnode.ServerID
	}{
		{"assignment order", ids("a", "b", "c"), groupView{}, ids("a", "b", "c")},
		{"leader first", ids("a", "b", "c"), groupView{leader: "c"}, ids("c", "a", "b")},
		// The trial: leader a, follower b down; a scale to two kept b.
		{"offline last", ids("a", "b", "c"), groupView{leader: "a", offline: set("b")}, ids("a", "c", "b")},
		{"offline last, leader unknown", ids("a", "b", "c"), groupView{offline: set("a")}, ids("b", "c", "a")},
		{"behind after current", ids("a", "b", "c", "d", "e"), groupView{leader: "e", behind: set("a", "c"), offline: set("b")}, ids("e", "d", "a", "c", "b")},
		{"an offline leader", ids("a", "b", "c"), groupView{leader: "a", offline: set("a")}, ids("b", "c", "a")},
		{"offline and behind", ids("a", "b", "c"), groupView{leader: "c", behind: set("a", "b"), offline: set("a")}, ids("c", "b", "a")},
	} {
		servers := slices.Clone(tc.servers)
		if got := keepOrder(servers, tc.view); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if !slices.Equal(servers, tc.servers) {
			t.Errorf("%s: the servers changed to %v", tc.name, servers)
		}
	}
}
