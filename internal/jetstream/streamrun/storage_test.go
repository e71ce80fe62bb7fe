package streamrun

import (
	"testing"

	"github.com/cairnmq/cairn/internal/stream"
)

// The reserve is a tenth of a small file system and 64 MiB of a large one.
func TestDiskReserve(t *testing.T) {
	for total, want := range map[uint64]uint64{20 << 20: 2 << 20, 640 << 20: 64 << 20, 1 << 40: 64 << 20} {
		if got := diskReserve(total); got != want {
			t.Errorf("diskReserve(%d) = %d, want %d", total, got, want)
		}
	}
}

// An account's bytes over the cluster are its bytes here plus the larger
// of the other servers' reports and what its replicas here imply the
// other replicas hold; a publish is refused once they are over the
// account's limit, and never without one.
func TestAccountClusterUsed(t *testing.T) {
	s := NewStorage(nil, "", NewUsage(), nil, nil, nil)
	const file = stream.FileStorage
	s.used[file].Store(100)
	if got := s.AccountClusterUsed(file); got != 100 || s.OverAccountLimit(file) {
		t.Fatalf("one server: %d, over %v", got, s.OverAccountLimit(file))
	}
	s.copies[file].Store(200) // an R3 stream of 100 bytes here
	s.SetOthers(file, 150)    // its followers reported 75 each so far
	if got := s.AccountClusterUsed(file); got != 300 {
		t.Fatalf("copies larger: %d, want 300", got)
	}
	s.SetOthers(file, 450) // and another server holds 250 of another stream
	if got := s.AccountClusterUsed(file); got != 550 {
		t.Fatalf("reports larger: %d, want 550", got)
	}
	if s.AccountClusterUsed(stream.MemoryStorage) != 0 {
		t.Fatal("memory counted the file bytes")
	}
	s.SetAccountLimit(file, 550)
	if s.OverAccountLimit(file) {
		t.Fatal("over at the limit")
	}
	s.SetAccountLimit(file, 549)
	if !s.OverAccountLimit(file) {
		t.Fatal("not over past the limit")
	}
}
