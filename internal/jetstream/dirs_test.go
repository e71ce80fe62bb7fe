package jetstream

import (
	"errors"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// publishN stores n messages in ORDERS and waits for their PubAcks.
func publishN(t *testing.T, tr *memTransport, n int) {
	t.Helper()
	acks := tr.inbox("_INBOX.pn")
	for range n {
		tr.Publish("events.orders.old", "_INBOX.pn", nil, []byte("old"))
		acks.next(t)
	}
}

// A delete that stops half way (here: no file can be removed, as if the
// server were killed) leaves nothing a start restores or a create of the
// same name takes over; the next start removes the remains.
func TestInterruptedDeleteLeavesNoStream(t *testing.T) {
	inner, tr := vfs.NewCrashFS(), newMemTransport()
	fs := vfs.NewFaultFS(inner)
	js := newTestJS(t, fs, tr)
	if _, err := js.AddStream(ordersConfig(stream.FileStorage)); err != nil {
		t.Fatal(err)
	}
	publishN(t, tr, 3)
	fs.Inject(vfs.Rule{Op: vfs.OpRemove})
	if err := js.DeleteStream("ORDERS"); err != nil {
		t.Fatalf("delete with removals failing: %v (the stream is gone once renamed)", err)
	}
	js.Shutdown()

	js2 := newTestJS(t, inner, newMemTransport())
	defer js2.Shutdown()
	if _, jerr := js2.StreamInfo("ORDERS", InfoOptions{}); jerr == nil {
		t.Fatal("a deleted stream came back after a restart")
	}
	if names, _ := inner.ReadDir(js2.streamsDir()); len(names) != 0 {
		t.Fatalf("the start left %q in the streams directory", names)
	}
	info, jerr := js2.AddStream(ordersConfig(stream.FileStorage))
	if jerr != nil {
		t.Fatal(jerr)
	}
	if info.State.Msgs != 0 || info.State.LastSeq != 0 {
		t.Fatalf("a new stream of the deleted one's name starts with %+v", info.State)
	}
}

// A stream a start could not restore is never served under a new stream
// of its name: the create moves its directory aside and starts empty.
func TestCreateSetsAsideUnrestoredDir(t *testing.T) {
	fs, tr := vfs.NewCrashFS(), newMemTransport()
	js := newTestJS(t, fs, tr)
	if _, err := js.AddStream(ordersConfig(stream.FileStorage)); err != nil {
		t.Fatal(err)
	}
	publishN(t, tr, 3)
	js.Shutdown()
	meta := js.streamDir("ORDERS") + "/meta.json"
	f, err := fs.Create(meta) // truncated: its checksum fails
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	js2 := newTestJS(t, fs, newMemTransport())
	defer js2.Shutdown()
	if _, jerr := js2.StreamInfo("ORDERS", InfoOptions{}); jerr == nil {
		t.Fatal("a stream with a damaged meta.json was restored")
	}
	cfg := ordersConfig(stream.FileStorage)
	cfg.Subjects = []string{"new.>"}
	info, jerr := js2.AddStream(cfg)
	if jerr != nil {
		t.Fatal(jerr)
	}
	if info.State.Msgs != 0 || info.State.LastSeq != 0 {
		t.Fatalf("the new stream took over the unrestored one's messages: %+v", info.State)
	}
	names, _ := fs.ReadDir(js2.streamsDir())
	if len(names) != 2 || names[0] != "ORDERS" {
		t.Fatalf("streams directory holds %q, want ORDERS and the old directory set aside", names)
	}
	js2.Shutdown()
	js3 := newTestJS(t, fs, newMemTransport())
	defer js3.Shutdown()
	if info, jerr := js3.StreamInfo("ORDERS", InfoOptions{}); jerr != nil || info.State.Msgs != 0 {
		t.Fatalf("after a restart: %+v, %v (the set-aside directory must not be restored)", info, jerr)
	}
}

// A store directory that cannot be written stops JetStream from starting,
// as nats-server refuses with "storage directory is not writable".
func TestStartRefusesUnwritableStore(t *testing.T) {
	fs := vfs.NewFaultFS(vfs.NewCrashFS())
	fs.Inject(vfs.Rule{Op: vfs.OpCreate})
	_, err := New(Config{StoreDir: "/sd", FS: fs}, newMemTransport())
	if !errors.Is(err, errNotWritable) {
		t.Fatalf("New = %v, want %v", err, errNotWritable)
	}
}

// A create that fails half way (here: meta.json cannot be written, as
// on a full disk) leaves no directory behind for a start to report.
func TestFailedCreateLeavesNoDir(t *testing.T) {
	inner := vfs.NewCrashFS()
	fs := vfs.NewFaultFS(inner)
	js := newTestJS(t, fs, newMemTransport())
	defer js.Shutdown()
	fs.Inject(vfs.Rule{Op: vfs.OpWrite, Path: "meta.json"})
	if _, jerr := js.AddStream(ordersConfig(stream.FileStorage)); jerr == nil {
		t.Fatal("create succeeded with meta.json unwritable")
	}
	if names, _ := inner.ReadDir(js.streamsDir()); len(names) != 0 {
		t.Fatalf("the failed create left %q", names)
	}
	fs.Clear()
	if _, jerr := js.AddStream(ordersConfig(stream.FileStorage)); jerr != nil {
		t.Fatalf("create after the failure: %v", jerr)
	}
}

// A stream and its first durable consumer, once created, survive a power
// loss: every directory leading to their files is durable (the store
// directory chain at the start, obs/ at the first consumer).
func TestStreamAndConsumerDirsSurvivePowerLoss(t *testing.T) {
	fs := vfs.NewCrashFS()
	js := newTestJS(t, fs, newMemTransport())
	if _, err := js.AddStream(ordersConfig(stream.FileStorage)); err != nil {
		t.Fatal(err)
	}
	cfg := consumer.Config{Durable: "D", AckPolicy: consumer.AckExplicit}
	if _, err := js.CreateConsumer("ORDERS", cfg, CreateOrUpdate, false); err != nil {
		t.Fatal(err)
	}
	crashed := fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	js.Shutdown()
	js2 := newTestJS(t, crashed, newMemTransport())
	defer js2.Shutdown()
	if _, jerr := js2.ConsumerInfo("ORDERS", "D"); jerr != nil {
		t.Fatalf("after power loss: %v", jerr)
	}
}

// A stream directory without meta.json (a create killed before it wrote
// it) is removed at the start, not reported at every start.
func TestStartRemovesDirWithoutMeta(t *testing.T) {
	fs := vfs.NewCrashFS()
	js := newTestJS(t, fs, newMemTransport())
	dir := js.streamDir("HALF")
	if err := fs.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create(dir + "/meta.json.tmp")
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	js.Shutdown()
	js2 := newTestJS(t, fs, newMemTransport())
	defer js2.Shutdown()
	if names, _ := fs.ReadDir(js2.streamsDir()); len(names) != 0 {
		t.Fatalf("the start left %q", names)
	}
}

// A consumer create that found its stream just before the stream was
// deleted gets 10059 and leaves no directory behind: not under the
// deleted stream's name, nor in a new stream of the same name.
func TestConsumerCreateAfterStreamDelete(t *testing.T) {
	fs := vfs.NewCrashFS()
	js := newTestJS(t, fs, newMemTransport())
	defer js.Shutdown()
	if _, err := js.AddStream(ordersConfig(stream.FileStorage)); err != nil {
		t.Fatal(err)
	}
	old, jerr := js.lookup("ORDERS")
	if jerr != nil {
		t.Fatal(jerr)
	}
	if err := js.DeleteStream("ORDERS"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.AddStream(ordersConfig(stream.FileStorage)); err != nil { // a new stream, same name
		t.Fatal(err)
	}
	cfg := consumer.Config{Durable: "C1", AckPolicy: consumer.AckExplicit}
	if _, err := js.createConsumer(old, "", cfg, CreateOrUpdate, false, time.Time{}); err == nil || err.ErrCode != 10059 {
		t.Fatalf("create on the deleted stream: %v, want 10059", err)
	}
	if names, _ := js.ConsumerNames("ORDERS"); len(names) != 0 {
		t.Fatalf("the new stream has consumers %q", names)
	}
	if _, _, err := fs.Stat(js.streamDir("ORDERS") + "/obs/C1"); err == nil {
		t.Fatal("the create wrote the consumer into the new stream's directory")
	}
}
