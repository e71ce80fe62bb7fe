package filestore

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"slices"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

var metaMagic = []byte("CAIRNSTR")

// metaSize is the size of the metadata file.
const metaSize = 32

// Open opens the file store in cfg.Dir, creating it if the directory holds
// none, and recovers it (see the package comment); limits are the
// stream's limits. It starts the flusher (writer and syncer goroutines),
// which Close stops.
func Open(cfg Config, limits store.Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{
		cfg:     cfg,
		fs:      cfg.FS,
		msgsDir: path.Join(cfg.Dir, "msgs"),
		cache:   newChunkCache(cfg.CacheBytes),
		kick:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		ckpt:    newCheckpoint(cfg.FS, cfg.Dir, cfg.ckptMax),
	}
	limits.MemSizes = false
	s.mu.limits = limits
	s.mu.subj = newSubjects()
	s.cons.m = make(map[string]*consumerStore)
	if err := s.open(); err != nil {
		s.closeFilesLocked()
		_ = s.ckpt.close()
		return nil, fmt.Errorf("filestore: open %s: %w", cfg.Dir, err)
	}
	if s.acks, err = openJournal(s.fs, cfg.Dir, s.cfg.Logf); err != nil {
		s.closeFilesLocked()
		return nil, fmt.Errorf("filestore: open %s: ack journal: %w", cfg.Dir, err)
	}
	s.note = newNotifier(s.mu.last)
	s.setPackingLocked()
	s.startFlusher()
	if len(s.mu.doomed) > 0 || s.mu.lw > s.mu.lwWritten || s.mu.changes > 0 {
		s.kickFlusher()
	}
	return s, nil
}

// open creates or recovers the store's files.
func (s *Store) open() error {
	if err := s.prepareDirs(); err != nil {
		return err
	}
	metaFound, err := s.readMeta()
	if err != nil {
		return err
	}
	to := s.cfg.RollbackTo
	var earlier, setAside []string
	if to != nil {
		if earlier, setAside, err = s.rollback(*to); err != nil {
			return err
		}
	}
	names, err := s.segmentFiles(true)
	if err != nil {
		return err
	}
	ck, err := scanCheckpoint(s.fs, s.cfg.Dir)
	if err != nil {
		return err
	}
	if to != nil {
		// The checkpoint file may name sequences appended after the
		// position; the position's LastSeq is what was durable then.
		ck.seq, ck.clean = to.LastSeq, false
	}
	switch {
	case len(names) == 0 && ck.seq >= max(s.mu.limits.FirstSeq, 1):
		// Every segment is gone, but the checkpoint says how far the log
		// was durable: recover from an empty first segment, so that
		// those sequences are reported lost (tailLost) and never given
		// to another message, as when only the last segment is gone.
		s.cfg.Logf("filestore: %s: no segment file, but the checkpoint shows sequences through %d were stored; they are reported lost and numbering continues after them", s.cfg.Dir, ck.seq)
		name, err := s.emptyFirstSegment()
		if err != nil {
			return err
		}
		names = []string{name}
	case len(names) == 0 && metaFound:
		return fmt.Errorf("%w: store metadata present but no segment file (and no checkpoint) in %s", store.ErrCorrupt, s.msgsDir)
	case len(names) == 0:
		return s.create()
	}
	if err := s.recover(names, ck); err != nil {
		return err
	}
	if to != nil {
		if s.mu.last != to.LastSeq {
			return fmt.Errorf("%w: %v: the segments hold sequences through %d", ErrBadPosition, *to, s.mu.last)
		}
		// The position returned to counts as taken and saved: what
		// recovery removed lies below it.
		s.mu.posTaken, s.mu.posSaved = 1, 1
		s.mu.setAside = setAside
	}
	if err := s.applyLimits(); err != nil {
		return err
	}
	s.mu.expiry.TTL.Prune(s.liveLocked) // drop what delete records and limits removed
	if !metaFound {
		s.cfg.Logf("filestore: %s: metadata file missing; writing it again", s.cfg.Dir)
		if err := s.writeMeta(); err != nil {
			return err
		}
	}
	if err := s.settleCheckpoint(ck); err != nil {
		return err
	}
	// The store is now exactly what it was at the position: what earlier
	// rollbacks set aside lay after positions at or before this one and
	// is superseded (package comment, "Positions and rollback").
	s.removeSetAside(earlier, "earlier rollbacks")
	return nil
}

