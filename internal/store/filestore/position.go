package filestore

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/vfs"
)

// Position is the end of a store's record log at one moment (package
// comment, "Positions and rollback"): the base of the segment that was
// active, its size in bytes, and LastSeq then. Position returns one;
// Config.RollbackTo takes one back. Its encoding is AppendPosition's.
type Position struct {
	Base    uint64 // base of the active segment
	Offset  uint64 // its size: the end of the last record, or of the header
	LastSeq uint64 // the store's LastSeq

	// id numbers the positions this store handed out (1, 2, ...), for
	// PositionSaved; 0 in a decoded position.
	id uint64
}

// PositionSize is the size of an encoded Position.
const PositionSize = 25

// positionVersion is the version byte of an encoded Position.
const positionVersion = 1

// ErrBadPosition is returned (wrapped) by DecodePosition for bytes that
// are not a position, and by Open when Config.RollbackTo does not match
// the files: its segment is missing, its offset is past the segment's
// end or not at a record boundary, or the segments hold a sequence past
// its LastSeq. The caller fences the replica (docs/cluster.md,
// "Checkpoints"). In the first cases nothing was changed on disk; in the
// last the rollback's cut was made (and what it cut set aside).
var ErrBadPosition = errors.New("filestore: position does not match the store")

// AppendPosition appends the encoding of p (PositionSize bytes: version
// 1, base, offset, LastSeq, each a little-endian u64) to dst.
func AppendPosition(dst []byte, p Position) []byte {
	dst = append(dst, positionVersion)
	dst = le.AppendUint64(dst, p.Base)
	dst = le.AppendUint64(dst, p.Offset)
	return le.AppendUint64(dst, p.LastSeq)
}

// DecodePosition decodes AppendPosition's bytes. Errors wrap
// ErrBadPosition: a length other than PositionSize, another version, a
// base of 0 or an offset below SegmentHeaderSize.
func DecodePosition(b []byte) (Position, error) {
	if len(b) != PositionSize || b[0] != positionVersion {
		return Position{}, fmt.Errorf("%w: %d bytes, version %d", ErrBadPosition, len(b), firstByte(b))
	}
	p := Position{Base: le.Uint64(b[1:]), Offset: le.Uint64(b[9:]), LastSeq: le.Uint64(b[17:])}
	if p.Base == 0 || p.Offset < SegmentHeaderSize {
		return Position{}, fmt.Errorf("%w: base %d, offset %d", ErrBadPosition, p.Base, p.Offset)
	}
	return p, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// String describes p for logs.
func (p Position) String() string {
	return fmt.Sprintf("segment %s offset %d (last sequence %d)", segmentName(p.Base), p.Offset, p.LastSeq)
}

// Position makes everything appended so far durable (one flusher batch,
// fsynced, whatever the sync policy) and returns the end of the record
// log after that batch. Called while nothing else changes the store (a
// replica's apply goroutine held), the position is exactly the store's
// state; changes made meanwhile may or may not be before it. In rollback
// mode (Config.RollbackMode) the segments a rollback to it needs are kept
// until a later position is saved (PositionSaved). Errors:
// store.ErrClosed, or store.ErrFenced wrapping the I/O error.
func (s *Store) Position() (Position, error) {
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return Position{}, err
	}
	s.mu.posTaken++
	id, gen := s.mu.posTaken, s.mu.taken+1
	s.mu.Unlock()
	// waitGen wakes the writer even inside BeginBatch: the caller may be
	// the apply goroutine holding a run of appends.
	if err := s.note.waitGen(gen); err != nil {
		return Position{}, err
	}
	s.mu.RLock()
	p := s.mu.durablePos
	s.mu.RUnlock()
	p.id = id
	return p, nil
}

