package test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Batch publishing (ADR-50) as nats-server v2.15.2 answers it: atomic
// batches (Nats-Batch-Id, Nats-Batch-Sequence, Nats-Batch-Commit on a
// stream with allow_atomic) and fast batches (the ".$FI" reply pattern
// on a stream with allow_batched). nats.go v1.55 has no batch publisher,
// so the tests send the headers and reply subjects themselves and read
// every reply byte for byte.

// batchClient publishes batch messages and collects every reply sent to
// its inbox, in order.
type batchClient struct {
	t     *testing.T
	nc    *nats.Conn
	inbox string
	sub   *nats.Subscription
}

func newBatchClient(t *testing.T, nc *nats.Conn) *batchClient {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox + ".>")
	if err != nil {
		t.Fatal(err)
	}
	return &batchClient{t: t, nc: nc, inbox: inbox, sub: sub}
}

// pub publishes data on subj with the headers kv (name, value, ...) and
// the reply subject reply ("" for none).
func (c *batchClient) pub(subj, reply, data string, kv ...string) {
	c.t.Helper()
	m := nats.NewMsg(subj)
	m.Reply = reply
	m.Data = []byte(data)
	for i := 0; i+1 < len(kv); i += 2 {
		m.Header.Set(kv[i], kv[i+1])
	}
	if err := c.nc.PublishMsg(m); err != nil {
		c.t.Fatal(err)
	}
}

// atomic publishes message seq of atomic batch id, with a reply, and an
// extra header pair list.
func (c *batchClient) atomic(subj, id string, seq int, commit string, kv ...string) {
	c.t.Helper()
	h := append([]string{"Nats-Batch-Id", id, "Nats-Batch-Sequence", strconv.Itoa(seq)}, kv...)
	if commit != "" {
		h = append(h, "Nats-Batch-Commit", commit)
	}
	c.pub(subj, c.inbox+".a"+strconv.Itoa(seq), "m"+strconv.Itoa(seq), h...)
}

// fastReply is the reply subject of a fast batch message.
func (c *batchClient) fastReply(id string, flow int, gap string, seq, op int) string {
	return fmt.Sprintf("%s.%s.%d.%s.%d.%d.$FI", c.inbox, id, flow, gap, seq, op)
}

// expect reads the next replies and compares them with want.
func (c *batchClient) expect(want ...string) {
	c.t.Helper()
	for i, w := range want {
		m, err := c.sub.NextMsg(jsTimeout)
		if err != nil {
			c.t.Fatalf("reply %d (want %s): %v", i+1, w, err)
		}
		if string(m.Data) != w {
			c.t.Fatalf("reply %d:\n got: %s\nwant: %s", i+1, m.Data, w)
		}
	}
}

// expectNone checks that no reply is waiting after a round trip.
func (c *batchClient) expectNone() {
	c.t.Helper()
	if err := c.nc.Flush(); err != nil {
		c.t.Fatal(err)
	}
	if m, err := c.sub.NextMsg(300 * time.Millisecond); err == nil {
		c.t.Fatalf("unexpected reply %s", m.Data)
	}
}

func errAck(stream string, code, errCode int, desc string) string {
	return fmt.Sprintf(`{"error":{"code":%d,"err_code":%d,"description":%q},"stream":%q,"seq":0}`, code, errCode, desc, stream)
}

func batchAck(stream string, seq uint64, id string, count int) string {
	return fmt.Sprintf(`{"stream":%q,"seq":%d,"batch":%q,"count":%d}`, stream, seq, id, count)
}

func TestAtomicBatchCommit(t *testing.T) {
	nc, js := jsConnect(t, startJS(t))
	s := createStream(t, js, jetstream.StreamConfig{Name: "ATOM", Subjects: []string{"atom.>"}, AllowAtomicPublish: true})
	c := newBatchClient(t, nc)

	c.atomic("atom.a", "b1", 1, "")
	c.atomic("atom.b", "b1", 2, "")
	c.atomic("atom.a", "b1", 3, "1")
	c.expect("", "", batchAck("ATOM", 3, "b1", 3))
	wantState(t, streamInfo(t, s).State, 3, 1, 3)
	m, err := s.GetMsg(tctx(t), 3)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Nats-Batch-Id") != "b1" || m.Header.Get("Nats-Batch-Sequence") != "3" || m.Header.Get("Nats-Batch-Commit") != "1" {
		t.Errorf("stored headers %v", m.Header)
	}

	// "eob" commits without storing the commit message; the last stored
	// message gets Nats-Batch-Commit: 1.
	c.atomic("atom.a", "b2", 1, "")
	c.atomic("atom.a", "b2", 2, "")
	c.atomic("atom.a", "b2", 3, "eob")
	c.expect("", "", batchAck("ATOM", 5, "b2", 2))
	if m, err = s.GetMsg(tctx(t), 5); err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Nats-Batch-Commit") != "1" || m.Header.Get("Nats-Batch-Sequence") != "2" {
		t.Errorf("stored headers of the eob batch's last message: %v", m.Header)
	}
	// A message without a reply gets nothing; the batch goes on.
	c.pub("atom.a", "", "x", "Nats-Batch-Id", "b3", "Nats-Batch-Sequence", "1")
	c.atomic("atom.a", "b3", 2, "1")
	c.expect(batchAck("ATOM", 7, "b3", 2))
}

