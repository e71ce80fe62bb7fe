package jscluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// groupOf is the status of a group led by replica 1 whose replicas are
// given as "<id><kind>": kind 'v' a live voter, 'd' a voter that is
// down, 'l' a live learner, 'x' a learner that is down (every replica
// holding the commit).
func groupOf(t *testing.T, replicas ...string) raftnode.GroupStatus {
	t.Helper()
	st := raftnode.GroupStatus{Role: raftnode.Leader, Replica: 1, Commit: 100}
	for _, r := range replicas {
		var id raftnode.ReplicaID
		var kind rune
		if _, err := fmt.Sscanf(r, "%d%c", &id, &kind); err != nil {
			t.Fatalf("replica %q: %v", r, err)
		}
		st.Replicas = append(st.Replicas, raftnode.ReplicaStatus{
			Replica: id, Server: raftnode.ServerID(fmt.Sprintf("n%d", id)), Match: 100,
			Active: kind == 'v' || kind == 'l', Learner: kind == 'l' || kind == 'x',
		})
		if kind == 'v' || kind == 'd' {
			st.Voters = append(st.Voters, id)
		}
	}
	return st
}

// The guard on a membership change (membership.go keepsLiveQuorum, as
// nats-server v2.15.2 canRemovePeer): a change that removes a live voter
// is refused unless the voters left hold a live majority; removing a
// voter that is down, or a learner, is always fine; a promotion in the
// same change counts as a voter left.
func TestKeepsLiveQuorum(t *testing.T) {
	remove := func(id raftnode.ReplicaID) raftnode.Change {
		return raftnode.Change{Kind: raftnode.RemoveReplica, Replica: id}
	}
	promote := func(id raftnode.ReplicaID) raftnode.Change {
		return raftnode.Change{Kind: raftnode.AddVoter, Replica: id}
	}
	for _, tc := range []struct {
		name     string
		replicas []string
		changes  []raftnode.Change
		want     bool
	}{
		{"R3 all live, remove a follower", []string{"1v", "2v", "3v"}, []raftnode.Change{remove(3)}, true},
		// The case of the guard: R3 to R2 keeping a voter that is down.
		{"R3 one down, remove the live follower", []string{"1v", "2d", "3v"}, []raftnode.Change{remove(3)}, false},
		{"R3 one down, remove the down one", []string{"1v", "2d", "3v"}, []raftnode.Change{remove(2)}, true},
		{"R3 one down, the leader's own removal", []string{"1v", "2d", "3v"}, []raftnode.Change{remove(1)}, false},
		{"R3 all live, the leader's own removal", []string{"1v", "2v", "3v"}, []raftnode.Change{remove(1)}, true},
		{"R2 to R1, the kept leader", []string{"1v", "2v"}, []raftnode.Change{remove(2)}, true},
		{"R2 to R1, the other down", []string{"1v", "2d"}, []raftnode.Change{remove(2)}, true},
		{"R2 to R1 on the other, the leader's own removal", []string{"1v", "2v"}, []raftnode.Change{remove(1)}, true},
		{"R5 two down, remove a live one", []string{"1v", "2v", "3v", "4d", "5d"}, []raftnode.Change{remove(2)}, false},
		{"R5 two down, remove a down one", []string{"1v", "2v", "3v", "4d", "5d"}, []raftnode.Change{remove(4)}, true},
		{"R5 one down, remove a live one", []string{"1v", "2v", "3v", "4v", "5d"}, []raftnode.Change{remove(2)}, true},
		{"R4 one down, remove a live one", []string{"1v", "2v", "3v", "4d"}, []raftnode.Change{remove(2)}, true},
		{"R4 two down, remove a down one", []string{"1v", "2v", "3d", "4d"}, []raftnode.Change{remove(3)}, true},
		{"a learner removed", []string{"1v", "2d", "3v", "4l"}, []raftnode.Change{remove(4)}, true},
		{"a learner that is down removed", []string{"1v", "2d", "3d", "4x"}, []raftnode.Change{remove(4)}, true},
		{"a promotion alone", []string{"1v", "2d", "3v", "4l"}, []raftnode.Change{promote(4)}, true},
		// A move keeping a voter that is down: the promotion replaces
		// the live voter that leaves, so the voters left are live two
		// of three.
		{"promotion with the live one's removal", []string{"1v", "2d", "3v", "4l"}, []raftnode.Change{promote(4), remove(3)}, true},
		{"promotion with the down one's removal", []string{"1v", "2d", "3v", "4l"}, []raftnode.Change{promote(4), remove(2)}, true},
		// A promotion of a learner that is down (nextMembership never
		// proposes one) does not count as live.
		{"promotion of a down learner with a live removal", []string{"1v", "2d", "3v", "4x"}, []raftnode.Change{promote(4), remove(3)}, false},
		{"R3 two down, remove the leader's live peer", []string{"1v", "2d", "3d", "4l"}, []raftnode.Change{promote(4), remove(1)}, false},
	} {
		st := groupOf(t, tc.replicas...)
		if got := keepsLiveQuorum(st, tc.changes); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// nextMembership with the guard: the removal of a live voter that
// would leave no live majority waits, the group unchanged; a promotion
// it would have gone with goes alone; removals the guard allows go as
// before, one that is down first, the leader's own last.
func TestNextMembershipQuorumGuard(t *testing.T) {
	want := func(ids ...raftnode.ReplicaID) []meta.Replica {
		var out []meta.Replica
		for _, id := range ids {
			out = append(out, meta.Replica{ID: id, Server: raftnode.ServerID(fmt.Sprintf("n%d", id))})
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		replicas []string
		want     []meta.Replica
		changes  string // describe's words, joined by ", "; "" for none
	}{
		{"R3 to R2, all live", []string{"1v", "2v", "3v"}, want(1, 2), "remove 3"},
		// The guard's case: the assignment keeps 2, which is down.
		{"R3 to R2 keeping a down voter", []string{"1v", "2d", "3v"}, want(1, 2), ""},
		{"R3 to R2 dropping the down voter", []string{"1v", "2d", "3v"}, want(1, 3), "remove 2"},
		{"R3 to R2 without the leader, one down", []string{"1v", "2d", "3v"}, want(2, 3), ""},
		{"R3 to R2 without the leader, all live", []string{"1v", "2v", "3v"}, want(2, 3), "remove 1"},
		{"R5 to R3, two leaving, one down", []string{"1v", "2v", "3v", "4v", "5d"}, want(1, 2, 3), "remove 5"},
		{"R4 to R3 keeping two down", []string{"1v", "2v", "3d", "4d"}, want(1, 3, 4), ""},
		{"R3 to R1 on the leader, one down", []string{"1v", "2d", "3v"}, want(1), "remove 2"},
		{"R3 to R1 on the leader, the down one gone", []string{"1v", "3v"}, want(1), "remove 3"},
		// A move from 1 2 3 to 1 2 4 with 2 down: the promotion of 4
		// replaces the live 3, leaving 1 and 4 live of three.
		{"move keeping a down voter", []string{"1v", "2d", "3v", "4l"}, want(1, 2, 4), "promote 4, remove 3"},
		{"move, learner added", []string{"1v", "2d", "3v"}, want(1, 2, 4), "add learner 4"},
		// A leader whose view lost its live majority (2 and 3 down,
		// before raft's CheckQuorum deposes it), moving 1 2 3 to 2 3 4:
		// its own removal with the promotion would leave 4 live alone
		// of three; the promotion goes alone.
		{"move, removal refused, promotion alone", []string{"1v", "2d", "3d", "4l"}, want(2, 3, 4), "promote 4"},
	} {
		st := groupOf(t, tc.replicas...)
		changes, _ := nextMembership(st, tc.want)
		if got := strings.Join(describe(changes), ", "); got != tc.changes {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.changes)
		}
	}
}

// What the guard counts as live (heardLive): a replica heard from
// within the contact window, whatever raft's RecentActive says (it
// stays set in a group that went quiet), the leader's own always; a
// replica without contact is not live; st itself is not changed.
func TestHeardLive(t *testing.T) {
	st := groupOf(t, "1v", "2v", "3v", "4v")
	st.Replicas[0].Active = false
	st.Peers = []raftnode.PeerContact{
		{Replica: 2, Heard: true, Ago: time.Second},
		{Replica: 3, Heard: true, Ago: 3 * time.Second},
	}
	live := heardLive(st, 2*time.Second)
	var got []bool
	for _, rs := range live.Replicas {
		got = append(got, rs.Active)
	}
	if want := []bool{true, true, false, false}; !slices.Equal(got, want) {
		t.Errorf("active %v, want %v", got, want)
	}
	if st.Replicas[0].Active || !st.Replicas[2].Active {
		t.Errorf("st changed: %+v", st.Replicas)
	}
	// The stopped follower's stale RecentActive no longer lets the
	// live one's removal go.
	st = groupOf(t, "1v", "2v", "3v")
	st.Peers = []raftnode.PeerContact{{Replica: 2, Heard: true, Ago: 5 * time.Second}, {Replica: 3, Heard: true, Ago: 0}}
	if changes, _ := nextMembership(heardLive(st, 2*time.Second), []meta.Replica{{ID: 1}, {ID: 2}}); changes != nil {
		t.Errorf("changes %v with replica 2 silent", describe(changes))
	}
}
