package jetstream

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// The dead-letter subject (docs/dead-letter.md): a stream ORDERS
// (events.orders.>) whose metadata names dlq.orders, a stream DLQ
// capturing dlq.>, and a durable consumer proc (explicit acks,
// max_deliver 2, ack_wait 1 h, so that only NAKs exhaust deliveries).

const dlqSubject = "dlq.orders"

func dlqOrigin(storage stream.StorageType, retention stream.RetentionPolicy) stream.Config {
	cfg := ordersConfig(storage)
	cfg.Retention = retention
	cfg.Metadata = map[string]string{stream.MetaDeadLetterSubject: dlqSubject}
	return cfg
}

// dlqSetup creates DLQ (unless withDLQ is false) and ORDERS with
// retention, the consumer proc, and publishes n orders ("order-<i>").
func dlqSetup(t *testing.T, js *JetStream, tr *memTransport, storage stream.StorageType, retention stream.RetentionPolicy, withDLQ bool, n int) {
	t.Helper()
	if withDLQ {
		if _, err := js.AddStream(stream.Config{Name: "DLQ", Subjects: []string{"dlq.>"}, Storage: stream.FileStorage}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.AddStream(dlqOrigin(storage, retention)); err != nil {
		t.Fatal(err)
	}
	durable := "proc"
	cfg := consumer.Config{Durable: durable, AckPolicy: consumer.AckExplicit, AckWait: time.Hour, MaxDeliver: 2}
	if _, err := js.CreateConsumer("ORDERS", cfg, CreateOrUpdate, false); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.pub")
	for i := range n {
		tr.Publish("events.orders.new", "_INBOX.pub", []byte("NATS/1.0\r\nOrder: "+fmt.Sprint(i+1)+"\r\n\r\n"), fmt.Appendf(nil, "order-%d", i+1))
	}
	for range n {
		acks.next(t)
	}
}

// pull asks proc for n messages and waits for them.
func pull(t *testing.T, tr *memTransport, d *deliveries, n int) {
	t.Helper()
	tr.Publish("$JS.API.CONSUMER.MSG.NEXT.ORDERS.proc", "_INBOX.pull", nil, fmt.Appendf(nil, `{"batch":%d}`, n))
	d.wait(t, n)
}

// ackWith sends body as the ack of the latest delivery of seq, with a
// reply subject when reply is not "".
func ackWith(tr *memTransport, d *deliveries, seq uint64, body, reply string) {
	d.mu.Lock()
	subj := d.subj[seq]
	d.mu.Unlock()
	tr.Publish(subj, reply, nil, []byte(body))
}

// exhaust NAKs the first delivery of seq, pulls its redelivery (it must
// be the only message to deliver) and NAKs it: the second NAK reaches
// max_deliver. The last NAK carries reply when not "".
func exhaust(t *testing.T, tr *memTransport, d *deliveries, seq uint64, reply string) {
	t.Helper()
	ackWith(tr, d, seq, "-NAK", "")
	pull(t, tr, d, 1)
	ackWith(tr, d, seq, "-NAK", reply)
}

// hdrField returns the value of the header field key of a header block.
func hdrField(hdr []byte, key string) string {
	for _, line := range bytes.Split(hdr, []byte("\r\n")) {
		if k, v, ok := bytes.Cut(line, []byte(": ")); ok && string(k) == key {
			return string(v)
		}
	}
	return ""
}

// streamMsgs returns the number of messages of a stream.
func streamMsgs(t *testing.T, js *JetStream, name string) uint64 {
	t.Helper()
	info, err := js.StreamInfo(name, InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// checkMoved fails unless DLQ holds exactly one copy of each ORDERS
// sequence in seqs (no more messages), with the original payload and
// the origin headers, and the consumer has nothing pending.
func checkMoved(t *testing.T, js *JetStream, reason string, seqs ...uint64) {
	t.Helper()
	waitState(t, js, "DLQ", uint64(len(seqs)))
	got := map[string]bool{}
	for i := range seqs {
		sm, err := js.GetMsg("DLQ", MsgGetRequest{Seq: uint64(i + 1)})
		if err != nil {
			t.Fatalf("DLQ seq %d: %v", i+1, err)
		}
		seq := hdrField(sm.Header, stream.HdrDeadLetterSequence)
		if got[seq] {
			t.Fatalf("ORDERS seq %s moved twice", seq)
		}
		got[seq] = true
		want := map[string]string{
			stream.HdrDeadLetterStream: "ORDERS", stream.HdrDeadLetterConsumer: "proc",
			stream.HdrDeadLetterSubject: "events.orders.new", stream.HdrDeadLetterReason: reason,
			"Nats-Msg-Id": "ORDERS.proc." + seq, "Order": seq,
		}
		for k, v := range want {
			if g := hdrField(sm.Header, k); g != v {
				t.Errorf("copy %d: %s = %q, want %q (header %q)", i+1, k, g, v, sm.Header)
			}
		}
		if string(sm.Data) != "order-"+seq || sm.Subject != dlqSubject {
			t.Errorf("copy %d: %s %q", i+1, sm.Subject, sm.Data)
		}
	}
	for _, s := range seqs {
		if !got[fmt.Sprint(s)] {
			t.Errorf("ORDERS seq %d not moved (moved: %v)", s, got)
		}
	}
	waitUntil(t, "the consumer to have nothing pending", func() bool {
		info, _ := js.ConsumerInfo("ORDERS", "proc")
		return info != nil && info.NumAckPending == 0
	})
	// A move completes on its copy's PubAck: a second copy would be
	// stored by now.
	if n := streamMsgs(t, js, "DLQ"); n != uint64(len(seqs)) {
		t.Fatalf("DLQ holds %d messages, want %d", n, len(seqs))
	}
}

// TestDeadLetterMaxDeliverMoves: a delivery that reaches max_deliver is
// copied to the dead-letter subject, stored once by DLQ with its origin,
// and only then released by the workqueue stream; MAX_DELIVERIES is
// still advised. For a persisted consumer (file) and one that is not
// (memory stream).
func TestDeadLetterMaxDeliverMoves(t *testing.T) {
	for _, storage := range []stream.StorageType{stream.FileStorage, stream.MemoryStorage} {
		t.Run(storage.String(), func(t *testing.T) {
			tr := newMemTransport()
			js := newTestJS(t, vfs.NewCrashFS(), tr)
			defer js.Shutdown()
			dlqSetup(t, js, tr, storage, stream.WorkQueuePolicy, true, 3)
			adv := tr.inbox("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDERS.proc")
			d := collectDeliveries(tr, "_INBOX.pull")
			pull(t, tr, d, 3)
			ackWith(tr, d, 1, "+ACK", "")
			ackWith(tr, d, 3, "+ACK", "")
			exhaust(t, tr, d, 2, "")
			if a := adv.next(t); !strings.Contains(a, `"stream_seq":2`) || !strings.Contains(a, `"deliveries":2`) {
				t.Fatalf("advisory %s", a)
			}
			checkMoved(t, js, "max_deliver", 2)
			waitState(t, js, "ORDERS", 0)
			info, _ := js.ConsumerInfo("ORDERS", "proc")
			if info.AckFloor.Stream != 3 {
				t.Fatalf("ack floor %+v, want stream 3", info.AckFloor)
			}
		})
	}
}

// TestDeadLetterTermAnswersOnceMoved: a +TERM with a reply is answered
// only once the copy is stored and the workqueue stream released the
// original; MSG_TERMINATED is advised with the reason.
func TestDeadLetterTermAnswersOnceMoved(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	dlqSetup(t, js, tr, stream.FileStorage, stream.WorkQueuePolicy, true, 1)
	adv := tr.inbox("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.ORDERS.proc")
	d := collectDeliveries(tr, "_INBOX.pull")
	pull(t, tr, d, 1)
	confirm := tr.inbox("_INBOX.term")
	ackWith(tr, d, 1, "+TERM bad order", "_INBOX.term")
	confirm.next(t)
	if n := streamMsgs(t, js, "DLQ"); n != 1 {
		t.Fatalf("+TERM answered with %d copies stored", n)
	}
	if n := streamMsgs(t, js, "ORDERS"); n != 0 {
		t.Fatalf("+TERM answered with the original still stored (%d)", n)
	}
	if a := adv.next(t); !strings.Contains(a, `"reason":"bad order"`) {
		t.Fatalf("advisory %s", a)
	}
	checkMoved(t, js, "term", 1)
}

// TestDeadLetterUncaptured: without a stream capturing the subject the
// copy is a core publish and the original is treated as without a
// dead-letter subject: +TERM acknowledges it (the workqueue stream
// releases it); after max_deliver it leaves pending but is held, in the
// stream and below the ack floor, until an explicit ack releases it.
func TestDeadLetterUncaptured(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	var mu sync.Mutex
	var copies []string
	_, _ = tr.Subscribe(dlqSubject, "", func(subj, reply string, hdr, data []byte) {
		mu.Lock()
		copies = append(copies, fmt.Sprintf("%s %s %s %q", hdrField(hdr, stream.HdrDeadLetterSequence), hdrField(hdr, stream.HdrDeadLetterReason), reply, data))
		mu.Unlock()
	})
	dlqSetup(t, js, tr, stream.FileStorage, stream.WorkQueuePolicy, false, 2)
	d := collectDeliveries(tr, "_INBOX.pull")
	pull(t, tr, d, 2)
	ackWith(tr, d, 2, "+TERM", "")
	exhaust(t, tr, d, 1, "")
	waitUntil(t, "two copies", func() bool { mu.Lock(); defer mu.Unlock(); return len(copies) == 2 })
	want := []string{`2 term  "order-2"`, `1 max_deliver  "order-1"`}
	mu.Lock()
	if fmt.Sprint(copies) != fmt.Sprint(want) {
		t.Errorf("copies %q, want %q", copies, want)
	}
	mu.Unlock()
	waitUntil(t, "nothing pending", func() bool {
		info, _ := js.ConsumerInfo("ORDERS", "proc")
		return info.NumAckPending == 0
	})
	waitState(t, js, "ORDERS", 1)
	info, _ := js.ConsumerInfo("ORDERS", "proc")
	if info.AckFloor.Stream != 0 || info.NumRedelivered != 1 {
		t.Fatalf("ack floor %+v, %d redelivered; want the floor below the held message 1, counted redelivered", info.AckFloor, info.NumRedelivered)
	}
	ackWith(tr, d, 1, "+ACK", "")
	waitState(t, js, "ORDERS", 0)
	mu.Lock()
	defer mu.Unlock()
	if len(copies) != 2 {
		t.Fatalf("the ack of the held message copied it: %q", copies)
	}
}

// dropReplies is a transport that drops what is published to subjects
// with one of its prefixes while drop is set.
type dropReplies struct {
	*memTransport
	mu       sync.Mutex
	prefixes []string
	dropped  int
}

func (t *dropReplies) Publish(subj, reply string, hdr, data []byte) bool {
	t.mu.Lock()
	for _, p := range t.prefixes {
		if strings.HasPrefix(subj, p) {
			t.dropped++
			t.mu.Unlock()
			return false
		}
	}
	t.mu.Unlock()
	return t.memTransport.Publish(subj, reply, hdr, data)
}

// later is a clock an hour ahead: past DLQ's duplicate window.
func later() time.Time { return time.Now().Add(time.Hour) }

// restartJS starts JetStream on a crashed file system with clock now
// (nil: time.Now).
func restartJS(t *testing.T, fs vfs.FS, tr Transport, now func() time.Time) *JetStream {
	t.Helper()
	js, err := New(Config{StoreDir: "/sd", FS: fs, ServerName: "s1", Now: now}, tr)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestDeadLetterCopyStoredBeforeCrash: the copy is durable in DLQ but
// its PubAck never reached the consumer when the power fails. After the
// restart, an hour later (DLQ's duplicate window has passed, so the
// Nats-Msg-Id alone would not stop a second copy), the move resumes,
// finds the copy and completes: one copy, the original released.
func TestDeadLetterCopyStoredBeforeCrash(t *testing.T) {
	fs, mt := vfs.NewCrashFS(), newMemTransport()
	tr := &dropReplies{memTransport: mt}
	js := newTestJS(t, fs, tr)
	dlqSetup(t, js, mt, stream.FileStorage, stream.WorkQueuePolicy, true, 1)
	tr.mu.Lock()
	tr.prefixes = []string{js.dlqAcks.Prefix()}
	tr.mu.Unlock()
	d := collectDeliveries(mt, "_INBOX.pull")
	pull(t, mt, d, 1)
	exhaust(t, mt, d, 1, "")
	dlq, _ := js.lookup("DLQ")
	waitUntil(t, "the copy to be durable", func() bool { return dlq.Store().DurableSeq() >= 1 })
	waitUntil(t, "its PubAck to be dropped", func() bool { tr.mu.Lock(); defer tr.mu.Unlock(); return tr.dropped > 0 })
	crashed := fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	js.Shutdown()

	js2 := restartJS(t, crashed, newMemTransport(), later)
	defer js2.Shutdown()
	checkMoved(t, js2, "max_deliver", 1)
	waitState(t, js2, "ORDERS", 0)
}

// TestDeadLetterCopyNotStoredBeforeCrash: the power fails after the
// mark is stored and the copy published, but before DLQ stored it (its
// apply goroutine is held). After the restart the move publishes the
// copy again: one copy, the original released.
func TestDeadLetterCopyNotStoredBeforeCrash(t *testing.T) {
	fs, tr := vfs.NewCrashFS(), newMemTransport()
	js := newTestJS(t, fs, tr)
	dlqSetup(t, js, tr, stream.FileStorage, stream.WorkQueuePolicy, true, 1)
	published := tr.inbox(dlqSubject)
	dlq, _ := js.lookup("DLQ")
	release := holdApply(dlq)
	d := collectDeliveries(tr, "_INBOX.pull")
	pull(t, tr, d, 1)
	exhaust(t, tr, d, 1, "")
	published.next(t) // the copy went out, so its mark is stored
	crashed := fs.Crash(vfs.CrashOptions{Tail: vfs.TailAny})
	release()
	js.Shutdown()

	js2 := restartJS(t, crashed, newMemTransport(), nil)
	defer js2.Shutdown()
	checkMoved(t, js2, "max_deliver", 1)
	waitState(t, js2, "ORDERS", 0)
}

// TestDeadLetterConfirmedNakBeforeCrash: the power fails right after a
// confirmed -NAK reached max_deliver (DLQ held, so nothing is copied).
// When the restored state holds the mark, the move resumes at the
// restart; when only the ack journal holds the NAK, its replay does not
// end the deliveries (the stored state may be newer than the NAK:
// consumer.State.Replay), and the delivery's ack wait does, after the
// restart an hour later: either way one copy, the original released,
// and no redelivery.
func TestDeadLetterConfirmedNakBeforeCrash(t *testing.T) {
	for _, tail := range []vfs.TailMode{vfs.TailDrop, vfs.TailAny, vfs.TailTorn} {
		t.Run(fmt.Sprint(tail), func(t *testing.T) {
			fs, tr := vfs.NewCrashFS(), newMemTransport()
			js := newTestJS(t, fs, tr)
			dlqSetup(t, js, tr, stream.FileStorage, stream.WorkQueuePolicy, true, 1)
			dlq, _ := js.lookup("DLQ")
			release := holdApply(dlq)
			d := collectDeliveries(tr, "_INBOX.pull")
			pull(t, tr, d, 1)
			ackWith(tr, d, 1, "-NAK", "")
			pull(t, tr, d, 1)
			// The second delivery's count must be stored for the journaled
			// NAK to exhaust it on replay.
			c, _ := js.lookupConsumer("ORDERS", "proc")
			waitUntil(t, "the redelivery to be stored", func() bool {
				st, err := c.StoredState()
				return err == nil && st.Redelivered[1] == 1
			})
			confirm := tr.inbox("_INBOX.nak")
			ackWith(tr, d, 1, "-NAK", "_INBOX.nak")
			confirm.next(t)
			crashed := fs.Crash(vfs.CrashOptions{Tail: tail})
			release()
			js.Shutdown()

			tr2 := newMemTransport()
			redelivered := tr2.inbox("_INBOX.again")
			js2 := restartJS(t, crashed, tr2, later)
			defer js2.Shutdown()
			checkMoved(t, js2, "max_deliver", 1)
			waitState(t, js2, "ORDERS", 0)
			tr2.Publish("$JS.API.CONSUMER.MSG.NEXT.ORDERS.proc", "_INBOX.again", nil, []byte(`{"batch":1,"no_wait":true}`))
			if got := redelivered.next(t); got != "" {
				t.Fatalf("after the restart the consumer delivered %q", got)
			}
		})
	}
}

// TestDeadLetterRetriesRefusedCopy: a copy the capturing stream refuses
// (here: a message too large for its max_msg_size) is retried, the
// original staying pending and in the stream, until the stream takes it.
func TestDeadLetterRetriesRefusedCopy(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	dlqSetup(t, js, tr, stream.FileStorage, stream.WorkQueuePolicy, true, 1)
	small := stream.Config{Name: "DLQ", Subjects: []string{"dlq.>"}, Storage: stream.FileStorage, MaxMsgSize: 16}
	if _, err := js.UpdateStream(small); err != nil {
		t.Fatal(err)
	}
	d := collectDeliveries(tr, "_INBOX.pull")
	pull(t, tr, d, 1)
	exhaust(t, tr, d, 1, "")
	c, _ := js.lookupConsumer("ORDERS", "proc")
	waitUntil(t, "a refused attempt", func() bool {
		tries, moving := c.MoveTries(1)
		return moving && tries > 0
	})
	if n := streamMsgs(t, js, "ORDERS"); n != 1 {
		t.Fatalf("the original was released (%d left) before its copy was stored", n)
	}
	if _, err := js.UpdateStream(stream.Config{Name: "DLQ", Subjects: []string{"dlq.>"}, Storage: stream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	checkMoved(t, js, "max_deliver", 1)
	waitState(t, js, "ORDERS", 0)
}

// TestDeadLetterReusedMsgID: ORDERS is deleted and made again, and its
// new message 1 is dead-lettered while the copy of the old message 1,
// with the same Nats-Msg-Id, is in DLQ's duplicate window (1 s). The
// duplicate PubAck is not taken for the new copy: it is stored once the
// old id has left the window.
func TestDeadLetterReusedMsgID(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	if _, err := js.AddStream(stream.Config{Name: "DLQ", Subjects: []string{"dlq.>"}, Storage: stream.FileStorage, DuplicateWindow: time.Second}); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		dlqSetup(t, js, tr, stream.FileStorage, stream.WorkQueuePolicy, false, 1)
		d := collectDeliveries(tr, "_INBOX.pull")
		pull(t, tr, d, 1)
		ackWith(tr, d, 1, "+TERM", "")
		waitState(t, js, "DLQ", uint64(round+1))
		waitState(t, js, "ORDERS", 0)
		if err := js.DeleteStream("ORDERS"); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := js.GetMsg("DLQ", MsgGetRequest{Seq: 1})
	b, _ := js.GetMsg("DLQ", MsgGetRequest{Seq: 2})
	if stream.MsgID(a.Header) != stream.MsgID(b.Header) || stream.DeadLetterTime(a.Header) == stream.DeadLetterTime(b.Header) {
		t.Fatalf("copies %q and %q", a.Header, b.Header)
	}
}

// TestDeadLetterConfigErrors: a bad dead-letter subject is refused at
// stream and consumer create and update with 10052, and so is a stream
// update whose subjects would capture a consumer's dead-letter subject.
func TestDeadLetterConfigErrors(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	meta := func(subj string) map[string]string { return map[string]string{stream.MetaDeadLetterSubject: subj} }
	cfg := ordersConfig(stream.FileStorage)
	for _, bad := range []string{"dlq.*", "events.orders.dead", "$JS.API.X"} {
		cfg.Metadata = meta(bad)
		expectErr(t, second(js.AddStream(cfg)), jserr.StreamInvalidConfig)
	}
	cfg.Metadata = meta(dlqSubject)
	if _, err := js.AddStream(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Metadata = meta("events.orders.x")
	expectErr(t, second(js.UpdateStream(cfg)), jserr.StreamInvalidConfig)
	cc := consumer.Config{Durable: "proc", AckPolicy: consumer.AckExplicit}
	for _, bad := range []string{"dlq orders", "events.orders.y"} {
		cc.Metadata = meta(bad)
		expectErr(t, second(js.CreateConsumer("ORDERS", cc, CreateOrUpdate, false)), jserr.StreamInvalidConfig)
	}
	cc.Metadata = meta("other.dlq")
	if _, err := js.CreateConsumer("ORDERS", cc, CreateOrUpdate, false); err != nil {
		t.Fatal(err)
	}
	cc.Metadata = meta("events.orders.z")
	expectErr(t, second(js.CreateConsumer("ORDERS", cc, CreateOrUpdate, false)), jserr.StreamInvalidConfig)
	cfg.Metadata = meta(dlqSubject)
	cfg.Subjects = []string{"events.orders.>", "other.>"}
	err := second(js.UpdateStream(cfg))
	expectErr(t, err, jserr.StreamInvalidConfig)
	if !strings.Contains(err.Description, "other.dlq") {
		t.Fatalf("error %v does not name the consumer's subject", err)
	}
}

// TestDeadLetterTermOfHeld: a message that ran out of deliveries while
// no stream captured the dead-letter subject is held by the workqueue
// stream, as without a dead-letter subject. Once DLQ captures the
// subject, a +TERM of it moves it (it was never moved): the +TERM is
// answered once DLQ stored the copy (reason term) and the original is
// released. With DLQ's apply goroutine held, the power fails after the
// mark of the held message is stored and the copy published: the
// restart resumes the move, one copy.
func TestDeadLetterTermOfHeld(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			fs, tr := vfs.NewCrashFS(), newMemTransport()
			js := newTestJS(t, fs, tr)
			dlqSetup(t, js, tr, stream.FileStorage, stream.WorkQueuePolicy, false, 1)
			d := collectDeliveries(tr, "_INBOX.pull")
			pull(t, tr, d, 1)
			exhaust(t, tr, d, 1, "")
			waitUntil(t, "the message to be out of deliveries", func() bool {
				c, _ := js.lookupConsumer("ORDERS", "proc")
				st := c.Snapshot() // out of deliveries: a redelivery count without a pending entry
				_, pending := st.PendingAt(1)
				_, counted := st.Redelivered[1]
				return counted && !pending && c.NumMoves() == 0
			})
			if _, err := js.AddStream(stream.Config{Name: "DLQ", Subjects: []string{"dlq.>"}, Storage: stream.FileStorage}); err != nil {
				t.Fatal(err)
			}
			waitState(t, js, "ORDERS", 1)
			adv := tr.inbox("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.ORDERS.proc")
			if !crash {
				defer js.Shutdown()
				confirm := tr.inbox("_INBOX.term")
				ackWith(tr, d, 1, "+TERM moved by hand", "_INBOX.term")
				confirm.next(t)
				if n := streamMsgs(t, js, "ORDERS"); n != 0 {
					t.Fatalf("+TERM answered with the original still stored (%d)", n)
				}
				if a := adv.next(t); !strings.Contains(a, `"reason":"moved by hand"`) {
					t.Fatalf("advisory %s", a)
				}
				checkMoved(t, js, "term", 1)
				return
			}
			dlq, _ := js.lookup("DLQ")
			release := holdApply(dlq)
			published := tr.inbox(dlqSubject)
			ackWith(tr, d, 1, "+TERM", "")
			published.next(t) // the copy went out, so the mark is stored
			if n := streamMsgs(t, js, "ORDERS"); n != 1 {
				t.Fatalf("the held message was released (%d left) before its copy was stored", n)
			}
			crashed := fs.Crash(vfs.CrashOptions{Tail: vfs.TailAny})
			release()
			js.Shutdown()

			js2 := restartJS(t, crashed, newMemTransport(), nil)
			defer js2.Shutdown()
			checkMoved(t, js2, "term", 1)
			waitState(t, js2, "ORDERS", 0)
		})
	}
}
