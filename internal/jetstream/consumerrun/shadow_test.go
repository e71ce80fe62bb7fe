package consumerrun

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
)

// A follower replica keeps the reply subjects of the pull requests it
// sees, and once it leads sends each whose request has not expired a 409
// Leadership Change, on which the client asks again: before, the
// requests that waited on a leader that died died with it, and a
// Consume through another server heard nothing for 5 s (its heartbeats
// missing), where nats-server's clients went on within 33 ms. A
// request that expired, a no_wait one and a leader's own are not
// answered so; a reply subject seen twice gets one 409.
func TestFollowerEndsPullsItSawWhenItLeads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &heldLog{}
		c, tr := startPullConsumerAs(t, 10, func(a streamrun.Applier[consumer.Op]) streamrun.Log[consumer.Op] {
			l.a = a
			return l
		}, false)
		tr.pull(t, "inbox.consume", `{"batch":5,"expires":30000000000}`)
		tr.pull(t, "inbox.consume", `{"batch":5,"expires":30000000000}`)
		tr.pull(t, "inbox.short", `{"batch":1,"expires":1000000000}`)
		tr.pull(t, "inbox.nowait", `{"batch":1,"no_wait":true}`)
		tr.pull(t, "inbox.plain", `1`)
		time.Sleep(2 * time.Second) // inbox.short's request expired
		c.SetLeading(true)
		synctest.Wait()
		want := map[string]int{"inbox.consume": 1, "inbox.plain": 1}
		for _, inbox := range []string{"inbox.consume", "inbox.short", "inbox.nowait", "inbox.plain"} {
			_, st := tr.got(inbox)
			n := 0
			for _, s := range st {
				if s == "NATS/1.0 409 Leadership Change" {
					n++
				}
			}
			if n != want[inbox] {
				t.Errorf("%s: %d 409 Leadership Change (statuses %q), want %d", inbox, n, st, want[inbox])
			}
		}
		// Leading, it serves pull requests and keeps none of them.
		tr.pull(t, "inbox.lead", `{"batch":1,"expires":30000000000}`)
		synctest.Wait()
		if n, _ := tr.got("inbox.lead"); n != 1 {
			t.Fatalf("the leader delivered %d messages to a pull of 1", n)
		}
		c.shadowMu.Lock()
		kept := len(c.shadowPulls)
		c.shadowMu.Unlock()
		if kept != 0 {
			t.Fatalf("the leader keeps %d reply subjects", kept)
		}
	})
}

// A follower handed the leadership by a live predecessor (a transfer, a
// step-down) sends no 409s for the requests it saw: the predecessor ends
// those that waited on it once the successor serves, and forwards those
// that reached it meanwhile, which are then being served here; a 409
// from here too ended Fetches in progress after graceful step-downs.
func TestHandedOverFollowerEndsNoPulls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &heldLog{handedOver: true}
		c, tr := startPullConsumerAs(t, 10, func(a streamrun.Applier[consumer.Op]) streamrun.Log[consumer.Op] {
			l.a = a
			return l
		}, false)
		tr.pull(t, "inbox.fetch", `{"batch":5,"expires":30000000000}`)
		c.SetLeading(true)
		synctest.Wait()
		if _, st := tr.got("inbox.fetch"); len(st) != 0 {
			t.Fatalf("statuses %q to a request seen as a follower of a predecessor that handed over", st)
		}
		c.shadowMu.Lock()
		kept := len(c.shadowPulls)
		c.shadowMu.Unlock()
		if kept != 0 {
			t.Fatalf("the leader keeps %d reply subjects", kept)
		}
	})
}
