package consumer

import (
	"fmt"
	"testing"
	"time"
)

// Priority groups (ADR-42) on the Deliverer, with the clock set by hand:
// the pin's priority_timeout runs on it, not on a timer.

func pinnedDeliverer(t *testing.T, n int) (*Deliverer, *recorder) {
	t.Helper()
	d, out, _ := newDeliverer(t, Config{AckPolicy: AckExplicit, PriorityPolicy: PriorityPinnedClient, PriorityGroups: []string{"jobs"}, PinnedTTL: 10 * time.Second}, n)
	ids := 0
	d.SetPinIDs(func() string { ids++; return fmt.Sprintf("PIN%d", ids) })
	return d, out
}

// The first request served is pinned: every delivery to it carries
// Nats-Pin-Id (after a headers_only Nats-Msg-Size), requests without the
// id wait, the pin's own requests renew it, and it ends after
// priority_timeout without one, with an unpin event.
func TestPinnedClient(t *testing.T) {
	d, out := pinnedDeliverer(t, 4)
	for _, r := range []string{"_A", "_B"} {
		out.interest[r] = true
	}
	d.AddPull("_A", []byte(`{"batch":2,"group":"jobs"}`), at(t0), 4)
	d.AddPull("_B", []byte(`{"batch":2,"group":"jobs"}`), at(t0), 4)
	d.Deliver(at(t0), 4)
	got := out.take()
	if len(got) != 2 || got[0].route != "_A" || got[1].route != "_A" {
		t.Fatalf("deliveries %+v, want two to the pinned _A", got)
	}
	if got[0].hdr != "NATS/1.0\r\nNats-Pin-Id: PIN1\r\n\r\n" {
		t.Errorf("header %q", got[0].hdr)
	}
	if ev := d.TakePinEvents(); len(ev) != 1 || !ev[0].Pinned || ev[0].ID != "PIN1" || ev[0].Group != "jobs" {
		t.Errorf("events %+v", ev)
	}
	if pg := d.PriorityGroups(); len(pg) != 1 || pg[0].PinnedClientID != "PIN1" || !pg[0].PinnedTS.Equal(at(t0)) {
		t.Errorf("priority groups %+v", pg)
	}
	// _B waits; the pinned client's next request (with the id) renews
	// the pin at t0+8s and is served.
	d.AddPull("_A", []byte(`{"batch":1,"group":"jobs","id":"PIN1"}`), at(t0+8*sec), 4)
	d.AddPull("_C", []byte(`{"batch":1,"group":"jobs","id":"OLD"}`), at(t0+8*sec), 4)
	d.Deliver(at(t0+8*sec), 4)
	got = out.take()
	if len(got) != 2 || got[0].route != "_C" || got[0].hdr != "NATS/1.0 423 Nats-Pin-Id mismatch\r\n\r\n" || got[1].route != "_A" {
		t.Fatalf("after the renewal %+v", got)
	}
	if w := d.NextWake(at(t0 + 8*sec)); !w.Equal(at(t0 + 18*sec)) {
		t.Errorf("next wake %v, want the pin's end at t0+18s", w)
	}
	d.ExpirePulls(at(t0 + 17*sec))
	if ev := d.TakePinEvents(); len(ev) != 0 {
		t.Fatalf("pin ended early: %+v", ev)
	}
	d.ExpirePulls(at(t0 + 18*sec))
	if ev := d.TakePinEvents(); len(ev) != 1 || ev[0].Pinned || ev[0].Reason != "timeout" {
		t.Fatalf("events at the timeout %+v", ev)
	}
	// _B, still waiting without an id, is pinned next.
	d.Deliver(at(t0+18*sec), 4)
	got = out.take()
	if len(got) != 1 || got[0].route != "_B" || got[0].hdr != "NATS/1.0\r\nNats-Pin-Id: PIN2\r\n\r\n" {
		t.Fatalf("after the timeout %+v", got)
	}
}

