package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Priority groups of pull consumers (ADR-42; nats-server v2.15.2
// priority_policy overflow, pinned_client, prioritized), through nats.go
// and raw pull requests whose status frames are compared byte for byte.

// pgPull sends a raw pull request body to consumer c of stream s and
// returns the subscription its answers arrive on.
func pgPull(t *testing.T, nc *nats.Conn, s, c, body string) *nats.Subscription {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+s+"."+c, inbox, []byte(body)); err != nil {
		t.Fatal(err)
	}
	return sub
}

// pgNext returns the next message on sub: a delivery's data and its
// Nats-Pin-Id, or a status frame as "<code> <description>".
func pgNext(t *testing.T, sub *nats.Subscription) (string, string) {
	t.Helper()
	m, err := sub.NextMsg(cxWait)
	if err != nil {
		t.Fatalf("nothing on %s: %v", sub.Subject, err)
	}
	if st := m.Header.Get("Status"); st != "" {
		return st + " " + m.Header.Get("Description"), ""
	}
	return string(m.Data), m.Header.Get("Nats-Pin-Id")
}

// pgNothing checks that sub got nothing (the request waits).
func pgNothing(t *testing.T, nc *nats.Conn, sub *nats.Subscription) {
	t.Helper()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := sub.Pending(); n != 0 {
		m, _ := sub.NextMsg(0)
		t.Fatalf("%s got %v %q, want nothing yet", sub.Subject, m.Header, m.Data)
	}
}

func TestPriorityRequestErrors(t *testing.T) {
	nc, js := jsConnect(t, startJS(t))
	createStream(t, js, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.>"}})
	cxCreate(t, js, "P", jetstream.ConsumerConfig{Durable: "PLAIN", AckPolicy: jetstream.AckExplicitPolicy})
	cxCreate(t, js, "P", jetstream.ConsumerConfig{Durable: "OVER", AckPolicy: jetstream.AckExplicitPolicy, PriorityPolicy: jetstream.PriorityPolicyOverflow, PriorityGroups: []string{"jobs"}})
	cxCreate(t, js, "P", jetstream.ConsumerConfig{Durable: "PIN", AckPolicy: jetstream.AckExplicitPolicy, PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{"jobs"}})
	for _, tc := range []struct{ consumer, body, want string }{
		{"PLAIN", `{"batch":1,"min_pending":5}`, "400 Bad Request - Not a Overflow Priority consumer"},
		{"PLAIN", `{"batch":1,"id":"x"}`, "400 Bad Request - Not a Pinned Client Priority consumer"},
		{"PLAIN", `{"batch":1,"priority":10}`, "400 Bad Request - Priority must be between 0 and 9"},
		{"OVER", `{"batch":1,"id":"x","group":"jobs"}`, "400 Bad Request - Not a Pinned Client Priority consumer"},
		{"OVER", `{"batch":1,"priority":-1,"group":"jobs"}`, "400 Bad Request - Priority must be between 0 and 9"},
		{"OVER", `{"batch":1}`, "400 Bad Request - Priority Group missing"},
		{"OVER", `{"batch":1,"group":"other"}`, "400 Bad Request - Invalid Priority Group"},
		{"PIN", `{"batch":1,"group":"jobs","min_ack_pending":1}`, "400 Bad Request - Not a Overflow Priority consumer"},
		{"OVER", `{"batch":1,"group":"jobs","priority":"high"}`, "400 Bad Request - json: cannot unmarshal string into Go struct field JSApiConsumerGetNextRequest.PriorityGroup.priority of type int"},
	} {
		got, _ := pgNext(t, pgPull(t, nc, "P", tc.consumer, tc.body))
		if got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.consumer, tc.body, got, tc.want)
		}
	}
	// A body that is not JSON is no group request: the consumer serves it.
	jsPublish(t, js, "p.a", "one")
	if got, _ := pgNext(t, pgPull(t, nc, "P", "OVER", "1")); got != "one" {
		t.Errorf("plain pull of an overflow consumer: %q", got)
	}
}

