package test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go/jetstream"
)

// jetstream { domain: HUB }: nats.go's NewWithDomain reaches JetStream
// under $JS.HUB.API (streams, consumers, KV with its $JS.HUB.API.$KV
// puts), PubAcks and stream infos name the domain, and $JS.API still
// works. As nats-server v2.15.2.
func TestJetStreamDomain(t *testing.T) {
	u := startServer(t, func(o *server.Options) { o.JetStream = true; o.JetStreamDomain = "HUB" })
	nc := connect(t, u)
	js, err := jetstream.NewWithDomain(nc, "HUB")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "D", Subjects: []string{"d.>"}})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, "d.a", []byte("x"))
	if err != nil || ack.Domain != "HUB" || ack.Sequence != 1 {
		t.Fatalf("PubAck %+v %v, want domain HUB", ack, err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Domain != "HUB" {
		t.Fatalf("stream info domain %q (%v)", info.Domain, err)
	}
	acct, err := js.AccountInfo(ctx)
	if err != nil || acct.Domain != "HUB" {
		t.Fatalf("account info domain %q (%v)", acct.Domain, err)
	}
	c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "C"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
	if err != nil || string(m.Data()) != "x" {
		t.Fatalf("Next through the domain: %v", err)
	}
	_ = m.Ack()

	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "B"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("KV get through the domain: %v", err)
	}

	// The API without the domain prefix answers too.
	r, err := nc.Request("$JS.API.STREAM.INFO.D", nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var si struct {
		Domain string `json:"domain"`
	}
	if err := json.Unmarshal(r.Data, &si); err != nil || si.Domain != "HUB" {
		t.Fatalf("$JS.API.STREAM.INFO.D: %s", r.Data)
	}
}
