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

// /raftz's wal part is the group's log as the replica holds it (trial
// 34 found bytes and the times zero): the entries first_seq..last_seq,
// their bytes and times; once every entry is compacted away, no
// messages, first_seq past last_seq and last_ts kept, as nats-server's
// WAL state reads.
func TestRaftzWAL(t *testing.T) {
	t1, t2 := time.Unix(100, 0).UTC(), time.Unix(200, 0).UTC()
	for _, c := range []struct {
		st   raftnode.GroupStatus
		want RaftzWAL
	}{
		{raftnode.GroupStatus{FirstIndex: 5, LastIndex: 7, LogBytes: 99, FirstTime: t1, LastTime: t2},
			RaftzWAL{Msgs: 3, Bytes: 99, FirstSeq: 5, LastSeq: 7, FirstTime: t1, LastTime: t2}},
		{raftnode.GroupStatus{FirstIndex: 8, LastIndex: 7, LastTime: t2},
			RaftzWAL{FirstSeq: 8, LastSeq: 7, LastTime: t2}},
		{raftnode.GroupStatus{FirstIndex: 1}, RaftzWAL{}},
	} {
		if got := raftzWAL(c.st); got != c.want {
			t.Errorf("%+v: %+v, want %+v", c.st, got, c.want)
		}
	}
}