// Overflow: a request with min_pending or min_ack_pending is served only
// while num_pending or num_ack_pending reaches it.
func TestPriorityOverflow(t *testing.T) {
	nc, js := jsConnect(t, startJS(t))
	createStream(t, js, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.>"}})
	c := cxCreate(t, js, "P", jetstream.ConsumerConfig{Durable: "OVER", AckPolicy: jetstream.AckExplicitPolicy, PriorityPolicy: jetstream.PriorityPolicyOverflow, PriorityGroups: []string{"jobs"}})
	cxPubN(t, js, "p.a", 3)
	far := pgPull(t, nc, "P", "OVER", `{"batch":5,"group":"jobs","min_pending":10,"expires":5000000000}`)
	// With 3 pending the far request waits; a nearer one without limits
	// takes a message, then one with min_ack_pending 1 is served.
	near, err := c.Fetch(1, jetstream.FetchPriorityGroup("jobs"), jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range near.Messages() {
		got = append(got, m)
	}
	if len(got) != 1 {
		t.Fatalf("request without limits got %d messages", len(got))
	}
	byAck, err := c.Fetch(1, jetstream.FetchPriorityGroup("jobs"), jetstream.FetchMinAckPending(1), jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range byAck.Messages() {
		n++
	}
	if n != 1 {
		t.Fatalf("request with min_ack_pending 1 (1 pending) got %d", n)
	}
	pgNothing(t, nc, far)
	cxPubN(t, js, "p.b", 10) // 11 pending now
	if got, _ := pgNext(t, far); got == "" || strings.HasPrefix(got, "4") {
		t.Fatalf("far request once 11 are pending: %q", got)
	}
}

// Pinned client: the first request is pinned and its deliveries carry
// Nats-Pin-Id; other requests wait, a wrong id is refused with 423; an
// UNPIN (or the priority_timeout) ends the pin with an advisory and the
// next request is pinned anew.
func TestPriorityPinnedClient(t *testing.T) {
	nc, js := jsConnect(t, startJS(t))
	s := createStream(t, js, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.>"}})
	c := cxCreate(t, js, "P", jetstream.ConsumerConfig{Durable: "PIN", AckPolicy: jetstream.AckExplicitPolicy, PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{"jobs"}, PinnedTTL: 2 * time.Second})
	if info := cxInfo(t, c); len(info.PriorityGroups) != 1 || info.PriorityGroups[0].Group != "jobs" || info.PriorityGroups[0].PinnedClientID != "" {
		t.Fatalf("priority_groups before a pin: %+v", info.PriorityGroups)
	}
	pinned := subSync(t, nc, "$JS.EVENT.ADVISORY.CONSUMER.PINNED.P.PIN")
	unpinned := subSync(t, nc, "$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.P.PIN")

	first := pgPull(t, nc, "P", "PIN", `{"batch":10,"group":"jobs","expires":10000000000}`)
	jsPublish(t, js, "p.a", "m1")
	data, pin := pgNext(t, first)
	if data != "m1" || len(pin) != 22 {
		t.Fatalf("first delivery %q pin %q", data, pin)
	}
	adv := cxAdvisory(t, pinned)
	if adv["type"] != "io.nats.jetstream.advisory.v1.consumer_group_pinned" || adv["pinned_id"] != pin || adv["group"] != "jobs" || adv["account"] != "$G" {
		t.Errorf("pinned advisory %v", adv)
	}
	info := cxInfo(t, c)
	if len(info.PriorityGroups) != 1 || info.PriorityGroups[0].PinnedClientID != pin || info.PriorityGroups[0].PinnedTS.IsZero() {
		t.Errorf("priority_groups %+v", info.PriorityGroups)
	}
	// Another client without the id waits; a wrong id is refused.
	other := pgPull(t, nc, "P", "PIN", `{"batch":1,"group":"jobs","expires":10000000000}`)
	if got, _ := pgNext(t, pgPull(t, nc, "P", "PIN", `{"batch":1,"group":"jobs","id":"nope"}`)); got != "423 Nats-Pin-Id mismatch" {
		t.Errorf("wrong pin id: %q", got)
	}
	jsPublish(t, js, "p.a", "m2")
	if data, p := pgNext(t, first); data != "m2" || p != pin {
		t.Errorf("second delivery %q %q", data, p)
	}
	pgNothing(t, nc, other)

	// UNPIN: the waiting request without an id (now first in the queue,
	// the pinned one went behind it after its delivery) is pinned next;
	// the old pin's request then gets 423 Nats-Wrong-Pin-Id.
	if err := s.UnpinConsumer(tctx(t), "PIN", "jobs"); err != nil {
		t.Fatal(err)
	}
	if adv := cxAdvisory(t, unpinned); adv["reason"] != "admin" || adv["group"] != "jobs" {
		t.Errorf("unpinned advisory %v", adv)
	}
	jsPublish(t, js, "p.a", "m3")
	if data, pin2 := pgNext(t, other); data != "m3" || pin2 == pin || len(pin2) != 22 {
		t.Fatalf("after UNPIN the other request got %q with pin %q (old %q)", data, pin2, pin)
	}
	jsPublish(t, js, "p.a", "m4")
	if got, _ := pgNext(t, first); got != "423 Nats-Wrong-Pin-Id" {
		t.Fatalf("the old pin's request got %q", got)
	}
	// The pin times out without requests: a timeout advisory.
	if adv := cxAdvisory(t, pinned); adv["pinned_id"] == pin {
		t.Errorf("a new pin reuses the old id: %v", adv)
	}
	waitFor(t, 10*time.Second, "the pin's timeout", func() bool {
		m, err := unpinned.NextMsg(100 * time.Millisecond)
		return err == nil && strings.Contains(string(m.Data), `"reason":"timeout"`)
	})
	if err := s.UnpinConsumer(tctx(t), "PIN", "other"); err == nil {
		t.Error("UNPIN of a group the consumer lacks succeeded")
	}
}

// Prioritized: a request of a lower priority value is served first,
// whenever it arrived.
func TestPriorityPrioritized(t *testing.T) {
	nc, js := jsConnect(t, startJS(t))
	createStream(t, js, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.>"}})
	cxCreate(t, js, "P", jetstream.ConsumerConfig{Durable: "PRI", AckPolicy: jetstream.AckExplicitPolicy, PriorityPolicy: jetstream.PriorityPolicyPrioritized, PriorityGroups: []string{"jobs"}})
	low := pgPull(t, nc, "P", "PRI", `{"batch":5,"group":"jobs","priority":5,"expires":10000000000}`)
	high := pgPull(t, nc, "P", "PRI", `{"batch":2,"group":"jobs","priority":1,"expires":10000000000}`)
	waitFor(t, cxWait, "both requests waiting", func() bool {
		info, err := js.Consumer(tctx(t), "P", "PRI")
		return err == nil && info.CachedInfo() != nil && cxInfo(t, info).NumWaiting == 2
	})
	for i := 1; i <= 3; i++ {
		jsPublish(t, js, "p.a", fmt.Sprint("m", i))
	}
	if a, _ := pgNext(t, high); a != "m1" {
		t.Errorf("priority 1 got %q first", a)
	}
	if b, _ := pgNext(t, high); b != "m2" {
		t.Errorf("priority 1 got %q second", b)
	}
	if c, _ := pgNext(t, low); c != "m3" {
		t.Errorf("priority 5 got %q", c)
	}
}

// $JS.API.CONSUMER.UNPIN's errors, as nats-server v2.15.2 answers them.
func TestPriorityUnpinErrors(t *testing.T) {
	nc, js := jsConnect(t, startJS(t))
	createStream(t, js, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.>"}})
	cxCreate(t, js, "P", jetstream.ConsumerConfig{Durable: "PIN", AckPolicy: jetstream.AckExplicitPolicy, PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{"jobs"}})
	const typ = "consumer_unpin_response"
	u := "$JS.API.CONSUMER.UNPIN."
	cxAPIErr(t, nc, u+"P.PIN", "", typ, 400, 10025, "invalid JSON: unexpected end of JSON input")
	cxAPIErr(t, nc, u+"P.PIN", `{}`, typ, 400, 10025, "invalid JSON: consumer group not specified")
	cxAPIErr(t, nc, u+"P.PIN", `{"group":"no.dots"}`, typ, 400, 10162, "*")
	cxAPIErr(t, nc, u+"NOPE.PIN", `{"group":"jobs"}`, typ, 404, 10059, "stream not found")
	cxAPIErr(t, nc, u+"P.NOPE", `{"group":"jobs"}`, typ, 404, 10014, "consumer not found")
	cxAPIErr(t, nc, u+"P.PIN", `{"group":"other"}`, typ, 400, 10160, "Provided priority group does not exist for this consumer")
	raw, m := apiRequest(t, nc, u+"P.PIN", `{"group":"jobs"}`)
	if m["type"] != "io.nats.jetstream.api.v1."+typ || m["error"] != nil {
		t.Errorf("UNPIN: %s", raw)
	}
}