// A batch is stored whole or not at all: a failed check of any message
// leaves the stream as it was.
func TestAtomicBatchAllOrNothing(t *testing.T) {
	nc, js := jsConnect(t, startJS(t))
	s := createStream(t, js, jetstream.StreamConfig{Name: "ATOM", Subjects: []string{"atom.>"}, AllowAtomicPublish: true})
	c := newBatchClient(t, nc)
	jsPublish(t, js, "atom.x", "before")

	c.atomic("atom.a", "e1", 1, "")
	c.atomic("atom.a", "e1", 2, "")
	c.atomic("atom.a", "e1", 3, "1", "Nats-Expected-Last-Msg-Id", "x")
	c.expect("", "", errAck("ATOM", 400, 10177, "atomic publish unsupported header used: Nats-Expected-Last-Msg-Id"))

	c.atomic("atom.a", "e2", 1, "", "Nats-Msg-Id", "same")
	c.atomic("atom.a", "e2", 2, "1", "Nats-Msg-Id", "same")
	c.expect("", errAck("ATOM", 400, 10201, "atomic publish batch contains duplicate message id"))

	c.atomic("atom.a", "e3", 1, "", "Nats-Expected-Last-Sequence", "1")
	c.atomic("atom.a", "e3", 2, "1", "Nats-Expected-Last-Sequence", "2")
	c.expect("", errAck("ATOM", 400, 10164, "wrong last sequence"))

	c.atomic("atom.a", "e4", 1, "", "Nats-Expected-Last-Sequence", "7")
	c.atomic("atom.a", "e4", 2, "1")
	c.expect("", errAck("ATOM", 400, 10071, "wrong last sequence: 1"))
	wantState(t, streamInfo(t, s).State, 1, 1, 1)

	// The same batch with the right expectation is stored.
	c.atomic("atom.a", "e5", 1, "", "Nats-Expected-Last-Sequence", "1")
	c.atomic("atom.b", "e5", 2, "1", "Nats-Expected-Last-Subject-Sequence", "0")
	c.expect("", batchAck("ATOM", 3, "e5", 2))
}

