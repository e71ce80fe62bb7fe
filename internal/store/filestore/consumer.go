package filestore

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

var consumerMagic = []byte("CAIRNCSM")

// The two copies of a consumer's state (package comment, "Consumer state
// file"): Update writes the one not holding the newest state.
var stateSlots = [2]string{"state", "state.1"}

// consumerStore keeps one consumer's state in consumers/<name>/state and
// state.1.
type consumerStore struct {
	s    *Store
	name string
	dir  string
	mu   struct {
		sync.Mutex
		closed bool
		fenced error  // set by a failed Update
		known  bool   // gen and slot were read (readLocked)
		gen    uint64 // the newest copy's generation
		slot   int    // the slot holding it
		// covered is the journal generation the newest stored copy
		// covers (the last Covered); the journal keeps what the older
		// copy lacks (Covered).
		covered uint64
	}
}

var (
	_ store.ConsumerStore   = (*consumerStore)(nil)
	_ store.ConsumerJournal = (*consumerStore)(nil)
)

// ConsumerStore opens the durable state of the named consumer, creating it
// (durably, with an empty state) if it does not exist. The same consumer
// store is returned while it is open. A name must be non-empty, must not
// start with '.', and must not hold '/', '\\' or NUL.
func (s *Store) ConsumerStore(name string) (store.ConsumerStore, error) {
	if !validConsumerName(name) {
		return nil, fmt.Errorf("%w: consumer name %q", store.ErrBadRequest, name)
	}
	s.cons.Lock()
	defer s.cons.Unlock()
	if s.cons.closed {
		return nil, store.ErrClosed
	}
	if cs := s.cons.m[name]; cs != nil {
		return cs, nil
	}
	cs := &consumerStore{s: s, name: name, dir: path.Join(s.cfg.Dir, "consumers", name)}
	if err := cs.ensure(); err != nil {
		return nil, err
	}
	s.cons.m[name] = cs
	return cs, nil
}

// validConsumerName reports whether name is safe as a directory name.
func validConsumerName(name string) bool {
	return name != "" && name[0] != '.' && !strings.ContainsAny(name, "/\\\x00")
}

// ensure creates the consumer's directory with an empty state unless it
// exists: the directory is built under .new-<name> and renamed into place,
// so that a consumer directory always holds a state file. An existing
// directory is fsynced, and its entry in the parent: a creation or an
// Update whose directory fsync failed may have left a rename there that a
// power loss would still undo, and what State reads and Update builds on
// must be durable.
func (cs *consumerStore) ensure() error {
	fs := cs.s.fs
	parent := path.Dir(cs.dir)
	_, isDir, err := fs.Stat(cs.dir)
	if err == nil && isDir {
		if err := fs.SyncDir(cs.dir); err != nil {
			return err
		}
		return fs.SyncDir(parent)
	}
	if err != nil && !vfs.IsNotExist(err) {
		return err
	}
	// A consumer of this name may have been deleted with records still in
	// the ack journal: they must never apply to this one.
	if err := cs.s.acks.reset(cs.name); err != nil {
		return err
	}
	tmp := path.Join(parent, ".new-"+cs.name)
	if err := removeConsumerDir(fs, tmp); err != nil {
		return err
	}
	if err := fs.MkdirAll(tmp); err != nil {
		return err
	}
	if err := replaceFile(fs, tmp, stateSlots[0], encodeConsumerState(&store.ConsumerState{}, 1)); err != nil {
		return err
	}
	if err := fs.Rename(tmp, cs.dir); err != nil {
		return err
	}
	return fs.SyncDir(parent)
}

