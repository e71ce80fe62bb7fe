package streamlog

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// frameLimit is a transport that refuses frames over max, as the cluster
// transport refuses those over its 64 MiB (transport.ErrFrameTooLarge).
type frameLimit struct {
	inner raftnode.Transport
	max   int
}

func (f frameLimit) Send(to raftnode.ServerID, frame []byte) error {
	if len(frame) > f.max {
		return errors.New("frame too large")
	}
	return f.inner.Send(to, frame)
}

// smallFrames gives the nodes, and their transports, frames of at most
// 64 KiB: the log's largest entry is then 64 KiB less 150 bytes.
func smallFrames(cfg *raftnode.Config) {
	const frame = 64 << 10
	cfg.MaxFrameBytes = frame
	cfg.Transport = frameLimit{inner: cfg.Transport, max: frame}
}

func atomicHeader(id string, seq int, commit bool) []byte {
	h := fmt.Sprintf("NATS/1.0\r\nNats-Batch-Id: %s\r\nNats-Batch-Sequence: %d\r\n", id, seq)
	if commit {
		h += "Nats-Batch-Commit: 1\r\n"
	}
	return []byte(h + "\r\n")
}

// A replicated stream refuses, before it proposes, what no follower
// could receive: an atomic batch whose one entry would pass the log's
// largest entry gets 10199 and a message that would not fit alone
// 10054; the stream then takes publishes, and every replica holds the
// same. Before, the batch's entry was logged on the leader, no frame
// could carry it to a follower, and the stream stalled: no later
// publish was acknowledged.
func TestRuntimeRefusesEntryOverFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newRunCluster(t, stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: stream.MemoryStorage, AllowAtomicPublish: true}, smallFrames)
		l := c.leader(-1)
		r := c.reps[l]
		if got, want := r.log.MaxEntryBytes(), 64<<10-raftnode.EntryOverhead; got != want {
			t.Fatalf("MaxEntryBytes %d, want %d", got, want)
		}
		payload := make([]byte, 30<<10)
		for seq := 1; seq <= 3; seq++ { // 90 KiB in one BatchCommit
			if !r.tr.publish("orders.>", "orders.b", fmt.Sprintf("batch.%d", seq), atomicHeader("b", seq, seq == 3), payload) {
				t.Fatal("the leader's runtime is not subscribed")
			}
		}
		if a := c.ack(l, "batch.3"); a.Error == nil || a.Error.Code != 10199 {
			t.Fatalf("the batch over the largest entry: %+v, want 10199", a)
		}
		r.tr.publish("orders.>", "orders.big", "big", nil, make([]byte, 64<<10))
		if a := c.ack(l, "big"); a.Error == nil || a.Error.Code != 10054 {
			t.Fatalf("a message over the largest entry: %+v, want 10054", a)
		}
		for i := 1; i <= 3; i++ {
			reply := fmt.Sprintf("after.%d", i)
			r.tr.publish("orders.>", "orders.a", reply, nil, payload)
			if a := c.ack(l, reply); a.Error != nil || a.Seq != uint64(i) {
				t.Fatalf("publish %d after the refusals: %+v", i, a)
			}
		}
		// A batch that fits (two of 30 KiB) is stored whole.
		for seq := 1; seq <= 2; seq++ {
			r.tr.publish("orders.>", "orders.b", fmt.Sprintf("fits.%d", seq), atomicHeader("c", seq, seq == 2), payload)
		}
		if a := c.ack(l, "fits.2"); a.Error != nil || a.Seq != 5 {
			t.Fatalf("a batch within the largest entry: %+v", a)
		}
		c.converged(5, 5)
	})
}
