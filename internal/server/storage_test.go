package server

import (
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/logger"
)

// friendlyBytes formats as nats-server v2.15.2 logs "Max Memory" and
// "Max Storage" (its friendlyBytes); 17.66 GB is what nats-server logged
// as Max Memory on a machine of 25275973632 bytes of memory.
func TestFriendlyBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.00 KB", 1536: "1.50 KB", 1 << 30: "1.00 GB",
		25275973632 / 4 * 3: "17.66 GB", 1 << 40: "1.00 TB", 1 << 62: "4.00 EB", -1: "unlimited",
	} {
		if got := friendlyBytes(n); got != want {
			t.Errorf("friendlyBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// A limit of 0 is sized from the machine, as nats-server sizes an unset
// one; bytes and NoStorage are used as they are.
func TestStorageLimitOptions(t *testing.T) {
	for _, tc := range []struct {
		opts     Options
		mem, str int64
		fromDisk bool
	}{
		{Options{}, defaultMaxMemory(), 0, true},
		{Options{MaxMemoryStore: 5000, MaxFileStore: 7000}, 5000, 7000, false},
		{Options{MaxMemoryStore: NoStorage, MaxFileStore: NoStorage}, jetstream.NoStorage, jetstream.NoStorage, false},
	} {
		s := &Server{opts: tc.opts}
		var cfg jetstream.Config
		s.storageLimits(&cfg)
		if cfg.MaxMemory != tc.mem || cfg.MaxStore != tc.str || cfg.MaxStoreFromDisk != tc.fromDisk {
			t.Errorf("%+v: got %d %d %v, want %d %d %v", tc.opts, cfg.MaxMemory, cfg.MaxStore, cfg.MaxStoreFromDisk, tc.mem, tc.str, tc.fromDisk)
		}
	}
	if m := defaultMaxMemory(); m <= 0 || systemMemory() > 0 && m > systemMemory() {
		t.Errorf("default memory limit %d with %d of memory", m, systemMemory())
	}
}

// The start of JetStream logs the limits in force, as nats-server does.
func TestStorageLimitsLogged(t *testing.T) {
	var out syncWriter
	s, err := New(Options{Host: "127.0.0.1", Port: RandomPort, JetStream: true, StoreDir: t.TempDir(),
		MaxMemoryStore: 1 << 30, MaxFileStore: 3 << 29, Logger: logger.New(&out, false, false)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	for _, want := range []string{"[INF]   Max Memory:      1.00 GB\n", "[INF]   Max Storage:     1.50 GB\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the log:\n%s", want, out.String())
		}
	}
}
