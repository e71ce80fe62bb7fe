package jscluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// lostAssignment is a stream of group 7 with replicas 1, 4 and 3 on s1,
// s2 and s3, stored as storage says.
func lostAssignment(storage string) meta.StreamAssignment {
	return meta.StreamAssignment{
		Account: "A", Name: "M", Group: 7, NextReplica: 5,
		Config:   fmt.Appendf(nil, `{"name":"M","storage":%q,"num_replicas":3}`, storage),
		Replicas: []meta.Replica{{ID: 1, Server: "s1"}, {ID: 4, Server: "s2"}, {ID: 3, Server: "s3"}},
	}
}

// A report stands only for the assignment's group, the server the
// assignment places that replica on, and for lostFresh: a report of the
// group before a reset (whose replica IDs start from 1 again on the same
// servers), of a replica replaced since, or that its server stopped
// repeating, does not count.
func TestLostStanding(t *testing.T) {
	sa := lostAssignment("memory")
	t0 := time.Unix(1000, 0)
	reports := map[raftnode.ReplicaID]lostReport{
		1: {group: 7, server: "s1", at: t0},
		4: {group: 6, server: "s2", at: t0},                  // another group
		3: {group: 7, server: "s9", at: t0},                  // another server
		2: {group: 7, server: "s2", at: t0.Add(time.Second)}, // replaced since
	}
	if got := standing(sa, reports, t0.Add(lostFresh)); !slices.Equal(got, []raftnode.ReplicaID{1}) {
		t.Fatalf("standing %v", got)
	}
	if got := standing(sa, reports, t0.Add(lostFresh+time.Millisecond)); len(got) != 0 {
		t.Fatalf("stale report standing: %v", got)
	}
}

// The decision: with a leader, lost replicas are replaced however many
// they are; without one, a replicated memory stream is reset only once a
// majority has been lost for resetAfter, never for a minority (it waits
// for a leader to replace it the normal way), never for a file stream,
// never for one replica.
func TestDecideLost(t *testing.T) {
	mem, file := lostAssignment("memory"), lostAssignment("file")
	t0 := time.Unix(1000, 0)
	later := t0.Add(resetAfter)
	all := []raftnode.ReplicaID{1, 4, 3}
	two := []raftnode.ReplicaID{1, 3}
	one := []raftnode.ReplicaID{4}
	single := mem
	single.Replicas = single.Replicas[:1]
	for _, tc := range []struct {
		name   string
		sa     meta.StreamAssignment
		lost   []raftnode.ReplicaID
		since  time.Time
		now    time.Time
		leader bool
		want   lostAction
	}{
		{"nothing lost", mem, nil, time.Time{}, later, false, lostWait},
		{"minority, leader", mem, one, time.Time{}, t0, true, lostReplace},
		{"majority, leader", mem, two, t0, later, true, lostReplace},
		{"all, leader", mem, all, t0, later, true, lostReplace},
		{"minority, no leader, long", mem, one, time.Time{}, t0.Add(time.Hour), false, lostWait},
		{"majority, no leader, too soon", mem, two, t0, later.Add(-time.Millisecond), false, lostWait},
		{"majority, no leader", mem, two, t0, later, false, lostReset},
		{"all, no leader", mem, all, t0, later, false, lostReset},
		{"majority, no since", mem, two, time.Time{}, later, false, lostWait},
		{"file stream", file, all, t0, t0.Add(time.Hour), false, lostWait},
		{"file stream, leader", file, one, t0, t0, true, lostReplace},
		{"one replica", single, []raftnode.ReplicaID{1}, t0, t0.Add(time.Hour), false, lostWait},
	} {
		if got := decideLost(tc.sa, tc.lost, tc.since, tc.now, tc.leader); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A full restart as the meta leader sees it, on an injected clock: the
// three replicas report one after the other (every staleRetry each), the
// housekeeping tick runs every 250 ms, and no leader answers. The
// majority is reached with the second report, and the reset is decided
// resetAfter after it, not before; a report arriving late (a majority
// broken for a while by an expired report) starts the wait again.
func TestLostTimeline(t *testing.T) {
	sa := lostAssignment("memory")
	t0 := time.Unix(1000, 0)
	reports := map[raftnode.ReplicaID]lostReport{}
	report := func(id raftnode.ReplicaID, srv raftnode.ServerID, at time.Time) {
		reports[id] = lostReport{group: 7, server: srv, at: at}
	}
	var since, resetAt time.Time
	for now := t0; now.Before(t0.Add(time.Minute)) && resetAt.IsZero(); now = now.Add(250 * time.Millisecond) {
		d := now.Sub(t0)
		if d%staleRetry == 0 {
			report(1, "s1", now)
		}
		if d >= 3*time.Second && (d-3*time.Second)%staleRetry == 0 {
			report(3, "s3", now)
		}
		lost := standing(sa, reports, now)
		since = majoritySince(sa, lost, since, now)
		if decideLost(sa, lost, since, now, false) == lostReset {
			resetAt = now
		}
	}
	if want := t0.Add(3*time.Second + resetAfter); !resetAt.Equal(want) {
		t.Fatalf("reset at %v, want %v", resetAt.Sub(t0), want.Sub(t0))
	}
	// The majority breaks (one report expired), then returns: the wait
	// starts over.
	now := t0.Add(time.Hour)
	report(1, "s1", now)
	lost := standing(sa, reports, now)
	if since = majoritySince(sa, lost, since, now); !since.IsZero() {
		t.Fatalf("a minority keeps the majority's time %v", since)
	}
	report(3, "s3", now.Add(time.Second))
	now = now.Add(time.Second)
	lost = standing(sa, reports, now)
	if since = majoritySince(sa, lost, since, now); !since.Equal(now) {
		t.Fatalf("majority since %v, want %v", since, now)
	}
	if decideLost(sa, lost, since, now.Add(resetAfter-time.Millisecond), false) != lostWait {
		t.Fatal("reset before resetAfter")
	}
}

// A new consumer is placed last on the servers whose replica of its
// stream stands reported lost or damaged: lostServers names them, for
// the assignment's group and servers only, while the report stands.
func TestLostServers(t *testing.T) {
	sa := lostAssignment("file")
	t0 := time.Unix(1000, 0)
	now := t0
	c := &Cluster{cfg: Config{Now: func() time.Time { return now }}}
	if got := c.lostServers(sa); len(got) != 0 {
		t.Fatalf("no report: %v", got)
	}
	c.lost.streams = map[streamKey]*lostStream{{"A", "M"}: {reports: map[raftnode.ReplicaID]lostReport{
		4: {group: 7, server: "s2", at: t0},
		3: {group: 6, server: "s3", at: t0}, // another group
	}}}
	if got := c.lostServers(sa); len(got) != 1 || !got["s2"] {
		t.Fatalf("lost servers %v, want s2", got)
	}
	now = t0.Add(lostFresh + time.Millisecond)
	if got := c.lostServers(sa); len(got) != 0 {
		t.Fatalf("a stale report still counts: %v", got)
	}
}
