package filestore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// readCountFS counts the bytes read from its files.
type readCountFS struct {
	vfs.FS
	read atomic.Int64
}

type readCountFile struct {
	vfs.File
	fs *readCountFS
}

func (f readCountFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.fs.read.Add(int64(n))
	return n, err
}

func (fs *readCountFS) Open(name string) (vfs.File, error) {
	f, err := fs.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return readCountFile{f, fs}, nil
}

func (fs *readCountFS) OpenAppend(name string) (vfs.File, error) {
	f, err := fs.FS.OpenAppend(name)
	if err != nil {
		return nil, err
	}
	return readCountFile{f, fs}, nil
}

// idxMsg is message n of 8 KiB on one of three subjects, some with a
// header holding a TTL, every third compressible.
func idxMsg(n int) store.Msg {
	m := store.Msg{Subject: fmt.Sprintf("big.%d", n%3), Time: int64(n+1) * 1e9}
	m.Data = make([]byte, 8<<10)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range m.Data {
		m.Data[i] = byte(r.Uint32())
	}
	if n%3 == 0 {
		m.Data = bytes.Repeat([]byte{byte(n)}, 8<<10)
	}
	if n%4 == 1 {
		m.Header = []byte("NATS/1.0\r\nNats-TTL: 1h\r\n\r\n")
	}
	return m
}

