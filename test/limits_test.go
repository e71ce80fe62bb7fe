package test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// Without --max_memory_store and --max_file_store the storage limits are
// sized from the machine, as nats-server v2.15.2 sizes them (three
// quarters of the memory, three quarters of the free disk): a stream
// reserving more than the machine has is refused with 10028 (memory) or
// 10047 (file), where cairn once accepted a memory stream of 100 GB and
// a file stream of 100 TB (issue 12, finding 5). A reservation that fits
// is accepted.
func TestStreamDefaultStorageLimits(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	const pib = 1 << 50 // more memory and disk than any test machine has
	_, err := js.CreateStream(tctx(t), jetstream.StreamConfig{Name: "M", Subjects: []string{"m"}, Storage: jetstream.MemoryStorage, MaxBytes: pib})
	wantAPIError(t, err, 500, 10028, "insufficient memory resources available")
	_, err = js.CreateStream(tctx(t), jetstream.StreamConfig{Name: "F", Subjects: []string{"f"}, Storage: jetstream.FileStorage, MaxBytes: 64 * pib})
	wantAPIError(t, err, 500, 10047, "insufficient storage resources available")
	createStream(t, js, jetstream.StreamConfig{Name: "M", Subjects: []string{"m"}, Storage: jetstream.MemoryStorage, MaxBytes: 1 << 20})
	createStream(t, js, jetstream.StreamConfig{Name: "F", Subjects: []string{"f"}, Storage: jetstream.FileStorage, MaxBytes: 1 << 20})
}

// NoStorage (a limit set to 0) allows no stream of that storage type, as
// an explicit max_memory_store: 0 in nats-server v2.15.2's configuration;
// the other type keeps its default.
func TestStreamZeroStorageLimit(t *testing.T) {
	u := startServer(t, func(o *server.Options) {
		o.JetStream = true
		o.MaxMemoryStore = server.NoStorage
	})
	_, js := jsConnect(t, u)
	_, err := js.CreateStream(tctx(t), jetstream.StreamConfig{Name: "M", Subjects: []string{"m"}, Storage: jetstream.MemoryStorage})
	wantAPIError(t, err, 500, 10028, "insufficient memory resources available")
	createStream(t, js, jetstream.StreamConfig{Name: "F", Subjects: []string{"f"}, Storage: jetstream.FileStorage})
}
