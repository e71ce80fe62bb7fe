package filestore

import (
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

var consumerMagic = []byte("CAIRNCSM")

// consumerStore keeps one consumer's state in consumers/<name>/state.
type consumerStore struct {
	s    *Store
	name string
	dir  string
	mu   struct {
		sync.Mutex
		closed bool
		fenced error                // set by a failed Update
		state  *store.ConsumerState // cached; nil until read
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
	if err := replaceFile(fs, tmp, "state", encodeConsumerState(&store.ConsumerState{})); err != nil {
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
	for _, name := range []string{"state", "state.new", ""} {
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
	if err := replaceFile(cs.s.fs, cs.dir, "state", encodeConsumerState(st)); err != nil {
		cs.mu.fenced = fmt.Errorf("%w: consumer %s: %w", store.ErrFenced, cs.name, err)
		return cs.mu.fenced
	}
	cs.mu.state = store.CloneConsumerState(st)
	return nil
}

func (cs *consumerStore) usableLocked() error {
	if cs.mu.closed {
		return store.ErrClosed
	}
	return cs.mu.fenced
}

// State returns the stored state, or an error wrapping store.ErrCorrupt
// when the state file is damaged or missing; it is never reset silently.
func (cs *consumerStore) State() (*store.ConsumerState, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.mu.closed {
		return nil, store.ErrClosed
	}
	if cs.mu.state == nil {
		st, err := cs.read()
		if err != nil {
			return nil, err
		}
		cs.mu.state = st
	}
	return store.CloneConsumerState(cs.mu.state), nil
}

// read reads and verifies the state file.
func (cs *consumerStore) read() (*store.ConsumerState, error) {
	name := path.Join(cs.dir, "state")
	b, err := readWhole(cs.s.fs, name)
	if vfs.IsNotExist(err) {
		return nil, &store.CorruptError{Where: name, Reason: "consumer state file missing"}
	}
	if err != nil {
		return nil, err
	}
	st, err := decodeConsumerState(b)
	if err != nil {
		return nil, &store.CorruptError{Where: name, Reason: err.Error()}
	}
	return st, nil
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
func (cs *consumerStore) Covered(gen uint64) { cs.s.acks.covered(cs.name, gen) }

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

// encodeConsumerState returns the state file's bytes (package comment,
// "Consumer state file").
func encodeConsumerState(st *store.ConsumerState) []byte {
	body := make([]byte, 0, 40+24*len(st.Pending)+16*len(st.Redelivered))
	for _, v := range []uint64{st.Delivered.Consumer, st.Delivered.Stream, st.AckFloor.Consumer, st.AckFloor.Stream} {
		body = le.AppendUint64(body, v)
	}
	body = le.AppendUint32(body, uint32(len(st.Pending)))
	for _, seq := range slices.Sorted(maps.Keys(st.Pending)) {
		p := st.Pending[seq]
		body = le.AppendUint64(le.AppendUint64(body, seq), p.Sequence)
		body = le.AppendUint64(body, uint64(p.Timestamp))
	}
	body = le.AppendUint32(body, uint32(len(st.Redelivered)))
	for _, seq := range slices.Sorted(maps.Keys(st.Redelivered)) {
		body = le.AppendUint64(le.AppendUint64(body, seq), st.Redelivered[seq])
	}
	b := append([]byte(nil), consumerMagic...)
	b = le.AppendUint32(b, formatVersion)
	b = le.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	return le.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// decodeConsumerState verifies and decodes a state file.
func decodeConsumerState(b []byte) (*store.ConsumerState, error) {
	if len(b) < 20 || string(b[:8]) != string(consumerMagic) {
		return nil, errMagic
	}
	n := int(le.Uint32(b[12:]))
	if n != len(b)-20 {
		return nil, errLength
	}
	if crc32.Checksum(b[:16+n], crcTable) != le.Uint32(b[16+n:]) {
		return nil, errCRC
	}
	if le.Uint32(b[8:]) != formatVersion {
		return nil, errVersion
	}
	d := decoder{b: b[16 : 16+n]}
	st := d.state()
	if d.err != nil {
		return nil, d.err
	}
	return st, nil
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

func (d *decoder) u32() int {
	if len(d.b) < 4 {
		d.err = errBody
		return 0
	}
	v := le.Uint32(d.b)
	d.b = d.b[4:]
	return int(v)
}

// state decodes the body.
func (d *decoder) state() *store.ConsumerState {
	st := &store.ConsumerState{}
	st.Delivered = store.SequencePair{Consumer: d.u64(), Stream: d.u64()}
	st.AckFloor = store.SequencePair{Consumer: d.u64(), Stream: d.u64()}
	if n := d.u32(); n > 0 && n <= len(d.b)/24 {
		st.Pending = make(map[uint64]store.Pending, n)
		for range n {
			seq := d.u64()
			st.Pending[seq] = store.Pending{Sequence: d.u64(), Timestamp: int64(d.u64())}
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
	if len(d.b) != 0 && d.err == nil {
		d.err = errBody
	}
	return st
}
