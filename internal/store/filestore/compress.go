package filestore

import (
	"sync"

	"github.com/klauspost/compress/s2"
)

// Compression of message payloads (see "Compression" in the package
// comment).

// minPack is the smallest payload Append tries to compress.
const minPack = 64

// maxPooled is the largest compression buffer kept for reuse.
const maxPooled = 1 << 20

// packPool holds buffers for compressed payloads (*[]byte).
var packPool sync.Pool

// pack returns the S2 block of data when it pays: data is at least minPack
// bytes and the block at least 1/16 smaller. force (tests) packs every
// payload. It returns nil otherwise; a non-nil result goes back to
// release once its bytes are copied.
func pack(data []byte, force bool) *[]byte {
	if len(data) < minPack && !force {
		return nil
	}
	bp, _ := packPool.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	buf := *bp
	if want := s2.MaxEncodedLen(len(data)); cap(buf) < want {
		buf = make([]byte, want)
	}
	out := s2.Encode(buf[:cap(buf)], data)
	*bp = out
	if !force && len(out) > len(data)-len(data)/16 {
		release(bp)
		return nil
	}
	return bp
}

// release returns a buffer from pack to the pool.
func release(bp *[]byte) {
	if bp != nil && cap(*bp) <= maxPooled {
		packPool.Put(bp)
	}
}

// packingWanted reports whether new segments may hold compressed records:
// the stream's compression is on (or a test forces it). Called with
// Store.mu held or during Open.
func (s *Store) packingWanted() bool { return s.mu.limits.Compress || s.cfg.forceS2 }

// setPackingLocked updates what Append reads without the lock: compress
// when compression is on and the active segment may hold the result.
func (s *Store) setPackingLocked() {
	s.packing.Store(s.packingWanted() && s.activeLocked().s2)
}
