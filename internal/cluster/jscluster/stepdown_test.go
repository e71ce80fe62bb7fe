package jscluster

import (
	"testing"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/route"
	"github.com/cairnmq/cairn/internal/stream"
)

// The step-down's refusals, with nats-server v2.15.2's codes and texts
// (measured: docs/cluster.md, "Step-down"), on a meta group whose only
// voter leads: a preferred server that is the leader or no replica's, a
// placement no other replica matches. A group this server does not lead
// answers 10008; one it does not have, 10041.
func TestStepDownRefusals(t *testing.T) {
	c := oneServer(t)
	c.host = aloneHost{}
	c.mustPropose(t, &meta.AddServer{Name: "s1", Cluster: "C", Tags: []string{"az:1"}, Incarnation: c.node.Incarnation()})
	for _, tc := range []struct {
		p    *stream.Placement
		code jserr.ErrCode
		text string
	}{
		{&stream.Placement{Preferred: "s1"}, jserr.ClusterNoPeers, `preferred server "s1" is already leader`},
		{&stream.Placement{Preferred: "s9"}, jserr.ClusterNoPeers, `preferred server "s9" not known`},
		{&stream.Placement{}, jserr.ClusterNoPeers, "no replacement peer connected"},
		{&stream.Placement{Tags: []string{"AZ:1"}}, jserr.ClusterNoPeers, "no replacement peer connected"},
	} {
		err := c.MetaLeaderStepDown(tc.p)
		if err == nil || jserr.ErrCode(err.ErrCode) != tc.code || err.Description != tc.text {
			t.Errorf("%+v: %v, want %d %q", tc.p, err, tc.code, tc.text)
		}
	}
	if err := c.MetaLeaderStepDown(nil); err != nil {
		t.Errorf("no placement, no successor: %v (the leader stays, success as in nats-server)", err)
	}
	if err := c.stepDown(raftnode.GroupID(99), nil); err == nil || jserr.ErrCode(err.ErrCode) != jserr.RaftGeneral {
		t.Errorf("an unknown group: %v", err)
	}
	if err := c.RemoveServer("s9", ""); err == nil || jserr.ErrCode(err.ErrCode) != jserr.ClusterServerNotMember {
		t.Errorf("remove s9: %v", err)
	}
	if err := c.RemoveServer("", peerHash("s1")); err == nil || jserr.ErrCode(err.ErrCode) != jserr.ClusterNotLeader {
		t.Errorf("remove s1 by peer ID: %v", err)
	}
	if err := c.EvacuateServer("", peerHash("s1")); err != nil {
		t.Errorf("evacuate s1 (nothing on it) by peer ID: %v", err)
	}
	if err := c.EvacuateServer("s9", ""); err == nil || jserr.ErrCode(err.ErrCode) != jserr.ClusterServerNotMember {
		t.Errorf("evacuate s9: %v", err)
	}
}

// aloneHost is the Host of a server with no route: only what step-down
// reads (the routed peers, the cluster's name).
type aloneHost struct{ Host }

func (aloneHost) ClusterPeers() []route.Peer { return nil }
func (aloneHost) ClusterName() string        { return "C" }

// Tags match ignoring case, and every wanted tag must be there.
func TestHasTags(t *testing.T) {
	for _, tc := range []struct {
		tags, want []string
		ok         bool
	}{
		{nil, nil, true},
		{[]string{"az:1", "ssd"}, []string{"SSD"}, true},
		{[]string{"az:1", "ssd"}, []string{"ssd", "az:2"}, false},
		{nil, []string{"x"}, false},
	} {
		if got := hasTags(tc.tags, tc.want); got != tc.ok {
			t.Errorf("hasTags(%v, %v) = %v", tc.tags, tc.want, got)
		}
	}
}
