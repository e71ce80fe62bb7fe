package test

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/server"
)

// A replicated stream's atomic batch is one raft entry, which must reach
// the followers in one frame of the Raft transport (docs/cluster.md,
// "Entries larger than a frame"). With frames of 2 MiB (64 MiB in
// production: RaftMaxFrameBytes), a batch of 2.7 MB is refused with
// 10199, naming the largest entry in bytes (and so is the commit of a
// batch whose middle message crossed the bound), and a message of 2.5 MB
// (max_payload 4 MiB) with 10054; the stream then takes publishes and
// every replica is current. Before, the batch's entry stayed on the
// leader, no frame could carry it, and the stream stalled: the next
// publish was never acknowledged.
func TestJetStreamClusterAtomicBatchOverFrame(t *testing.T) {
	const frame = 2 << 20
	servers, _ := jsClusterMod(t, 3, func(_ int, o *server.Options) {
		o.RaftMaxFrameBytes = frame
		o.MaxPayload = 4 << 20
	})
	js := jsAt(t, servers[0])
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3, AllowAtomicPublish: true})
		return err
	})
	currentReplicas(t, js, "ORDERS")
	nc := connect(t, servers[1].ClientURL())
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox + ".>")
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 900<<10)
	for seq := 1; seq <= 3; seq++ {
		m := nats.NewMsg("orders.batch")
		m.Reply = inbox + "." + strconv.Itoa(seq)
		m.Data = payload
		m.Header.Set("Nats-Batch-Id", "big")
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(seq))
		if seq == 3 {
			m.Header.Set("Nats-Batch-Commit", "1")
		}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	want := fmt.Sprintf(`{"error":{"code":400,"err_code":10199,"description":"atomic publish batch is too large: %d bytes"},"stream":"ORDERS","seq":0}`, frame-raftnode.EntryOverhead)
	for seq := 1; seq <= 3; seq++ {
		m, err := sub.NextMsg(jsTimeout)
		if err != nil {
			t.Fatalf("reply to batch message %d: %v", seq, err)
		}
		if seq < 3 && len(m.Data) != 0 || seq == 3 && string(m.Data) != want {
			t.Fatalf("reply to batch message %d: %s", seq, m.Data)
		}
	}
	// A middle message crosses the bound, and only the first message and
	// the commit ask for a reply (the least ADR-50 asks): the commit gets
	// the same 10199, not 10176 "incomplete" (trial 36, finding 4).
	for seq := 1; seq <= 5; seq++ {
		m := nats.NewMsg("orders.batch")
		m.Data = payload
		m.Header.Set("Nats-Batch-Id", "mid")
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(seq))
		switch seq {
		case 1:
			m.Reply = inbox + ".mid1"
		case 5:
			m.Reply = inbox + ".mid5"
			m.Header.Set("Nats-Batch-Commit", "1")
		}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct{ subj, data string }{{inbox + ".mid1", ""}, {inbox + ".mid5", want}} {
		m, err := sub.NextMsg(jsTimeout)
		if err != nil {
			t.Fatalf("reply on %s: %v", w.subj, err)
		}
		if m.Subject != w.subj || string(m.Data) != w.data {
			t.Fatalf("reply %q on %s, want %q on %s", m.Data, m.Subject, w.data, w.subj)
		}
	}
	_, err = js.Publish(ctx2(t), "orders.big", make([]byte, 2500<<10))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10054 {
		t.Fatalf("a message over the largest entry: %v, want 10054", err)
	}
	for i := 1; i <= 5; i++ {
		ack, err := js.Publish(ctx2(t), "orders.after", []byte("order"))
		if err != nil || ack.Sequence != uint64(i) {
			t.Fatalf("publish %d after the refusals: %+v %v", i, ack, err)
		}
	}
	eventually(t, "every replica holds the 5 messages", func() error {
		si := currentReplicas(t, js, "ORDERS")
		for _, p := range si.Cluster.Replicas {
			if p.Lag != 0 {
				return fmt.Errorf("replica %s lags %d", p.Name, p.Lag)
			}
		}
		if si.State.Msgs != 5 || si.State.LastSeq != 5 {
			return fmt.Errorf("state %+v", si.State)
		}
		return nil
	})
}