// The errors of a bad batch message, in nats-server's order.
func TestAtomicBatchErrors(t *testing.T) {
	nc, js := jsConnect(t, startJS(t))
	createStream(t, js, jetstream.StreamConfig{Name: "ATOM", Subjects: []string{"atom.>"}, AllowAtomicPublish: true, MaxMsgSize: 200})
	createStream(t, js, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.>"}})
	c := newBatchClient(t, nc)
	incomplete := errAck("ATOM", 400, 10176, "atomic publish batch is incomplete")

	c.atomic("plain.a", "p", 1, "")
	c.expect(errAck("PLAIN", 400, 10174, "atomic publish is disabled"))
	c.atomic("atom.a", strings.Repeat("i", 65), 1, "")
	c.expect(errAck("ATOM", 400, 10179, "atomic publish batch ID is invalid"))
	c.pub("atom.a", c.inbox+".x", "m", "Nats-Batch-Id", "noseq")
	c.expect(errAck("ATOM", 400, 10175, "atomic publish sequence is missing"))
	c.pub("atom.a", c.inbox+".x", strings.Repeat("x", 300), "Nats-Batch-Id", "big", "Nats-Batch-Sequence", "1")
	c.expect(errAck("ATOM", 400, 10054, "message size exceeds maximum allowed"))
	c.atomic("atom.a", "unknown", 2, "")
	c.expect(incomplete)
	c.atomic("atom.a", "huge", 1001, "")
	c.expect(errAck("ATOM", 400, 10199, "atomic publish batch is too large: 1000"))
	c.atomic("atom.a", "huge", 1001, "eob")
	c.expect(incomplete)
	c.atomic("atom.a", "commit", 1, "2")
	c.expect(errAck("ATOM", 400, 10200, "atomic publish batch commit is invalid"))
	c.atomic("atom.a", "eob1", 1, "eob")
	c.expect(incomplete)
	c.atomic("atom.a", "level", 1, "", "Nats-Required-Api-Level", "99")
	c.expect(errAck("ATOM", 412, 10185, "JetStream minimum api level required"))

	// A gap abandons the batch: the next message finds none.
	c.atomic("atom.a", "gap", 1, "")
	c.atomic("atom.a", "gap", 3, "")
	c.atomic("atom.a", "gap", 4, "1")
	c.expect("", incomplete, incomplete)
	c.expectNone()
}

// 50 atomic batches may be open on a stream; the 51st is refused.
func TestAtomicBatchInflight(t *testing.T) {
	nc, js := jsConnect(t, startJS(t))
	createStream(t, js, jetstream.StreamConfig{Name: "ATOM", Subjects: []string{"atom.>"}, AllowAtomicPublish: true})
	c := newBatchClient(t, nc)
	for i := range 50 {
		c.atomic("atom.a", "open"+strconv.Itoa(i), 1, "")
	}
	for range 50 {
		c.expect("")
	}
	c.atomic("atom.a", "one-more", 1, "")
	c.expect(errAck("ATOM", 429, 10210, "atomic publish too many inflight"))
	c.atomic("atom.a", "open7", 2, "1")
	c.expect(batchAck("ATOM", 2, "open7", 2)) // an open batch still commits
}

func TestFastBatchFlow(t *testing.T) {
	nc, js := jsConnect(t, startJS(t))
	s := createStream(t, js, jetstream.StreamConfig{Name: "FAST", Subjects: []string{"fast.>"}, AllowBatchPublish: true})
	c := newBatchClient(t, nc)

	// Flow 2: an ack for every second message, then the PubAck of the
	// EOB commit.
	c.pub("fast.a", c.fastReply("f1", 2, "fail", 1, 0), "1")
	c.expect(`{"type":"ack","seq":0,"msgs":2}`)
	for seq := 2; seq <= 5; seq++ {
		c.pub("fast.a", c.fastReply("f1", 2, "fail", seq, 1), strconv.Itoa(seq))
	}
	c.expect(`{"type":"ack","seq":2,"msgs":2}`, `{"type":"ack","seq":4,"msgs":2}`)
	c.pub("fast.a", c.fastReply("f1", 2, "fail", 6, 3), "")
	c.expect(batchAck("FAST", 5, "f1", 5))
	wantState(t, streamInfo(t, s).State, 5, 1, 5)

	// A batch of one message that commits at once.
	c.pub("fast.a", c.fastReply("f2", 10, "fail", 1, 2), "one")
	c.expect(batchAck("FAST", 6, "f2", 1))

	// A gap ends a batch that does not allow gaps, with the PubAck of
	// what was stored.
	c.pub("fast.a", c.fastReply("f3", 10, "fail", 1, 0), "1")
	c.pub("fast.a", c.fastReply("f3", 10, "fail", 3, 1), "3")
	c.expect(`{"type":"ack","seq":0,"msgs":10}`, `{"type":"gap","last_seq":2,"seq":3}`, batchAck("FAST", 7, "f3", 1))

	// With gaps allowed the batch goes on; a ping repeats the last flow
	// ack.
	c.pub("fast.a", c.fastReply("f4", 10, "ok", 1, 0), "1")
	c.pub("fast.a", c.fastReply("f4", 10, "ok", 3, 1), "3")
	c.pub("fast.a", c.fastReply("f4", 10, "ok", 3, 4), "")
	c.pub("fast.a", c.fastReply("f4", 10, "ok", 4, 2), "4")
	c.expect(`{"type":"ack","seq":0,"msgs":10}`, `{"type":"gap","last_seq":2,"seq":3}`, `{"type":"ack","seq":0,"msgs":10}`, batchAck("FAST", 10, "f4", 4))
	wantState(t, streamInfo(t, s).State, 10, 1, 10)
}

// A failed check: the first message of a batch without gaps gets the
// error PubAck; later, {"type":"err"} and the PubAck of what was stored,
// or, with gaps allowed, the batch goes on.
func TestFastBatchCheckErrors(t *testing.T) {
	nc, js := jsConnect(t, startJS(t))
	createStream(t, js, jetstream.StreamConfig{Name: "FAST", Subjects: []string{"fast.>"}, AllowBatchPublish: true})
	c := newBatchClient(t, nc)
	wrong := `{"code":400,"err_code":10071,"description":"wrong last sequence: 0"}`

	c.pub("fast.a", c.fastReply("e1", 10, "fail", 1, 0), "1", "Nats-Expected-Last-Sequence", "5")
	c.expect(`{"type":"ack","seq":0,"msgs":10}`, errAck("FAST", 400, 10071, "wrong last sequence: 0"))

	c.pub("fast.a", c.fastReply("e2", 10, "fail", 1, 0), "1")
	c.pub("fast.a", c.fastReply("e2", 10, "fail", 2, 1), "2", "Nats-Expected-Last-Sequence", "5")
	c.pub("fast.a", c.fastReply("e2", 10, "fail", 3, 1), "3")
	c.expect(`{"type":"ack","seq":0,"msgs":10}`, `{"type":"err","seq":2,"error":`+strings.Replace(wrong, ": 0", ": 1", 1)+`}`, batchAck("FAST", 1, "e2", 1),
		errAck("FAST", 400, 10208, "batch publish ID unknown"))

	c.pub("fast.a", c.fastReply("e3", 10, "ok", 1, 0), "1")
	c.pub("fast.a", c.fastReply("e3", 10, "ok", 2, 1), "2", "Nats-Expected-Last-Sequence", "5")
	c.pub("fast.a", c.fastReply("e3", 10, "ok", 3, 2), "3")
	c.expect(`{"type":"ack","seq":0,"msgs":10}`, `{"type":"err","seq":2,"error":`+strings.Replace(wrong, ": 0", ": 2", 1)+`}`, batchAck("FAST", 3, "e3", 3))
}

// The errors of a message that cannot be part of a fast batch.
func TestFastBatchErrors(t *testing.T) {
	nc, js := jsConnect(t, startJS(t))
	createStream(t, js, jetstream.StreamConfig{Name: "FAST", Subjects: []string{"fast.>"}, AllowBatchPublish: true})
	createStream(t, js, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.>"}})
	c := newBatchClient(t, nc)

	c.pub("plain.a", c.fastReply("p", 10, "fail", 1, 0), "1")
	c.expect(errAck("PLAIN", 400, 10205, "batch publish is disabled"))
	c.pub("plain.a", c.inbox+".bad.$FI", "1")
	c.expect(errAck("PLAIN", 400, 10205, "batch publish is disabled"))
	c.pub("fast.a", c.inbox+".bad.$FI", "1")
	c.expect(errAck("FAST", 400, 10206, "batch publish pattern is invalid"))
	c.pub("fast.a", c.fastReply("x", 10, "maybe", 1, 0), "1")
	c.expect(errAck("FAST", 400, 10206, "batch publish pattern is invalid"))
	c.pub("fast.a", c.fastReply("x", 10, "fail", 2, 0), "1") // start must be sequence 1
	c.expect(errAck("FAST", 400, 10206, "batch publish pattern is invalid"))
	c.pub("fast.a", c.fastReply(strings.Repeat("i", 65), 10, "fail", 1, 0), "1")
	c.expect(errAck("FAST", 400, 10207, "batch publish ID is invalid"))
	c.pub("fast.a", c.fastReply("nope", 10, "fail", 2, 1), "1")
	c.expect(errAck("FAST", 400, 10208, "batch publish ID unknown"))
	c.pub("fast.a", c.fastReply("nope", 10, "fail", 1, 4), "")
	c.expect(errAck("FAST", 400, 10208, "batch publish ID unknown"))
	c.pub("fast.a", c.fastReply("lvl", 10, "fail", 1, 0), "1", "Nats-Required-Api-Level", "99")
	c.expect(errAck("FAST", 412, 10185, "JetStream minimum api level required"))
}

// A mirror of a stream that takes atomic batches stores the messages
// without their Nats-Batch-* headers, as nats-server's mirror does.
func TestAtomicBatchMirrored(t *testing.T) {
	nc, js := jsConnect(t, startJS(t))
	createStream(t, js, jetstream.StreamConfig{Name: "ATOM", Subjects: []string{"atom.>"}, AllowAtomicPublish: true})
	m := createStream(t, js, jetstream.StreamConfig{Name: "MIRROR", Mirror: &jetstream.StreamSource{Name: "ATOM"}})
	c := newBatchClient(t, nc)
	c.atomic("atom.a", "b", 1, "", "Nats-Expected-Last-Sequence", "0")
	c.atomic("atom.a", "b", 2, "1")
	c.expect("", batchAck("ATOM", 2, "b", 2))
	waitFor(t, 10*time.Second, "the mirror's copies", func() bool { return streamInfo(t, m).State.Msgs == 2 })
	for seq := uint64(1); seq <= 2; seq++ {
		msg, err := m.GetMsg(tctx(t), seq)
		if err != nil {
			t.Fatal(err)
		}
		for k := range msg.Header {
			if strings.HasPrefix(k, "Nats-Batch-") || strings.HasPrefix(k, "Nats-Expected-") {
				t.Errorf("mirrored message %d keeps %s", seq, k)
			}
		}
	}
}