// removeConsumerDir removes a consumer directory and its files, if it
// exists.
func removeConsumerDir(fs vfs.FS, dir string) error {
	names, err := fs.ReadDir(dir)
	if vfs.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range append(names, "") {
		if err := fs.Remove(path.Join(dir, name)); err != nil && !vfs.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// Update replaces the stored state durably (write-new, fsync, rename,
// fsync directory). After an I/O error the consumer store is fenced:
// Update returns store.ErrFenced until the store is reopened.
func (cs *consumerStore) Update(st *store.ConsumerState) error {
	if err := store.CheckConsumerState(st); err != nil {
		return err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if err := cs.usableLocked(); err != nil {
		return err
	}
	if !cs.mu.known { // learn which copy is the newest first
		if _, err := cs.readLocked(); err != nil && !errors.Is(err, store.ErrCorrupt) {
			return err
		}
		cs.mu.known = true
	}
	slot, gen := 1-cs.mu.slot, cs.mu.gen+1
	write := func(w io.Writer) error { return writeConsumerState(w, st, gen) }
	if err := replaceFileWith(cs.s.fs, cs.dir, stateSlots[slot], write); err != nil {
		cs.mu.fenced = fmt.Errorf("%w: consumer %s: %w", store.ErrFenced, cs.name, err)
		return cs.mu.fenced
	}
	cs.mu.gen, cs.mu.slot = gen, slot
	return nil
}

func (cs *consumerStore) usableLocked() error {
	if cs.mu.closed {
		return store.ErrClosed
	}
	return cs.mu.fenced
}

// State returns the stored state, read from its files, or an error
// wrapping store.ErrCorrupt when the state file is damaged or missing; it
// is never reset silently. Nothing is cached: a consumer reads its state
// once, when it is restored, and a copy kept for that would double the
// memory of a large pending set (a million pending acks are 24 MB of
// state).
func (cs *consumerStore) State() (*store.ConsumerState, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.mu.closed {
		return nil, store.ErrClosed
	}
	st, err := cs.readLocked()
	if err != nil {
		return nil, err
	}
	cs.mu.known = true
	return st, nil
}

// readLocked reads and verifies both copies of the state and returns the
// newest good one. A damaged copy is renamed aside (stateDamaged) and
// reported; when no good copy is left, the error wraps store.ErrCorrupt.
func (cs *consumerStore) readLocked() (*store.ConsumerState, error) {
	var best *store.ConsumerState
	var bad []string
	cs.mu.gen, cs.mu.slot = 0, 0
	for i, slot := range stateSlots {
		name := path.Join(cs.dir, slot)
		b, err := readWhole(cs.s.fs, name)
		if vfs.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		st, gen, err := decodeConsumerState(b)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", slot, err))
			if err := cs.setAside(slot); err != nil {
				return nil, err
			}
			continue
		}
		if best == nil || gen > cs.mu.gen {
			best, cs.mu.gen, cs.mu.slot = st, gen, i
		}
	}
	switch {
	case best == nil && len(bad) == 0:
		return nil, &store.CorruptError{Where: cs.dir, Reason: "consumer state file missing"}
	case best == nil:
		return nil, &store.CorruptError{Where: cs.dir, Reason: "consumer state damaged (" + strings.Join(bad, "; ") + "), set aside as " + stateDamaged}
	case len(bad) > 0:
		cs.s.cfg.Logf("filestore: consumer %s: consumer state damaged (%s), set aside as %s; using the other copy, which may be one save older: unconfirmed acknowledgements made since it was saved may be redelivered",
			cs.dir, strings.Join(bad, "; "), stateDamaged)
		cs.rewriteLocked(best)
	}
	return best, nil
}

// rewriteLocked writes st, the good copy a read fell back to, into the
// other slot at once, so that the state has two good copies again before
// the next save: a second damaged copy then still finds one (found by a
// new user's trial). A failure is logged and leaves one good copy.
func (cs *consumerStore) rewriteLocked(st *store.ConsumerState) {
	if cs.mu.fenced != nil {
		return
	}
	slot, gen := 1-cs.mu.slot, cs.mu.gen+1
	write := func(w io.Writer) error { return writeConsumerState(w, st, gen) }
	if err := replaceFileWith(cs.s.fs, cs.dir, stateSlots[slot], write); err != nil {
		cs.s.cfg.Logf("filestore: consumer %s: writing a second copy of the consumer state: %v", cs.dir, err)
		return
	}
	cs.mu.gen, cs.mu.slot = gen, slot
}

// stateDamaged is the name a damaged copy of a consumer's state is kept
// under, with a number when one is there already.
const stateDamaged = "state.damaged"

// setAside renames a damaged copy to state.damaged (or state.damaged.N)
// durably, so that no later Update writes over the evidence.
func (cs *consumerStore) setAside(slot string) error {
	fs := cs.s.fs
	dst := path.Join(cs.dir, stateDamaged)
	for n := 1; ; n++ {
		if _, _, err := fs.Stat(dst); vfs.IsNotExist(err) {
			break
		}
		dst = path.Join(cs.dir, fmt.Sprintf("%s.%d", stateDamaged, n))
	}
	if err := fs.Rename(path.Join(cs.dir, slot), dst); err != nil {
		return err
	}
	return fs.SyncDir(cs.dir)
}

// Delete removes the consumer's state for good.
func (cs *consumerStore) Delete() error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.mu.closed {
		return store.ErrClosed
	}
	cs.mu.closed = true
	cs.s.acks.forget(cs.name)
	return cs.s.removeConsumer(cs)
}

// Journal appends ops to the store's ack journal (package comment, "Ack
// journal") and calls done once they are fsynced, or with the error
// (store.ErrClosed, or store.ErrFenced after an I/O error of the journal).
func (cs *consumerStore) Journal(ops []store.ConsumerOp, done func(error)) {
	cs.s.acks.append(cs.name, ops, done)
}

// JournalGen returns the ack journal's current generation.
func (cs *consumerStore) JournalGen() uint64 { return cs.s.acks.gen() }

// Covered records that the stored state holds this consumer's journal
// records of every generation below gen.
//
// The journal is trimmed only below what the older of the two copies
// covers: the generation of the previous call. When the newest copy is
// found damaged at the next open, the other copy and the journal's
// records since it still hold every confirmed ack.
func (cs *consumerStore) Covered(gen uint64) {
	cs.mu.Lock()
	prev := cs.mu.covered
	cs.mu.covered = gen
	cs.mu.Unlock()
	if prev != 0 {
		cs.s.acks.covered(cs.name, prev)
	}
}

// Journaled returns, once, this consumer's records found in the ack
// journal when the store opened.
func (cs *consumerStore) Journaled() []store.ConsumerOp { return cs.s.acks.recoveredOps(cs.name) }

// removeConsumer forgets cs and removes its directory durably, holding
// the open consumer stores' lock so that a ConsumerStore of the same name
// waits for the removal and creates the consumer again, instead of
// returning a store whose directory is about to go.
func (s *Store) removeConsumer(cs *consumerStore) error {
	s.cons.Lock()
	defer s.cons.Unlock()
	if s.cons.m[cs.name] == cs {
		delete(s.cons.m, cs.name)
	}
	if err := removeConsumerDir(s.fs, cs.dir); err != nil {
		return err
	}
	return s.fs.SyncDir(path.Dir(cs.dir))
}

// Close releases the consumer store; ConsumerStore opens it again.
func (cs *consumerStore) Close() error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.mu.closed {
		return store.ErrClosed
	}
	cs.mu.closed = true
	cs.s.forgetConsumer(cs)
	return nil
}

