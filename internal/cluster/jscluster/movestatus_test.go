package jscluster

import (
	"slices"
	"testing"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// A move's status line follows its group through the steps of a move
// from n1 n2 n3 (replicas 1-3, n1 leading) to n1 n4 n5 (replicas 1, 4,
// 5), as the leader sees them; a follower reports none; with no move
// recorded there is none (docs/cluster.md, "Moving a stream").
func TestGroupMoveStatus(t *testing.T) {
	sa := meta.StreamAssignment{Replicas: []meta.Replica{{ID: 1, Server: "n1"}, {ID: 4, Server: "n4"}, {ID: 5, Server: "n5"}}, Move: &meta.MoveOrigin{}}
	rs := func(id raftnode.ReplicaID, server string, learner bool) raftnode.ReplicaStatus {
		return raftnode.ReplicaStatus{Replica: id, Server: raftnode.ServerID(server), Learner: learner, Active: true}
	}
	down := func(r raftnode.ReplicaStatus) raftnode.ReplicaStatus { r.Active = false; return r }
	origin := []raftnode.ReplicaStatus{rs(1, "n1", false), rs(2, "n2", false), rs(3, "n3", false)}
	steps := []struct {
		name     string
		replicas []raftnode.ReplicaStatus
		joint    bool
		self     raftnode.ReplicaID
		want     string // type: description; "" for none
	}{
		{"targets not added", origin, false, 1, "catchup: waiting for desired peers to catch up"},
		{"targets learning", append(slices.Clone(origin), rs(4, "n4", true), rs(5, "n5", false)), false, 1, "catchup: waiting for desired peers to catch up"},
		{"promoting", append(slices.Clone(origin), rs(4, "n4", false), rs(5, "n5", false)), true, 1, "membership: waiting for membership change to commit"},
		{"origin left", append(slices.Clone(origin), rs(4, "n4", false), rs(5, "n5", false)), false, 1, "membership: removing peer n2"},
		// n4 and n5 down since their promotion: n2's removal would
		// leave n1 n3 n4 n5 with two live voters of four
		// (keepsLiveQuorum).
		{"origin left, the targets down", append(slices.Clone(origin), down(rs(4, "n4", false)), down(rs(5, "n5", false))), false, 1, "quorum: waiting for quorum to remove peer"},
		{"leader of the origin", []raftnode.ReplicaStatus{rs(2, "n2", false), rs(1, "n1", false), rs(4, "n4", false), rs(5, "n5", false)}, false, 2, "membership: waiting for a desired peer to step down to"},
		{"converged", []raftnode.ReplicaStatus{rs(1, "n1", false), rs(4, "n4", false), rs(5, "n5", false)}, false, 1, ""},
	}
	for _, s := range steps {
		st := raftnode.GroupStatus{Role: raftnode.Leader, Replica: s.self, Replicas: s.replicas, Joint: s.joint}
		got := ""
		if d := groupMoveStatus(sa, st); d != nil {
			got = d.Type + ": " + d.Description
		}
		if got != s.want {
			t.Errorf("%s: %q, want %q", s.name, got, s.want)
		}
	}
	c := &Cluster{}
	if d := c.moveStatus(sa, raftnode.GroupStatus{Role: raftnode.Follower, Replica: 4}); d != nil {
		t.Errorf("a follower's status: %+v", d)
	}
	if d := c.moveStatus(meta.StreamAssignment{Replicas: sa.Replicas}, raftnode.GroupStatus{Role: raftnode.Leader, Replica: 1, Replicas: origin}); d != nil {
		t.Errorf("no move, a status: %+v", d)
	}
}

// During a move a stream's info lists the group's origin replicas beside
// the assigned targets, as nats-server v2.15.2 lists origin and
// targets; with no move only the assigned ones.
func TestShownReplicas(t *testing.T) {
	targets := []meta.Replica{{ID: 1, Server: "n1"}, {ID: 4, Server: "n4"}}
	st := raftnode.GroupStatus{Replica: 1, Peers: []raftnode.PeerContact{{Replica: 2, Server: "n2"}, {Replica: 4, Server: "n4"}, {Replica: 3, Server: "n4"}}}
	ids := func(rs []meta.Replica) []raftnode.ReplicaID {
		var out []raftnode.ReplicaID
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	if got := ids(shownReplicas(meta.StreamAssignment{Replicas: targets}, st)); !slices.Equal(got, []raftnode.ReplicaID{1, 4}) {
		t.Errorf("no move: %v", got)
	}
	if got := ids(shownReplicas(meta.StreamAssignment{Replicas: targets, Move: &meta.MoveOrigin{}}, st)); !slices.Equal(got, []raftnode.ReplicaID{1, 4, 2}) {
		t.Errorf("a move: %v", got)
	}
}