// idxStore writes 200 bigMsg messages in segments of 64 KiB (compressed
// when s2), removes a few, and closes the store.
func idxStore(t *testing.T, s2 bool) (*vfs.CrashFS, store.Config, map[uint64]store.Msg) {
	fs := vfs.NewCrashFS()
	cfg := memConfig(fs, 64<<10)
	limits := store.Config{MsgTTL: true, Compress: s2}
	s := mustOpen(t, cfg, limits)
	msgs := map[uint64]store.Msg{}
	for n := range 200 {
		m := idxMsg(n)
		msgs[appendSync(t, s, m)] = m
	}
	for _, seq := range []uint64{3, 50, 51, 120} {
		if err := s.Delete(seq); err != nil {
			t.Fatal(err)
		}
		delete(msgs, seq)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return fs, limits, msgs
}

// stateOf returns what a reopened store must show the same either way.
func stateOf(t *testing.T, s *Store) (store.State, map[string]store.SubjectState) {
	st := s.State(true)
	return st, s.SubjectsState(">")
}

// TestIndexOpenReadsNoPayload: a store of large messages reopens
// through its sealed segments' index files, reading a small part of its
// bytes (it read them all: a restart took a second per GiB), and
// recovers the same state, subjects, TTLs and messages as a full read.
func TestIndexOpenReadsNoPayload(t *testing.T) {
	for _, s2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("s2=%v", s2), func(t *testing.T) {
			fs, limits, msgs := idxStore(t, s2)
			names, err := fs.ReadDir("/store/msgs")
			if err != nil {
				t.Fatal(err)
			}
			var segBytes int64
			var idxs, segs int
			for _, n := range names {
				if _, ok := parseSegmentName(n); ok {
					segs++
					f, _ := fs.Open("/store/msgs/" + n)
					sz, _ := f.Size()
					f.Close()
					segBytes += sz
				}
				if _, ok := parseIdxName(n); ok {
					idxs++
				}
			}
			if segs < 10 || idxs != segs-1 {
				t.Fatalf("%d segments, %d index files: want every sealed segment indexed", segs, idxs)
			}

			cfs := &readCountFS{FS: fs}
			var log testLog
			cfg := memConfig(cfs, 64<<10)
			cfg.Logf = log.logf
			s := mustOpen(t, cfg, limits)
			if read := cfs.read.Load(); read*8 > segBytes {
				t.Errorf("open read %d bytes of %d in segments: want well under 1/8", read, segBytes)
			}
			if !log.has(fmt.Sprintf("(%d opened through their index)", segs-1)) {
				t.Errorf("log: %q", log.lines)
			}
			gotState, gotSubj := stateOf(t, s)
			ttlNext := s.mu.expiry.TTL.Len()
			for seq, m := range msgs {
				got, err := s.Load(seq)
				if err != nil || got.Subject != m.Subject || !bytes.Equal(got.Data, m.Data) || !bytes.Equal(got.Header, m.Header) {
					t.Fatalf("Load(%d): %v", seq, err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			// The same store read in full (no index file) says the same.
			for _, n := range names {
				if _, ok := parseIdxName(n); ok {
					if err := fs.Remove("/store/msgs/" + n); err != nil {
						t.Fatal(err)
					}
				}
			}
			full := mustOpen(t, memConfig(fs, 64<<10), limits)
			defer full.Close()
			wantState, wantSubj := stateOf(t, full)
			if !reflect.DeepEqual(gotState, wantState) || !reflect.DeepEqual(gotSubj, wantSubj) || ttlNext != full.mu.expiry.TTL.Len() {
				t.Errorf("through the index: %+v %v ttl %d\nread in full: %+v %v ttl %d", gotState, gotSubj, ttlNext, wantState, wantSubj, full.mu.expiry.TTL.Len())
			}
		})
	}
}

// flipByte flips one bit of the file name at off.
func flipByte(t *testing.T, fs *vfs.CrashFS, name string, off int64) {
	t.Helper()
	b, err := readWhole(fs, name)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x10
	if err := fs.WriteFile(name, b); err != nil {
		t.Fatal(err)
	}
}

// TestIndexDamageFoundOnRead: a payload damaged in a segment opened
// through its index is found when the message is read, before it is
// served: the load fails with a CorruptError and the sequence is lost
// from then on; the others are served. A damaged index file, or one
// that does not match its segment, is not used: the segment is read in
// full and its damage reported at open, as before.
func TestIndexDamageFoundOnRead(t *testing.T) {
	fs, limits, msgs := idxStore(t, false)
	s := mustOpen(t, memConfig(fs, 64<<10), limits)
	g := s.mu.segs[1]
	seg, victim, off := g.path, g.base+1, int64(g.offs[1])+int64(g.recordLen(1))/2
	s.Close()
	flipByte(t, fs, seg, off)

	var log testLog
	cfg := memConfig(fs, 64<<10)
	cfg.Logf = log.logf
	s = mustOpen(t, cfg, limits)
	if !log.has("opened through their index") || s.State(false).Lost != nil {
		t.Fatalf("open: lost %v, log %q", s.State(false).Lost, log.lines)
	}
	_, err := s.Load(victim)
	var ce *store.CorruptError
	if !errors.As(err, &ce) || ce.First != victim {
		t.Fatalf("Load(%d) of a damaged record: %v, want a CorruptError", victim, err)
	}
	if lost := s.State(false).Lost; lost == nil || !reflect.DeepEqual(lost.Msgs, []uint64{victim}) {
		t.Errorf("lost after the read: %+v", lost)
	}
	if _, err := s.Load(victim); !errors.As(err, &ce) {
		t.Errorf("second Load: %v", err)
	}
	for seq := range msgs {
		if _, err := s.Load(seq); seq != victim && err != nil {
			t.Errorf("Load(%d): %v", seq, err)
		}
	}
	s.Close()

	// The index file damaged, or its segment's last bytes changed:
	// the segment is read in full, and its damage found at open.
	idx := path.Join("/store/msgs", idxName(g.base))
	for _, tc := range []struct {
		what string
		file string
		off  func(size int64) int64
	}{
		{"a damaged index file", idx, func(size int64) int64 { return size / 2 }},
		{"a segment whose last record changed", seg, func(size int64) int64 { return size - 2 }},
	} {
		t.Run(tc.what, func(t *testing.T) {
			fs2 := vfs.NewCrashFS()
			for _, dir := range []string{"/store", "/store/msgs"} {
				all, _ := fs.ReadDir(dir)
				for _, n := range all {
					if b, err := readWhole(fs, path.Join(dir, n)); err == nil {
						if err := fs2.WriteFile(path.Join(dir, n), b); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			b, _ := readWhole(fs2, tc.file)
			flipByte(t, fs2, tc.file, tc.off(int64(len(b))))
			var log testLog
			cfg := memConfig(fs2, 64<<10)
			cfg.Logf = log.logf
			s := mustOpen(t, cfg, limits)
			defer s.Close()
			lost := s.State(false).Lost
			if lost == nil || !slices.Contains(lost.Msgs, victim) {
				t.Errorf("lost at open: %+v, want %d among them; log %q", lost, victim, log.lines)
			}
		})
	}
}

// TestIndexRemovedWithSegment: removing front segments removes their
// index files, and an index left without its segment is removed at open.
func TestIndexRemovedWithSegment(t *testing.T) {
	fs, limits, _ := idxStore(t, false)
	s := mustOpen(t, memConfig(fs, 64<<10), limits)
	if _, err := s.Compact(100); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := fs.WriteFile("/store/msgs/"+idxName(1), []byte("orphan")); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, memConfig(fs, 64<<10), limits)
	defer s.Close()
	names, _ := fs.ReadDir("/store/msgs")
	segs := map[uint64]bool{}
	for _, n := range names {
		if b, ok := parseSegmentName(n); ok {
			segs[b] = true
		}
	}
	for _, n := range names {
		if b, ok := parseIdxName(n); ok && !segs[b] {
			t.Errorf("index %s without its segment", n)
		}
	}
}
