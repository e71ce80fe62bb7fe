package consumer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
)

// The Deliverer's tests drive it with a time they set by hand: no
// goroutine, no sleep. A memory store is the stream, recorder the
// network.

// sent is one message the Deliverer sent.
type sent struct {
	route, subject, reply string
	hdr                   string
	data                  string
}

// recorder is an Output that records what is sent; subjects in
// interest have a listener.
type recorder struct {
	msgs     []sent
	interest map[string]bool
}

func (r *recorder) Publish(subject, reply string, hdr, data []byte) bool {
	r.msgs = append(r.msgs, sent{route: subject, subject: subject, reply: reply, hdr: string(hdr), data: string(data)})
	return true
}

func (r *recorder) PublishAs(route, subject, reply string, hdr, data []byte) bool {
	r.msgs = append(r.msgs, sent{route: route, subject: subject, reply: reply, hdr: string(hdr), data: string(data)})
	return true
}

func (r *recorder) HasInterest(subject string) bool { return r.interest[subject] }

// take returns and forgets what was sent.
func (r *recorder) take() []sent {
	m := r.msgs
	r.msgs = nil
	return m
}

// direct applies operations at once, as the runtime's local log does.
type direct struct {
	st  **State
	out Outcome
	ops []Op
}

func (d *direct) Commit(op Op) *Outcome {
	d.ops = append(d.ops, op)
	(*d.st).ApplyOp(op, &d.out)
	return &d.out
}

// newDeliverer returns a Deliverer of consumer C of stream S with cfg
// (defaults applied) over a store holding n messages on "s.<i>", at
// position, created at t0.
func newDeliverer(t *testing.T, cfg Config, n int) (*Deliverer, *recorder, store.Store) {
	t.Helper()
	ms := memstore.New(store.Config{})
	for i := range n {
		if _, err := ms.Append(store.Msg{Subject: fmt.Sprintf("s.%d", i+1), Data: []byte("x"), Time: t0 + int64(i)*sec}); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = 30 * time.Second
	}
	out := &recorder{interest: map[string]bool{}}
	lg := &direct{}
	d := NewDeliverer("S", "C", cfg, time.Unix(0, t0), ms, out, lg, t.Logf)
	lg.st = &d.st
	d.Position()
	return d, out, ms
}

func at(ns int64) time.Time { return time.Unix(0, ns) }

// A pull request gets up to its batch of messages, each with the ack
// reply subject of ADR-15, and then leaves the queue.
func TestDelivererPullBatch(t *testing.T) {
	d, out, ms := newDeliverer(t, Config{AckPolicy: AckExplicit}, 3)
	out.interest["_INBOX.1"] = true
	d.AddPull("_INBOX.1", []byte(`{"batch":2}`), at(t0), ms.State(false).LastSeq)
	d.Deliver(at(t0), ms.State(false).LastSeq)
	got := out.take()
	if len(got) != 2 || got[0].subject != "s.1" || got[1].subject != "s.2" {
		t.Fatalf("sent %+v, want s.1 and s.2", got)
	}
	if want := fmt.Sprintf("$JS.ACK.S.C.1.1.1.%d.2", t0); got[0].reply != want {
		t.Errorf("ack subject %q, want %q", got[0].reply, want)
	}
	if d.NumWaiting() != 0 {
		t.Errorf("%d requests waiting after the batch was filled", d.NumWaiting())
	}
	if p := d.NumPending(ms.State(false).LastSeq); p != 1 {
		t.Errorf("num_pending %d, want 1", p)
	}
}

