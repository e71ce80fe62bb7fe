package streamrun

import "testing"

// The reserve is a tenth of a small file system and 64 MiB of a large one.
func TestDiskReserve(t *testing.T) {
	for total, want := range map[uint64]uint64{20 << 20: 2 << 20, 640 << 20: 64 << 20, 1 << 40: 64 << 20} {
		if got := diskReserve(total); got != want {
			t.Errorf("diskReserve(%d) = %d, want %d", total, got, want)
		}
	}
}
