package jscluster

import (
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// The first start of a brand-new cluster (trial 37): each server's first
// line named only itself, "routes named: [cn1]", although its
// configuration names three routes (the line is logged before any route
// resolved); it now names the configured routes and what they reached.
func TestWaitingLine(t *testing.T) {
	routes := []string{"127.0.0.1:27211", "127.0.0.1:27212", "127.0.0.1:27213"}
	for _, tc := range []struct {
		name      string
		self      int
		connected []string
		waited    time.Duration
		want      string
	}{
		{"first start", 0, nil, 0,
			"JetStream cluster: waiting to enter the meta group until its routes connect: 3 configured (127.0.0.1:27211, 127.0.0.1:27212, 127.0.0.1:27213), connected to none yet"},
		{"self resolved, one peer", 1, []string{"cn2"}, 0,
			"JetStream cluster: waiting to enter the meta group until its routes connect: 3 configured (127.0.0.1:27211, 127.0.0.1:27212, 127.0.0.1:27213), 1 of them to this server itself, connected to cn2 (1 of the other 2)"},
		{"self not resolved, one peer", 0, []string{"cn3"}, 0,
			"JetStream cluster: waiting to enter the meta group until its routes connect: 3 configured (127.0.0.1:27211, 127.0.0.1:27212, 127.0.0.1:27213), connected to cn3 (1 of 3)"},
		{"still waiting", 1, []string{"cn2"}, 10200 * time.Millisecond,
			"JetStream cluster: still waiting to enter the meta group after 10s until its routes connect: 3 configured (127.0.0.1:27211, 127.0.0.1:27212, 127.0.0.1:27213), 1 of them to this server itself, connected to cn2 (1 of the other 2)"},
	} {
		if got := waitingLine(routes, tc.self, tc.connected, tc.waited); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	if got := waitingLine(nil, 0, nil, 0); !strings.Contains(got, "no routes configured") {
		t.Errorf("no routes: %s", got)
	}
}

// A server whose meta replica the leader reaches before it bootstrapped
// (on a brand-new cluster, every server but the first to start the meta
// group: trial 37) enters a group it is a first member of, and says so;
// only a server the running group did not know joins "as a new replica".
func TestInvitedLine(t *testing.T) {
	const self = raftnode.ServerID("cn1")
	inc := raftnode.Incarnation{1}
	other := raftnode.Incarnation{2}

	line, join := invitedLine("cn3", nil, self, inc)
	if join || strings.Contains(line, "new replica") || strings.Contains(line, "joining") || !strings.Contains(line, "cn3 started the new cluster's meta group first") {
		t.Errorf("forming cluster (no catalogue in the hello): join %v, %q", join, line)
	}
	if rec := joinRecord(self, inc, map[raftnode.ServerID]raftnode.Incarnation{"cn3": other}); joinedLine(rec, join) != "" {
		t.Errorf("forming cluster: startMeta logs %q", joinedLine(rec, join))
	}

	line, join = invitedLine("cn3", map[raftnode.ServerID]raftnode.Incarnation{"cn3": other, self: inc}, self, inc)
	if join || strings.Contains(line, "joining") {
		t.Errorf("catalogue knows this store: join %v, %q", join, line)
	}

	line, join = invitedLine("cn3", map[raftnode.ServerID]raftnode.Incarnation{"cn3": other}, self, inc)
	if !join || !strings.Contains(line, "cn3 adds this server to its meta group: joining it") {
		t.Errorf("running group without this server: join %v, %q", join, line)
	}
	rec := joinRecord(self, inc, map[raftnode.ServerID]raftnode.Incarnation{"cn3": other})
	if got := joinedLine(rec, join); !strings.Contains(got, "joining the meta group as a new replica (the voters record of the join names [cn1 cn3])") {
		t.Errorf("real join: startMeta logs %q", got)
	}
}

// A server that entered a forming cluster's meta group learns the other
// members' names from their catalogue entries: its members line waits
// for them (trial 37's first start, a rerun: "meta group of [cn1 cn3
// replica 10462958224774676476]"), and names a replica by ID only after
// membersNameWait.
func TestMembersLine(t *testing.T) {
	voters := []raftnode.ReplicaID{7, 3, 9}
	known := map[raftnode.ReplicaID]string{7: "cn1", 3: "cn3"}
	if line, ok := membersLine(voters, known, time.Second); ok {
		t.Errorf("a member unnamed after 1s: logged %q", line)
	}
	known[9] = "cn2"
	if line, ok := membersLine(voters, known, time.Second); !ok || line != "JetStream cluster: meta group of [cn1 cn2 cn3]" {
		t.Errorf("every member named: %q %v", line, ok)
	}
	delete(known, 9)
	if line, ok := membersLine(voters, known, membersNameWait); !ok || line != "JetStream cluster: meta group of [cn1 cn3 replica 9]" {
		t.Errorf("a member unnamed after the wait: %q %v", line, ok)
	}
}