// PositionSaved tells a store in rollback mode that the caller recorded
// p (a position this store's Position returned) durably and will never
// roll back to an earlier one: the segments emptied before p was taken
// may now be removed (at the flusher's next batch). Positions saved out
// of order count as the newest of them.
//
// The first position saved that was taken after a rollback (Open with
// Config.RollbackTo) also removes what that rollback set aside: the
// caller's state is past it for good.
func (s *Store) PositionSaved(p Position) {
	s.mu.Lock()
	s.mu.posSaved = max(s.mu.posSaved, p.id)
	wake := len(s.mu.doomed) > 0
	var setAside []string
	if p.id > 1 { // 1 is the position a rollback returned to
		setAside, s.mu.setAside = s.mu.setAside, nil
	}
	s.mu.Unlock()
	if wake {
		s.kickFlusher()
	}
	s.removeSetAside(setAside, "the rollback at open")
}

// removeSetAside removes the files names, set aside by a rollback (whose
// names which, for the log), from the msgs directory and syncs it. A
// failure is logged and leaves the files to the next Open that rolls
// back, which removes them once its own rollback is done.
func (s *Store) removeSetAside(names []string, whose string) {
	if len(names) == 0 {
		return
	}
	for _, name := range names {
		if err := s.fs.Remove(path.Join(s.msgsDir, name)); err != nil && !vfs.IsNotExist(err) {
			s.cfg.Logf("filestore: %s: remove %s, set aside by %s: %v", s.cfg.Dir, name, whose, err)
			return
		}
	}
	if err := s.fs.SyncDir(s.msgsDir); err != nil {
		s.cfg.Logf("filestore: %s: sync %s: %v", s.cfg.Dir, s.msgsDir, err)
		return
	}
	s.cfg.Infof("filestore: %s: removed %s set aside by %s", s.cfg.Dir, logger.Count(len(names), "file"), whose)
}

// isSetAside reports whether name is a file a rollback sets aside:
// <base>.blk.rolledback[.<n>] or <base>.blk.from-<offset>.rolledback[.<n>]
// (package comment, "Directory layout").
func isSetAside(name string) bool {
	if len(name) < 24 {
		return false
	}
	if _, ok := parseSegmentName(name[:24]); !ok {
		return false
	}
	rest := name[24:]
	if off, ok := strings.CutPrefix(rest, ".from-"); ok {
		digits := len(off) - len(strings.TrimLeft(off, "0123456789"))
		if digits == 0 {
			return false
		}
		rest = off[digits:]
	}
	rest, ok := strings.CutPrefix(rest, ".rolledback")
	if !ok {
		return false
	}
	if n, ok := strings.CutPrefix(rest, "."); ok {
		return n != "" && strings.Trim(n, "0123456789") == ""
	}
	return rest == ""
}

// removableLocked reports whether a doomed segment may go once its batch
// is durable: always outside rollback mode; in it, once a position taken
// after its removal was saved.
func (s *Store) removableLocked(d doomedSeg) bool {
	return !s.cfg.RollbackMode || d.after < s.mu.posSaved
}

