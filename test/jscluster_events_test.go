package test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestJetStreamClusterAPIAudit: in a cluster each API request is
// audited once, by the server that answers it, and the audit describes
// the client as the server it is connected to knows it (its name, that
// server, the cluster), as nats-server's does; what carries the client's
// description between the servers is seen by no subscriber, and a
// client cannot write it itself.
func TestJetStreamClusterAPIAudit(t *testing.T) {
	servers := jsCluster(t, 3)
	listen := connect(t, servers[2].ClientURL())
	audits := subSync(t, listen, "$JS.EVENT.ADVISORY.API")
	snoop := connect(t, servers[1].ClientURL())
	requests := subSync(t, snoop, "$JS.API.>")
	flush(t, listen)
	flush(t, snoop)
	for _, s := range servers {
		waitFor(t, clusterTimeout, "the listeners' interest on "+s.Name(), func() bool {
			return s.HasInterest("$JS.EVENT.ADVISORY.API") && s.HasInterest("$JS.API.X")
		})
	}
	nc0, js0 := jsConnect(t, servers[0].ClientURL())
	defer nc0.Close()
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js0.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	drain := func() {
		for {
			if _, err := audits.NextMsg(300 * time.Millisecond); err != nil {
				break
			}
		}
		for {
			if _, err := requests.NextMsg(10 * time.Millisecond); err != nil {
				return
			}
		}
	}
	drain()

	for i, s := range servers {
		name := fmt.Sprintf("c%d", i)
		nc := connect(t, s.ClientURL(), nats.Name(name))
		for _, subj := range []string{"$JS.API.STREAM.INFO.ORDERS", "$JS.API.STREAM.NAMES"} {
			msg := nats.NewMsg(subj)
			msg.Header.Set("Cairn-Api-Client", `{"name":"forged","acc":"X"}`)
			r, err := nc.RequestMsg(msg, 5*time.Second)
			if err != nil {
				t.Fatalf("%s from %s: %v", subj, s.Name(), err)
			}
			m, err := audits.NextMsg(5 * time.Second)
			if err != nil {
				t.Fatalf("%s from %s: no audit", subj, s.Name())
			}
			var a struct {
				Server   string         `json:"server"`
				Subject  string         `json:"subject"`
				Response string         `json:"response"`
				Client   map[string]any `json:"client"`
			}
			if err := json.Unmarshal(m.Data, &a); err != nil {
				t.Fatal(err)
			}
			c := a.Client
			if a.Subject != subj || a.Response != string(r.Data) || a.Server == "" ||
				c["name"] != name || c["server"] != s.Name() || c["cluster"] != clusterName || c["acc"] != "$G" {
				t.Errorf("%s from %s: audit %s", subj, s.Name(), m.Data)
			}
			// The copy a subscriber of another server gets carries the
			// client's own header only.
			fwd, err := requests.NextMsg(5 * time.Second)
			if err != nil {
				t.Fatalf("%s: the snooper got nothing", subj)
			}
			if fwd.Header.Get("Cairn-Api-Client") != `{"name":"forged","acc":"X"}` && i == 1 {
				t.Errorf("%s: the local snooper saw header %v", subj, fwd.Header)
			}
			if i != 1 && (len(fwd.Header.Values("Cairn-Api-Client")) != 0) {
				t.Errorf("%s from %s: a routed copy carries %v", subj, s.Name(), fwd.Header)
			}
		}
		nc.Close()
	}
	if m, err := audits.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("extra audit %s", m.Data)
	}
}

// TestJetStreamClusterAckSampling: a replicated consumer with
// sample_freq samples its acks where it delivers, on its leader: each
// acknowledged delivery gives one metric, whichever servers hold
// replicas.
func TestJetStreamClusterAckSampling(t *testing.T) {
	servers := jsCluster(t, 3)
	listen := connect(t, servers[1].ClientURL())
	metrics := subSync(t, listen, "$JS.EVENT.METRIC.CONSUMER.ACK.ORDERS.worker")
	flush(t, listen)
	nc, js := jsConnect(t, servers[0].ClientURL())
	defer nc.Close()
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(tctx(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	for i := 1; i <= 5; i++ {
		subj := fmt.Sprintf("orders.%d", i)
		eventually(t, "publish "+subj, func() error {
			_, err := js.Publish(tctx(t), subj, []byte("order"), jetstream.WithMsgID(subj))
			return err
		})
	}
	var cons jetstream.Consumer
	eventually(t, "create consumer", func() error {
		var err error
		cons, err = js.CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "worker",
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, SampleFrequency: "100%", Replicas: 3})
		return err
	})
	for _, s := range servers {
		waitFor(t, clusterTimeout, "the listener's interest on "+s.Name(), func() bool {
			return s.HasInterest("$JS.EVENT.METRIC.CONSUMER.ACK.ORDERS.worker")
		})
	}
	acked := map[uint64]bool{}
	eventually(t, "fetch and ack", func() error {
		b, err := cons.Fetch(5-len(acked), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		for m := range b.Messages() {
			md, _ := m.Metadata()
			if err := m.DoubleAck(tctx(t)); err != nil {
				return err
			}
			acked[md.Sequence.Stream] = true
		}
		if len(acked) < 5 {
			return fmt.Errorf("%d acknowledged", len(acked))
		}
		return nil
	})
	seen := map[uint64]int{}
	for {
		m, err := metrics.NextMsg(500 * time.Millisecond)
		if err != nil {
			break
		}
		var v struct {
			StreamSeq uint64 `json:"stream_seq"`
		}
		_ = json.Unmarshal(m.Data, &v)
		seen[v.StreamSeq]++
	}
	for seq := uint64(1); seq <= 5; seq++ {
		if seen[seq] != 1 {
			t.Errorf("stream sequence %d: %d metrics, want 1 (%v)", seq, seen[seq], seen)
		}
	}
}
