package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestConsumerNumRedelivered follows num_redelivered (and
// num_ack_pending) through NAKs, an ack wait that runs out, max_deliver
// reached by NAKs and by the ack wait, acks and a +TERM, as nats-server
// v2.15.2 counts them: the messages delivered more than once that are
// still pending or ran out of deliveries unacknowledged.
func TestConsumerNumRedelivered(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.%d", 6)
	// The ack wait bounds how long the test may take between a fetch and
	// the info that follows it (a delivery at max_deliver runs out
	// after it): 1 s was passed once by a CI run under load.
	const ackWait = 3 * time.Second
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "rd", AckPolicy: jetstream.AckExplicitPolicy,
		MaxDeliver: 3, AckWait: ackWait})
	msgs := map[uint64]jetstream.Msg{}
	fetch := func(n int) string {
		t.Helper()
		b, err := c.Fetch(n, jetstream.FetchMaxWait(2*ackWait+2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for m := range b.Messages() {
			md, _ := m.Metadata()
			msgs[md.Sequence.Stream] = m
			got = append(got, fmt.Sprintf("%d#%d", md.Sequence.Stream, md.NumDelivered))
		}
		return strings.Join(got, " ")
	}
	// do sends an ack of the latest delivery of seq and waits for the
	// server's confirmation (nats.go would refuse a second ack of a
	// message).
	do := func(seq uint64, body string) {
		t.Helper()
		if _, err := nc.Request(msgs[seq].Reply(), []byte(body), 5*time.Second); err != nil {
			t.Fatalf("%s of %d: %v", body, seq, err)
		}
	}
	const nak, ack, term = "-NAK", "+ACK", "+TERM"
	var steps []string
	step := func(what string) {
		t.Helper()
		info := cxInfo(t, c)
		steps = append(steps, fmt.Sprintf("%s: %d/%d", what, info.NumRedelivered, info.NumAckPending))
	}

	steps = append(steps, "fetch "+fetch(6))
	step("delivered")
	do(1, nak)
	do(2, nak)
	step("2 NAKed")
	steps = append(steps, "fetch "+fetch(2))
	step("2 redelivered")
	do(1, ack)
	step("1 acked")
	do(3, ack)
	do(4, ack)
	do(5, term)
	step("3 4 acked, 5 terminated")
	// 6 is left to its ack wait; 2 is NAKed to its last delivery.
	do(2, nak)
	steps = append(steps, "fetch "+fetch(2))
	step("6 after its ack wait, 2 for the last time")
	do(2, nak)
	step("2 NAKed at max_deliver")
	steps = append(steps, "fetch "+fetch(1))
	step("6 again")
	// 6's ack wait runs out at max_deliver: nothing more is delivered.
	b, err := c.Fetch(1, jetstream.FetchMaxWait(ackWait+1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() {
		t.Fatal("a delivery beyond max_deliver")
	}
	step("6 ran out")
	do(6, ack)
	step("6 acked late")
	do(2, ack)
	step("2 acked late")

	want := []string{
		"fetch 1#1 2#1 3#1 4#1 5#1 6#1",
		"delivered: 0/6",
		"2 NAKed: 0/6",
		"fetch 1#2 2#2",
		"2 redelivered: 2/6",
		"1 acked: 1/5",
		"3 4 acked, 5 terminated: 1/2",
		"fetch 2#3 6#2",
		"6 after its ack wait, 2 for the last time: 2/2",
		"2 NAKed at max_deliver: 2/1",
		"fetch 6#3",
		"6 again: 2/1",
		"6 ran out: 2/0",
		"6 acked late: 1/0",
		"2 acked late: 0/0",
	}
	if targetIsNatsServer() {
		// docs/compatibility.md, "A -NAK of a delivery that was the last
		// max_deliver allows": nats-server keeps it ack pending until
		// the consumer next looks for something to deliver.
		want[9] = "2 NAKed at max_deliver: 2/2"
	}
	if strings.Join(steps, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(steps, "\n"), strings.Join(want, "\n"))
	}
}

// TestConsumerNumRedeliveredAckAll: with ack policy all, an ack at or
// above redelivered messages acknowledges them, and num_redelivered
// counts as nats-server v2.15.2 counts it.
func TestConsumerNumRedeliveredAckAll(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.%d", 4)
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "all", AckPolicy: jetstream.AckAllPolicy, AckWait: time.Minute})
	replies := map[uint64]string{}
	fetch := func(n int) string {
		t.Helper()
		b, err := c.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for m := range b.Messages() {
			md, _ := m.Metadata()
			replies[md.Sequence.Stream] = m.Reply()
			got = append(got, fmt.Sprintf("%d#%d", md.Sequence.Stream, md.NumDelivered))
		}
		return strings.Join(got, " ")
	}
	do := func(seq uint64, body string) {
		t.Helper()
		if _, err := nc.Request(replies[seq], []byte(body), 5*time.Second); err != nil {
			t.Fatalf("%s of %d: %v", body, seq, err)
		}
	}
	var steps []string
	step := func(what string) {
		t.Helper()
		info := cxInfo(t, c)
		steps = append(steps, fmt.Sprintf("%s: %d/%d", what, info.NumRedelivered, info.NumAckPending))
	}
	steps = append(steps, "fetch "+fetch(4))
	do(1, "-NAK")
	do(3, "-NAK")
	steps = append(steps, "fetch "+fetch(2))
	step("1 3 redelivered")
	do(2, "+ACK")
	step("acked up to 2")
	do(4, "+ACK")
	step("acked up to 4")
	want := []string{
		"fetch 1#1 2#1 3#1 4#1",
		"fetch 1#2 3#2",
		"1 3 redelivered: 2/4",
		"acked up to 2: 1/2",
		"acked up to 4: 0/0",
	}
	if strings.Join(steps, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(steps, "\n"), strings.Join(want, "\n"))
	}
}
