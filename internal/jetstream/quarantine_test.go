package jetstream

import (
	"errors"
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// QuarantineStream refuses a running stream (10058), moves a stopped
// stream's directory, files and all, out of the streams directory to
// the first free name under quarantine, and reports "" when there is
// nothing to move; the stream's name is then free for a new stream.
func TestQuarantineStream(t *testing.T) {
	fs, tr := vfs.NewCrashFS(), newMemTransport()
	js := newTestJS(t, fs, tr)
	defer js.Shutdown()
	cfg := ordersConfig(stream.FileStorage)
	for round := range 2 {
		if _, err := js.AddStream(cfg); err != nil {
			t.Fatal(err)
		}
		tr.Publish("events.orders.1", "", nil, []byte("x"))
		_, err := js.QuarantineStream("ORDERS", "g1.r2")
		var jerr *jserr.Error
		if !errors.As(err, &jerr) || jerr.ErrCode != uint16(jserr.StreamNameExist) {
			t.Fatalf("round %d: quarantine of a running stream: %v", round, err)
		}
		if _, _, jerr := js.DetachStream("ORDERS"); jerr != nil {
			t.Fatal(jerr)
		}
		to, err := js.QuarantineStream("ORDERS", "g1.r2")
		want := []string{"/sd/jetstream/$G/quarantine/ORDERS.g1.r2", "/sd/jetstream/$G/quarantine/ORDERS.g1.r2.1"}[round]
		if err != nil || to != want {
			t.Fatalf("round %d: moved to %q (%v), want %q", round, to, err, want)
		}
		if _, isDir, err := fs.Stat(to + "/msgs"); err != nil || !isDir {
			t.Fatalf("round %d: the store did not move with the stream: %v", round, err)
		}
		if _, _, err := fs.Stat(js.StreamDir("ORDERS")); !vfs.IsNotExist(err) {
			t.Fatalf("round %d: the stream directory is still there: %v", round, err)
		}
	}
	if to, err := js.QuarantineStream("ORDERS", "g1.r2"); to != "" || err != nil {
		t.Fatalf("nothing to move: %q %v", to, err)
	}
}
