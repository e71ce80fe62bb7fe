package raftnode

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// chainCRC, from the body's own CRC, equals bodyCRC over the body, for
// lengths from 0 to past 64 KiB and any chain value.
func TestChainCRC(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 4, 7, 8, 15, 16, 100, 1023, 4096, 65537, 1 << 20} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(r.Uint32())
		}
		for range 3 {
			chain := r.Uint32()
			if got, want := chainCRC(chain, crc32.Checksum(body, castagnoli), n), bodyCRC(chain, body); got != want {
				t.Fatalf("%d bytes, chain %#x: chainCRC %#x, bodyCRC %#x", n, chain, got, want)
			}
		}
	}
}
