package jscluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// A handover counts as moved only once another replica is seen leading:
// a leader that CheckQuorum made a follower (same term, no leader) is
// lost, not handed over (trial 36: "handed over for 28 of 28" when its
// peers were gone); one whose transfer started an election waits for the
// new leader, and for its own log to apply, before it is done.
func TestHandOverUpdate(t *testing.T) {
	const self, peer = raftnode.ReplicaID(1), raftnode.ReplicaID(2)
	follower := func(term uint64, leader raftnode.ReplicaID, applied uint64) raftnode.GroupStatus {
		return raftnode.GroupStatus{Replica: self, Role: raftnode.Follower, Term: term, Leader: leader, Applied: applied, LastIndex: 10}
	}

	quorum := &handover{term: 3}
	quorum.update(follower(3, 0, 8), nil, false)
	if !quorum.done || quorum.took {
		t.Errorf("CheckQuorum step-down: done %v, took %v; want done, not taken", quorum.done, quorum.took)
	}

	moved := &handover{term: 3}
	moved.update(raftnode.GroupStatus{Replica: self, Role: raftnode.Leader, Term: 3, Transferee: peer}, nil, false)
	moved.update(follower(4, 0, 8), nil, false) // the transferee campaigns
	if moved.done || moved.took {
		t.Fatalf("election under way: done %v, took %v; want neither", moved.done, moved.took)
	}
	moved.update(follower(4, peer, 9), nil, false)
	if moved.done || !moved.took {
		t.Fatalf("new leader, log not applied: done %v, took %v; want taken, not done", moved.done, moved.took)
	}
	moved.update(follower(4, peer, 10), nil, false)
	if !moved.done || !moved.took {
		t.Errorf("new leader, log applied: done %v, took %v; want both", moved.done, moved.took)
	}

	nobody := &handover{term: 3}
	nobody.update(follower(4, 0, 10), nil, false)
	nobody.update(follower(4, 0, 10), nil, true)
	if !nobody.done || nobody.took {
		t.Errorf("no new leader after two election timeouts: done %v, took %v; want done, not taken", nobody.done, nobody.took)
	}

	gone := &handover{term: 3}
	gone.update(raftnode.GroupStatus{}, errors.New("no such group"), false)
	if !gone.done || gone.took {
		t.Errorf("group gone: done %v, took %v", gone.done, gone.took)
	}
}

// The two election timeouts after which HandOver gives up on a group
// count from its transfer's request, not from HandOver's start: a
// stream leader stopped during a burst spent 1.9 s having its streams
// propose what they took, then gave up on its stream at the first look,
// deposed by the transferee's campaign and not yet told the new leader
// (trial 38: "did not move", the successor leading a moment later).
func TestHandOverLateFromTransfer(t *testing.T) {
	const self, peer = raftnode.ReplicaID(1), raftnode.ReplicaID(2)
	const abandon = 2 * time.Second
	began := time.Unix(1000, 0)
	asked := began.Add(1900 * time.Millisecond) // after the streams' quiesce
	h := &handover{term: 3, asked: asked}
	campaign := raftnode.GroupStatus{Replica: self, Role: raftnode.Follower, Term: 4, LastIndex: 10, Applied: 10}
	h.update(campaign, nil, h.late(asked.Add(300*time.Millisecond), abandon))
	if h.done {
		t.Fatalf("deposed by the transferee's campaign 2.2 s after HandOver began, 0.3 s after the transfer: given up; want a wait for the new leader")
	}
	led := campaign
	led.Leader, led.LeaderServer = peer, "n2"
	h.update(led, nil, h.late(asked.Add(320*time.Millisecond), abandon))
	if !h.done || !h.took || h.successor != "n2" {
		t.Errorf("new leader seen: done %v, took %v, successor %q; want done, taken by n2", h.done, h.took, h.successor)
	}

	never := &handover{term: 3, asked: asked}
	never.update(campaign, nil, never.late(asked.Add(abandon+time.Millisecond), abandon))
	if !never.done || never.took {
		t.Errorf("no new leader two election timeouts after the transfer was asked: done %v, took %v; want given up", never.done, never.took)
	}
}