// rollback returns the segment files to position p (package comment,
// "Positions and rollback", steps 1 and 2), before recovery reads them.
// It returns the files earlier rollbacks had set aside, and those it set
// aside itself, and logs what it did once.
func (s *Store) rollback(p Position) (earlier, setAside []string, err error) {
	all, err := s.fs.ReadDir(s.msgsDir)
	if err != nil {
		return nil, nil, err
	}
	for _, n := range all {
		if isSetAside(n) {
			earlier = append(earlier, n)
		}
	}
	names, err := s.segmentFiles(false)
	if err != nil {
		return nil, nil, err
	}
	name := segmentName(p.Base)
	if !slices.Contains(names, name) {
		return nil, nil, fmt.Errorf("%w: %v: no such segment", ErrBadPosition, p)
	}
	segPath := path.Join(s.msgsDir, name)
	data, err := readWhole(s.fs, segPath)
	if err != nil {
		return nil, nil, err
	}
	if err := checkBoundary(data, p); err != nil {
		return nil, nil, err
	}
	var cut uint64 // bytes cut from p's segment
	segs := 0      // later segments set aside
	if p.Offset < uint64(len(data)) {
		to, err := s.quarantine(name+fmt.Sprintf(".from-%d", p.Offset), data[p.Offset:])
		if err != nil {
			return nil, nil, err
		}
		setAside, cut = append(setAside, to), uint64(len(data))-p.Offset
	}
	for i := len(names) - 1; i >= 0; i-- {
		base, _ := parseSegmentName(names[i])
		if base <= p.Base {
			break
		}
		to, err := s.freeName(names[i] + ".rolledback")
		if err != nil {
			return nil, nil, err
		}
		if err := s.fs.Rename(path.Join(s.msgsDir, names[i]), path.Join(s.msgsDir, to)); err != nil {
			return nil, nil, fmt.Errorf("rollback: rename %s: %w", names[i], err)
		}
		setAside = append(setAside, to)
		segs++
	}
	if err := s.fs.SyncDir(s.msgsDir); err != nil {
		return nil, nil, fmt.Errorf("rollback: sync directory %s: %w", s.msgsDir, err)
	}
	if len(setAside) > 0 {
		s.cfg.Infof("filestore: %s: rollback to %v: %s of its segment and %s, written after it, set aside until the next saved position", s.cfg.Dir, p, logger.Count(int(cut), "byte"), logger.Count(segs, "later segment"))
	}
	if p.Offset == uint64(len(data)) {
		return earlier, setAside, nil
	}
	// The segment is the last one now, read in full; its index, if
	// sealed before, describes what is cut (the later segments' indexes
	// are orphans, which recovery removes).
	if err := s.removeIndex(p.Base); err != nil {
		return nil, nil, err
	}
	return earlier, setAside, truncateSync(s.fs, segPath, int64(p.Offset))
}

// checkBoundary returns an error wrapping ErrBadPosition unless p.Offset
// is within data (the segment p names) and at the end of its header or
// of a valid record.
func checkBoundary(data []byte, p Position) error {
	switch {
	case p.Offset > uint64(len(data)):
		return fmt.Errorf("%w: %v: the segment holds %d bytes", ErrBadPosition, p, len(data))
	case p.Offset == SegmentHeaderSize:
		return nil
	}
	good, _ := scanRecords(data, p.Base, nil)
	for _, off := range good {
		if uint64(off)+uint64(le.Uint32(data[off:])) == p.Offset {
			return nil
		}
	}
	return fmt.Errorf("%w: %v: not the end of a record", ErrBadPosition, p)
}

// quarantine writes b to the first free name of msgs/<name>.rolledback[.n]
// and fsyncs it; it returns the name.
func (s *Store) quarantine(name string, b []byte) (string, error) {
	to, err := s.freeName(name + ".rolledback")
	if err != nil {
		return "", err
	}
	full := path.Join(s.msgsDir, to)
	f, err := s.fs.Create(full)
	if err != nil {
		return "", fmt.Errorf("rollback: create %s: %w", full, err)
	}
	err = writeSync(f, full, b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return to, err
}

// freeName returns name, or name.<n> for the first n from 1 such that no
// file of msgs holds it.
func (s *Store) freeName(name string) (string, error) {
	try := name
	for n := 1; ; n++ {
		_, _, err := s.fs.Stat(path.Join(s.msgsDir, try))
		if vfs.IsNotExist(err) {
			return try, nil
		}
		if err != nil {
			return "", err
		}
		try = fmt.Sprintf("%s.%d", name, n)
	}
}

// truncateSync cuts the file name to size bytes and fsyncs it.
func truncateSync(fs vfs.FS, name string, size int64) error {
	f, err := fs.OpenAppend(name)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("rollback: truncate %s: %w", name, err)
	}
	return nil
}
