package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Sizes and constants of the on-disk format (package comment).
const (
	segmentHeaderSize = 48
	recordHeaderSize  = 24
	// MaxRecordBody is the largest body of a WAL record, in bytes.
	MaxRecordBody = 256 << 20
	walVersion    = 1
	recordMagic   = 0x4C415743 // "CWAL" as little-endian bytes
	segmentMagic  = "CAIRNWAL"
)

// Body and item kinds (on disk; append only).
const (
	bodyBatch = 1

	itemReplica   = 1
	itemHardState = 2
	itemEntries   = 3
	itemSnapshot  = 4
	itemCompact   = 5
	itemSnapBegin = 6
	itemSnapAbort = 7
)

const replicaRemoved = 1 // flags of a replica item: a tombstone

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errShort is returned by the decoder for a body that ends inside an item.
var errShort = errors.New("raftnode: record body ends inside an item")

// snapMeta is the base of a group's log: the index and term of the last
// entry dropped (by a compaction or a snapshot install) and the conf
// state in force there.
type snapMeta struct {
	index, term uint64
	conf        *pb.ConfState
}

// items builds the items of one group for a batch body.
type items struct {
	b []byte
}

func (it *items) head(kind byte, g GroupID) {
	it.b = append(it.b, kind)
	it.b = binary.LittleEndian.AppendUint64(it.b, uint64(g))
}

// recordItems returns items that begin a record's body (bodyBatch): a
// group whose round writes a large record alone has it written as it is
// (roundOut.record), not copied behind the record's first byte.
func recordItems() items { return items{b: []byte{bodyBatch}} }

func (it *items) u64(v uint64) { it.b = binary.LittleEndian.AppendUint64(it.b, v) }
func (it *items) u32(v uint32) { it.b = binary.LittleEndian.AppendUint32(it.b, v) }

func (it *items) replica(g GroupID, r ReplicaID, flags byte) {
	it.head(itemReplica, g)
	it.u64(uint64(r))
	it.b = append(it.b, flags)
}

func (it *items) hardState(g GroupID, hs *pb.HardState) {
	it.head(itemHardState, g)
	it.u64(hs.GetTerm())
	it.u64(hs.GetVote())
	it.u64(hs.GetCommit())
}

// entries encodes ents, which are consecutive.
func (it *items) entries(g GroupID, ents []*pb.Entry) {
	size := 9 + 8 + 4
	for _, e := range ents {
		size += 8 + 1 + 4 + len(e.GetData())
	}
	it.b = slices.Grow(it.b, size) // a large entry's bytes are copied once
	it.head(itemEntries, g)
	it.u64(ents[0].GetIndex())
	it.u32(uint32(len(ents)))
	for _, e := range ents {
		it.u64(e.GetTerm())
		it.b = append(it.b, byte(e.GetType()))
		it.u32(uint32(len(e.GetData())))
		it.b = append(it.b, e.GetData()...)
	}
}

func (it *items) snap(kind byte, g GroupID, m snapMeta) {
	it.head(kind, g)
	it.u64(m.index)
	it.u64(m.term)
	cs := m.conf
	for _, l := range [][]uint64{cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext()} {
		it.u32(uint32(len(l)))
		for _, id := range l {
			it.u64(id)
		}
	}
	auto := byte(0)
	if cs.GetAutoLeave() {
		auto = 1
	}
	it.b = append(it.b, auto)
}

// item is one decoded item.
type item struct {
	kind    byte
	group   GroupID
	replica ReplicaID
	flags   byte
	hs      *pb.HardState
	first   uint64
	ents    []*pb.Entry
	meta    snapMeta
	// from and n are an entries item's first index and count as
	// written; first and ents leave out the entries at or below the
	// decoder's floor of the group.
	from uint64
	n    uint32
}

