package raftnode

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/cairnmq/cairn/internal/vfs"
)

// wal is the server's write-ahead log, shared by every group (package
// comment, "Directory layout" to "Recovery"). It is used by one goroutine
// at a time: the Node serialises access with walMu.
type wal struct {
	fs       vfs.FS
	dir      string
	inc      Incarnation
	segBytes int64
	// logf receives what an operator must see (a torn tail cut,
	// damage); debugf the routine (segments started and deleted).
	logf, debugf func(string, ...any)
	// created is set when prepareWAL made a new WAL (Open logs it).
	created bool

	segs []*segment // oldest first; the last one is active
	f    vfs.File   // the active segment, open for appending or in place
	// ip is f opened in place, when the FS can (vfs.InPlaceFS; nil:
	// records are appended); end is the active segment's length on disk:
	// its records and the zeros written ahead of them (package comment,
	// "Preallocated space"). Without ip, end is size.
	ip      vfs.InPlaceFile
	end     int64
	inPlace bool   // the FS writes in place: segments get zeros ahead
	zeros   []byte // a chunk of zeros for writeAhead (made on first use)
	size    int64  // bytes of records in the active segment
	synced  int64  // bytes of the active segment known fsynced
	chain   uint32 // body CRC of the active segment's last record

	meta map[GroupID]*walMeta // what the log holds for each group, as written
	// damage is set when fsynced data was found damaged at open, or a
	// write or fsync failed: nothing more is written, every group fenced.
	damage error
	// recovered holds the replayed state of groups until AddGroup claims it.
	recovered map[GroupID]*recovered
	torn      int64 // bytes cut from the tail at open
	// pending are the segments found by prepareWAL, which load replays.
	pending []uint64
}

type segment struct {
	seq      uint64
	maxIndex map[GroupID]uint64 // highest entry index written per group
}

// walMeta is a group's metadata as written to the log.
type walMeta struct {
	replica ReplicaID // the live replica; 0 if none
	removed ReplicaID // the highest removed replica; 0 if none
	hs      *pb.HardState
	base    snapMeta // index, term and conf state of the log's start
}

// recovered is a group's state as replayed at open.
type recovered struct {
	meta walMeta
	ents []*pb.Entry // consecutive, from meta.base.index+1
	// pending is a snapshot whose install began (the state machine was
	// asked to Restore it) but whose snapshot item is missing.
	pending *snapMeta
	err     error // the replayed state failed a check (ErrCorrupt)
}

// walUpdate is what one group's items of a batch change in walMeta.
type walUpdate struct {
	group    GroupID
	replica  ReplicaID // set the live replica (0: unchanged)
	removed  ReplicaID // a tombstone of this replica (0: none)
	hs       *pb.HardState
	base     *snapMeta
	maxIndex uint64 // highest entry index written (0: none)
}

func segName(seq uint64) string { return fmt.Sprintf("%020d.wal", seq) }

// openWAL opens or creates the WAL in dir and replays it; logf and
// debugf are its logs (wal.logf, wal.debugf).
func openWAL(fs vfs.FS, dir string, segBytes int64, logf, debugf func(string, ...any)) (*wal, error) {
	w, err := prepareWAL(fs, dir, segBytes, logf, debugf)
	if err != nil {
		return nil, err
	}
	if err := w.load(); err != nil {
		return nil, err
	}
	return w, nil
}

// prepareWAL opens or creates the WAL in dir without replaying it: a new
// WAL is created (and needs no replay), an existing one has its
// incarnation read from its first segment's header (zero if that header
// is damaged: the replay reports it). load replays it.
func prepareWAL(fs vfs.FS, dir string, segBytes int64, logf, debugf func(string, ...any)) (*wal, error) {
	w := &wal{fs: fs, dir: dir, segBytes: segBytes, logf: logf, debugf: debugf, meta: map[GroupID]*walMeta{}, recovered: map[GroupID]*recovered{}}
	_, w.inPlace = fs.(vfs.InPlaceFS)
	if err := mkdirDurable(fs, dir); err != nil {
		return nil, err
	}
	seqs, err := w.listSegments()
	if err != nil {
		return nil, err
	}
	if len(seqs) == 0 {
		return w, w.create()
	}
	w.pending = seqs
	if inc, err := readIncarnation(fs, path.Join(dir, segName(seqs[0]))); err == nil {
		w.inc = inc
	}
	return w, nil
}

