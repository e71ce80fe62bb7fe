package jetstream

import (
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// --max_file_store and --max_memory_store: creates and updates reserve
// max_bytes (10047 / 10028 beyond the limit), and a publish once usage is
// over the limit gets 10023.
func TestStorageLimits(t *testing.T) {
	tr := newMemTransport()
	js, err := New(Config{StoreDir: "/sd", FS: vfs.NewCrashFS(), ServerName: "s1", MaxStore: 1000, MaxMemory: 500}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Shutdown()
	// They are server limits, not the account's: $JS.API.INFO reports
	// none, as nats-server v2.15.2 does with them set.
	if l := js.Account().Limits; l.MaxMemory != -1 || l.MaxStore != -1 {
		t.Fatalf("account limits %+v, want max_memory and max_storage -1", l)
	}
	file := func(name string, maxBytes int64) stream.Config {
		return stream.Config{Name: name, Subjects: []string{name + ".>"}, Storage: stream.FileStorage, MaxBytes: maxBytes}
	}
	expectErr(t, errOnly(js.AddStream(file("BIG", 2000))), jserr.StorageResourcesExceeded)
	if _, err := js.AddStream(file("A", 600)); err != nil {
		t.Fatal(err)
	}
	expectErr(t, errOnly(js.AddStream(file("B", 600))), jserr.StorageResourcesExceeded)
	if _, err := js.AddStream(file("B", 399)); err != nil {
		t.Fatal(err)
	}
	expectErr(t, errOnly(js.UpdateStream(file("B", 401))), jserr.StorageResourcesExceeded)
	mem := stream.Config{Name: "M", Subjects: []string{"M.>"}, Storage: stream.MemoryStorage, MaxBytes: 501}
	expectErr(t, errOnly(js.AddStream(mem)), jserr.MemoryResourcesExceeded)

	// Usage: fill A beyond the file limit's remainder is impossible (its
	// own max_bytes stops it), so use an unlimited stream on a second
	// server-wide budget.
	js2, err := New(Config{StoreDir: "/sd2", FS: vfs.NewCrashFS(), ServerName: "s2", MaxStore: 300}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer js2.Shutdown()
	if _, err := js2.AddStream(stream.Config{Name: "U", Subjects: []string{"u.>"}, Storage: stream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.u")
	var last string
	for i := 0; i < 20 && !strings.Contains(last, "10023"); i++ {
		tr.Publish("u.x", "_INBOX.u", nil, []byte(strings.Repeat("x", 100)))
		last = acks.next(t)
	}
	want := `{"error":{"code":503,"err_code":10023,"description":"insufficient resources"},"stream":"U","seq":0}`
	if last != want {
		t.Fatalf("publish over the limit: %s, want %s", last, want)
	}
	if n := js2.storage.Used(stream.FileStorage); n <= 300 {
		t.Errorf("usage %d, want over the limit of 300", n)
	}
}

func errOnly[T any](_ T, err *jserr.Error) *jserr.Error { return err }

// A damaged message is answered 10037, as nats-server answers it, and its
// file path stays in the server's log.
func TestMsgGetErrorOfDamage(t *testing.T) {
	err := msgGetError(&store.CorruptError{First: 50, Last: 50, Where: "/data/seg.blk", Reason: "records damaged"})
	if err == nil || jserr.ErrCode(err.ErrCode) != jserr.NoMessageFound || strings.Contains(err.Description, "/data") {
		t.Errorf("got %+v, want 10037 without the path", err)
	}
}

// NoStorage (nats-server's explicit max_memory_store: 0, which the Helm
// chart writes to turn memory storage off) refuses every stream of that
// storage type, 10028 for memory and 10047 for file, as nats-server
// v2.15.2 answers; the other type is unaffected.
func TestNoStorage(t *testing.T) {
	js, err := New(Config{StoreDir: "/sd", FS: vfs.NewCrashFS(), ServerName: "s1", MaxMemory: NoStorage}, newMemTransport())
	if err != nil {
		t.Fatal(err)
	}
	defer js.Shutdown()
	mem := stream.Config{Name: "M", Subjects: []string{"m"}, Storage: stream.MemoryStorage}
	expectErr(t, errOnly(js.AddStream(mem)), jserr.MemoryResourcesExceeded)
	if _, err := js.AddStream(stream.Config{Name: "F", Subjects: []string{"f"}, Storage: stream.FileStorage}); err != nil {
		t.Fatalf("file stream refused: %v", err)
	}
	js2, err := New(Config{StoreDir: "/sd2", FS: vfs.NewCrashFS(), ServerName: "s2", MaxStore: NoStorage}, newMemTransport())
	if err != nil {
		t.Fatal(err)
	}
	defer js2.Shutdown()
	expectErr(t, errOnly(js2.AddStream(stream.Config{Name: "F", Subjects: []string{"f"}, Storage: stream.FileStorage})), jserr.StorageResourcesExceeded)
}

// With MaxStoreFromDisk the file limit is sized as nats-server v2.15.2
// sizes an unset max_file_store: three quarters of the free space at the
// start, plus three quarters of what the restored streams hold (so that
// it does not shrink as they fill the disk across restarts); 1 TiB when
// the file system cannot tell.
func TestStorageLimitFromDisk(t *testing.T) {
	tr := newMemTransport()
	fs := &spaceFS{CrashFS: vfs.NewCrashFS(), free: 4000, total: 1 << 30}
	cfg := Config{StoreDir: "/sd", FS: fs, ServerName: "s1", MaxStoreFromDisk: true, MaxStore: 1 << 40}
	js, err := New(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	if mem, file := js.StorageLimits(); mem != -1 || file != 3000 {
		t.Fatalf("limits %d %d, want unlimited memory and 3000 bytes of file", mem, file)
	}
	file := func(name string, maxBytes int64) stream.Config {
		return stream.Config{Name: name, Subjects: []string{name + ".>"}, Storage: stream.FileStorage, MaxBytes: maxBytes}
	}
	expectErr(t, errOnly(js.AddStream(file("BIG", 3001))), jserr.StorageResourcesExceeded)
	if _, err := js.AddStream(file("A", 0)); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.a")
	for range 10 {
		tr.Publish("A.x", "_INBOX.a", nil, []byte(strings.Repeat("x", 100)))
		acks.next(t)
	}
	held := js.storage.Used(stream.FileStorage)
	js.Shutdown()

	fs.set(1000) // the stream's bytes are no longer free
	js, err = New(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Shutdown()
	if _, got := js.StorageLimits(); got != 750+held/4*3 {
		t.Fatalf("file limit %d after restoring %d bytes with 1000 free, want %d", got, held, 750+held/4*3)
	}

	js3, err := New(Config{StoreDir: "/sd3", FS: vfs.NewCrashFS(), MaxStoreFromDisk: true}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer js3.Shutdown()
	if _, got := js3.StorageLimits(); got != 1<<40 {
		t.Fatalf("file limit %d without free space information, want 1 TiB", got)
	}
}

// A file limit sized from a disk that was full at the start rises once
// the disk has room (regrowFileLimit, every healEvery), so that file
// publishes are taken again without a restart; it never falls.
func TestStorageLimitFromDiskRegrows(t *testing.T) {
	tr := newMemTransport()
	fs := &spaceFS{CrashFS: vfs.NewCrashFS(), free: 400, total: 1 << 30}
	js, err := New(Config{StoreDir: "/sd", FS: fs, ServerName: "s1", MaxStoreFromDisk: true}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Shutdown()
	if _, file := js.StorageLimits(); file != 300 {
		t.Fatalf("file limit %d, want 300", file)
	}
	big := stream.Config{Name: "B", Subjects: []string{"b"}, Storage: stream.FileStorage, MaxBytes: 3000}
	expectErr(t, errOnly(js.AddStream(big)), jserr.StorageResourcesExceeded)

	fs.set(8000) // space freed by another program
	js.regrowFileLimit()
	if _, file := js.StorageLimits(); file != 6000 {
		t.Fatalf("file limit %d once 8000 bytes are free, want 6000", file)
	}
	if _, err := js.AddStream(big); err != nil {
		t.Fatalf("a stream within the raised limit: %v", err)
	}
	fs.set(8600) // a little more room: not worth a new limit (less than an eighth)
	js.regrowFileLimit()
	if _, file := js.StorageLimits(); file != 6000 {
		t.Fatalf("file limit %d once 8600 bytes are free, want it kept at 6000", file)
	}
	fs.set(100)
	js.regrowFileLimit()
	if _, file := js.StorageLimits(); file != 6000 {
		t.Fatalf("file limit %d after the disk filled again, want it kept at 6000", file)
	}
}

// SetLimits (a reload of the account's jetstream block) replaces the
// account's limits for later requests: max_streams raised lets a stream
// in, lowered keeps the streams there and refuses the next (10027);
// max_memory lowered refuses a reservation it allowed (10028) and is
// reported by $JS.API.INFO; nil removes the limits.
func TestSetLimits(t *testing.T) {
	js, err := New(Config{StoreDir: "/sd", FS: vfs.NewCrashFS(), ServerName: "s1",
		Limits: &AccountLimits{MaxMemory: -1, MaxStore: -1, MaxStreams: 1, MaxConsumers: -1}}, newMemTransport())
	if err != nil {
		t.Fatal(err)
	}
	defer js.Shutdown()
	mem := func(name string, maxBytes int64) stream.Config {
		return stream.Config{Name: name, Subjects: []string{name + ".>"}, Storage: stream.MemoryStorage, MaxBytes: maxBytes}
	}
	if _, err := js.AddStream(mem("A", 100)); err != nil {
		t.Fatal(err)
	}
	expectErr(t, errOnly(js.AddStream(mem("B", 100))), jserr.MaximumStreamsLimit)
	js.SetLimits(&AccountLimits{MaxMemory: -1, MaxStore: -1, MaxStreams: 3, MaxConsumers: -1})
	if _, err := js.AddStream(mem("B", 100)); err != nil {
		t.Fatalf("max_streams raised to 3: %v", err)
	}
	js.SetLimits(&AccountLimits{MaxMemory: 250, MaxStore: -1, MaxStreams: 2, MaxConsumers: -1})
	if l := js.Account().Limits; l.MaxStreams != 2 || l.MaxMemory != 250 {
		t.Fatalf("account limits %+v", l)
	}
	expectErr(t, errOnly(js.AddStream(mem("C", 10))), jserr.MaximumStreamsLimit)
	expectErr(t, errOnly(js.UpdateStream(mem("B", 200))), jserr.MemoryResourcesExceeded)
	js.SetLimits(nil)
	if _, err := js.AddStream(mem("C", 1000)); err != nil {
		t.Fatalf("no limits: %v", err)
	}
	if l := js.Account().Limits; l != Unlimited {
		t.Fatalf("account limits %+v, want none", l)
	}
}

// The meta leader's check of an account's limits over the streams the
// cluster assigns it (CheckClusteredLimits, nats-server v2.15.2
// jsClusteredStreamLimitsCheck): every assigned stream counts toward
// max_streams but the one checked; reservations are max_bytes times
// the replicas, of the same storage.
func TestCheckClusteredLimits(t *testing.T) {
	js := newTestJS(t, vfs.NewCrashFS(), newMemTransport())
	js.SetLimits(&AccountLimits{MaxMemory: 100, MaxStore: 1000, MaxStreams: 3, MaxConsumers: 5, MaxAckPending: -1,
		MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: 400})
	assigned := []AssignedStream{
		{Name: "A", Storage: stream.FileStorage, MaxBytes: 200, Replicas: 3},  // 600 of 1000
		{Name: "M", Storage: stream.MemoryStorage, MaxBytes: 30, Replicas: 3}, // 90 of 100
	}
	for _, c := range []struct {
		what string
		cfg  stream.Config
		want jserr.ErrCode
	}{
		{"R3 file 100: 600+300", stream.Config{Name: "B", Storage: stream.FileStorage, MaxBytes: 100, Replicas: 3}, 0},
		{"R3 file 150: 600+450", stream.Config{Name: "B", Storage: stream.FileStorage, MaxBytes: 150, Replicas: 3}, jserr.StorageResourcesExceeded},
		{"R1 file 400: 600+400", stream.Config{Name: "B", Storage: stream.FileStorage, MaxBytes: 400, Replicas: 1}, 0},
		{"A itself scaled to 5: 1000", stream.Config{Name: "A", Storage: stream.FileStorage, MaxBytes: 200, Replicas: 5}, 0},
		{"A scaled to 5 at 201: past the per-stream first", stream.Config{Name: "A", Storage: stream.FileStorage, MaxBytes: 401, Replicas: 5}, jserr.StreamMaxStreamBytesExceeded},
		{"R1 memory 11: 90+11", stream.Config{Name: "B", Storage: stream.MemoryStorage, MaxBytes: 11, Replicas: 1}, jserr.MemoryResourcesExceeded},
		{"R3 memory unlimited: 90+3", stream.Config{Name: "B", Storage: stream.MemoryStorage, MaxBytes: -1, Replicas: 3}, 0},
		{"max_consumers 6 of 5", stream.Config{Name: "B", Storage: stream.FileStorage, MaxBytes: -1, Replicas: 1, MaxConsumers: 6}, jserr.MaximumConsumersLimit},
	} {
		if err := js.CheckClusteredLimits(&c.cfg, assigned); c.want == 0 && err != nil || c.want != 0 && (err == nil || err.ErrCode != uint16(c.want)) {
			t.Errorf("%s: %v, want %d", c.what, err, c.want)
		}
	}
	third := append(assigned, AssignedStream{Name: "C", Storage: stream.FileStorage, MaxBytes: -1, Replicas: 1})
	if err := js.CheckClusteredLimits(&stream.Config{Name: "D", Storage: stream.FileStorage, MaxBytes: -1, Replicas: 1}, third); err == nil || err.ErrCode != uint16(jserr.MaximumStreamsLimit) {
		t.Errorf("a fourth stream: %v, want 10027", err)
	}
	if err := js.CheckClusteredLimits(&stream.Config{Name: "C", Storage: stream.FileStorage, MaxBytes: -1, Replicas: 3}, third); err != nil {
		t.Errorf("the third stream itself, scaled up: %v", err)
	}
}
