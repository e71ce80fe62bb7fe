package filestore

import (
	"fmt"
	"hash/crc32"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// The ack journal (package comment, "Ack journal"): the confirmed
// acknowledgements of every consumer of the store, appended with group
// commit.

var ackMagic = []byte("CAIRNACK")

const (
	ackHeaderSize = 28
	ackRecFixed   = 36      // record bytes besides the consumer name
	ackRotateSize = 1 << 20 // a new generation starts past this size
	opReset       = 0x10    // record kind: forget the name's earlier records
)

// journal is a store's ack journal. Its goroutine (run) owns the files;
// mu guards everything else.
type journal struct {
	fs   vfs.FS
	dir  string // <Dir>/acks
	root string // <Dir>
	logf func(string, ...any)
	kick chan struct{} // capacity 1
	done chan struct{}

	mu struct {
		sync.Mutex
		gen       uint64 // the generation appends go to
		size      int64  // bytes of gen, including those not yet written
		pend      []ackChunk
		waiters   []func(error)
		track     map[string]*ackTrack
		recovered map[string][]store.ConsumerOp
		files     []uint64 // generations on disk, ascending
		failed    error
		closed    bool
	}

	// Owned by run.
	f       vfs.File
	fgen    uint64
	madeDir bool
}

// ackChunk is encoded records for one generation.
type ackChunk struct {
	gen uint64
	b   []byte
}

// ackTrack says which generations hold records of one consumer that its
// stored state may not hold: first is the oldest such generation (0 for
// none), last the newest generation it wrote to.
type ackTrack struct {
	first, last uint64
}

// openJournal recovers the journal in <root>/acks and starts its
// goroutine. Damage is logged and ends the replay of that file: the acks
// after it are redelivered rather than guessed.
func openJournal(fs vfs.FS, root string, logf func(string, ...any)) (*journal, error) {
	j := &journal{fs: fs, root: root, dir: path.Join(root, "acks"), logf: logf,
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	j.mu.track = map[string]*ackTrack{}
	j.mu.recovered = map[string][]store.ConsumerOp{}
	if err := j.recover(); err != nil {
		return nil, err
	}
	go j.run()
	return j, nil
}

func ackFileName(gen uint64) string { return fmt.Sprintf("%020d.log", gen) }

// recover reads every journal file, oldest first.
func (j *journal) recover() error {
	names, err := j.fs.ReadDir(j.dir)
	if vfs.IsNotExist(err) {
		j.mu.gen, j.mu.size = 1, ackHeaderSize
		return nil
	}
	if err != nil {
		return err
	}
	j.madeDir = true
	first := map[string]uint64{}
	for _, name := range names {
		gen, err := strconv.ParseUint(strings.TrimSuffix(name, ".log"), 10, 64)
		if err != nil || !strings.HasSuffix(name, ".log") || gen == 0 {
			continue // not ours: left alone
		}
		j.mu.files = append(j.mu.files, gen)
		if err := j.readFile(gen, first); err != nil {
			return err
		}
	}
	for name, gen := range first {
		if _, isDir, err := j.fs.Stat(path.Join(j.root, "consumers", name)); err != nil || !isDir {
			delete(j.mu.recovered, name) // the consumer is gone
			continue
		}
		j.mu.track[name] = &ackTrack{first: gen, last: gen}
	}
	j.mu.gen, j.mu.size = 1, ackHeaderSize
	if n := len(j.mu.files); n > 0 {
		j.mu.gen = j.mu.files[n-1] + 1
	}
	return nil
}

// readFile replays one file into recovered; first gets the generation of
// each name's oldest kept record.
func (j *journal) readFile(gen uint64, first map[string]uint64) error {
	name := path.Join(j.dir, ackFileName(gen))
	b, err := readWhole(j.fs, name)
	if err != nil {
		return err
	}
	if len(b) < ackHeaderSize || string(b[:8]) != string(ackMagic) || le.Uint32(b[8:]) != 1 ||
		le.Uint64(b[16:]) != gen || crc32.Checksum(b[:24], crcTable) != le.Uint32(b[24:]) {
		if len(b) > 0 {
			j.logf("filestore: ack journal %s: damaged header; its confirmed acknowledgements are not replayed (their messages may be redelivered)", name)
		}
		return nil
	}
	off := ackHeaderSize
	for off < len(b) {
		op, cname, n, ok := decodeAckRecord(b[off:], gen, uint64(off))
		if !ok {
			j.logf("filestore: ack journal %s: damaged or torn record at offset %d of %d; the acknowledgements after it are not replayed (their messages may be redelivered)", name, off, len(b))
			return nil
		}
		off += n
		if op.Kind == opReset {
			delete(j.mu.recovered, cname)
			delete(first, cname)
			continue
		}
		j.mu.recovered[cname] = append(j.mu.recovered[cname], op)
		if _, ok := first[cname]; !ok {
			first[cname] = gen
		}
	}
	return nil
}

// appendAckRecord encodes one record at offset off of generation gen.
func appendAckRecord(b []byte, gen, off uint64, name string, op store.ConsumerOp) []byte {
	start := len(b)
	b = le.AppendUint32(b, uint32(ackRecFixed+len(name)))
	b = append(b, byte(op.Kind), 0)
	b = le.AppendUint16(b, uint16(len(name)))
	b = le.AppendUint64(b, op.Stream)
	b = le.AppendUint64(b, op.Consumer)
	b = le.AppendUint64(b, uint64(op.Time))
	b = append(b, name...)
	var pos [16]byte
	le.PutUint64(pos[:], gen)
	le.PutUint64(pos[8:], off)
	crc := crc32.Update(crc32.Checksum(pos[:], crcTable), crcTable, b[start:])
	return le.AppendUint32(b, crc)
}

// decodeAckRecord verifies and decodes the record at the start of b,
// found at offset off of generation gen, and returns its length.
func decodeAckRecord(b []byte, gen, off uint64) (store.ConsumerOp, string, int, bool) {
	if len(b) < ackRecFixed {
		return store.ConsumerOp{}, "", 0, false
	}
	l := int(le.Uint32(b))
	if l < ackRecFixed || l > len(b) || int(le.Uint16(b[6:]))+ackRecFixed != l || b[5] != 0 {
		return store.ConsumerOp{}, "", 0, false
	}
	var pos [16]byte
	le.PutUint64(pos[:], gen)
	le.PutUint64(pos[8:], off)
	if crc32.Update(crc32.Checksum(pos[:], crcTable), crcTable, b[:l-4]) != le.Uint32(b[l-4:]) {
		return store.ConsumerOp{}, "", 0, false
	}
	kind := store.ConsumerOpKind(b[4])
	switch kind {
	case store.OpAck, store.OpNak, store.OpTerm, opReset:
	default:
		return store.ConsumerOp{}, "", 0, false
	}
	op := store.ConsumerOp{Kind: kind, Stream: le.Uint64(b[8:]), Consumer: le.Uint64(b[16:]), Time: int64(le.Uint64(b[24:]))}
	return op, string(b[32 : l-4]), l, true
}

// append queues ops of the named consumer and done for the next sync.
func (j *journal) append(name string, ops []store.ConsumerOp, done func(error)) {
	j.mu.Lock()
	if err := j.usableLocked(); err != nil {
		j.mu.Unlock()
		if done != nil {
			done(err)
		}
		return
	}
	if j.mu.size >= ackRotateSize {
		j.mu.gen++
		j.mu.size = ackHeaderSize
	}
	var b []byte
	for _, op := range ops {
		n := len(b)
		b = appendAckRecord(b, j.mu.gen, uint64(j.mu.size), name, op)
		j.mu.size += int64(len(b) - n)
	}
	if k := len(j.mu.pend); k > 0 && j.mu.pend[k-1].gen == j.mu.gen {
		j.mu.pend[k-1].b = append(j.mu.pend[k-1].b, b...)
	} else {
		j.mu.pend = append(j.mu.pend, ackChunk{gen: j.mu.gen, b: b})
	}
	if len(ops) > 0 && ops[0].Kind != opReset {
		t := j.mu.track[name]
		if t == nil {
			t = &ackTrack{}
			j.mu.track[name] = t
		}
		if t.first == 0 {
			t.first = j.mu.gen
		}
		t.last = j.mu.gen
	}
	if done != nil {
		j.mu.waiters = append(j.mu.waiters, done)
	}
	j.mu.Unlock()
	j.signal()
}

func (j *journal) usableLocked() error {
	if j.mu.closed {
		return store.ErrClosed
	}
	return j.mu.failed
}

// reset durably forgets every record of name: a consumer created under
// the name of a deleted one must not inherit its acknowledgements.
func (j *journal) reset(name string) error {
	j.forget(name)
	ch := make(chan error, 1)
	j.append(name, []store.ConsumerOp{{Kind: opReset}}, func(err error) { ch <- err })
	return <-ch
}

// forget drops what the journal remembers of name (its consumer was
// deleted).
func (j *journal) forget(name string) {
	j.mu.Lock()
	delete(j.mu.track, name)
	delete(j.mu.recovered, name)
	j.mu.Unlock()
	j.signal()
}

// gen returns the generation appends go to now.
func (j *journal) gen() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.mu.gen
}

// covered records that name's stored state holds its records of every
// generation below gen.
func (j *journal) covered(name string, gen uint64) {
	j.mu.Lock()
	t := j.mu.track[name]
	trim := false
	if t != nil && t.first != 0 && t.first < gen {
		if t.last < gen {
			t.first = 0
		} else {
			t.first = gen
		}
		trim = true
	}
	j.mu.Unlock()
	if trim {
		j.signal()
	}
}

// recoveredOps hands over (once) the records of name found at open.
func (j *journal) recoveredOps(name string) []store.ConsumerOp {
	j.mu.Lock()
	defer j.mu.Unlock()
	ops := j.mu.recovered[name]
	delete(j.mu.recovered, name)
	return ops
}

func (j *journal) signal() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// run writes and fsyncs what was appended, releases the waiters, and
// removes generations no consumer needs; it stops once closed and
// drained.
func (j *journal) run() {
	defer close(j.done)
	for {
		j.mu.Lock()
		pend, waiters, closed := j.mu.pend, j.mu.waiters, j.mu.closed
		j.mu.pend, j.mu.waiters = nil, nil
		j.mu.Unlock()
		if len(pend) > 0 {
			err := j.write(pend)
			if err != nil {
				j.fail(err)
			}
			for _, w := range waiters {
				w(err)
			}
			continue
		}
		j.trim()
		if closed {
			if j.f != nil {
				j.f.Close()
			}
			return
		}
		<-j.kick
	}
}

// fail fences the journal after an I/O error: later appends fail at once.
func (j *journal) fail(err error) {
	j.mu.Lock()
	first := j.mu.failed == nil
	if first {
		j.mu.failed = fmt.Errorf("%w: ack journal: %w", store.ErrFenced, err)
	}
	waiters := j.mu.waiters
	j.mu.waiters, j.mu.pend = nil, nil
	j.mu.Unlock()
	if first {
		j.logf("filestore: ack journal %s: %v; confirmed acknowledgements are not confirmed until the server restarts", j.dir, err)
	}
	for _, w := range waiters {
		w(err)
	}
}

// write appends the chunks to their generations' files and fsyncs them
// (and the directory, for a new file) before returning.
func (j *journal) write(pend []ackChunk) error {
	newFile := false
	for _, c := range pend {
		if j.f == nil || c.gen != j.fgen {
			made, err := j.switchTo(c.gen)
			if err != nil {
				return err
			}
			newFile = newFile || made
		}
		if _, err := j.f.Write(c.b); err != nil {
			return err
		}
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	if newFile {
		return j.fs.SyncDir(j.dir)
	}
	return nil
}

// switchTo syncs and closes the current file and creates generation
// gen's, with its header.
func (j *journal) switchTo(gen uint64) (bool, error) {
	if j.f != nil {
		if err := j.f.Sync(); err != nil {
			return false, err
		}
		j.f.Close()
		j.f = nil
	}
	if !j.madeDir {
		if err := j.fs.MkdirAll(j.dir); err != nil {
			return false, err
		}
		if err := j.fs.SyncDir(j.root); err != nil {
			return false, err
		}
		j.madeDir = true
	}
	f, err := j.fs.Create(path.Join(j.dir, ackFileName(gen)))
	if err != nil {
		return false, err
	}
	h := append([]byte(nil), ackMagic...)
	h = le.AppendUint32(h, 1)
	h = le.AppendUint32(h, 0)
	h = le.AppendUint64(h, gen)
	h = le.AppendUint32(h, crc32.Checksum(h, crcTable))
	if _, err := f.Write(h); err != nil {
		f.Close()
		return false, err
	}
	j.f, j.fgen = f, gen
	j.mu.Lock()
	j.mu.files = append(j.mu.files, gen)
	j.mu.Unlock()
	return true, nil
}

// trim removes the files of generations below the oldest one a consumer
// still needs; the active generation's file stays.
func (j *journal) trim() {
	j.mu.Lock()
	keep := j.mu.gen
	for _, t := range j.mu.track {
		if t.first != 0 && t.first < keep {
			keep = t.first
		}
	}
	var doomed []uint64
	j.mu.files = slices.DeleteFunc(j.mu.files, func(g uint64) bool {
		if g < keep && !(j.f != nil && g == j.fgen) {
			doomed = append(doomed, g)
			return true
		}
		return false
	})
	j.mu.Unlock()
	for _, g := range doomed {
		if err := j.fs.Remove(path.Join(j.dir, ackFileName(g))); err != nil && !vfs.IsNotExist(err) {
			j.logf("filestore: ack journal: remove %s: %v", ackFileName(g), err)
		}
	}
	if len(doomed) > 0 {
		_ = j.fs.SyncDir(j.dir) // a file that comes back is replayed harmlessly
	}
}

// close writes what is queued, releases the waiters and stops.
func (j *journal) close() {
	j.mu.Lock()
	if j.mu.closed {
		j.mu.Unlock()
		return
	}
	j.mu.closed = true
	j.mu.Unlock()
	j.signal()
	<-j.done
}
