package test

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Durable source and mirror consumers (ADR-60, nats-server 2.14+;
// docs/durable-sourcing.md), through nats.go. Run against nats-server
// v2.15.2 with CAIRN_TEST_TARGET=nats-server.

// durableSourceHeader is the Nats-Stream-Source value of a message
// copied through a durable consumer: the origin's name with ":C=" and
// the hash of the consumer's name, the origin sequence, "> >", the
// subject and the origin's identity.
var durableSourceHeader = regexp.MustCompile(`^O:C=[0-9A-Za-z]{8} (\d+) > > (\S+) [0-9A-Za-z]{8}$`)

// flowControlConsumer creates the durable push consumer a durable
// source reads: ack policy flow_control (the server fills in flow
// control and the 1 s heartbeat).
func flowControlConsumer(t *testing.T, s jetstream.Stream, name, deliver string, mod func(*jetstream.ConsumerConfig)) jetstream.PushConsumer {
	t.Helper()
	cfg := jetstream.ConsumerConfig{Durable: name, DeliverSubject: deliver, AckPolicy: jetstream.AckFlowControlPolicy, MaxAckPending: 100}
	if mod != nil {
		mod(&cfg)
	}
	c, err := s.CreateOrUpdatePushConsumer(tctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A source through a durable consumer of an interest origin copies
// everything the consumer delivers, in order and once, and its flow
// control replies acknowledge what was copied, so the origin lets the
// messages go.
func TestStreamDurableSourceInterest(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	o := createStream(t, js, jetstream.StreamConfig{Name: "O", Subjects: []string{"o.>"}, Retention: jetstream.InterestPolicy})
	c := flowControlConsumer(t, o, "SRC", "dlv.src", nil)
	for i := 1; i <= 5; i++ {
		jsPublish(t, js, fmt.Sprintf("o.%d", i), fmt.Sprintf("m%d", i))
	}
	agg := createStream(t, js, jetstream.StreamConfig{Name: "AGG", Sources: []*jetstream.StreamSource{
		{Name: "O", Consumer: &jetstream.StreamConsumerSource{Name: "SRC", DeliverSubject: "dlv.src"}},
	}})
	waitMsgs(t, agg, 5)
	for i := 6; i <= 8; i++ {
		jsPublish(t, js, fmt.Sprintf("o.%d", i), fmt.Sprintf("m%d", i))
	}
	info := waitMsgs(t, agg, 8)
	for seq := uint64(1); seq <= 8; seq++ {
		m, err := agg.GetMsg(tctx(t), seq)
		if err != nil {
			t.Fatal(err)
		}
		h := durableSourceHeader.FindStringSubmatch(m.Header.Get("Nats-Stream-Source"))
		if h == nil || h[1] != fmt.Sprint(seq) || h[2] != fmt.Sprintf("o.%d", seq) || string(m.Data) != fmt.Sprintf("m%d", seq) {
			t.Fatalf("message %d: %s %q header %q", seq, m.Subject, m.Data, m.Header.Get("Nats-Stream-Source"))
		}
	}
	if len(info.Sources) != 1 || info.Sources[0].Name != "O" || info.Sources[0].Error != nil {
		t.Fatalf("sources info %+v", info.Sources)
	}
	// The flow control replies acknowledge: the interest origin empties.
	waitFor(t, 10*time.Second, "the origin to release what was copied", func() bool {
		ci, err := c.Info(tctx(t))
		oi, err2 := o.Info(tctx(t))
		return err == nil && err2 == nil && ci.AckFloor.Stream == 8 && ci.NumAckPending == 0 && oi.State.Msgs == 0
	})
	ci, _ := c.Info(tctx(t))
	if !ci.PushBound || ci.Delivered.Stream != 8 {
		t.Errorf("consumer info: push_bound %v delivered %+v", ci.PushBound, ci.Delivered)
	}
	waitFor(t, 5*time.Second, "source seq 8, lag 0", func() bool {
		info, err := agg.Info(tctx(t))
		return err == nil && info.Sources[0].Lag == 0 && info.Sources[0].Active >= 0
	})
}

// A mirror through a durable consumer of a workqueue origin takes the
// messages out of it at their origin sequences.
func TestStreamDurableMirrorWorkQueue(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	o := createStream(t, js, jetstream.StreamConfig{Name: "WQ", Subjects: []string{"wq.>"}, Retention: jetstream.WorkQueuePolicy})
	flowControlConsumer(t, o, "MIR", "dlv.mir", nil)
	for i := 1; i <= 4; i++ {
		jsPublish(t, js, fmt.Sprintf("wq.%d", i), fmt.Sprintf("w%d", i))
	}
	m := createStream(t, js, jetstream.StreamConfig{Name: "M", Mirror: &jetstream.StreamSource{
		Name: "WQ", Consumer: &jetstream.StreamConsumerSource{Name: "MIR", DeliverSubject: "dlv.mir"},
	}})
	waitMsgs(t, m, 4)
	jsPublish(t, js, "wq.5", "w5")
	info := waitMsgs(t, m, 5)
	if info.State.FirstSeq != 1 || info.State.LastSeq != 5 || info.Mirror == nil || info.Mirror.Error != nil {
		t.Fatalf("mirror state %+v mirror %+v", info.State, info.Mirror)
	}
	waitMsgs(t, o, 0)
}

// A durable source whose consumer is not of ack policy flow_control
// reports 10217 (a mirror 10214) and copies nothing; a consumer created
// later with the right policy is picked up.
func TestStreamDurableSourceWrongAckPolicy(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	o := createStream(t, js, jetstream.StreamConfig{Name: "O", Subjects: []string{"o.>"}})
	if _, err := o.CreateOrUpdatePushConsumer(tctx(t), jetstream.ConsumerConfig{Durable: "EXP", DeliverSubject: "dlv.exp", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	jsPublish(t, js, "o.1", "one")
	agg := createStream(t, js, jetstream.StreamConfig{Name: "AGG", Sources: []*jetstream.StreamSource{
		{Name: "O", Consumer: &jetstream.StreamConsumerSource{Name: "EXP", DeliverSubject: "dlv.exp"}},
	}})
	mir := createStream(t, js, jetstream.StreamConfig{Name: "M", Mirror: &jetstream.StreamSource{
		Name: "O", Consumer: &jetstream.StreamConsumerSource{Name: "EXP", DeliverSubject: "dlv.exp"},
	}})
	waitFor(t, 15*time.Second, "errors 10217 and 10214", func() bool {
		ai, err := agg.Info(tctx(t))
		mi, err2 := mir.Info(tctx(t))
		return err == nil && err2 == nil && len(ai.Sources) == 1 && ai.Sources[0].Error != nil && ai.Sources[0].Error.ErrorCode == 10217 &&
			mi.Mirror != nil && mi.Mirror.Error != nil && mi.Mirror.Error.ErrorCode == 10214
	})
	if ai, _ := agg.Info(tctx(t)); ai.State.Msgs != 0 || ai.Sources[0].Error.Description != "stream source consumer requires flow control ack policy" {
		t.Fatalf("source through an explicit-ack consumer: %d messages, error %+v", ai.State.Msgs, ai.Sources[0].Error)
	}
}

// A durable source resumes after a restart from the consumer's ack
// floor without copying twice what it copied before.
func TestStreamDurableSourceRestart(t *testing.T) {
	dir := t.TempDir()
	u, stop := startServerStoppable(t, jsIn(dir))
	nc, js := jsConnect(t, u)
	o := createStream(t, js, jetstream.StreamConfig{Name: "O", Subjects: []string{"o.>"}, Retention: jetstream.InterestPolicy})
	flowControlConsumer(t, o, "SRC", "dlv.src", nil)
	agg := createStream(t, js, jetstream.StreamConfig{Name: "AGG", Sources: []*jetstream.StreamSource{
		{Name: "O", Consumer: &jetstream.StreamConsumerSource{Name: "SRC", DeliverSubject: "dlv.src"}},
	}})
	for i := 1; i <= 3; i++ {
		jsPublish(t, js, fmt.Sprintf("o.%d", i), fmt.Sprintf("m%d", i))
	}
	waitMsgs(t, agg, 3)
	nc.Close()
	stop()
	u, _ = startServerStoppable(t, jsIn(dir))
	_, js = jsConnect(t, u)
	for i := 4; i <= 5; i++ {
		jsPublish(t, js, fmt.Sprintf("o.%d", i), fmt.Sprintf("m%d", i))
	}
	agg, err := js.Stream(tctx(t), "AGG")
	if err != nil {
		t.Fatal(err)
	}
	waitMsgsWithin(t, agg, 5, 30*time.Second)
	for seq := uint64(1); seq <= 5; seq++ {
		m, err := agg.GetMsg(tctx(t), seq)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != fmt.Sprintf("m%d", seq) {
			t.Fatalf("message %d is %q after the restart", seq, m.Data)
		}
	}
	o, _ = js.Stream(tctx(t), "O")
	waitMsgs(t, o, 0)
}
