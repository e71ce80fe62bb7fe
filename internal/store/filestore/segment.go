package filestore

import (
	"math/bits"
	"slices"

	"github.com/cairnmq/cairn/internal/vfs"
)

// hdrBit marks, in segment.lens, a message stored with a header.
const hdrBit = 1 << 31

// segment is one segment file and its in-memory index. Slot i is the
// sequence base+i; slots run from base to the segment's last message.
// Every field but lastEnd is guarded by Store.mu.
type segment struct {
	base uint64
	path string

	offs  []uint32 // record offset of slot i; 0 when no record is known
	lens  []uint32 // record length of slot i, with hdrBit
	sids  []uint32 // subject id of slot i
	next  []uint32 // distance to the next message on the same subject; 0 unknown
	dead  []uint64 // bitmap: slot i is not a stored message
	live  int      // stored messages
	lost  int      // slots inside Store.mu.lost
	bloom [4]uint64
	// plain is, for slot i holding a compressed record, the record's
	// length uncompressed (0 for other slots); nil until the segment
	// holds a compressed record.
	plain []uint32
	// maxTime is the largest message time the segment ever held.
	maxTime int64
	// lastEnd is where the last read from the file ended, guarded by
	// chunkCache.mu.
	lastEnd int64
	// s2 says the segment's header is version segVersionS2, so that it
	// may hold compressed records.
	s2 bool

	// buf is the segment's bytes from file offset bufOff to size: every
	// byte not yet written to the file, and the last ones written (at
	// least the chunk being filled, see trimImage). Bytes below bufOff are
	// read from the file. nil once a sealed segment is all written.
	buf     []byte
	bufOff  int64
	size    int64    // bytes of the segment (written or not)
	written int64    // bytes handed to the flusher
	synced  int64    // bytes known to be durable
	created bool     // the file exists with its header durable
	sealed  bool     // no more appends: a newer segment exists
	f       vfs.File // open file; nil until created

	// ix collects the segment's index file as its records are written;
	// nil when it gets none. Owned by the flusher's writer (by Open
	// before the flusher starts), not guarded by Store.mu.
	ix *idxBuilder
}

// appendRec appends a record to the image (see appendRecordAt) and
// returns its offset in the file. The caller has reserved room for it.
func (g *segment) appendRec(typ, flags byte, seq uint64, tm int64, subj string, hdr, data []byte) int64 {
	off := g.size
	g.buf = appendRecordAt(g.buf, g.bufOff, g.base, typ, flags, seq, tm, subj, hdr, data)
	g.grown()
	return off
}

// appendMarker appends a record without subject, header or payload.
func (g *segment) appendMarker(typ byte, seq uint64) { g.appendRec(typ, 0, seq, 0, "", nil, nil) }

// grown sets size after bytes were appended to buf.
func (g *segment) grown() { g.size = g.bufOff + int64(len(g.buf)) }

// inImage returns the n bytes at offset off when buf holds them.
func (g *segment) inImage(off int64, n int) ([]byte, bool) {
	if g.buf == nil || off < g.bufOff {
		return nil, false
	}
	return g.buf[off-g.bufOff : off-g.bufOff+int64(n)], true
}

// dropImage forgets the in-memory bytes: the file holds all of them.
func (g *segment) dropImage() { g.buf, g.bufOff = nil, g.size }

// Sizes of the in-memory image of a segment (trimImage).
const (
	// trimStep is how many written bytes an image collects before they
	// are dropped (one copy of what is kept per trimStep written).
	trimStep = 256 << 10
	// keepImageCap is the largest image capacity kept once the bytes it
	// held are written; a larger buffer (grown by a large message) is
	// replaced by one that fits what remains.
	keepImageCap = 1 << 20
)

// trimImage drops from buf the bytes the file now holds up to written,
// the end of what the flusher wrote, keeping the 64 KiB chunk being
// filled: readers at the tail of the log copy from memory, and reads from
// the file only ever touch whole chunks, which never change once written
// and may be cached (chunkCache). It does nothing until at least trimStep
// bytes can go, nor while the bytes kept (appended since the write) would
// outnumber those dropped: the copy, made under the store's lock, costs
// at most one byte per byte written. Only the flusher's writer calls it,
// after its write and before it takes the next batch, so nothing else
// refers to buf's bytes.
func (g *segment) trimImage(written int64) {
	cut := written &^ (chunkSize - 1)
	drop := cut - g.bufOff
	if g.buf == nil || drop < trimStep || int64(len(g.buf))-drop > drop {
		return
	}
	n := copy(g.buf, g.buf[cut-g.bufOff:])
	g.buf, g.bufOff = g.buf[:n], cut
	if cap(g.buf) > keepImageCap && n < cap(g.buf)/4 {
		g.buf = append(make([]byte, 0, max(2*n, initialBufCap)), g.buf...)
	}
}