// decoder reads the items of a batch body.
type decoder struct {
	b   []byte
	err error
	// floor, when not nil, gives for some groups the index at and below
	// which entries are not decoded (their data is not copied): a replay
	// knows they are dropped by the end of the log (wal.floors).
	floor map[GroupID]uint64
	// all skips every entry (wal.floors reads only the metadata).
	all bool
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.err = errShort
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() byte {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

// next decodes the next item; ok is false at the end of the body or on
// error (d.err).
func (d *decoder) next() (it item, ok bool) {
	if d.err != nil || len(d.b) == 0 {
		return it, false
	}
	it.kind = d.u8()
	it.group = GroupID(d.u64())
	switch it.kind {
	case itemReplica:
		it.replica = ReplicaID(d.u64())
		it.flags = d.u8()
		if it.flags&^replicaRemoved != 0 {
			d.err = fmt.Errorf("raftnode: replica item with flags %#x", it.flags)
		}
	case itemHardState:
		it.hs = &pb.HardState{Term: new(d.u64()), Vote: new(d.u64()), Commit: new(d.u64())}
	case itemEntries:
		d.entries(&it)
	case itemSnapshot, itemCompact, itemSnapBegin, itemSnapAbort:
		it.meta = d.snapMeta()
	default:
		d.err = fmt.Errorf("raftnode: unknown item kind %d", it.kind)
	}
	return it, d.err == nil
}

func (d *decoder) entries(it *item) {
	it.first = d.u64()
	n := d.u32()
	if d.err == nil && uint64(n) > uint64(len(d.b))/13 {
		d.err = errShort // each entry takes at least 13 bytes
		return
	}
	it.from, it.n = it.first, n
	skip := uint32(0) // entries at or below the floor: checked, not kept
	if f, ok := d.floor[it.group]; ok && f >= it.first {
		skip = uint32(min(uint64(n), f-it.first+1))
	}
	if d.all {
		skip = n
	}
	keep := n - skip
	// One allocation each for the entries, their numbers and types, and
	// their data (copied: the entries must not pin the segment buffer),
	// rather than five per entry: a replay decodes every entry the WAL
	// holds, but for those below the floor.
	ents := make([]pb.Entry, keep)
	nums := make([]uint64, 2*int(keep))
	types := make([]pb.EntryType, keep)
	datas := make([][]byte, keep)
	size := 0
	for i := uint32(0); i < n && d.err == nil; i++ {
		term := d.u64()
		typ := d.u8()
		data := d.take(int(d.u32()))
		if typ > byte(pb.EntryConfChangeV2) {
			d.err = fmt.Errorf("raftnode: entry type %d", typ)
		}
		if i < skip {
			continue
		}
		j := i - skip
		datas[j] = data
		size += len(data)
		nums[2*j], nums[2*j+1], types[j] = term, it.first+uint64(i), pb.EntryType(typ)
	}
	if d.err != nil {
		return
	}
	it.first += uint64(skip)
	buf := make([]byte, 0, size)
	it.ents = make([]*pb.Entry, keep)
	for i := range ents {
		e := &ents[i]
		e.Term, e.Index, e.Type = &nums[2*i], &nums[2*i+1], &types[i]
		if data := datas[i]; len(data) > 0 {
			start := len(buf)
			buf = append(buf, data...)
			e.Data = buf[start:len(buf):len(buf)]
		}
		it.ents[i] = e
	}
}

func (d *decoder) ids() []uint64 {
	n := d.u32()
	if d.err == nil && uint64(n) > uint64(len(d.b))/8 {
		d.err = errShort
		return nil
	}
	var l []uint64
	for i := uint32(0); i < n && d.err == nil; i++ {
		l = append(l, d.u64())
	}
	return l
}

func (d *decoder) snapMeta() snapMeta {
	m := snapMeta{index: d.u64(), term: d.u64()}
	cs := &pb.ConfState{Voters: d.ids(), Learners: d.ids(), VotersOutgoing: d.ids(), LearnersNext: d.ids()}
	switch d.u8() {
	case 0:
	case 1:
		cs.AutoLeave = new(true)
	default:
		if d.err == nil {
			d.err = errors.New("raftnode: bad auto-leave byte")
		}
	}
	m.conf = cs
	return m
}

// recordHeader encodes the header of a record of body at offset off, after
// a record whose body CRC was chain, in a file synced through synced.
func recordHeader(body []byte, off, synced int64, chain uint32) (hdr [recordHeaderSize]byte, crc uint32) {
	return recordHeaderSum(len(body), crc32.Checksum(body, castagnoli), off, synced, chain)
}

// recordHeaderSum is recordHeader for a body of n bytes whose own CRC
// (crc32.Checksum, chain not included) is sum: the body's pass is made
// before the WAL's lock is taken, and chained to the previous record's
// CRC under it (chainCRC).
func recordHeaderSum(n int, sum uint32, off, synced int64, chain uint32) (hdr [recordHeaderSize]byte, crc uint32) {
	binary.LittleEndian.PutUint32(hdr[0:], recordMagic)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(n))
	binary.LittleEndian.PutUint64(hdr[8:], uint64(synced))
	crc = chainCRC(chain, sum, n)
	binary.LittleEndian.PutUint32(hdr[16:], crc)
	binary.LittleEndian.PutUint32(hdr[20:], headerCRC(hdr[:20], off))
	return hdr, crc
}

func bodyCRC(chain uint32, body []byte) uint32 {
	var c [4]byte
	binary.LittleEndian.PutUint32(c[:], chain)
	return crc32.Update(crc32.Checksum(c[:], castagnoli), castagnoli, body)
}

// chainCRC is bodyCRC(chain, body) from sum, the CRC of the body alone,
// and its length n: the CRC of the chain's 4 bytes extended by n bytes
// whose CRC is sum (crc32Combine).
func chainCRC(chain uint32, sum uint32, n int) uint32 {
	var c [4]byte
	binary.LittleEndian.PutUint32(c[:], chain)
	return crc32Combine(crc32.Checksum(c[:], castagnoli), sum, int64(n))
}

// crc32Combine returns the CRC-32C of a|b from crc1, the CRC of a, crc2,
// the CRC of b, and n, the length of b: zlib's crc32_combine (the CRC
// register advanced over n zero bytes by squaring a 32x32 matrix over
// GF(2), log2(n) times), for the Castagnoli polynomial.
func crc32Combine(crc1, crc2 uint32, n int64) uint32 {
	if n <= 0 {
		return crc1
	}
	var even, odd [32]uint32
	odd[0] = crc32.Castagnoli // the operator for one zero bit
	row := uint32(1)
	for i := 1; i < 32; i++ {
		odd[i] = row
		row <<= 1
	}
	gf2Square(&even, &odd) // two zero bits
	gf2Square(&odd, &even) // four zero bits
	for {
		gf2Square(&even, &odd) // the first pass: one zero byte
		if n&1 != 0 {
			crc1 = gf2Times(&even, crc1)
		}
		n >>= 1
		if n == 0 {
			break
		}
		gf2Square(&odd, &even)
		if n&1 != 0 {
			crc1 = gf2Times(&odd, crc1)
		}
		n >>= 1
		if n == 0 {
			break
		}
	}
	return crc1 ^ crc2
}

func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat *[32]uint32) {
	for i := range 32 {
		square[i] = gf2Times(mat, mat[i])
	}
}

