package monitor

import (
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/jscluster"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// A replica removed from the meta group (SERVER.REMOVE) is no longer
// counted in /raftz's size and quorum_needed, nor listed among the
// peers, though the node still knows its server (a trial: a cluster of
// three with one removed showed size 3, quorum 2); a learner on the
// leader is listed but not counted.
func TestRaftzGroupCountsMembers(t *testing.T) {
	st := raftnode.GroupStatus{
		Replica: 1, Role: raftnode.Leader, Voters: []raftnode.ReplicaID{1, 2},
		Replicas: []raftnode.ReplicaStatus{{Replica: 1, Server: "n1"}, {Replica: 2, Server: "n2"}, {Replica: 4, Server: "n4", Learner: true}},
		Peers:    []raftnode.PeerContact{{Replica: 2, Server: "n2"}, {Replica: 3, Server: "n3"}, {Replica: 4, Server: "n4"}},
	}
	rg := raftzGroup(jscluster.RaftGroup{Status: st}, time.Now())
	if rg.Size != 2 || rg.QuorumNeeded != 2 {
		t.Errorf("size %d, quorum_needed %d; want 2 and 2", rg.Size, rg.QuorumNeeded)
	}
	if len(rg.Peers) != 2 || hasPeer(rg, "n3") || !hasPeer(rg, "n2") || !hasPeer(rg, "n4") {
		t.Errorf("peers %+v; want n2 and n4", rg.Peers)
	}
}

func hasPeer(rg RaftzGroup, name string) bool {
	for _, p := range rg.Peers {
		if p.Name == name {
			return true
		}
	}
	return false
}