// reserveSlots makes room for n slots without growing the index slices
// piecemeal (their growth slack would otherwise cost memory per message).
func (g *segment) reserveSlots(n int) {
	g.offs = slices.Grow(g.offs, n)
	g.lens = slices.Grow(g.lens, n)
	g.sids = slices.Grow(g.sids, n)
	g.next = slices.Grow(g.next, n)
	g.dead = slices.Grow(g.dead, n/64+1)
	if g.plain != nil {
		g.plain = slices.Grow(g.plain, n)
	}
}

// end returns the sequence after the segment's last slot.
func (g *segment) end() uint64 { return g.base + uint64(len(g.offs)) }

// slot returns the slot index of seq, or false when seq has no slot here.
func (g *segment) slot(seq uint64) (int, bool) {
	if seq < g.base || seq >= g.end() {
		return 0, false
	}
	return int(seq - g.base), true
}

// isDead reports whether slot i holds no stored message.
func (g *segment) isDead(i int) bool { return g.dead[i>>6]&(1<<(i&63)) != 0 }

// kill marks slot i removed; it must be live.
func (g *segment) kill(i int) {
	g.dead[i>>6] |= 1 << (i & 63)
	g.live--
}

// addSlot appends a slot. A slot without a record (off 0) starts dead.
func (g *segment) addSlot(off, length uint32, sid uint32) {
	i := len(g.offs)
	g.offs = append(g.offs, off)
	g.lens = append(g.lens, length)
	g.sids = append(g.sids, sid)
	g.next = append(g.next, 0)
	if g.plain != nil {
		g.plain = append(g.plain, 0)
	}
	if i&63 == 0 {
		g.dead = append(g.dead, 0)
	}
	if off == 0 {
		g.dead[i>>6] |= 1 << (i & 63)
		return
	}
	g.live++
	g.bloom[bloomBit(sid)>>6] |= 1 << (bloomBit(sid) & 63)
}

// setPlain records that the last slot holds a compressed record whose
// length uncompressed is n.
func (g *segment) setPlain(n uint32) {
	if g.plain == nil {
		g.plain = make([]uint32, len(g.offs), cap(g.offs))
	}
	g.plain[len(g.offs)-1] = n
}

// mayHold reports whether the segment may hold a message with a subject
// id whose bloom bits are in mask.
func (g *segment) mayHold(mask *[4]uint64) bool {
	return g.bloom[0]&mask[0]|g.bloom[1]&mask[1]|g.bloom[2]&mask[2]|g.bloom[3]&mask[3] != 0
}

// bloomBit returns the bit of the 256-bit segment filter for a subject id.
func bloomBit(sid uint32) uint32 { return (sid * 0x9E3779B1) >> 24 }

// nextLive returns the first live slot at or after i, or -1.
func (g *segment) nextLive(i int) int {
	for i < len(g.offs) {
		w := ^g.dead[i>>6] >> (i & 63)
		if w != 0 {
			j := i + bits.TrailingZeros64(w)
			if j < len(g.offs) {
				return j
			}
			return -1
		}
		i = (i | 63) + 1
	}
	return -1
}

// prevLive returns the last live slot at or before i, or -1.
func (g *segment) prevLive(i int) int {
	for ; i >= 0; i-- {
		if !g.isDead(i) {
			return i
		}
	}
	return -1
}

// msgSize returns store.MsgSize of the message in slot i from its record
// length (uncompressed): the record has 2 bytes more overhead than MsgSize
// counts, and MsgSize adds 4 when there is a header.
func (g *segment) msgSize(i int) uint64 {
	l := g.lens[i]
	n := uint64(l&^hdrBit) - 2
	if g.plain != nil && g.plain[i] != 0 {
		n = uint64(g.plain[i]) - 2
	}
	if l&hdrBit != 0 {
		n += 4
	}
	return n
}

// recordLen returns the length of slot i's record.
func (g *segment) recordLen(i int) int { return int(g.lens[i] &^ hdrBit) }

// indexBytes returns the memory the per-slot index uses.
func (g *segment) indexBytes() int {
	return 4*(cap(g.offs)+cap(g.lens)+cap(g.sids)+cap(g.next)+cap(g.plain)) + 8*cap(g.dead)
}
