package test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Interest and workqueue retention of messages that ran out of deliveries
// (max_deliver) unacknowledged, and where a purge leaves each consumer.
// Every assertion holds against nats-server v2.15.2
// (CAIRN_TEST_TARGET=nats-server); where cairn deliberately differs
// (docs/compatibility.md) the test says which way each server goes.
//
// nats-server notices that a NAKed message ran out of deliveries only
// when the consumer next looks for something to deliver (a pull request
// waiting); cairn at the NAK. rtExhaust therefore ends with a pull that
// gets nothing, after which both agree.

// rtExhaust has pull consumer c (max_deliver n) deliver its next message
// n times, NAKing each delivery, then pulls once more and gets nothing:
// the message ran out of deliveries. It returns the last delivery, whose
// reply subject still acks or terminates the message.
func rtExhaust(t *testing.T, nc *nats.Conn, c jetstream.Consumer, n int) jetstream.Msg {
	t.Helper()
	var last jetstream.Msg
	for i := 1; i <= n; i++ {
		m := cxFetch(t, c, 1, time.Second)
		if len(m) != 1 || cxMeta(t, m[0]).NumDelivered != uint64(i) {
			t.Fatalf("delivery %d: %d messages", i, len(m))
		}
		cxNakSync(t, nc, m[0])
		last = m[0]
	}
	if m := cxFetch(t, c, 1, 300*time.Millisecond); len(m) != 0 {
		t.Fatalf("delivered again after %d deliveries with max_deliver %d: stream seqs %v", n, n, cxSeqs(t, m))
	}
	return last
}

// rtHeld checks whether the stream still holds message seq.
func rtHeld(t *testing.T, s jetstream.Stream, seq uint64, want bool) {
	t.Helper()
	_, err := s.GetMsg(tctx(t), seq)
	switch {
	case want && err != nil:
		t.Fatalf("message %d is gone: %v", seq, err)
	case !want && !errors.Is(err, jetstream.ErrMsgNotFound):
		t.Fatalf("message %d is still there (%v)", seq, err)
	}
}

// rtAckAll fetches up to n messages from c and double-acks them.
func rtAckAll(t *testing.T, c jetstream.Consumer, n int) {
	t.Helper()
	for _, m := range cxFetch(t, c, n, time.Second) {
		cxAckSync(t, m)
	}
}