// A request with expires ends with 408 at its deadline, not before; a
// no_wait request without messages ends at once with 404; one past its
// budget of bytes gets 409.
func TestDelivererPullStatuses(t *testing.T) {
	d, out, _ := newDeliverer(t, Config{AckPolicy: AckExplicit}, 0)
	out.interest["_INBOX.e"], out.interest["_INBOX.n"] = true, true
	d.AddPull("_INBOX.e", []byte(`{"batch":5,"expires":2000000000}`), at(t0), 0)
	d.AddPull("_INBOX.n", []byte(`{"batch":1,"no_wait":true}`), at(t0), 0)
	d.Deliver(at(t0), 0)
	if got := out.take(); len(got) != 1 || got[0].route != "_INBOX.n" || got[0].hdr != "NATS/1.0 404 No Messages\r\n\r\n" {
		t.Fatalf("after the first round: %+v, want the no_wait request's 404", got)
	}
	if w := d.NextWake(at(t0)); !w.Equal(at(t0 + 2*sec)) {
		t.Errorf("next wake %v, want the expiry 2s on", w)
	}
	d.ExpirePulls(at(t0 + 2*sec - 1))
	if got := out.take(); len(got) != 0 {
		t.Fatalf("before the expiry: %+v", got)
	}
	d.ExpirePulls(at(t0 + 2*sec))
	want := "NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 5\r\nNats-Pending-Bytes: 0\r\n\r\n"
	if got := out.take(); len(got) != 1 || got[0].hdr != want {
		t.Fatalf("at the expiry: %+v, want %q", got, want)
	}

	d, out, ms := newDeliverer(t, Config{AckPolicy: AckExplicit}, 2)
	out.interest["_INBOX.b"] = true
	d.AddPull("_INBOX.b", []byte(`{"batch":5,"max_bytes":10}`), at(t0), ms.State(false).LastSeq)
	d.Deliver(at(t0), ms.State(false).LastSeq)
	want = "NATS/1.0 409 Message Size Exceeds MaxBytes\r\nNats-Pending-Messages: 5\r\nNats-Pending-Bytes: 10\r\n\r\n"
	if got := out.take(); len(got) != 1 || got[0].hdr != want {
		t.Fatalf("over max_bytes: %+v, want %q", got, want)
	}
}

// A pull request with idle_heartbeat gets a heartbeat each time the
// interval passes without a delivery; a requester that left is dropped.
func TestDelivererPullHeartbeat(t *testing.T) {
	d, out, _ := newDeliverer(t, Config{AckPolicy: AckExplicit}, 0)
	out.interest["_INBOX.h"] = true
	d.AddPull("_INBOX.h", []byte(`{"batch":1,"expires":10000000000,"idle_heartbeat":1000000000}`), at(t0), 0)
	d.ExpirePulls(at(t0 + sec/2))
	if got := out.take(); len(got) != 0 {
		t.Fatalf("heartbeat too early: %+v", got)
	}
	d.ExpirePulls(at(t0 + sec))
	want := "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\nNats-Last-Stream: 0\r\n\r\n"
	if got := out.take(); len(got) != 1 || got[0].hdr != want {
		t.Fatalf("heartbeat: %+v, want %q", got, want)
	}
	delete(out.interest, "_INBOX.h")
	d.ExpirePulls(at(t0 + 2*sec))
	if got := out.take(); len(got) != 0 || d.NumWaiting() != 0 {
		t.Fatalf("a gone requester: sent %+v, %d waiting", got, d.NumWaiting())
	}
}

// The pull queue's refusals: a push consumer, max_waiting, the request
// limits, a bad body.
func TestDelivererPullRefusals(t *testing.T) {
	push, out, _ := newDeliverer(t, Config{DeliverSubject: "d", AckPolicy: AckExplicit}, 0)
	push.AddPull("_INBOX.p", nil, at(t0), 0)
	if got := out.take(); len(got) != 1 || got[0].hdr != "NATS/1.0 409 Consumer is push based\r\n\r\n" {
		t.Fatalf("push: %+v", got)
	}
	d, out, _ := newDeliverer(t, Config{AckPolicy: AckExplicit, MaxWaiting: 1, MaxRequestBatch: 3}, 0)
	d.AddPull("_INBOX.1", nil, at(t0), 0)
	d.AddPull("_INBOX.2", nil, at(t0), 0)
	d.AddPull("_INBOX.3", []byte("5"), at(t0), 0)
	d.AddPull("_INBOX.4", []byte(`{"batch":"x"}`), at(t0), 0)
	var hdrs []string
	for _, m := range out.take() {
		hdrs = append(hdrs, m.route+" "+strings.TrimSpace(m.hdr))
	}
	want := []string{
		"_INBOX.2 NATS/1.0 409 Exceeded MaxWaiting",
		"_INBOX.3 NATS/1.0 409 Exceeded MaxRequestBatch of 3",
		"_INBOX.4 NATS/1.0 400 Bad Request - json: cannot unmarshal string into Go struct field JSApiConsumerGetNextRequest.batch of type int",
	}
	if strings.Join(hdrs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("refusals:\n%s\nwant\n%s", strings.Join(hdrs, "\n"), strings.Join(want, "\n"))
	}
}