// What a server stopped with the rest of its cluster counts (trial 37,
// finding 3): a group taken by a server that announced it is leaving is
// not handed over, a group whose other replicas' servers all announced
// leaving (however active their replicas) has no other server left, not
// "no active follower"; and when that is every group, the one line says
// so without the per-group accounting.
func TestHandOverOutcome(t *testing.T) {
	staying := func(names ...raftnode.ServerID) map[raftnode.ServerID]bool {
		m := map[raftnode.ServerID]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	others := []raftnode.ServerID{"n2", "n3"}
	for _, tc := range []struct {
		name    string
		h       handover
		staying map[raftnode.ServerID]bool
		want    handOverOutcome
	}{
		{"taken by a server that stays", handover{took: true, successor: "n2", others: others}, staying("n2", "n3"), outcomeMoved},
		{"taken by a server leaving too, the whole cluster leaving", handover{took: true, successor: "n2", others: others}, staying(), outcomeNoneLeft},
		{"taken by a server leaving, n3 stays", handover{took: true, successor: "n2", others: others}, staying("n3"), outcomeFailed},
		{"no successor: every other server leaving", handover{alone: true, done: true, others: others}, staying(), outcomeNoneLeft},
		{"no successor: a server of the group stays", handover{alone: true, done: true, others: others}, staying("n3"), outcomeNoSuccessor},
		{"no successor: only a server outside the group stays", handover{alone: true, done: true, others: others}, staying("n4"), outcomeNoneLeft},
		{"lost to CheckQuorum, a server stays", handover{lost: 9, done: true, others: others}, staying("n2"), outcomeLost},
		{"lost to CheckQuorum, none left", handover{lost: 9, done: true, others: others}, staying(), outcomeNoneLeft},
		{"abandoned, a server stays", handover{seen: true, done: true, others: others}, staying("n2", "n3"), outcomeFailed},
	} {
		if got := tc.h.outcome(tc.staying); got != tc.want {
			t.Errorf("%s: outcome %d, want %d", tc.name, got, tc.want)
		}
	}

	h := &handover{term: 3, others: others}
	h.update(raftnode.GroupStatus{Replica: 1, Role: raftnode.Follower, Term: 4, Leader: 2, LeaderServer: "n2", Applied: 10, LastIndex: 10}, nil, false)
	if !h.took || h.successor != "n2" {
		t.Errorf("taken: took %v by %q, want by n2", h.took, h.successor)
	}

	info, warn := handOverLines(HandOverResult{Led: 2, NoneLeft: 2, Took: time.Millisecond})
	if len(info) != 1 || len(warn) != 0 || !strings.HasPrefix(info[0], "JetStream cluster: no other server is left to take the leadership of 2 Raft groups") {
		t.Errorf("whole cluster stopping: info %q, warn %q", info, warn)
	}
	info, warn = handOverLines(HandOverResult{Led: 5, Moved: 3, NoneLeft: 1, NoSuccessor: 1, Took: 13 * time.Millisecond})
	if len(info) != 2 || len(warn) != 0 ||
		info[0] != "JetStream cluster: leadership handed over for 3 of 5 Raft groups in 13ms (1 without an active follower, 0 lost without a successor)" ||
		!strings.HasPrefix(info[1], "JetStream cluster: no other server is left to take the leadership of 1 Raft group (") {
		t.Errorf("mixed: info %q, warn %q", info, warn)
	}
	// One group: the singular (trial 38 read "1 of 1 Raft groups").
	info, _ = handOverLines(HandOverResult{Led: 1, Moved: 1, Took: 6 * time.Millisecond})
	if len(info) != 1 || info[0] != "JetStream cluster: leadership handed over for 1 of 1 Raft group in 6ms (0 without an active follower, 0 lost without a successor)" {
		t.Errorf("one group: info %q", info)
	}
	info, warn = handOverLines(HandOverResult{Led: 2, Moved: 1, Failed: []string{"stream A > S"}})
	if len(info) != 1 || len(warn) != 1 || warn[0] != "JetStream cluster: the leadership of stream A > S did not move before the server stops" {
		t.Errorf("failed: info %q, warn %q", info, warn)
	}
}