// A request with an old id gets 423 Nats-Wrong-Pin-Id when a new pin is
// chosen; UNPIN of an unknown group is refused, of the group advises
// "admin".
func TestPinnedWrongID(t *testing.T) {
	d, out := pinnedDeliverer(t, 2)
	out.interest["_OLD"], out.interest["_NEW"] = true, true
	d.AddPull("_OLD", []byte(`{"batch":1,"group":"jobs","id":"GONE"}`), at(t0), 2)
	d.AddPull("_NEW", []byte(`{"batch":1,"group":"jobs"}`), at(t0), 2)
	d.Deliver(at(t0), 2)
	got := out.take()
	if len(got) != 2 || got[0].hdr != "NATS/1.0 423 Nats-Wrong-Pin-Id\r\nNats-Pending-Messages: 1\r\nNats-Pending-Bytes: 0\r\n\r\n" || got[1].route != "_NEW" {
		t.Fatalf("sent %+v", got)
	}
	if d.Unpin("other") {
		t.Error("UNPIN of a group the consumer lacks")
	}
	d.TakePinEvents()
	if !d.Unpin("jobs") {
		t.Fatal("UNPIN refused")
	}
	if ev := d.TakePinEvents(); len(ev) != 1 || ev[0].Reason != "admin" {
		t.Errorf("events %+v", ev)
	}
	if pg := d.PriorityGroups(); pg[0].PinnedClientID != "" || !pg[0].PinnedTS.IsZero() {
		t.Errorf("after UNPIN %+v", pg)
	}
}

// Prioritized: requests are served by priority, then arrival; a request
// that wants more goes behind those of its priority.
func TestPrioritized(t *testing.T) {
	d, out, _ := newDeliverer(t, Config{AckPolicy: AckExplicit, PriorityPolicy: PriorityPrioritized, PriorityGroups: []string{"jobs"}}, 5)
	for _, r := range []string{"_P5", "_P1a", "_P1b", "_P0"} {
		out.interest[r] = true
	}
	d.AddPull("_P5", []byte(`{"batch":5,"group":"jobs","priority":5}`), at(t0), 5)
	d.AddPull("_P1a", []byte(`{"batch":2,"group":"jobs","priority":1}`), at(t0), 5)
	d.AddPull("_P1b", []byte(`{"batch":1,"group":"jobs","priority":1}`), at(t0), 5)
	d.AddPull("_P0", []byte(`{"batch":1,"group":"jobs"}`), at(t0), 5)
	d.Deliver(at(t0), 5)
	var routes []string
	for _, m := range out.take() {
		routes = append(routes, m.route)
	}
	if got := fmt.Sprint(routes); got != "[_P0 _P1a _P1b _P1a _P5]" {
		t.Errorf("served %s", got)
	}
}

// Overflow: a request with thresholds is passed over while neither is
// met; pull requests share messages one by one.
func TestOverflowAndRoundRobin(t *testing.T) {
	d, out, _ := newDeliverer(t, Config{AckPolicy: AckExplicit, PriorityPolicy: PriorityOverflow, PriorityGroups: []string{"jobs"}}, 6)
	for _, r := range []string{"_FAR", "_N1", "_N2", "_ACK"} {
		out.interest[r] = true
	}
	d.AddPull("_FAR", []byte(`{"batch":9,"group":"jobs","min_pending":10}`), at(t0), 6)
	d.AddPull("_N1", []byte(`{"batch":2,"group":"jobs"}`), at(t0), 6)
	d.AddPull("_N2", []byte(`{"batch":2,"group":"jobs"}`), at(t0), 6)
	d.Deliver(at(t0), 6)
	routes := func() string {
		var r []string
		for _, m := range out.take() {
			r = append(r, m.route)
		}
		return fmt.Sprint(r)
	}
	if got := routes(); got != "[_N1 _N2 _N1 _N2]" {
		t.Errorf("served %s", got)
	}
	// 4 delivered and none acknowledged: min_ack_pending 4 is met, the
	// far request's min_pending 10 is not.
	d.AddPull("_ACK", []byte(`{"batch":1,"group":"jobs","min_ack_pending":4}`), at(t0), 6)
	d.Deliver(at(t0), 6)
	if got := routes(); got != "[_ACK]" {
		t.Errorf("served %s", got)
	}
	if d.NumWaiting() != 1 {
		t.Errorf("%d waiting, want the far request", d.NumWaiting())
	}
}