func headerCRC(first20 []byte, off int64) uint32 {
	var o [8]byte
	binary.LittleEndian.PutUint64(o[:], uint64(off))
	return crc32.Update(crc32.Checksum(first20, castagnoli), castagnoli, o[:])
}

// validHeader reports whether buf[off:] starts with a record header valid
// at off, and returns its body length, synced field and body CRC.
func validHeader(buf []byte, off int64) (n int64, synced int64, crc uint32, ok bool) {
	if off < 0 || int64(len(buf))-off < recordHeaderSize {
		return 0, 0, 0, false
	}
	h := buf[off : off+recordHeaderSize]
	if binary.LittleEndian.Uint32(h[0:]) != recordMagic {
		return 0, 0, 0, false
	}
	if binary.LittleEndian.Uint32(h[20:]) != headerCRC(h[:20], off) {
		return 0, 0, 0, false
	}
	n = int64(binary.LittleEndian.Uint32(h[4:]))
	synced = int64(binary.LittleEndian.Uint64(h[8:]))
	if n < 1 || n > MaxRecordBody {
		return 0, 0, 0, false
	}
	return n, synced, binary.LittleEndian.Uint32(h[16:]), true
}

// segmentHeader encodes a segment header.
func segmentHeader(inc Incarnation, seq uint64) []byte {
	h := make([]byte, segmentHeaderSize)
	copy(h, segmentMagic)
	binary.LittleEndian.PutUint32(h[8:], walVersion)
	binary.LittleEndian.PutUint32(h[12:], segmentHeaderSize)
	copy(h[16:32], inc[:])
	binary.LittleEndian.PutUint64(h[32:], seq)
	binary.LittleEndian.PutUint32(h[44:], crc32.Checksum(h[:44], castagnoli))
	return h
}

// parseSegmentHeader checks a segment header and returns its incarnation,
// seq and CRC (the chain seed of its first record).
func parseSegmentHeader(buf []byte) (inc Incarnation, seq uint64, crc uint32, err error) {
	if len(buf) < segmentHeaderSize {
		return inc, 0, 0, fmt.Errorf("%w: segment header: %d bytes", ErrCorrupt, len(buf))
	}
	h := buf[:segmentHeaderSize]
	crc = binary.LittleEndian.Uint32(h[44:])
	switch {
	case string(h[:8]) != segmentMagic:
		return inc, 0, 0, fmt.Errorf("%w: segment header: bad magic", ErrCorrupt)
	case crc != crc32.Checksum(h[:44], castagnoli):
		return inc, 0, 0, fmt.Errorf("%w: segment header: bad checksum", ErrCorrupt)
	case binary.LittleEndian.Uint32(h[8:]) != walVersion:
		return inc, 0, 0, fmt.Errorf("%w: segment header: unsupported version %d", ErrCorrupt, binary.LittleEndian.Uint32(h[8:]))
	case binary.LittleEndian.Uint32(h[12:]) != segmentHeaderSize:
		return inc, 0, 0, fmt.Errorf("%w: segment header: size %d", ErrCorrupt, binary.LittleEndian.Uint32(h[12:]))
	}
	copy(inc[:], h[16:32])
	return inc, binary.LittleEndian.Uint64(h[32:]), crc, nil
}
