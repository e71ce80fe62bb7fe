package raftnode

import (
	"slices"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// A status's voters are both halves of a joint configuration, once
// each, ascending; learners are not voters.
func TestVotersOf(t *testing.T) {
	cs := &pb.ConfState{Voters: []uint64{3, 1}, VotersOutgoing: []uint64{1, 2}, Learners: []uint64{4}, LearnersNext: []uint64{5}}
	if got := votersOf(cs); !slices.Equal(got, []ReplicaID{1, 2, 3}) {
		t.Fatalf("voters %v, want 1 2 3", got)
	}
	if got := votersOf(&pb.ConfState{}); len(got) != 0 {
		t.Fatalf("voters of an empty configuration: %v", got)
	}
}