// readIncarnation returns the incarnation in the header of segment file
// name.
func readIncarnation(fs vfs.FS, name string) (Incarnation, error) {
	f, err := fs.Open(name)
	if err != nil {
		return Incarnation{}, err
	}
	defer f.Close()
	hdr := make([]byte, segmentHeaderSize)
	if n, err := f.ReadAt(hdr, 0); n < len(hdr) {
		return Incarnation{}, fmt.Errorf("raftnode: read the header of %s: %w", name, err)
	}
	inc, _, _, err := parseSegmentHeader(hdr)
	return inc, err
}

// load replays the segments prepareWAL found (nothing for a new WAL). It
// runs once; errors are the file system's (damage is not an error: it
// sets damage).
func (w *wal) load() error {
	seqs := w.pending
	w.pending = nil
	if len(seqs) == 0 {
		return nil
	}
	return w.replay(seqs)
}

// mkdirDurable creates dir and its parents and makes their entries
// durable (fsync of each parent), so a power loss cannot take the WAL's
// directory, and the store's incarnation with it.
func mkdirDurable(fs vfs.FS, dir string) error {
	if err := fs.MkdirAll(dir); err != nil {
		return err
	}
	for d := path.Clean(dir); d != "." && d != "/"; d = path.Dir(d) {
		if err := fs.SyncDir(path.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

func (w *wal) listSegments() ([]uint64, error) {
	names, err := w.fs.ReadDir(w.dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, n := range names {
		s, ok := strings.CutSuffix(n, ".wal")
		if !ok || len(s) != 20 {
			continue
		}
		if seq, err := strconv.ParseUint(s, 10, 64); err == nil && seq > 0 {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

// create starts a new WAL: a fresh incarnation and segment 1.
func (w *wal) create() error {
	if _, err := rand.Read(w.inc[:]); err != nil {
		return err
	}
	w.created = true
	return w.newSegment(1, nil)
}

// newSegment creates segment seq holding its header and, if checkpoint is
// not nil, a first record with that body (write-new, fsync, rename, fsync
// directory), and makes it the active one. A segment under its final name
// thus always has its header and its checkpoint. On an FS that writes in
// place, the new file also holds a first run of zeros ahead of its
// records (package comment, "Preallocated space").
func (w *wal) newSegment(seq uint64, checkpoint []byte) error {
	name := path.Join(w.dir, segName(seq))
	tmp := name + ".new"
	hdr := segmentHeader(w.inc, seq)
	_, _, chain, _ := parseSegmentHeader(hdr)
	buf := hdr
	if checkpoint != nil {
		rh, crc := recordHeader(checkpoint, segmentHeaderSize, 0, chain)
		buf = append(append(buf, rh[:]...), checkpoint...)
		chain = crc
	}
	size := int64(len(buf))
	if w.inPlace {
		buf = append(buf, make([]byte, w.chunk())...)
	}
	f, err := w.fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := w.fs.Rename(tmp, name); err != nil {
		return err
	}
	if err := w.fs.SyncDir(w.dir); err != nil {
		return err
	}
	if w.f != nil {
		w.f.Close()
		w.f, w.ip = nil, nil
	}
	if err := w.openSegment(name, size, int64(len(buf))); err != nil {
		return err
	}
	w.synced, w.chain = size, chain
	w.segs = append(w.segs, &segment{seq: seq, maxIndex: map[GroupID]uint64{}})
	w.debugf("raftnode: WAL segment %d started", seq)
	return nil
}

// preallocChunk is how many zeros the WAL writes ahead of its records at
// a time (package comment, "Preallocated space"): one extension per MiB
// of records, which the next fsync makes durable with them.
const preallocChunk = 1 << 20

// chunk returns the run of zeros written ahead at a time: preallocChunk,
// or less for small segments (tests), at least 4 KiB.
func (w *wal) chunk() int {
	return int(min(preallocChunk, max(w.segBytes, 4<<10)))
}

// openSegment opens segment file name as the active one, holding size
// bytes of records and end bytes in all: in place when the FS can, else
// for appending (an FS that turns out not to write in place, a FaultFS
// over a plain one, has the file cut back to size and fsynced).
func (w *wal) openSegment(name string, size, end int64) error {
	if w.inPlace {
		ip, err := w.fs.(vfs.InPlaceFS).OpenInPlace(name)
		switch {
		case err == nil:
			w.f, w.ip, w.size, w.end = ip, ip, size, end
			return nil
		case !errors.Is(err, errors.ErrUnsupported):
			return err
		}
		w.inPlace = false
	}
	f, err := w.fs.OpenAppend(name)
	if err != nil {
		return err
	}
	if end != size {
		if err := f.Truncate(size); err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return err
		}
	}
	w.f, w.ip, w.size, w.end = f, nil, size, size
	return nil
}

// fail records a write failure: the WAL is fenced for good.
func (w *wal) fail(err error) error {
	if w.damage == nil {
		w.damage = fmt.Errorf("%w: WAL write failed: %w", ErrCorrupt, err)
		w.logf("raftnode: %v; every group is fenced", w.damage)
	}
	return w.damage
}

// write appends one batch record of the given items (each group's items
// back to back) and applies the updates to the metadata. It does not
// fsync. A record larger than MaxRecordBody, or a failed write, fences
// the WAL.
func (w *wal) write(body []byte, ups []walUpdate) error {
	return w.writeSummed(body, crc32.Checksum(body, castagnoli), ups)
}

// writeSummed is write for a body whose own CRC (crc32.Checksum) the
// caller computed, before taking the WAL's lock: only the chaining and
// the write itself happen under it.
func (w *wal) writeSummed(body []byte, sum uint32, ups []walUpdate) error {
	if w.damage != nil {
		return w.damage
	}
	if len(body) > MaxRecordBody {
		return w.fail(fmt.Errorf("record of %d bytes", len(body)))
	}
	if w.size >= w.segBytes {
		if err := w.rotate(); err != nil {
			return w.fail(err)
		}
	}
	if err := w.writeRecord(body, sum); err != nil {
		return w.fail(err)
	}
	seg := w.segs[len(w.segs)-1]
	for _, u := range ups {
		w.update(u)
		if u.maxIndex > seg.maxIndex[u.group] {
			seg.maxIndex[u.group] = u.maxIndex
		}
	}
	return nil
}

func (w *wal) writeRecord(body []byte, sum uint32) error {
	hdr, crc := recordHeaderSum(len(body), sum, w.size, w.synced, w.chain)
	n := int64(len(hdr) + len(body))
	// A record is written in one call; a large one (a large entry) in
	// two, its header then its body, rather than copied behind its header.
	parts := [][]byte{hdr[:], body}
	if len(body) < largeRecord {
		parts = [][]byte{append(append(make([]byte, 0, n), hdr[:]...), body...)}
	}
	if w.ip == nil {
		for _, p := range parts {
			if _, err := w.f.Write(p); err != nil {
				return err
			}
		}
	} else {
		// A record that passes the zeros by more than a chunk (a large
		// entry) is written past them as it is: zeros written under it
		// first would double its writes for nothing, as the file's size
		// changes at this round's fsync either way.
		if w.size+n-w.end <= int64(w.chunk()) {
			if err := w.writeAhead(w.size + n); err != nil {
				return err
			}
		}
		off := w.size
		for _, p := range parts {
			if _, err := w.ip.WriteAt(p, off); err != nil {
				return err
			}
			off += int64(len(p))
		}
	}
	w.size += n
	w.end = max(w.end, w.size)
	w.chain = crc
	return nil
}

// largeRecord is the body size from which a record's header and body are
// written apart (writeRecord).
const largeRecord = 1 << 20

// writeAhead extends the active segment with zeros, a chunk at a time,
// until it holds need bytes (package comment, "Preallocated space"). The
// zeros are durable with the next fsync, the records written over them
// after it.
func (w *wal) writeAhead(need int64) error {
	if need <= w.end {
		return nil
	}
	if w.zeros == nil {
		w.zeros = make([]byte, w.chunk())
	}
	for w.end < need {
		if _, err := w.ip.WriteAt(w.zeros, w.end); err != nil {
			return err
		}
		w.end += int64(len(w.zeros))
	}
	return nil
}

func (w *wal) update(u walUpdate) {
	m := w.meta[u.group]
	if m == nil {
		m = &walMeta{base: snapMeta{conf: &pb.ConfState{}}}
		w.meta[u.group] = m
	}
	if u.removed != 0 {
		m.removed = max(m.removed, u.removed)
		if m.replica <= u.removed { // an older replica's record is dead too: AddGroup refuses it (ErrRemoved)
			*m = walMeta{removed: m.removed, base: snapMeta{conf: &pb.ConfState{}}}
		}
	}
	if u.replica != 0 && u.replica != m.replica {
		*m = walMeta{replica: u.replica, removed: m.removed, base: snapMeta{conf: &pb.ConfState{}}}
	}
	if u.hs != nil {
		m.hs = u.hs
	}
	if u.base != nil {
		m.base = *u.base
	}
}

// snapBegin writes and fsyncs a snapshot-begin item for group g: the
// install of a snapshot at m starts (the state machine's Restore comes
// next). If the state machine finished it but the snapshot item was lost,
// recovery completes the install from this item.
func (w *wal) snapBegin(g GroupID, m snapMeta) error {
	var it items
	it.b = []byte{bodyBatch}
	it.snap(itemSnapBegin, g, m)
	if err := w.write(it.b, nil); err != nil {
		return err
	}
	return w.sync()
}

// sync fsyncs the active segment if it has unsynced bytes.
func (w *wal) sync() error {
	if w.damage != nil {
		return w.damage
	}
	if w.synced == w.size {
		return nil
	}
	if err := w.f.Sync(); err != nil {
		return w.fail(err)
	}
	w.synced = w.size
	return nil
}

// rotate fsyncs the active segment and starts the next one, with its
// checkpoint record.
func (w *wal) rotate() error {
	if err := w.sync(); err != nil {
		return err
	}
	if err := w.cutAhead(); err != nil {
		return w.fail(err)
	}
	var it items
	it.b = append(it.b, bodyBatch)
	for _, g := range slices.Sorted(maps.Keys(w.meta)) {
		m := w.meta[g]
		if m.removed != 0 {
			it.replica(g, m.removed, replicaRemoved)
		}
		if m.replica == 0 {
			continue
		}
		it.replica(g, m.replica, 0)
		if m.hs != nil {
			it.hardState(g, m.hs)
		}
		it.snap(itemCompact, g, m.base)
	}
	return w.newSegment(w.segs[len(w.segs)-1].seq+1, it.b)
}

// cutAhead cuts the zeros written ahead off the active segment, durably,
// before a newer segment exists: only the last segment may end in zeros
// (replaySegment).
func (w *wal) cutAhead() error {
	if w.end == w.size {
		return nil
	}
	if err := w.f.Truncate(w.size); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	w.end = w.size
	return nil
}

// collect deletes the oldest segments that no group needs any more: every
// group whose entries a segment holds has compacted past them, or has no
// live replica. It does nothing unless the active segment is fully
// fsynced, so the checkpoints of the newer segments, and the compact
// items it relies on, are durable.
func (w *wal) collect() {
	if w.synced != w.size {
		return // the newest checkpoint may not be durable yet
	}
	for w.damage == nil && len(w.segs) > 1 {
		s := w.segs[0]
		for g, max := range s.maxIndex {
			if m := w.meta[g]; m != nil && m.replica != 0 && max > m.base.index {
				return
			}
		}
		if err := w.fs.Remove(path.Join(w.dir, segName(s.seq))); err != nil {
			w.fail(err)
			return
		}
		if err := w.fs.SyncDir(w.dir); err != nil {
			w.fail(err)
			return
		}
		w.segs = w.segs[1:]
		w.debugf("raftnode: WAL segment %d deleted", s.seq)
	}
}

// blocking returns the groups that keep the oldest segment alive, sorted
// (a stalled group pins the WAL; the caller may compact or remove it).
func (w *wal) blocking() []GroupID {
	if len(w.segs) < 2 {
		return nil
	}
	var gs []GroupID
	for g, max := range w.segs[0].maxIndex {
		if m := w.meta[g]; m != nil && m.replica != 0 && max > m.base.index {
			gs = append(gs, g)
		}
	}
	slices.Sort(gs)
	return gs
}

func (w *wal) close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f, w.ip = nil, nil
	return err
}

// replayGroup is a group's state while the log is replayed.
type replayGroup struct {
	walMeta
	ents    []*pb.Entry // consecutive; may start past base.index+1 until a later item closes the gap
	pending *snapMeta   // a snapshot-begin item not yet followed by its snapshot item
}

// replay reads the segments seqs (sorted), cutting a torn tail, and builds
// the groups' recovered state. Damage to fsynced data does not fail it: it
// sets w.damage.
func (w *wal) replay(seqs []uint64) error {
	groups := map[GroupID]*replayGroup{}
	lastBuf, err := readFile(w.fs, path.Join(w.dir, segName(seqs[len(seqs)-1])))
	if err != nil {
		return err
	}
	var floors map[GroupID]uint64
	if !noFloors {
		floors = w.floors(lastBuf)
	}
	for i, seq := range seqs {
		last := i == len(seqs)-1
		if i > 0 && seq != seqs[i-1]+1 {
			w.damage = fmt.Errorf("%w: WAL segment %d missing", ErrCorrupt, seqs[i-1]+1)
			break
		}
		var buf []byte
		if last {
			buf = lastBuf
		}
		if err := w.replaySegment(seq, last, groups, floors, buf); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return err
			}
			w.damage = err
			break
		}
	}
	if w.damage != nil {
		w.logf("raftnode: %v; every group is fenced", w.damage)
		if w.f != nil {
			w.f.Close()
			w.f, w.ip = nil, nil
		}
	}
	for g, rg := range groups {
		w.meta[g] = &walMeta{replica: rg.replica, removed: rg.removed, hs: rg.hs, base: rg.base}
		if rg.replica != 0 {
			w.recovered[g] = &recovered{meta: rg.walMeta, ents: rg.ents, pending: rg.pending, err: rg.check(g)}
		}
	}
	return nil
}

// floors returns, for each group the last segment (its content buf)
// speaks of, the index at and below which the replay need not decode the
// group's entries, because the end of the log drops them: the group's
// base once that segment is replayed alone (its checkpoint record, then
// its compactions and snapshots), or every index for a group whose
// replica was removed. A segment's checkpoint names every group the WAL
// knows, so entries of earlier segments that a later compaction drops
// are checked (CRC, structure) but not copied: a WAL of 800 MB of
// compacted 128 KiB entries was decoded in full before, every entry's
// data copied, to be dropped at the end. nil when the segment cannot be
// read as one (the replay then decodes everything and reports the
// damage).
func (w *wal) floors(buf []byte) map[GroupID]uint64 {
	_, _, chain, err := parseSegmentHeader(buf)
	if err != nil {
		return nil
	}
	groups := map[GroupID]*replayGroup{}
	scratch := &segment{maxIndex: map[GroupID]uint64{}}
	for off := int64(segmentHeaderSize); off < int64(len(buf)); {
		n, _, crc, ok := validHeader(buf, off)
		if !ok || off+recordHeaderSize+n > int64(len(buf)) {
			break
		}
		body := buf[off+recordHeaderSize : off+recordHeaderSize+n]
		if bodyCRC(chain, body) != crc || replayBodyFloor(body, scratch, groups, nil, true) != nil {
			break // the replay proper judges it
		}
		chain = crc
		off += recordHeaderSize + n
	}
	floors := make(map[GroupID]uint64, len(groups))
	for g, rg := range groups {
		if rg.replica == 0 {
			floors[g] = math.MaxUint64
		} else {
			floors[g] = rg.base.index
		}
	}
	return floors
}

// noFloors (tests only) makes replays decode every entry.
var noFloors bool

// replaySegment replays one segment (its content buf, nil: read it).
// For the last segment it opens the file for appending (after cutting a
// torn tail and fsyncing). Entries at or below floors are not decoded.
func (w *wal) replaySegment(seq uint64, last bool, groups map[GroupID]*replayGroup, floors map[GroupID]uint64, buf []byte) error {
	name := path.Join(w.dir, segName(seq))
	if buf == nil {
		var err error
		if buf, err = readFile(w.fs, name); err != nil {
			return err
		}
	}
	inc, hseq, chain, err := parseSegmentHeader(buf)
	if err != nil {
		return fmt.Errorf("segment %d: %w", seq, err)
	}
	if len(w.segs) == 0 {
		w.inc = inc
	}
	switch {
	case inc != w.inc:
		return fmt.Errorf("%w: segment %d belongs to store %s, not %s", ErrCorrupt, seq, inc, w.inc)
	case hseq != seq:
		return fmt.Errorf("%w: segment %d says it is segment %d", ErrCorrupt, seq, hseq)
	}
	seg := &segment{seq: seq, maxIndex: map[GroupID]uint64{}}
	w.segs = append(w.segs, seg)
	off := int64(segmentHeaderSize)
	for off < int64(len(buf)) {
		n, _, crc, ok := validHeader(buf, off)
		ok = ok && off+recordHeaderSize+n <= int64(len(buf))
		var body []byte
		if ok {
			body = buf[off+recordHeaderSize : off+recordHeaderSize+n]
			ok = bodyCRC(chain, body) == crc
		}
		if !ok && last && allZero(buf[off:]) {
			break // the zeros written ahead of the records: their end
		}
		if !ok {
			if !last || vouched(buf, off) {
				return fmt.Errorf("%w: WAL segment %d: invalid record at offset %d, before fsynced data", ErrCorrupt, seq, off)
			}
			w.torn = int64(len(buf)) - off
			w.logf("raftnode: WAL segment %d: cutting a torn tail of %d bytes at offset %d", seq, w.torn, off)
			break
		}
		if err := replayBodyFloor(body, seg, groups, floors, false); err != nil {
			return fmt.Errorf("%w: WAL segment %d: record at offset %d: %v", ErrCorrupt, seq, off, err)
		}
		chain = crc
		off += recordHeaderSize + n
	}
	if !last {
		return nil
	}
	return w.openActive(name, off, chain)
}

// openActive opens the last segment for appending, cut at size, and
// fsyncs it: what a killed process left in the page cache is made durable
// before anything builds on it.
func (w *wal) openActive(name string, size int64, chain uint32) error {
	if err := w.openSegment(name, size, size); err != nil {
		return err
	}
	f := w.f
	if cur, err := f.Size(); err != nil || cur != size {
		if err == nil {
			err = f.Truncate(size)
		}
		if err != nil {
			f.Close()
			w.f, w.ip = nil, nil
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		w.f, w.ip = nil, nil
		return err
	}
	w.synced, w.chain = size, chain
	return nil
}

// allZero reports whether b holds only zeros.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// vouched reports whether a valid record header after off says the file
// had been fsynced past off: then the invalid record at off was durable,
// and its damage is not a torn write.
func vouched(buf []byte, off int64) bool {
	for p := off + 1; p+recordHeaderSize <= int64(len(buf)); p++ {
		if _, synced, _, ok := validHeader(buf, p); ok && synced > off {
			return true
		}
	}
	return false
}

func readFile(fs vfs.FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && size > 0 {
		return nil, err
	}
	return buf, nil
}

// replayBody applies the items of one record.
func replayBody(body []byte, seg *segment, groups map[GroupID]*replayGroup) error {
	return replayBodyFloor(body, seg, groups, nil, false)
}

// replayBodyFloor is replayBody decoding no entry at or below its group's
// floor (every entry with all).
func replayBodyFloor(body []byte, seg *segment, groups map[GroupID]*replayGroup, floors map[GroupID]uint64, all bool) error {
	if body[0] != bodyBatch {
		return fmt.Errorf("body kind %d", body[0])
	}
	d := decoder{b: body[1:], floor: floors, all: all}
	for {
		it, ok := d.next()
		if !ok {
			return d.err
		}
		rg := groups[it.group]
		if rg == nil {
			rg = &replayGroup{walMeta: walMeta{base: snapMeta{conf: &pb.ConfState{}}}}
			groups[it.group] = rg
		}
		rg.apply(it)
		if it.kind == itemEntries && it.n > 0 {
			last := it.from + uint64(it.n) - 1
			seg.maxIndex[it.group] = max(seg.maxIndex[it.group], last)
		}
	}
}

func (rg *replayGroup) apply(it item) {
	switch it.kind {
	case itemReplica:
		if it.flags&replicaRemoved != 0 {
			rg.removed = max(rg.removed, it.replica)
			if rg.replica <= it.replica { // as wal.update
				*rg = replayGroup{walMeta: walMeta{removed: rg.removed, base: snapMeta{conf: &pb.ConfState{}}}}
			}
		} else if rg.replica != it.replica {
			*rg = replayGroup{walMeta: walMeta{replica: it.replica, removed: rg.removed, base: snapMeta{conf: &pb.ConfState{}}}}
		}
	case itemHardState:
		rg.hs = it.hs
	case itemEntries:
		if len(it.ents) == 0 && it.n > 0 {
			// Every entry at or below the floor, not decoded: what the
			// item overwrote goes, as appendEntries would drop it; what
			// it wrote the end of the log drops.
			rg.truncateFrom(it.from)
		} else {
			rg.appendEntries(it.first, it.ents)
		}
	case itemSnapshot:
		rg.base, rg.ents, rg.pending = it.meta, nil, nil
	case itemSnapBegin:
		m := it.meta
		rg.pending = &m
	case itemSnapAbort:
		rg.pending = nil
	case itemCompact:
		rg.base = it.meta
		rg.dropThrough(it.meta.index)
	}
}

// appendEntries writes ents (starting at first) over the log, dropping
// what was at and after first; a gap before first is kept as a gap (a
// later compaction may close it; check reports it otherwise). The
// entries are appended in place: the slice is the group's alone, and
// copying it for every record made a replay quadratic in the entries a
// group holds (BenchmarkWALReplay: 80 s for 200,000 entries, where it
// now takes well under a second).
func (rg *replayGroup) appendEntries(first uint64, ents []*pb.Entry) {
	if len(ents) == 0 {
		return
	}
	switch {
	case len(rg.ents) == 0 || first < rg.ents[0].GetIndex() || first > rg.lastIndex()+1:
		rg.ents = ents
	default:
		keep := first - rg.ents[0].GetIndex()
		clear(rg.ents[keep:]) // entries overwritten: let them go
		rg.ents = append(rg.ents[:keep], ents...)
	}
	rg.dropThrough(rg.base.index)
}

// truncateFrom drops the entries at and after index.
func (rg *replayGroup) truncateFrom(index uint64) {
	for len(rg.ents) > 0 && rg.ents[len(rg.ents)-1].GetIndex() >= index {
		rg.ents[len(rg.ents)-1] = nil
		rg.ents = rg.ents[:len(rg.ents)-1]
	}
}

func (rg *replayGroup) dropThrough(index uint64) {
	for len(rg.ents) > 0 && rg.ents[0].GetIndex() <= index {
		rg.ents = rg.ents[1:]
	}
}

func (rg *replayGroup) lastIndex() uint64 {
	if len(rg.ents) == 0 {
		return rg.base.index
	}
	return rg.ents[len(rg.ents)-1].GetIndex()
}

// check validates a replayed group (package comment, "Recovery").
func (rg *replayGroup) check(g GroupID) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: group %d: %s", ErrCorrupt, g, fmt.Sprintf(format, args...))
	}
	prevTerm := rg.base.term
	for i, e := range rg.ents {
		if e.GetIndex() != rg.base.index+1+uint64(i) {
			return bad("log has a gap before index %d (base %d)", e.GetIndex(), rg.base.index)
		}
		if e.GetTerm() < prevTerm {
			return bad("term goes down at index %d", e.GetIndex())
		}
		prevTerm = e.GetTerm()
	}
	if rg.hs.GetCommit() > rg.lastIndex() {
		return bad("commit %d past the last index %d", rg.hs.GetCommit(), rg.lastIndex())
	}
	if rg.hs.GetTerm() < prevTerm {
		return bad("term %d below the last entry's term %d", rg.hs.GetTerm(), prevTerm)
	}
	return nil
}
