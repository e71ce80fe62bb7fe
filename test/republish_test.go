package test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RePublish (docs/protocol.md 5.8): each stored message matching the
// source goes out on the mapped subject with the stream's headers added.
// Checked against nats-server v2.15.2.
func TestStreamRePublish(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	sub, err := nc.SubscribeSync("rp.>")
	if err != nil {
		t.Fatal(err)
	}
	hsub, err := nc.SubscribeSync("rph.>")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	createStream(t, js, jetstream.StreamConfig{Name: "RP", Subjects: []string{"rps.>"},
		RePublish: &jetstream.RePublish{Source: "rps.*", Destination: "rp.{{wildcard(1)}}"}})
	createStream(t, js, jetstream.StreamConfig{Name: "RPH", Subjects: []string{"rph-in.*"},
		RePublish: &jetstream.RePublish{Source: "rph-in.*", Destination: "rph.$1", HeadersOnly: true}})

	m := nats.NewMsg("rps.a")
	m.Data = []byte("first")
	m.Header.Set("X-App", "1")
	ack1 := jsPublishMsg(t, js, m)
	jsPublish(t, js, "rps.b.deep", "not matched by rps.*")
	ack3 := jsPublish(t, js, "rps.a", "second")

	got := nextMsg(t, sub)
	if got.Subject != "rp.a" || string(got.Data) != "first" || got.Header.Get("X-App") != "1" {
		t.Fatalf("first republish: %s %q %v", got.Subject, got.Data, got.Header)
	}
	wantRePublishHeaders(t, got, "RP", "rps.a", ack1.Sequence, 0)
	got = nextMsg(t, sub)
	if got.Subject != "rp.a" || string(got.Data) != "second" {
		t.Fatalf("second republish: %s %q", got.Subject, got.Data)
	}
	wantRePublishHeaders(t, got, "RP", "rps.a", ack3.Sequence, ack1.Sequence)
	if extra, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		t.Errorf("unmatched subject republished: %s", extra.Subject)
	}

	jsPublish(t, js, "rph-in.x", "12345")
	got = nextMsg(t, hsub)
	if got.Subject != "rph.x" || len(got.Data) != 0 || got.Header.Get("Nats-Msg-Size") != "5" {
		t.Fatalf("headers-only republish: %s %q %v", got.Subject, got.Data, got.Header)
	}
	wantRePublishHeaders(t, got, "RPH", "rph-in.x", 1, 0)
}

func wantRePublishHeaders(t *testing.T, m *nats.Msg, stream, subj string, seq, last uint64) {
	t.Helper()
	for k, want := range map[string]string{
		"Nats-Stream": stream, "Nats-Subject": subj,
		"Nats-Sequence": fmt.Sprint(seq), "Nats-Last-Sequence": fmt.Sprint(last),
	} {
		if got := m.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Time-Stamp")); err != nil {
		t.Errorf("Nats-Time-Stamp %q: %v", m.Header.Get("Nats-Time-Stamp"), err)
	}
}

// A mirror with republish republishes what it copies, with its own
// stream name and the origin's sequence (nats-server v2.15.2 stores
// mirrored messages through processJetStreamMsg, which republishes).
func TestMirrorRePublish(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	sub, err := nc.SubscribeSync("mrp.>")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	createStream(t, js, jetstream.StreamConfig{Name: "MRPO", Subjects: []string{"mrpo.>"}})
	jsPublish(t, js, "mrpo.a", "one")
	jsPublish(t, js, "mrpo.b", "two")
	createStream(t, js, jetstream.StreamConfig{Name: "MRP", Mirror: &jetstream.StreamSource{Name: "MRPO"},
		RePublish: &jetstream.RePublish{Source: "mrpo.>", Destination: "mrp.>"}})
	for i, want := range []struct{ subj, data string }{{"mrp.a", "one"}, {"mrp.b", "two"}} {
		got := nextMsg(t, sub)
		if got.Subject != want.subj || string(got.Data) != want.data {
			t.Fatalf("republish %d: %s %q", i, got.Subject, got.Data)
		}
		wantRePublishHeaders(t, got, "MRP", "mrpo."+want.subj[4:], uint64(i+1), 0)
	}
	jsPublish(t, js, "mrpo.a", "three")
	got := nextMsg(t, sub)
	if got.Subject != "mrp.a" || string(got.Data) != "three" {
		t.Fatalf("republish of a new message: %s %q", got.Subject, got.Data)
	}
	wantRePublishHeaders(t, got, "MRP", "mrpo.a", 3, 1)
}
