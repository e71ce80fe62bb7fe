package jetstream

import (
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// The disk guard's figures (streamrun's diskCheckEvery and
// diskReserveMax): how often it looks at the most, and the largest
// reserve.
const (
	diskCheckEvery = 100 * time.Millisecond
	diskReserveMax = 64 << 20
)

// spaceFS is a CrashFS that reports the free space a test sets.
type spaceFS struct {
	*vfs.CrashFS
	mu          sync.Mutex
	free, total uint64
}

func (f *spaceFS) Space(string) (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.free, f.total, nil
}

func (f *spaceFS) set(free uint64) {
	f.mu.Lock()
	f.free = free
	f.mu.Unlock()
}

// With less than the reserve free on the store's file system, a publish to
// a file stream gets 10023 insufficient resources and stores nothing; a
// memory stream is not affected; once space is back (and the guard has
// looked again) publishes are stored.
func TestDiskGuardRefusesPublishesWhenSpaceIsLow(t *testing.T) {
	fs := &spaceFS{CrashFS: vfs.NewCrashFS(), free: 1 << 40, total: 1 << 40}
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func() { mu.Lock(); now = now.Add(diskCheckEvery); mu.Unlock() }
	tr := newMemTransport()
	js, err := New(Config{StoreDir: "/sd", FS: fs, ServerName: "s1", Now: clock}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Shutdown()
	if _, err := js.AddStream(ordersConfig(stream.FileStorage)); err != nil {
		t.Fatal(err)
	}
	mem := stream.Config{Name: "MEM", Subjects: []string{"mem.>"}, Storage: stream.MemoryStorage}
	if _, err := js.AddStream(mem); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.d")
	pub := func(subj string) string {
		tr.Publish(subj, "_INBOX.d", nil, []byte("x"))
		return acks.next(t)
	}
	if got := pub("events.orders.1"); got != `{"stream":"ORDERS","seq":1}` {
		t.Fatalf("with room: %s", got)
	}
	fs.set(diskReserveMax - 1)
	advance()
	const refused = `{"error":{"code":503,"err_code":10023,"description":"insufficient resources"},"stream":"ORDERS","seq":0}`
	if got := pub("events.orders.2"); got != refused {
		t.Fatalf("under the reserve: %s, want %s", got, refused)
	}
	if got := pub("mem.1"); got != `{"stream":"MEM","seq":1}` {
		t.Fatalf("memory stream under the reserve: %s", got)
	}
	fs.set(diskReserveMax + 1)
	if got := pub("events.orders.3"); got != refused {
		t.Fatalf("before the guard looks again: %s", got)
	}
	advance()
	if got := pub("events.orders.4"); got != `{"stream":"ORDERS","seq":2}` {
		t.Fatalf("with room again: %s", got)
	}
}

// Fast publishers are checked by bytes too: once a quarter of the reserve
// has been offered since the last look, the guard looks again at once,
// however little time has passed.
func TestDiskGuardLooksAgainAfterAQuarterOfTheReserve(t *testing.T) {
	fs := &spaceFS{CrashFS: vfs.NewCrashFS(), free: 40 << 20, total: 40 << 20} // reserve 4 MiB
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}                          // never advances
	tr := newMemTransport()
	js, err := New(Config{StoreDir: "/sd", FS: fs, ServerName: "s1", Now: clk.now}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Shutdown()
	if _, err := js.AddStream(ordersConfig(stream.FileStorage)); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.q")
	data := make([]byte, 400<<10)
	var got []string
	for i := range 4 {
		tr.Publish("events.orders.1", "_INBOX.q", nil, data)
		got = append(got, acks.next(t))
		if i == 0 {
			fs.set(1 << 20) // under the reserve from now on
		}
	}
	const refused = `{"error":{"code":503,"err_code":10023,"description":"insufficient resources"},"stream":"ORDERS","seq":0}`
	if got[2] != `{"stream":"ORDERS","seq":3}` || got[3] != refused {
		t.Fatalf("PubAcks %q: want the third stored (under a quarter of the reserve since the look) and the fourth refused", got)
	}
}
