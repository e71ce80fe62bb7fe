package jetstream

import (
	"fmt"
	"testing"

	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// BenchmarkPublishPersistMode publishes 128-byte messages to a file
// stream on the real file system, with one publish in flight (each
// waits for its PubAck, as `nats bench js pub sync`) or 64, in the
// default persist mode (PubAck after the fsync) and in persist_mode async
// (PubAck after the write): the difference is what the mode buys
// (docs/durability.md section 3). Compare the two modes' ns/op within one
// run.
func BenchmarkPublishPersistMode(b *testing.B) {
	for _, mode := range []struct {
		name string
		pm   stream.PersistMode
	}{{"default", stream.DefaultPersist}, {"async", stream.AsyncPersist}} {
		for _, inflight := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/inflight=%d", mode.name, inflight), func(b *testing.B) {
				benchPublish(b, stream.Config{Name: "B", Subjects: []string{"b"}, PersistMode: mode.pm}, inflight)
			})
		}
	}
}

// BenchmarkPublishMemory publishes 128-byte messages to a memory stream,
// with one publish in flight or 64: the runtime's publish path (ingest
// queue, proposer, local log, apply, PubAck) without a disk, so that a
// change to that path is seen in ns/op.
func BenchmarkPublishMemory(b *testing.B) {
	for _, inflight := range []int{1, 64} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			benchPublish(b, stream.Config{Name: "B", Subjects: []string{"b"}, Storage: stream.MemoryStorage}, inflight)
		})
	}
}

// BenchmarkPublishMemoryAccountLimit is BenchmarkPublishMemory in an
// account with a max_memory it never reaches: every publish is checked
// against the account's limit (streamrun Storage.OverAccountLimit), the
// path a change to that check slows.
func BenchmarkPublishMemoryAccountLimit(b *testing.B) {
	limits := Unlimited
	limits.MaxMemory = 1 << 40
	for _, inflight := range []int{1, 64} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			benchPublishIn(b, &limits, stream.Config{Name: "B", Subjects: []string{"b"}, Storage: stream.MemoryStorage}, inflight)
		})
	}
}

// benchPublish publishes b.N 128-byte messages on subject b to a stream
// of cfg (subjects b), with at most inflight publishes awaiting their
// PubAck.
func benchPublish(b *testing.B, cfg stream.Config, inflight int) {
	benchPublishIn(b, nil, cfg, inflight)
}

// benchPublishIn is benchPublish in an account of limits (nil: none).
func benchPublishIn(b *testing.B, limits *AccountLimits, cfg stream.Config, inflight int) {
	tr := newMemTransport()
	js, err := New(Config{StoreDir: b.TempDir(), FS: vfs.OS(), ServerName: "s1", Limits: limits}, tr)
	if err != nil {
		b.Fatal(err)
	}
	defer js.Shutdown()
	if _, err := js.AddStream(cfg); err != nil {
		b.Fatal(err)
	}
	acks := make(chan struct{}, inflight)
	if _, err := tr.Subscribe("_INBOX.b", "", func(_, _ string, _, _ []byte) { acks <- struct{}{} }); err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 128)
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for i := range b.N {
		if i >= inflight {
			<-acks
		}
		tr.Publish("b", "_INBOX.b", nil, payload)
	}
	for range min(b.N, inflight) {
		<-acks
	}
}
