package jscluster

import (
	"errors"
	"testing"

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
