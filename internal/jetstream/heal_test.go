package jetstream

import (
	"strings"
	"syscall"
	"testing"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// A file stream fenced by a full disk heals in place once the disk takes
// writes again: no restart, its acknowledged messages and its consumer
// kept, the next publish numbered after them. A purge of a fenced stream
// heals it first, so that it can free space (issue 12, finding 6).
func TestFencedStreamHealsInPlace(t *testing.T) {
	fs, tr := vfs.NewFaultFS(vfs.NewCrashFS()), newMemTransport()
	js := newTestJS(t, fs, tr)
	defer js.Shutdown()
	if _, err := js.AddStream(stream.Config{Name: "H", Subjects: []string{"h.>"}, Storage: stream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer("H", consumer.Config{Durable: "C", AckPolicy: consumer.AckExplicit}, CreateOrUpdate, false); err != nil {
		t.Fatal(err)
	}
	publishTo(t, tr, "h.a", 5)

	full := vfs.Rule{Op: vfs.OpWrite, Path: "/streams/H/", Err: syscall.ENOSPC}
	fs.Inject(full)
	acks := tr.inbox("_INBOX.full")
	tr.Publish("h.a", "_INBOX.full", nil, []byte("x"))
	if got := acks.next(t); !strings.Contains(got, "error") {
		t.Fatalf("a publish to a full disk was acknowledged: %s", got)
	}
	if ps := js.Problems(); len(ps) != 1 || ps[0].Kind != "fenced" {
		t.Fatalf("problems %+v, want H fenced", ps)
	}
	if healed := js.healFenced(); len(healed) != 0 {
		t.Fatalf("healed %v while the disk is still full", healed)
	}

	fs.Clear()
	if healed := js.healFenced(); len(healed) != 1 || healed[0] != "H" {
		t.Fatalf("healed %v once the disk takes writes, want [H]", healed)
	}
	if ps := js.Problems(); len(ps) != 0 {
		t.Fatalf("problems after the heal: %+v", ps)
	}
	tr.Publish("h.a", "_INBOX.full", nil, []byte("y"))
	if got := acks.next(t); !strings.Contains(got, `"seq":6`) {
		t.Fatalf("publish after the heal: %s, want seq 6", got)
	}
	if n := streamMsgs(t, js, "H"); n != 6 {
		t.Fatalf("%d messages after the heal, want 6", n)
	}
	if _, err := js.ConsumerInfo("H", "C"); err != nil {
		t.Fatalf("the consumer after the heal: %v", err)
	}

	// Fenced again; the disk has room; a purge heals, then purges.
	fs.Inject(full)
	tr.Publish("h.a", "_INBOX.full", nil, []byte("z"))
	if got := acks.next(t); !strings.Contains(got, "error") {
		t.Fatalf("a publish to a full disk was acknowledged: %s", got)
	}
	fs.Clear()
	n, jerr := js.Purge("H", store.PurgeRequest{})
	if jerr != nil || n != 6 {
		t.Fatalf("purge of a fenced stream with room again: %d, %v", n, jerr)
	}
}