// TestRetentionMaxDeliverInterest is nats-server's behaviour from its
// issues 4998 and 6538: on an interest stream, a message that one
// consumer NAKed until max_deliver stays after every other consumer
// acked it, so that it can still be read by sequence after the
// MAX_DELIVERIES advisory; that consumer's ack floor stays below it. A
// later ack of it (from the last delivery's reply subject) releases it.
func TestRetentionMaxDeliverInterest(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	s := createStream(t, js, jetstream.StreamConfig{Name: "RMD", Subjects: []string{"rmd.>"}, Retention: jetstream.InterestPolicy})
	c1 := cxCreate(t, js, "RMD", jetstream.ConsumerConfig{Durable: "c1", MaxDeliver: 3})
	c2 := cxCreate(t, js, "RMD", jetstream.ConsumerConfig{Durable: "c2"})
	adv := subSync(t, nc, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.RMD.c1")
	flush(t, nc)
	jsPublish(t, js, "rmd.a", "poison")

	last := rtExhaust(t, nc, c1, 3)
	if a := cxAdvisory(t, adv); a["stream_seq"] != float64(1) || a["deliveries"] != float64(3) {
		t.Errorf("MAX_DELIVERIES advisory: %v", a)
	}
	rtAckAll(t, c2, 1)
	rtHeld(t, s, 1, true)
	info := cxInfo(t, c1)
	cxSeqInfo(t, "c1 delivered", info.Delivered, 3, 1)
	cxSeqInfo(t, "c1 ack floor", info.AckFloor, 0, 0)
	cxCounts(t, info, 0, 0, 1, 0)

	// The operator has dealt with it: an ack releases it.
	cxAckSync(t, last)
	rtHeld(t, s, 1, false)
	info = cxInfo(t, c1)
	cxSeqInfo(t, "c1 ack floor after the late ack", info.AckFloor, 0, 0)
	cxCounts(t, info, 0, 0, 0, 0)
}

// TestRetentionMaxDeliverFloorMovesOn: once the consumer acks everything
// still pending, its ack floor moves past the message that ran out of
// deliveries (as nats-server's does), and the message still stays.
func TestRetentionMaxDeliverFloorMovesOn(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	s := createStream(t, js, jetstream.StreamConfig{Name: "RMF", Subjects: []string{"rmf.>"}, Retention: jetstream.InterestPolicy})
	c1 := cxCreate(t, js, "RMF", jetstream.ConsumerConfig{Durable: "c1", MaxDeliver: 2})
	c2 := cxCreate(t, js, "RMF", jetstream.ConsumerConfig{Durable: "c2"})
	jsPublish(t, js, "rmf.a", "poison")
	rtExhaust(t, nc, c1, 2)
	jsPublish(t, js, "rmf.a", "fine")
	rtAckAll(t, c1, 1)
	info := cxInfo(t, c1)
	cxSeqInfo(t, "c1 ack floor", info.AckFloor, 3, 2)
	cxCounts(t, info, 0, 0, 1, 0)
	rtAckAll(t, c2, 2)
	rtHeld(t, s, 1, true)
	rtHeld(t, s, 2, false)
}

// rtFixture is an interest stream RMP where consumer c1 (max_deliver 2,
// filter rmp.a) ran out of deliveries for message 1 and c2 (unfiltered)
// acked it.
type rtFixture struct {
	dir  string
	stop func()
	nc   *nats.Conn
	js   jetstream.JetStream
	s    jetstream.Stream
	c1   jetstream.Consumer
	last jetstream.Msg // c1's last delivery of message 1
}

func rtSetup(t *testing.T, opts func(*jetstream.ConsumerConfig)) *rtFixture {
	t.Helper()
	f := &rtFixture{dir: t.TempDir()}
	var u string
	u, f.stop = startServerStoppable(t, jsIn(f.dir))
	f.nc, f.js = jsConnect(t, u)
	f.s = createStream(t, f.js, jetstream.StreamConfig{Name: "RMP", Subjects: []string{"rmp.>"}, Retention: jetstream.InterestPolicy})
	cfg := jetstream.ConsumerConfig{Durable: "c1", MaxDeliver: 2, FilterSubject: "rmp.a"}
	if opts != nil {
		opts(&cfg)
	}
	f.c1 = cxCreate(t, f.js, "RMP", cfg)
	c2 := cxCreate(t, f.js, "RMP", jetstream.ConsumerConfig{Durable: "c2"})
	jsPublish(t, f.js, "rmp.a", "poison")
	f.last = rtExhaust(t, f.nc, f.c1, 2)
	rtAckAll(t, c2, 1)
	rtHeld(t, f.s, 1, true)
	return f
}

// TestRetentionMaxDeliverPaths: every other way an interest stream
// decides about a message that consumer c1 ran out of deliveries for,
// once c2 acked it.
func TestRetentionMaxDeliverPaths(t *testing.T) {
	t.Run("term releases it", func(t *testing.T) {
		f := rtSetup(t, nil)
		adv := subSync(t, f.nc, "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.RMP.c1")
		flush(t, f.nc)
		if _, err := f.nc.Request(f.last.Reply(), []byte("+TERM handled"), jsTimeout); err != nil {
			t.Fatalf("+TERM: %v", err)
		}
		rtHeld(t, f.s, 1, false)
		if a := cxAdvisory(t, adv); a["stream_seq"] != float64(1) || a["reason"] != "handled" || a["deliveries"] != float64(2) {
			t.Errorf("MSG_TERMINATED advisory: %v", a)
		}
		cxCounts(t, cxInfo(t, f.c1), 0, 0, 0, 0)
	})
	t.Run("a NAK or progress changes nothing", func(t *testing.T) {
		f := rtSetup(t, nil)
		for _, body := range []string{"-NAK", "+WPI"} {
			if err := f.nc.Publish(f.last.Reply(), []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
		flush(t, f.nc)
		if m := cxFetch(t, f.c1, 1, 300*time.Millisecond); len(m) != 0 {
			t.Fatalf("delivered again: %v", cxSeqs(t, m))
		}
		rtHeld(t, f.s, 1, true)
		cxCounts(t, cxInfo(t, f.c1), 0, 0, 1, 0)
	})
	t.Run("deleting its consumer releases it", func(t *testing.T) {
		f := rtSetup(t, nil)
		if err := f.js.DeleteConsumer(tctx(t), "RMP", "c1"); err != nil {
			t.Fatal(err)
		}
		cxWaitMsgs(t, f.s, 0)
	})
	t.Run("deleting another consumer keeps it", func(t *testing.T) {
		f := rtSetup(t, nil)
		if err := f.js.DeleteConsumer(tctx(t), "RMP", "c2"); err != nil {
			t.Fatal(err)
		}
		rtHeld(t, f.s, 1, true)
	})
	t.Run("a filter that no longer matches releases it", func(t *testing.T) {
		f := rtSetup(t, nil)
		if _, err := f.js.UpdateConsumer(tctx(t), "RMP", jetstream.ConsumerConfig{Durable: "c1", MaxDeliver: 2, FilterSubject: "rmp.b"}); err != nil {
			t.Fatal(err)
		}
		cxWaitMsgs(t, f.s, 0)
	})
	t.Run("a filter that still matches keeps it", func(t *testing.T) {
		f := rtSetup(t, nil)
		if _, err := f.js.UpdateConsumer(tctx(t), "RMP", jetstream.ConsumerConfig{Durable: "c1", MaxDeliver: 2, FilterSubject: "rmp.*"}); err != nil {
			t.Fatal(err)
		}
		rtHeld(t, f.s, 1, true)
	})
	t.Run("a restart keeps it", func(t *testing.T) {
		f := rtSetup(t, nil)
		reply := f.last.Reply()
		f.nc.Close()
		f.stop()
		u, _ := startServerStoppable(t, jsIn(f.dir))
		nc, js := jsConnect(t, u)
		s, err := js.Stream(tctx(t), "RMP")
		if err != nil {
			t.Fatal(err)
		}
		rtHeld(t, s, 1, true)
		c1, err := js.Consumer(tctx(t), "RMP", "c1")
		if err != nil {
			t.Fatal(err)
		}
		info := cxInfo(t, c1)
		cxSeqInfo(t, "c1 ack floor after the restart", info.AckFloor, 0, 0)
		cxCounts(t, info, 0, 0, 1, 0)
		if _, err := nc.Request(reply, nil, jsTimeout); err != nil {
			t.Fatalf("ack after the restart: %v", err)
		}
		rtHeld(t, s, 1, false)
	})
	t.Run("removing it from the stream forgets it", func(t *testing.T) {
		f := rtSetup(t, nil)
		if err := f.s.DeleteMsg(tctx(t), 1); err != nil {
			t.Fatal(err)
		}
		cxCounts(t, cxInfo(t, f.c1), 0, 0, 0, 0)
	})
	t.Run("ack all never releases it", func(t *testing.T) {
		f := rtSetup(t, func(c *jetstream.ConsumerConfig) { c.AckPolicy = jetstream.AckAllPolicy })
		jsPublish(t, f.js, "rmp.a", "next")
		rtAckAll(t, f.c1, 1) // acks everything through 2
		cxAckSync(t, f.last) // at or below the floor: nothing
		info := cxInfo(t, f.c1)
		cxSeqInfo(t, "c1 ack floor", info.AckFloor, 3, 2)
		cxCounts(t, info, 0, 0, 1, 0)
		rtHeld(t, f.s, 1, true)
	})
	for _, how := range []string{"deleting", "refiltering"} {
		t.Run(how+" its consumer after its floor moved past it", func(t *testing.T) {
			f := rtSetup(t, nil)
			jsPublish(t, f.js, "rmp.a", "next")
			rtAckAll(t, f.c1, 1)
			cxSeqInfo(t, "c1 ack floor", cxInfo(t, f.c1).AckFloor, 3, 2)
			var err error
			if how == "deleting" {
				err = f.js.DeleteConsumer(tctx(t), "RMP", "c1")
			} else {
				_, err = f.js.UpdateConsumer(tctx(t), "RMP", jetstream.ConsumerConfig{Durable: "c1", MaxDeliver: 2, FilterSubject: "rmp.b"})
			}
			if err != nil {
				t.Fatal(err)
			}
			if targetIsNatsServer() {
				// It scans only from the consumer's ack floor up, so the
				// message nobody holds any more stays (until a restart).
				rtHeld(t, f.s, 1, true)
				return
			}
			// cairn releases everything the consumer held
			// (docs/compatibility.md).
			rtHeld(t, f.s, 1, false)
		})
	}
}

// TestRetentionMaxDeliverWorkQueue: a workqueue stream keeps a message
// that ran out of deliveries (nats-server issue 7817) until an ack or
// +TERM of it.
func TestRetentionMaxDeliverWorkQueue(t *testing.T) {
	for _, body := range []string{"+ACK", "+TERM"} {
		t.Run(body, func(t *testing.T) {
			u := startJS(t)
			nc, js := jsConnect(t, u)
			s := createStream(t, js, jetstream.StreamConfig{Name: "RMW", Subjects: []string{"rmw.>"}, Retention: jetstream.WorkQueuePolicy})
			c := cxCreate(t, js, "RMW", jetstream.ConsumerConfig{Durable: "w", MaxDeliver: 2})
			jsPublish(t, js, "rmw.a", "poison")
			last := rtExhaust(t, nc, c, 2)
			jsPublish(t, js, "rmw.a", "fine")
			rtAckAll(t, c, 1)
			rtHeld(t, s, 1, true)
			rtHeld(t, s, 2, false)
			if _, err := nc.Request(last.Reply(), []byte(body), jsTimeout); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			rtHeld(t, s, 1, false)
		})
	}
}

// TestRetentionPurgeMovesCoveredConsumers is nats-server's behaviour for
// a purge with a subject: a consumer whose filter the purge covers
// entirely moves past it (nothing pending, ack floor at the last purged
// position); a consumer with a disjoint filter keeps its position; one
// whose filters reach beyond the subject moves to the stream's new first
// sequence.
func TestRetentionPurgeMovesCoveredConsumers(t *testing.T) {
	type want struct {
		name       string
		pending    uint64
		ackPending int
		floor      uint64 // ack_floor.stream_seq
	}
	for _, tc := range []struct {
		name    string
		deliver bool // each consumer fetches 3 and acks the first before the purge
		purge   func(t *testing.T, s jetstream.Stream, js jetstream.JetStream)
		want    []want
	}{
		{
			name: "subject",
			purge: func(t *testing.T, s jetstream.Stream, _ jetstream.JetStream) {
				rtPurge(t, s, jetstream.WithPurgeSubject("FOO.adam"))
			},
			want: []want{
				{"adam", 0, 0, 20}, {"eve", 10, 0, 0}, {"all", 10, 0, 1},
				{"star", 10, 0, 1}, {"multi", 0, 0, 1}, {"beyond", 10, 0, 1},
			},
		},
		{
			name:    "subject after deliveries",
			deliver: true,
			purge: func(t *testing.T, s jetstream.Stream, _ jetstream.JetStream) {
				rtPurge(t, s, jetstream.WithPurgeSubject("FOO.adam"))
			},
			want: []want{
				{"adam", 0, 0, 20}, {"eve", 7, 2, 3}, {"all", 9, 1, 1},
				{"star", 9, 1, 1}, {"multi", 0, 0, 5}, {"beyond", 9, 1, 1},
			},
		},
		{
			name: "subject keep",
			purge: func(t *testing.T, s jetstream.Stream, _ jetstream.JetStream) {
				rtPurge(t, s, jetstream.WithPurgeSubject("FOO.adam"), jetstream.WithPurgeKeep(3))
			},
			want: []want{{"adam", 3, 0, 14}, {"eve", 10, 0, 0}, {"all", 13, 0, 1}},
		},
		{
			name: "subject below sequence",
			purge: func(t *testing.T, s jetstream.Stream, _ jetstream.JetStream) {
				rtPurge(t, s, jetstream.WithPurgeSubject("FOO.adam"), jetstream.WithPurgeSequence(10))
			},
			want: []want{{"adam", 5, 0, 10}, {"eve", 10, 0, 0}, {"all", 15, 0, 1}},
		},
		{
			name: "subject matching nothing",
			purge: func(t *testing.T, s jetstream.Stream, _ jetstream.JetStream) {
				rtPurge(t, s, jetstream.WithPurgeSubject("FOO.zed"))
			},
			want: []want{{"adam", 10, 0, 0}, {"eve", 10, 0, 0}, {"all", 20, 0, 0}},
		},
		{
			name: "rollup",
			purge: func(t *testing.T, _ jetstream.Stream, js jetstream.JetStream) {
				m := &nats.Msg{Subject: "FOO.adam", Header: nats.Header{"Nats-Rollup": []string{"sub"}}, Data: []byte("r")}
				if _, err := js.PublishMsg(tctx(t), m); err != nil {
					t.Fatal(err)
				}
			},
			want: []want{{"adam", 1, 0, 20}, {"eve", 10, 0, 0}, {"all", 11, 0, 1}, {"multi", 1, 0, 1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := startJS(t)
			_, js := jsConnect(t, u)
			s := createStream(t, js, jetstream.StreamConfig{Name: "PRG", Subjects: []string{"FOO.*", "BAR.>"}, AllowRollup: true})
			cs := map[string]jetstream.Consumer{}
			for _, cfg := range []jetstream.ConsumerConfig{
				{Durable: "adam", FilterSubject: "FOO.adam"},
				{Durable: "eve", FilterSubject: "FOO.eve"},
				{Durable: "all"},
				{Durable: "star", FilterSubject: "FOO.*"},
				{Durable: "multi", FilterSubjects: []string{"FOO.adam", "FOO.x"}},
				{Durable: "beyond", FilterSubjects: []string{"FOO.*", "BAR.>"}},
			} {
				cs[cfg.Durable] = cxCreate(t, js, "PRG", cfg)
			}
			for range 10 {
				jsPublish(t, js, "FOO.adam", "a")
				jsPublish(t, js, "FOO.eve", "e")
			}
			if tc.deliver {
				for _, name := range []string{"adam", "eve", "all", "star", "multi", "beyond"} {
					m := cxFetch(t, cs[name], 3, time.Second)
					if len(m) != 3 {
						t.Fatalf("%s fetched %d", name, len(m))
					}
					cxAckSync(t, m[0])
				}
			}
			tc.purge(t, s, js)
			for _, w := range tc.want {
				if tc.deliver && w.name == "multi" && targetIsNatsServer() {
					// Its deliveries 3 and 5, purged, stay ack pending
					// there; cairn drops them (docs/compatibility.md).
					continue
				}
				info := cxInfo(t, cs[w.name])
				if info.NumPending != w.pending || info.NumAckPending != w.ackPending || info.AckFloor.Stream != w.floor {
					t.Errorf("%s: num_pending %d num_ack_pending %d ack_floor.stream_seq %d, want %d %d %d",
						w.name, info.NumPending, info.NumAckPending, info.AckFloor.Stream, w.pending, w.ackPending, w.floor)
				}
			}
		})
	}
}

func rtPurge(t *testing.T, s jetstream.Stream, opts ...jetstream.StreamPurgeOpt) {
	t.Helper()
	if err := s.Purge(tctx(t), opts...); err != nil {
		t.Fatalf("purge: %v", err)
	}
}
