package consumerrun

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
)

// heldLogAs starts pull consumer C over a heldLog (its predecessor
// handed it over when handedOver), leading when lead.
func heldLogAs(t *testing.T, lead, handedOver bool) (*Consumer, *pullTransport, *heldLog) {
	t.Helper()
	l := &heldLog{handedOver: handedOver}
	c, tr := startPullConsumerAs(t, 10, func(a streamrun.Applier[consumer.Op]) streamrun.Log[consumer.Op] {
		l.a = a
		return l
	}, lead)
	return c, tr, l
}

// leadershipChanges counts the 409 Leadership Change statuses inbox got.
func leadershipChanges(tr *pullTransport, inbox string) int {
	_, st := tr.got(inbox)
	n := 0
	for _, s := range st {
		if s == "NATS/1.0 409 Leadership Change" {
			n++
		}
	}
	return n
}

// proposedPulls returns the PullRequest operations flushed so far.
func proposedPulls(l *heldLog) []*consumer.PullRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*consumer.PullRequest
	for _, e := range l.flushed {
		for _, op := range e.ops {
			if p, ok := op.(*consumer.PullRequest); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// The leader records the reply subject of each pull request that waits,
// with its expiry, in the round's batch: once per reply subject while
// more than half of the new request's life is left on the record (a
// Consume asks again and again on one reply subject), again after; a
// no_wait request without expires and a refused one are not recorded.
func TestLeaderRecordsWaitingPulls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, tr, l := heldLogAs(t, true, false)
		start := time.Now()
		tr.pull(t, "inbox.consume", `{"batch":100,"expires":30000000000}`)
		tr.pull(t, "inbox.consume", `{"batch":100,"expires":30000000000}`)
		tr.pull(t, "inbox.nowait", `{"batch":1,"no_wait":true}`)
		tr.pull(t, "inbox.bad", `{"batch":`)
		tr.pull(t, "inbox.plain", `100`)
		synctest.Wait()
		if _, st := tr.got("inbox.bad"); len(st) != 1 || !strings.HasPrefix(st[0], "NATS/1.0 400 ") {
			t.Fatalf("inbox.bad got %q, want a 400", st)
		}
		got := proposedPulls(l)
		want := []consumer.PullRequest{
			{Reply: "inbox.consume", Expires: start.Add(30 * time.Second).UnixNano(), Time: start.UnixNano()},
			{Reply: "inbox.plain", Expires: start.Add(pullKeep).UnixNano(), Time: start.UnixNano()},
		}
		if len(got) != len(want) {
			for _, g := range got {
				t.Logf("%+v", *g)
			}
			t.Fatalf("recorded %d pull requests, want %d", len(got), len(want))
		}
		for i := range want {
			if *got[i] != want[i] {
				t.Errorf("record %d: %+v, want %+v", i, *got[i], want[i])
			}
		}
		time.Sleep(10 * time.Second) // 20 s of 30 left: not again
		tr.pull(t, "inbox.consume", `{"batch":100,"expires":30000000000}`)
		synctest.Wait()
		if n := len(proposedPulls(l)); n != 2 {
			t.Fatalf("%d records after a request with more than half its life on the record, want 2", n)
		}
		time.Sleep(6 * time.Second) // 14 s left of a new request's 30: again
		tr.pull(t, "inbox.consume", `{"batch":100,"expires":30000000000}`)
		synctest.Wait()
		got = proposedPulls(l)
		if len(got) != 3 || got[2].Reply != "inbox.consume" || got[2].Expires != time.Now().Add(30*time.Second).UnixNano() {
			t.Fatalf("records %+v; want a third for inbox.consume expiring 30 s from now", got)
		}
	})
}

// A replica elected leader (its predecessor went silent) sends one 409
// Leadership Change to each reply subject its log recorded whose request
// has not expired, on which the client asks again: before, the requests
// that waited on a killed leader, or on a cluster restarted whole, got
// nothing and a Consume waited for its heartbeats to miss (about 30 s).
// The records survive a snapshot (a restart starts from one).
func TestElectedLeaderEndsRecordedPulls(t *testing.T) {
	for _, viaSnapshot := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", viaSnapshot), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, tr, _ := heldLogAs(t, false, false)
				now := time.Now()
				c.ApplyBatch(1, []consumer.Op{
					&consumer.Reset{Stream: 1},
					&consumer.PullRequest{Reply: "inbox.consume", Expires: now.Add(30 * time.Second).UnixNano(), Time: now.UnixNano()},
					&consumer.PullRequest{Reply: "inbox.short", Expires: now.Add(time.Second).UnixNano(), Time: now.UnixNano()},
					&consumer.PullRequest{Reply: "inbox.consume", Expires: now.Add(20 * time.Second).UnixNano(), Time: now.UnixNano()},
				}, 0)
				if viaSnapshot {
					idx, data, err := c.CommittedSnapshot()
					if err != nil {
						t.Fatal(err)
					}
					c2, tr2, _ := heldLogAs(t, false, false)
					if err := c2.RestoreCommitted(idx, data); err != nil {
						t.Fatal(err)
					}
					c, tr = c2, tr2
				}
				time.Sleep(2 * time.Second) // inbox.short's request expired
				c.SetLeading(true)
				synctest.Wait()
				if n := leadershipChanges(tr, "inbox.consume"); n != 1 {
					t.Errorf("inbox.consume: %d 409 Leadership Change, want 1", n)
				}
				if n := leadershipChanges(tr, "inbox.short"); n != 0 {
					t.Errorf("inbox.short (expired): %d 409 Leadership Change, want 0", n)
				}
			})
		})
	}
}