// settleCheckpoint makes the checkpoint file hold the recovered LastSeq,
// which recovery made durable: it keeps appending to a clean file that
// already says so (a clean shutdown's), and replaces any other.
func (s *Store) settleCheckpoint(ck ckptScan) error {
	switch {
	case ck.clean && ck.seq == s.mu.last && int64(ck.size) <= s.cfg.ckptMax:
		return s.ckpt.keep(ck.seq)
	case !ck.found:
		s.cfg.Infof("filestore: %s: no checkpoint file (a store written before checkpoints, or the file was removed); writing one", s.cfg.Dir)
	case ck.hdrBad:
		s.cfg.Logf("filestore: %s: the checkpoint file's header is damaged (%d valid records read); writing it again", s.cfg.Dir, ck.valid)
	}
	return s.ckpt.replace(s.mu.last)
}

// applyLimits removes what the stream's limits push out of the recovered
// store, as UpdateConfig does: the layer above makes a stream update
// durable before it calls UpdateConfig, and a crash may come between the
// two. Like recovery's, these removals are not counted in Removals; the
// first batch writes them.
func (s *Store) applyLimits() error {
	err := store.EnforceAfterUpdate(s.mu.limits, enforcer{s})
	s.mu.removals = 0
	return err
}

// prepareDirs creates the store's directories and makes them durable,
// with the directories above them that MkdirAll created and the nearest
// one that already existed (whose new entry that is); the entries above
// that one are the caller's to have made durable (the jetstream package
// syncs its directory chain at each start). A store whose
// metadata file and directories exist needs nothing: the Open that wrote
// the metadata file did so only after making its directories durable
// (create follows prepareDirs), so a restart of many streams does not
// sync the chain of directories above each.
func (s *Store) prepareDirs() error {
	dirs := []string{s.msgsDir, path.Join(s.cfg.Dir, "consumers")}
	if s.prepared(dirs) {
		return nil
	}
	top := s.existingAncestor(path.Clean(s.cfg.Dir))
	for _, dir := range dirs {
		if err := s.fs.MkdirAll(dir); err != nil {
			return err
		}
	}
	for dir := path.Clean(s.cfg.Dir); ; dir = path.Dir(dir) {
		if err := s.fs.SyncDir(dir); err != nil {
			return err
		}
		if dir == top || dir == "/" || dir == "." {
			return nil
		}
	}
}

// prepared reports whether the metadata file and every one of dirs exist.
func (s *Store) prepared(dirs []string) bool {
	if _, _, err := s.fs.Stat(path.Join(s.cfg.Dir, "meta")); err != nil {
		return false
	}
	for _, dir := range dirs {
		if _, isDir, err := s.fs.Stat(dir); err != nil || !isDir {
			return false
		}
	}
	return true
}

// existingAncestor returns dir or its nearest ancestor that exists.
func (s *Store) existingAncestor(dir string) string {
	for ; dir != "/" && dir != "."; dir = path.Dir(dir) {
		if _, _, err := s.fs.Stat(dir); err == nil {
			return dir
		}
	}
	return dir
}

