package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A push consumer delivers to a subscriber that arrives after the
// consumer was created, and again after the subscriber went away and
// came back (found by a fresh-user review: a worker that restarts must
// not stall the flow until the next publish).
func TestConsumerPushLateSubscriber(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "LATE", Subjects: []string{"late.>"}})
	for i := 0; i < 20; i++ {
		jsPublish(t, js, "late.x", fmt.Sprint(i))
	}
	_, err := js.CreateOrUpdateConsumer(tctx(t), "LATE", jetstream.ConsumerConfig{
		Durable: "P", DeliverSubject: "deliver.late", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the consumer exists with nobody listening
	sub, err := nc.SubscribeSync("deliver.late")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		m, err := sub.NextMsg(3 * time.Second)
		if err != nil {
			t.Fatalf("message %d to the late subscriber: %v", i, err)
		}
		if string(m.Data) != fmt.Sprint(i) {
			t.Fatalf("message %d: %q", i, m.Data)
		}
		if err := m.AckSync(); err != nil {
			t.Fatal(err)
		}
	}
	// Gone, messages arrive, and back: they go to the new subscriber.
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	for i := 20; i < 30; i++ {
		jsPublish(t, js, "late.x", fmt.Sprint(i))
	}
	time.Sleep(200 * time.Millisecond)
	sub2, err := nc.SubscribeSync("deliver.late")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 10 {
		m, err := sub2.NextMsg(3 * time.Second)
		if err != nil {
			t.Fatalf("after resubscribing, %d of the 10 published meanwhile: %v", len(seen), err)
		}
		seen[string(m.Data)] = true
	}
}

// Deleting messages that await an ack frees their place under
// max_ack_pending at once (found by a fresh-user review: cairn waited
// for ack_wait).
func TestConsumerDeletedPendingFreesAckLimit(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	s := createStream(t, js, jetstream.StreamConfig{Name: "DEL", Subjects: []string{"del.>"}})
	jsPublish(t, js, "del.x", "1")
	jsPublish(t, js, "del.x", "2")
	c, err := js.CreateOrUpdateConsumer(tctx(t), "DEL", jetstream.ConsumerConfig{
		Durable: "C", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 2, AckWait: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Fetch(2, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range b.Messages() {
		n++
	}
	if n != 2 {
		t.Fatalf("fetched %d, want 2", n)
	}
	for _, seq := range []uint64{1, 2} {
		if err := s.DeleteMsg(tctx(t), seq); err != nil {
			t.Fatal(err)
		}
	}
	jsPublish(t, js, "del.x", "3")
	m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
	if err != nil {
		t.Fatalf("next after deleting the pending messages: %v", err)
	}
	if string(m.Data()) != "3" {
		t.Errorf("got %q, want 3", m.Data())
	}
}

// A consumer created paused announces it on the pause advisory, and
// announces the end of the pause when the time runs out (found by a
// fresh-user review).
func TestConsumerPauseAdvisories(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "PA", Subjects: []string{"pa.>"}})
	adv, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.PAUSE.PA.C")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	until := time.Now().Add(500 * time.Millisecond)
	if _, err := js.CreateOrUpdateConsumer(tctx(t), "PA", jetstream.ConsumerConfig{Durable: "C", PauseUntil: &until}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []bool{true, false} {
		m, err := adv.NextMsg(3 * time.Second)
		if err != nil {
			t.Fatalf("pause advisory (paused %v): %v", want, err)
		}
		var a struct {
			Type   string `json:"type"`
			Paused bool   `json:"paused"`
		}
		if err := json.Unmarshal(m.Data, &a); err != nil || a.Type != "io.nats.jetstream.advisory.v1.consumer_pause" || a.Paused != want {
			t.Errorf("advisory %s, want paused %v", m.Data, want)
		}
	}
}

// On a workqueue stream, once a double ack is answered the message is
// gone from the stream (found by a fresh-user review: the removal could
// lag the reply).
func TestConsumerWorkQueueRemovedBeforeDoubleAck(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	s := createStream(t, js, jetstream.StreamConfig{Name: "WQR", Subjects: []string{"wqr.>"}, Retention: jetstream.WorkQueuePolicy})
	const n = 50
	for i := 0; i < n; i++ {
		jsPublish(t, js, "wqr.x", fmt.Sprint(i))
	}
	c, err := js.CreateOrUpdateConsumer(tctx(t), "WQR", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if err := m.DoubleAck(tctx(t)); err != nil {
			t.Fatal(err)
		}
		if got := streamInfo(t, s).State.Msgs; got != uint64(n-1-i) {
			t.Fatalf("after double-acking message %d the stream holds %d, want %d", i, got, n-1-i)
		}
	}
}

// A pull request whose requester has gone stops counting in num_waiting
// (found by a fresh-user review: cairn kept counting it).
func TestConsumerNumWaitingDropsGoneRequester(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "NW", Subjects: []string{"nw.>"}})
	c, err := js.CreateOrUpdateConsumer(tctx(t), "NW", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	other, err := nats.Connect(u)
	if err != nil {
		t.Fatal(err)
	}
	inbox := nats.NewInbox()
	if _, err := other.SubscribeSync(inbox); err != nil {
		t.Fatal(err)
	}
	if err := other.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.NW.C", inbox, []byte(`{"batch":1,"expires":60000000000}`)); err != nil {
		t.Fatal(err)
	}
	other.Flush()
	waitFor(t, 3*time.Second, "the request to be waiting", func() bool {
		info, err := c.Info(tctx(t))
		return err == nil && info.NumWaiting == 1
	})
	other.Close()
	nc.Flush()
	waitFor(t, 3*time.Second, "num_waiting to drop the gone requester", func() bool {
		info, err := c.Info(tctx(t))
		return err == nil && info.NumWaiting == 0
	})
}

// A pull consumer with inactive_threshold is not removed while the ack
// wait of what it delivered is running, as nats-server decides (found by
// a fresh-user review: cairn removed it at the threshold).
func TestConsumerInactiveWaitsForAckWait(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "IA", Subjects: []string{"ia.>"}})
	jsPublish(t, js, "ia.x", "1")
	c, err := js.CreateOrUpdateConsumer(tctx(t), "IA", jetstream.ConsumerConfig{
		Name: "E", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 3 * time.Second, InactiveThreshold: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(jetstream.FetchMaxWait(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // well past the threshold, within the ack wait
	if _, err := js.Consumer(tctx(t), "IA", "E"); err != nil {
		t.Fatalf("consumer gone while its delivery's ack wait runs: %v", err)
	}
	waitFor(t, 6*time.Second, "the consumer to go after ack wait and threshold", func() bool {
		_, err := js.Consumer(tctx(t), "IA", "E")
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	})
}