// A replica handed the leadership by a live predecessor (a transfer, a
// step-down) sends no 409s for the recorded requests: the predecessor
// ends those that waited on it once the successor serves, and forwards
// those that reached it meanwhile, which are then being served here; a
// 409 from here too ended Fetches in progress after graceful step-downs.
func TestHandedOverLeaderEndsNoRecordedPulls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, tr, _ := heldLogAs(t, false, true)
		now := time.Now()
		c.ApplyBatch(1, []consumer.Op{
			&consumer.Reset{Stream: 1},
			&consumer.PullRequest{Reply: "inbox.fetch", Expires: now.Add(30 * time.Second).UnixNano(), Time: now.UnixNano()},
		}, 0)
		c.SetLeading(true)
		synctest.Wait()
		if _, st := tr.got("inbox.fetch"); len(st) != 0 {
			t.Fatalf("statuses %q to a request recorded under a predecessor that handed over", st)
		}
	})
}

// pullSet.keep: a reply subject's expiry only grows; a full set drops
// the expired ones for a new reply subject and refuses it when none
// expired.
func TestPullSetKeep(t *testing.T) {
	p := pullSet{}
	for i := range maxPulls {
		if !p.keep(fmt.Sprintf("r%d", i), int64(100+i), 0) {
			t.Fatalf("r%d refused in a set of %d", i, len(p))
		}
	}
	if p.keep("new", 500, 50) {
		t.Fatal("a new reply subject kept in a full set with nothing expired")
	}
	if !p.keep("r3", 50, 50) || p["r3"] != 103 {
		t.Fatalf("r3 again: expiry %d, want 103 (kept, never shortened)", p["r3"])
	}
	if !p.keep("new", 500, 110) {
		t.Fatal("a new reply subject refused after 11 expired")
	}
	if len(p) != maxPulls-11+1 {
		t.Fatalf("%d kept, want %d", len(p), maxPulls-10)
	}
}

// A leader that lost its leadership and wins it back by an election
// while it still keeps the requests that waited on it (endOrphans) ends
// each with one 409, not a second for its record of the same reply
// subject: nats.go's Consume asks again on each.
func TestRegainedLeaderEndsEachPullOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, tr, l := heldLogAs(t, true, false)
		tr.pull(t, "inbox.consume", `{"batch":100,"expires":30000000000}`)
		synctest.Wait()
		l.commit(c)
		l.mu.Lock()
		l.noSuccessor = true // no successor serves yet: the requests stay
		l.mu.Unlock()
		c.SetLeading(false)
		synctest.Wait()
		c.SetLeading(true)
		synctest.Wait()
		if n := leadershipChanges(tr, "inbox.consume"); n != 1 {
			t.Fatalf("%d 409 Leadership Change to the request that waited, want 1", n)
		}
	})
}

// A leader holding for a leadership transfer records no pull request:
// raft drops what is proposed during a transfer, and a dropped batch
// makes the leader step down; its successor is handed the request.
func TestHoldingLeaderRecordsNoPull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, tr, l := heldLogAs(t, true, false)
		l.mu.Lock()
		l.transferring = true
		l.mu.Unlock()
		c.Signal()
		synctest.Wait()
		tr.pull(t, "inbox.fetch", `{"batch":5,"expires":30000000000}`)
		synctest.Wait()
		if got := proposedPulls(l); len(got) != 0 {
			t.Fatalf("recorded %d pull requests while holding for a transfer", len(got))
		}
	})
}

// No pull request is recorded while a replica's server runs a build
// that does not decode the operation (a rolling upgrade): its replica
// would be fenced by the first entry holding one.
func TestNoPullRecordedForAnOldPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, tr, l := heldLogAs(t, true, false)
		l.mu.Lock()
		l.oldPeer = true
		l.mu.Unlock()
		tr.pull(t, "inbox.fetch", `{"batch":5,"expires":30000000000}`)
		synctest.Wait()
		if got := proposedPulls(l); len(got) != 0 {
			t.Fatalf("recorded %d pull requests with a peer of an earlier build", len(got))
		}
		l.mu.Lock()
		l.oldPeer = false // upgraded
		l.mu.Unlock()
		tr.pull(t, "inbox.fetch", `{"batch":5,"expires":30000000000}`)
		synctest.Wait()
		if got := proposedPulls(l); len(got) != 1 {
			t.Fatalf("recorded %d pull requests once every peer upgraded, want 1", len(got))
		}
	})
}