// detach closes the consumer store when its Store closes.
func (cs *consumerStore) detach() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.mu.closed = true
}

// forgetConsumer removes cs from the open consumer stores.
func (s *Store) forgetConsumer(cs *consumerStore) {
	s.cons.Lock()
	defer s.cons.Unlock()
	if s.cons.m[cs.name] == cs {
		delete(s.cons.m, cs.name)
	}
}

// consumerStateVersion is the version of the state files Update writes
// without dead-letter marks; version 1 (formatVersion, no generation) is
// still read.
const consumerStateVersion = 2

// consumerVersionDL is the version of a consumer state file with a
// dead-letter section (version 2 and the section).
const consumerVersionDL = 3

// encodeConsumerState returns the state file's bytes for generation gen
// (package comment, "Consumer state file"): version 2 without
// dead-letter marks, so that such a state reads in a build that does not
// know them; version 3 with them.
func encodeConsumerState(st *store.ConsumerState, gen uint64) []byte {
	var b bytes.Buffer
	_ = writeConsumerState(&b, st, gen) // a bytes.Buffer never fails
	return b.Bytes()
}

// stateWriteSize is the size of the pieces writeConsumerState writes.
const stateWriteSize = 64 << 10

// writeConsumerState writes the state file of st for generation gen to w
// (see encodeConsumerState) in pieces of stateWriteSize bytes, so that a
// large pending set (24 bytes per entry) needs no buffer of its size;
// st.Pending is already in file order.
func writeConsumerState(w io.Writer, st *store.ConsumerState, gen uint64) error {
	n := 48 + 24*len(st.Pending) + 16*len(st.Redelivered) // body length
	version := uint32(consumerStateVersion)
	if len(st.DeadLetter) > 0 {
		version = consumerVersionDL
		n += 4 + 17*len(st.DeadLetter)
	}
	b := make([]byte, 0, stateWriteSize)
	var crc uint32
	var err error
	flush := func(min int) {
		if err != nil || cap(b)-len(b) >= min {
			return
		}
		crc = crc32.Update(crc, crcTable, b)
		_, err = w.Write(b)
		b = b[:0]
	}
	b = append(b, consumerMagic...)
	b = le.AppendUint32(b, version)
	b = le.AppendUint32(b, uint32(n))
	b = le.AppendUint64(b, gen)
	for _, v := range []uint64{st.Delivered.Consumer, st.Delivered.Stream, st.AckFloor.Consumer, st.AckFloor.Stream} {
		b = le.AppendUint64(b, v)
	}
	b = le.AppendUint32(b, uint32(len(st.Pending)))
	for _, p := range st.Pending {
		flush(24)
		b = le.AppendUint64(le.AppendUint64(b, p.Stream), p.Sequence)
		b = le.AppendUint64(b, uint64(p.Timestamp))
	}
	flush(4)
	b = le.AppendUint32(b, uint32(len(st.Redelivered)))
	for _, seq := range slices.Sorted(maps.Keys(st.Redelivered)) {
		flush(16)
		b = le.AppendUint64(le.AppendUint64(b, seq), st.Redelivered[seq])
	}
	if version == consumerVersionDL {
		flush(4)
		b = le.AppendUint32(b, uint32(len(st.DeadLetter)))
		for _, seq := range slices.Sorted(maps.Keys(st.DeadLetter)) {
			flush(17)
			dl := st.DeadLetter[seq]
			b = le.AppendUint64(le.AppendUint64(b, seq), dl.After)
			b = append(b, byte(dl.Reason))
		}
	}
	flush(cap(b)) // everything but the CRC
	if err != nil {
		return err
	}
	_, err = w.Write(le.AppendUint32(b, crc))
	return err
}

