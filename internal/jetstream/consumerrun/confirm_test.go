package consumerrun

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
)

// These tests follow a replicated consumer's double-ack confirmations
// (replicated.go, "Double acks through a change of leader") over a log
// whose batches apply when the test says (heldLog).

// ack sends the consumer an acknowledgement of stream sequence seq
// (delivered once, as the seq-th delivery) with body and reply subject.
func (t *pullTransport) ack(tb testing.TB, seq uint64, body, reply string) {
	tb.Helper()
	const subj = "$JS.ACK.S.C.>"
	hs := t.handlers(subj)
	if len(hs) == 0 {
		tb.Fatal("the consumer does not take acks")
	}
	for _, h := range hs {
		h(consumer.AckSubject("S", "C", 1, seq, seq, time.Now().UnixNano(), 0), reply, nil, []byte(body))
	}
}

// confirmed reports whether the consumer answered reply (an empty
// message: the double ack's confirmation), failing on more than one
// answer.
func (t *pullTransport) confirmed(tb testing.TB, reply string) bool {
	tb.Helper()
	_, st := t.got(reply)
	if len(st) > 1 {
		tb.Fatalf("%s answered %d times", reply, len(st))
	}
	return len(st) == 1
}

// next applies the oldest batch flushed and not yet applied: with its
// key (its entry applied at its index under the term it was proposed
// in: raftnode hands the proposer the tag, also once it no longer leads)
// or without (another term's entry took its index: no tag).
func (l *heldLog) next(tb testing.TB, c *Consumer, own bool) {
	tb.Helper()
	l.mu.Lock()
	if len(l.flushed) == 0 {
		l.mu.Unlock()
		tb.Fatal("no batch flushed to apply")
	}
	e := l.flushed[0]
	l.flushed = l.flushed[1:]
	l.index++
	index := l.index
	l.mu.Unlock()
	key := e.key
	if !own {
		key = 0
	}
	c.ApplyBatch(index, e.ops, key)
}

// acksInBatches has a replicated consumer over l deliver three messages,
// applies their deliveries, and double-acks each in a round of its own
// (a batch each); none is confirmed before its batch applies.
func acksInBatches(t *testing.T) (*heldLog, *Consumer, *pullTransport) {
	t.Helper()
	l := &heldLog{}
	c, tr := startPullConsumer(t, 10, func(a streamrun.Applier[consumer.Op]) streamrun.Log[consumer.Op] {
		l.a = a
		return l
	})
	tr.pull(t, "inbox.1", `{"batch":3,"expires":600000000000}`)
	synctest.Wait()
	if n, _ := tr.got("inbox.1"); n != 3 {
		t.Fatalf("delivered %d messages, want 3", n)
	}
	l.commit(c)
	for seq := uint64(1); seq <= 3; seq++ {
		tr.ack(t, seq, "+ACK", fmt.Sprintf("reply.%d", seq))
		synctest.Wait()
	}
	l.mu.Lock()
	batches := len(l.flushed)
	l.mu.Unlock()
	if batches != 3 {
		t.Fatalf("%d batches flushed for three double acks in three rounds, want 3", batches)
	}
	for seq := 1; seq <= 3; seq++ {
		if tr.confirmed(t, fmt.Sprintf("reply.%d", seq)) {
			t.Fatalf("double ack %d confirmed before its operation applied", seq)
		}
	}
	return l, c, tr
}

// A leader that loses its leadership with double acks waiting keeps
// their confirmations: the one whose entry then applies here under the
// term it was proposed in (committed by the next leader) is answered;
// those whose indexes entries of another term took, or that raftnode
// gave up on, are not, and are dropped once none of their batches can
// still apply (Outstanding), within keptConfirmLook.
// Before, the deposed leader dropped every confirmation at once, and
// the client of an ack that committed timed out.
func TestDeposedLeaderConfirmsCommittedDoubleAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, c, tr := acksInBatches(t)
		c.SetLeading(false)
		synctest.Wait()
		if c.Leading() {
			t.Fatal("still leading")
		}
		l.next(t, c, true) // the first ack's entry, committed by the next leader
		synctest.Wait()
		if !tr.confirmed(t, "reply.1") {
			t.Fatal("a deposed leader's double ack whose entry committed was not confirmed")
		}
		l.next(t, c, false) // the second's index taken by the next leader's entry
		synctest.Wait()
		if tr.confirmed(t, "reply.2") {
			t.Fatal("a double ack confirmed for an entry of another term at its index")
		}
		c.mu.Lock()
		kept := len(c.confirms)
		c.mu.Unlock()
		if kept != 2 {
			t.Fatalf("%d confirmations kept while the third batch may still apply, want 2", kept)
		}
		// raftnode learns nothing of the third batch and gives its
		// proposal up (ten election timeouts): nothing applies.
		l.mu.Lock()
		l.flushed = l.flushed[1:]
		l.mu.Unlock()
		time.Sleep(keptConfirmLook + time.Millisecond)
		synctest.Wait()
		c.mu.Lock()
		kept = len(c.confirms)
		c.mu.Unlock()
		if kept != 0 || tr.confirmed(t, "reply.2") || tr.confirmed(t, "reply.3") {
			t.Fatalf("after every batch resolved: %d confirmations kept, reply.2 %v, reply.3 %v; want none kept or sent",
				kept, tr.confirmed(t, "reply.2"), tr.confirmed(t, "reply.3"))
		}
	})
}

// A confirmation is released only by the entry that carries its
// operation: a batch raft dropped (it never entered the log) is not
// confirmed by a later batch's apply. Before, every confirmation keyed
// up to the applied entry's tag was released.
func TestDoubleAckOfLostBatchNotConfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, c, tr := acksInBatches(t)
		l.next(t, c, true)
		l.mu.Lock()
		l.flushed = l.flushed[1:] // raft dropped the second batch
		l.mu.Unlock()
		l.next(t, c, true)
		synctest.Wait()
		if !tr.confirmed(t, "reply.1") || !tr.confirmed(t, "reply.3") {
			t.Fatal("double acks whose entries applied not confirmed")
		}
		if tr.confirmed(t, "reply.2") {
			t.Fatal("the double ack of a batch that never entered the log confirmed")
		}
	})
}

// A double ack that proposes nothing (a +TERM of a message acknowledged
// already) on a leader whose proposals have all applied is confirmed at
// once: its state is the committed one. Before, the confirmation waited
// for the next batch to apply, and on an idle consumer never came.
func TestNoOpDoubleAckConfirmedWhenSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, c, tr := acksInBatches(t)
		l.commit(c)
		synctest.Wait()
		tr.ack(t, 1, "+TERM", "reply.term")
		synctest.Wait()
		if !tr.confirmed(t, "reply.term") {
			t.Fatal("a double ack that changed nothing, every proposal applied, not confirmed")
		}
	})
}