// Push flow control: once half of the 2 MiB window is outstanding a
// flow control request goes out; its reply doubles the window; until
// then a heartbeat names it as stalled.
func TestDelivererFlowControl(t *testing.T) {
	d, out, ms := newDeliverer(t, Config{DeliverSubject: "d", AckPolicy: AckNone, FlowControl: true, Heartbeat: 5 * time.Second}, 0)
	out.interest["d"] = true
	big := strings.Repeat("x", 200<<10)
	for i := range 8 {
		if _, err := ms.Append(store.Msg{Subject: "s", Data: []byte(big), Time: t0 + int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	d.Deliver(at(t0), ms.State(false).LastSeq)
	var fc string
	for _, m := range out.take() {
		if m.hdr == "NATS/1.0 100 FlowControl Request\r\n\r\n" {
			fc = m.reply
		}
	}
	if !strings.HasPrefix(fc, "$JS.FC.S.C.") {
		t.Fatalf("no flow control request after 8 × 200 KiB (reply %q)", fc)
	}
	d.Heartbeats(at(t0 + 5*sec))
	if got := out.take(); len(got) != 1 || !strings.Contains(got[0].hdr, "Nats-Consumer-Stalled: "+fc) {
		t.Fatalf("heartbeat %+v, want it to name %s as stalled", got, fc)
	}
	if _, ok := d.FlowControlReply(fc, nil); ok {
		t.Fatal("ack none: a flow control reply acknowledged")
	}
	if d.fc.window != 4<<20 || d.fc.reply != "" {
		t.Fatalf("after the reply: window %d, request %q", d.fc.window, d.fc.reply)
	}
	if acked := d.TakeAcked(); len(acked) != 8 {
		t.Errorf("ack none: %d deliveries counted acknowledged, want 8", len(acked))
	}
}

// replay_policy original spaces deliveries as the messages were stored.
func TestDelivererReplayOriginal(t *testing.T) {
	d, out, ms := newDeliverer(t, Config{DeliverSubject: "d", AckPolicy: AckNone, ReplayPolicy: ReplayOriginal}, 3) // stored a second apart
	out.interest["d"] = true
	now := t0 + 100*sec
	d.Deliver(at(now), ms.State(false).LastSeq)
	if got := out.take(); len(got) != 1 {
		t.Fatalf("first round sent %d, want 1", len(got))
	}
	d.Deliver(at(now+sec-1), ms.State(false).LastSeq)
	if got := out.take(); len(got) != 0 {
		t.Fatalf("second message %d ns early", 1)
	}
	d.Deliver(at(now+sec), ms.State(false).LastSeq)
	if got := out.take(); len(got) != 1 || got[0].subject != "s.2" {
		t.Fatalf("at +1s: %+v, want s.2", got)
	}
}

// A paused consumer delivers nothing until the pause ends; NextWake
// names its end.
func TestDelivererPause(t *testing.T) {
	d, out, ms := newDeliverer(t, Config{DeliverSubject: "d", AckPolicy: AckExplicit}, 1)
	out.interest["d"] = true
	d.log.Commit(&Pause{Until: t0 + 10*sec})
	d.Deliver(at(t0), ms.State(false).LastSeq)
	if got := out.take(); len(got) != 0 {
		t.Fatalf("paused consumer sent %+v", got)
	}
	if w := d.NextWake(at(t0)); !w.Equal(at(t0 + 10*sec)) {
		t.Errorf("next wake %v, want the pause's end", w)
	}
	d.Deliver(at(t0+10*sec), ms.State(false).LastSeq)
	if got := out.take(); len(got) != 1 {
		t.Fatalf("after the pause: %+v", got)
	}
}

// Ack wait expiry, through the operations: an unacknowledged delivery
// is redelivered after ack_wait, with its delivery count.
func TestDelivererRedelivers(t *testing.T) {
	d, out, ms := newDeliverer(t, Config{DeliverSubject: "d", AckPolicy: AckExplicit, AckWait: 2 * time.Second}, 1)
	out.interest["d"] = true
	d.Deliver(at(t0), ms.State(false).LastSeq)
	out.take()
	if w := d.NextWake(at(t0)); !w.Equal(at(t0 + 2*sec)) {
		t.Fatalf("next wake %v, want the ack deadline", w)
	}
	d.log.Commit(&ExpireAcks{Time: t0 + 2*sec})
	d.Deliver(at(t0+2*sec), ms.State(false).LastSeq)
	got := out.take()
	if len(got) != 1 || !strings.HasPrefix(got[0].reply, "$JS.ACK.S.C.2.1.2.") {
		t.Fatalf("redelivery %+v, want delivery count 2", got)
	}
}

// inactive_threshold: a pull consumer with nothing waiting and nothing
// pending is inactive once the threshold passed since its last activity.
func TestDelivererInactive(t *testing.T) {
	d, _, _ := newDeliverer(t, Config{AckPolicy: AckExplicit, InactiveThreshold: 5 * time.Second}, 0)
	if d.Inactive(at(t0 + 5*sec - 1)) {
		t.Fatal("inactive before the threshold")
	}
	d.AddPull("", nil, at(t0+3*sec), 0) // activity, even without a reply
	if d.Inactive(at(t0 + 7*sec)) {
		t.Fatal("inactive 4s after a pull request")
	}
	if !d.Inactive(at(t0 + 8*sec)) {
		t.Fatal("not inactive 5s after the last pull request")
	}
}

// A no_wait request that the requests already waiting would leave
// nothing for gets 408 Requests Pending (nats-server v2.15.2
// processNextMsgRequest); with no request waiting it is served.
func TestDelivererRequestsPending(t *testing.T) {
	d, out, ms := newDeliverer(t, Config{AckPolicy: AckExplicit}, 2)
	end := ms.State(false).LastSeq
	out.interest["_INBOX.w"], out.interest["_INBOX.n"] = true, true
	d.AddPull("_INBOX.w", []byte(`{"batch":5,"expires":10000000000}`), at(t0), end)
	d.AddPull("_INBOX.n", []byte(`{"batch":1,"no_wait":true}`), at(t0), end)
	if got := out.take(); len(got) != 1 || got[0].route != "_INBOX.n" || got[0].hdr != "NATS/1.0 408 Requests Pending\r\n\r\n" {
		t.Fatalf("no_wait behind a request for 5 of 2 messages: %+v, want 408 Requests Pending", got)
	}
	d2, out2, ms2 := newDeliverer(t, Config{AckPolicy: AckExplicit}, 2)
	out2.interest["_INBOX.n"] = true
	d2.AddPull("_INBOX.n", []byte(`{"batch":1,"no_wait":true}`), at(t0), ms2.State(false).LastSeq)
	d2.Deliver(at(t0), ms2.State(false).LastSeq)
	if got := out2.take(); len(got) != 1 || got[0].subject != "s.1" {
		t.Fatalf("a lone no_wait request: %+v, want s.1", got)
	}
}

// At shutdown (EndPulls without a status) each waiting request gets 409
// Server Shutdown with what it was still owed; a deletion's status goes
// as it is.
func TestDelivererEndPulls(t *testing.T) {
	d, out, _ := newDeliverer(t, Config{AckPolicy: AckExplicit}, 0)
	out.interest["_INBOX.a"] = true
	d.AddPull("_INBOX.a", []byte(`{"batch":3,"max_bytes":100,"expires":10000000000}`), at(t0), 0)
	d.EndPulls(nil)
	want := "NATS/1.0 409 Server Shutdown\r\nNats-Pending-Messages: 3\r\nNats-Pending-Bytes: 100\r\n\r\n"
	if got := out.take(); len(got) != 1 || got[0].hdr != want {
		t.Fatalf("shutdown: %+v, want %q", got, want)
	}
	d.AddPull("_INBOX.a", nil, at(t0), 0)
	d.EndPulls(StatusDeleted)
	if got := out.take(); len(got) != 1 || got[0].hdr != string(StatusDeleted) {
		t.Fatalf("deletion: %+v, want %q", got, StatusDeleted)
	}
	if d.NumWaiting() != 0 {
		t.Fatal("requests left waiting")
	}
}

// A change of leader ends the waiting requests with one 409 Leadership
// Change per reply subject (EndPullsOnce): nats.go's Consume sends all
// its requests with one and asks again on each 409.
func TestDelivererEndPullsOnce(t *testing.T) {
	d, out, _ := newDeliverer(t, Config{AckPolicy: AckExplicit}, 0)
	out.interest["_INBOX.a"], out.interest["_INBOX.b"] = true, true
	for _, r := range []string{"_INBOX.a", "_INBOX.a", "_INBOX.b", "_INBOX.a"} {
		d.AddPull(r, []byte(`{"batch":3,"expires":10000000000}`), at(t0), 0)
	}
	status := []byte("NATS/1.0 409 Leadership Change\r\n\r\n")
	d.EndPullsOnce(status)
	got := out.take()
	if len(got) != 2 || got[0].subject != "_INBOX.a" || got[1].subject != "_INBOX.b" || got[0].hdr != string(status) {
		t.Fatalf("ended with %+v, want one 409 to each of _INBOX.a and _INBOX.b", got)
	}
	if d.NumWaiting() != 0 {
		t.Fatal("requests left waiting")
	}
}

// rate_limit_bps paces a push consumer by the clock passed in: a bucket
// of 8 bytes lets two 4-byte messages ("s.N" and "x") go at once; at
// 8,000 bits (1,000 bytes) a second the next goes 4 ms later, and
// NextWake names that time.
func TestDelivererRateLimit(t *testing.T) {
	d, out, ms := newDeliverer(t, Config{DeliverSubject: "d", AckPolicy: AckNone, RateLimit: 8000}, 5)
	d.SetRateBurst(8)
	out.interest["d"] = true
	end := ms.State(false).LastSeq
	d.Deliver(at(t0), end)
	if got := out.take(); len(got) != 2 {
		t.Fatalf("first burst: %d sent, want 2", len(got))
	}
	wake := d.NextWake(at(t0))
	if wake.Before(at(t0+4e6)) || wake.After(at(t0+5e6)) {
		t.Fatalf("next wake %v after t0, want about 4ms", wake.Sub(at(t0)))
	}
	d.Deliver(at(t0+3e6), end)
	if got := out.take(); len(got) != 0 {
		t.Fatalf("3ms on: %d sent, want none", len(got))
	}
	d.Deliver(wake, end)
	if got := out.take(); len(got) != 1 || got[0].subject != "s.3" {
		t.Fatalf("at the wake: %+v, want s.3", got)
	}
}

// A Reset operation restarts deliveries where it says; the Deliverer
// forgets its cached position (Reset) and delivers from there again.
func TestDelivererReset(t *testing.T) {
	d, out, ms := newDeliverer(t, Config{DeliverSubject: "d", AckPolicy: AckExplicit}, 3)
	out.interest["d"] = true
	end := ms.State(false).LastSeq
	d.Deliver(at(t0), end)
	if got := out.take(); len(got) != 3 {
		t.Fatalf("sent %d, want 3", len(got))
	}
	d.log.Commit(&Reset{Stream: 2})
	d.Reset()
	if n := d.NumPending(end); n != 2 {
		t.Fatalf("num_pending after a reset to 2: %d, want 2", n)
	}
	d.Deliver(at(t0+sec), end)
	got := out.take()
	if len(got) != 2 || got[0].subject != "s.2" || !strings.HasPrefix(got[0].reply, "$JS.ACK.S.C.1.2.1.") {
		t.Fatalf("after the reset: %+v, want s.2 and s.3, consumer sequence from 1", got)
	}
	if d.st.NumAckPending() != 2 {
		t.Fatalf("%d pending, want the 2 new deliveries only", d.st.NumAckPending())
	}
}

// With ack policy flow_control (ADR-60) the consumer asks for flow
// control once max_ack_pending deliveries are outstanding, and with a
// heartbeat while anything is pending; the reply's Nats-Last-Stream and
// Nats-Last-Consumer are the acknowledgement (nats-server v2.15.2
// needFlowControl, processFlowControl).
func TestDelivererAckFlowControl(t *testing.T) {
	d, out, ms := newDeliverer(t, Config{DeliverSubject: "d", AckPolicy: AckFlowControl, FlowControl: true, Heartbeat: time.Second, MaxAckPending: 3, MaxDeliver: -1}, 5)
	out.interest["d"] = true
	d.Deliver(at(t0+10*sec), ms.State(false).LastSeq)
	var data int
	var fc string
	for _, m := range out.take() {
		switch {
		case m.hdr == "NATS/1.0 100 FlowControl Request\r\n\r\n":
			fc = m.reply
		case strings.HasPrefix(m.subject, "s."):
			data++
		}
	}
	if data != 3 || fc == "" {
		t.Fatalf("delivered %d with flow control request %q, want 3 and a request at max_ack_pending", data, fc)
	}
	if _, ok := d.FlowControlReply("$JS.FC.S.C.other", []byte("NATS/1.0\r\nNats-Last-Consumer: 3\r\nNats-Last-Stream: 3\r\n\r\n")); ok {
		t.Fatal("a reply to another request acknowledged")
	}
	ack, ok := d.FlowControlReply(fc, []byte("NATS/1.0\r\nNats-Last-Consumer: 2\r\nNats-Last-Stream: 2\r\n\r\n"))
	if !ok || ack.Stream != 2 || ack.Consumer != 2 {
		t.Fatalf("reply acknowledged %+v %v, want stream 2 consumer 2", ack, ok)
	}
	d.log.Commit(&Ack{Stream: ack.Stream, Consumer: ack.Consumer})
	// One still pending: the next heartbeat asks again.
	d.Heartbeats(at(t0 + 12*sec))
	var again string
	for _, m := range out.take() {
		if m.hdr == "NATS/1.0 100 FlowControl Request\r\n\r\n" {
			again = m.reply
		}
	}
	if again == "" || again == fc {
		t.Fatalf("heartbeat with a pending delivery sent no new flow control request (%q)", again)
	}
	if _, ok := d.FlowControlReply(again, nil); ok {
		t.Fatal("a reply without a header acknowledged")
	}
}

// DeliverUpTo hands out at most n messages and then reports more,
// without ending a no_wait request it could not serve for want of room
// (as at maxPerRound): with room again, the request gets its messages;
// Deliver without a bound ends it once the messages ran out.
func TestDelivererDeliverUpTo(t *testing.T) {
	d, out, ms := newDeliverer(t, Config{AckPolicy: AckExplicit}, 5)
	end := ms.State(false).LastSeq
	out.interest["_INBOX.n"] = true
	d.AddPull("_INBOX.n", []byte(`{"batch":10,"no_wait":true}`), at(t0), end)
	if !d.DeliverUpTo(at(t0), end, 0) || len(out.take()) != 0 || d.NumWaiting() != 1 {
		t.Fatal("with no room: sent something, did not report more, or ended the no_wait request")
	}
	if !d.DeliverUpTo(at(t0), end, 3) {
		t.Fatal("stopped at the bound without reporting more")
	}
	if got := out.take(); len(got) != 3 || d.NumWaiting() != 1 {
		t.Fatalf("with room for 3: sent %d, %d requests waiting", len(got), d.NumWaiting())
	}
	if d.DeliverUpTo(at(t0), end, 1000) {
		t.Fatal("reported more with everything delivered")
	}
	got := out.take()
	if len(got) != 3 || got[2].hdr != "NATS/1.0 404 No Messages\r\n\r\n" || d.NumWaiting() != 0 {
		t.Fatalf("with room again: %+v, want the last 2 messages and the 404", got)
	}
}