// decodeConsumerState verifies and decodes a state file and returns its
// generation (0 for version 1).
func decodeConsumerState(b []byte) (*store.ConsumerState, uint64, error) {
	if len(b) < 20 || string(b[:8]) != string(consumerMagic) {
		return nil, 0, errMagic
	}
	n := int(le.Uint32(b[12:]))
	if n != len(b)-20 {
		return nil, 0, errLength
	}
	if crc32.Checksum(b[:16+n], crcTable) != le.Uint32(b[16+n:]) {
		return nil, 0, errCRC
	}
	d := decoder{b: b[16 : 16+n]}
	var gen uint64
	version := le.Uint32(b[8:])
	switch version {
	case 1:
	case consumerStateVersion, consumerVersionDL:
		gen = d.u64()
	default:
		return nil, 0, errVersion
	}
	st := d.state(version == consumerVersionDL)
	if d.err != nil {
		return nil, 0, d.err
	}
	return st, gen, nil
}

// decoder reads the body of a consumer state file.
type decoder struct {
	b   []byte
	err error
}

var errBody = errors.New("malformed consumer state")

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.err = errBody
		return 0
	}
	v := le.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// deadLetters decodes the dead-letter section: a count, then each
// stream sequence and After (u64) and reason (u8). Every entry must be
// pending or held (store.ConsumerState.Markable) with a known reason,
// and the section must not be empty.
func (d *decoder) deadLetters(st *store.ConsumerState) {
	n := d.u32()
	if n == 0 || n > len(d.b)/17 {
		d.err = errBody
		return
	}
	st.DeadLetter = make(map[uint64]store.DeadLetter, n)
	for range n {
		seq, after := d.u64(), d.u64()
		r := store.DeadLetterReason(d.b[0])
		d.b = d.b[1:]
		if !st.Markable(seq) || r.String() == "" {
			d.err = errBody
			return
		}
		st.DeadLetter[seq] = store.DeadLetter{Reason: r, After: after}
	}
}

func (d *decoder) u32() int {
	if len(d.b) < 4 {
		d.err = errBody
		return 0
	}
	v := le.Uint32(d.b)
	d.b = d.b[4:]
	return int(v)
}

// state decodes the body; dl says it has a dead-letter section.
func (d *decoder) state(dl bool) *store.ConsumerState {
	st := &store.ConsumerState{}
	st.Delivered = store.SequencePair{Consumer: d.u64(), Stream: d.u64()}
	st.AckFloor = store.SequencePair{Consumer: d.u64(), Stream: d.u64()}
	if n := d.u32(); n > 0 && n <= len(d.b)/24 {
		st.Pending = make([]store.StreamPending, n)
		for i := range st.Pending {
			p := &st.Pending[i]
			p.Stream, p.Sequence, p.Timestamp = d.u64(), d.u64(), int64(d.u64())
			if i > 0 && p.Stream <= st.Pending[i-1].Stream {
				d.err = errBody // the format wants them ascending
			}
		}
	} else if n > 0 {
		d.err = errBody
	}
	if n := d.u32(); n > 0 && n <= len(d.b)/16 {
		st.Redelivered = make(map[uint64]uint64, n)
		for range n {
			seq := d.u64()
			st.Redelivered[seq] = d.u64()
		}
	} else if n > 0 {
		d.err = errBody
	}
	if dl {
		d.deadLetters(st)
	}
	if len(d.b) != 0 && d.err == nil {
		d.err = errBody
	}
	return st
}