// segmentFiles returns the names of the segment files, in order of base.
// Other files are left alone and, with logUnknown, logged (once per
// Open: the rollback lists the files too), but for the files a rollback
// sets aside, which are the store's own.
func (s *Store) segmentFiles(logUnknown bool) ([]string, error) {
	names, err := s.fs.ReadDir(s.msgsDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range names {
		_, isIdx := parseIdxName(name)
		switch _, ok := parseSegmentName(name); {
		case ok:
			out = append(out, name)
		case logUnknown && !isSetAside(name) && !isIdx:
			s.cfg.Logf("filestore: %s: ignoring unknown file %s", s.cfg.Dir, name)
		}
	}
	return out, nil // 20-digit names sort as their numbers
}

// emptyFirstSegment writes (durably) the file of an empty first segment,
// as create does, for recovery to read, and returns its name.
func (s *Store) emptyFirstSegment() (string, error) {
	first := s.mu.limits.FirstSeq
	base := max(first, 1)
	g := s.newSegment(base)
	header := segHeader{base: base, lowWater: first, s2: s.packingWanted()}.encode()
	f, err := s.createSegmentFile(g.path, header)
	if err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return segmentName(base), nil
}

// create makes a new store: its first segment, then its metadata file.
func (s *Store) create() error {
	first := s.mu.limits.FirstSeq
	base := max(first, 1)
	g := s.newSegment(base)
	g.s2 = s.packingWanted()
	header := segHeader{base: base, lowWater: first, s2: g.s2}.encode()
	f, err := s.createSegmentFile(g.path, header)
	if err != nil {
		return err
	}
	g.f, g.created = f, true
	g.ix = newIdxBuilder(header)
	g.buf = append(make([]byte, 0, initialBufCap), header...)
	g.size, g.written, g.synced = SegmentHeaderSize, SegmentHeaderSize, SegmentHeaderSize
	s.mu.segs = []*segment{g}
	s.mu.first, s.mu.last = first, base-1
	s.mu.lw, s.mu.lwWritten = first, 0 // the first batch writes it in a compact record
	if err := s.ckpt.replace(s.mu.last); err != nil {
		return err
	}
	return s.writeMeta()
}

// encodeMeta returns the metadata file's bytes.
func encodeMeta(firstSeq uint64) []byte {
	b := append([]byte(nil), metaMagic...)
	b = le.AppendUint32(b, formatVersion)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint64(b, firstSeq)
	b = le.AppendUint32(b, 0)
	return le.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// writeMeta writes the metadata file (write-new, fsync, rename, fsync
// directory).
func (s *Store) writeMeta() error {
	return replaceFile(s.fs, s.cfg.Dir, "meta", encodeMeta(s.mu.limits.FirstSeq))
}

// readMeta reports whether the metadata file exists. A damaged one still
// marks the directory as a store; it is logged, not rewritten.
func (s *Store) readMeta() (bool, error) {
	name := path.Join(s.cfg.Dir, "meta")
	b, err := readWhole(s.fs, name)
	if vfs.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch {
	case len(b) != metaSize || string(b[:8]) != string(metaMagic) || crc32.Checksum(b[:28], crcTable) != le.Uint32(b[28:]):
		s.cfg.Logf("filestore: %s: metadata file is damaged; the segments are the truth", s.cfg.Dir)
	case le.Uint32(b[8:]) != formatVersion:
		return true, fmt.Errorf("%w: metadata version %d", errVersion, le.Uint32(b[8:]))
	}
	return true, nil
}

// readWhole returns the whole content of the file name.
func readWhole(fs vfs.FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if err := readFull(f, b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// replaceFile replaces dir/name with data durably: write dir/name.new,
// fsync it, rename it over dir/name, fsync dir.
func replaceFile(fs vfs.FS, dir, name string, data []byte) error {
	return replaceFileWith(fs, dir, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// replaceFileWith is replaceFile with the new content written by write.
func replaceFileWith(fs vfs.FS, dir, name string, write func(w io.Writer) error) error {
	tmp := path.Join(dir, name+".new")
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	err = write(f)
	if err != nil {
		err = fmt.Errorf("write %s: %w", tmp, err)
	} else if err = f.Sync(); err != nil {
		err = fmt.Errorf("sync %s: %w", tmp, err)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := fs.Rename(tmp, path.Join(dir, name)); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

// errTornCreation marks a last segment whose creation never became
// durable.
var errTornCreation = errors.New("segment creation never completed")

// removeOrphanIndexes removes the index files of segments that are not
// among names (removed or set aside by a rollback): an index is the
// store's own, worthless without its segment.
func (s *Store) removeOrphanIndexes(names []string) error {
	all, err := s.fs.ReadDir(s.msgsDir)
	if err != nil {
		return err
	}
	for _, name := range all {
		base, ok := parseIdxName(name)
		if _, found := slices.BinarySearch(names, segmentName(base)); !ok || found {
			continue
		}
		if err := s.removeIndex(base); err != nil {
			return err
		}
	}
	return nil
}
