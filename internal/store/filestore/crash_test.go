package filestore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// crashPoints is the number of power losses TestPowerLoss simulates; the
// CAIRN_CRASH_POINTS environment variable overrides it (a soak).
func crashPoints() int {
	if v, err := strconv.Atoi(os.Getenv("CAIRN_CRASH_POINTS")); err == nil && v > 0 {
		return v
	}
	if testing.Short() {
		return 200
	}
	return 1000
}

// history records what a crash run attempted and what was acknowledged.
type history struct {
	mu        sync.Mutex
	attempted map[uint64]store.Msg // Append returned the sequence
	acked     map[uint64]bool      // WaitDurable returned nil
	maxAcked  uint64
	delTried  map[uint64]bool // Delete was called
	delAcked  map[uint64]bool // Delete returned nil
	compTried uint64          // highest Compact argument tried
	compAcked uint64          // highest Compact argument acknowledged
	stateAck  uint64          // last consumer Delivered.Stream acknowledged
	stateTry  uint64          // last consumer Delivered.Stream tried
}

func newHistory() *history {
	return &history{attempted: map[uint64]store.Msg{}, acked: map[uint64]bool{}, delTried: map[uint64]bool{}, delAcked: map[uint64]bool{}}
}

// removedMaybe reports whether seq may have been removed by a delete or
// compact that was at least attempted.
func (h *history) removedMaybe(seq uint64) bool { return h.delTried[seq] || seq < h.compTried }

// removedSurely reports whether an acknowledged delete or compact removed
// seq.
func (h *history) removedSurely(seq uint64) bool { return h.delAcked[seq] || seq < h.compAcked }

// TestPowerLoss simulates power losses at random moments of a concurrent
// workload (appenders that wait for durability, a deleter, a compactor
// and a consumer-state writer) with every CrashFS tail mode, reopens the
// crashed file system and checks docs/durability.md section 5 (power
// loss): recovery succeeds,
// every acknowledged message is there with its subject and payload at its
// sequence, the state is an acknowledged prefix plus at most an
// unacknowledged tail, acknowledged deletes stay applied, and nothing is
// reported lost. Two thirds of the runs store payloads compressed.
func TestPowerLoss(t *testing.T) {
	n := crashPoints()
	var torn, tails atomic.Int64
	for i := range n {
		r := rand.New(rand.NewPCG(uint64(i), 99))
		lg := crashRun(t, r, uint64(i))
		if lg.has("torn tail") {
			torn.Add(1)
		}
		if lg.has("recovered") {
			tails.Add(1)
		}
		if t.Failed() {
			t.Fatalf("crash point %d failed", i)
		}
	}
	t.Logf("%d crash points, %d recoveries, %d with a torn tail dropped", n, tails.Load(), torn.Load())
}

// crashRun runs one workload until a power loss, then checks recovery.
func crashRun(t *testing.T, r *rand.Rand, seed uint64) *testLog {
	fs := vfs.NewCrashFS()
	opts := vfs.CrashOptions{Rand: rand.New(rand.NewPCG(seed, 5)), Tail: vfs.TailMode(r.IntN(int(vfs.TailAny) + 1)), ZeroFill: r.IntN(2) == 0}
	var crashed *vfs.CrashFS
	var once sync.Once
	crash := func() { once.Do(func() { crashed = fs.Crash(opts) }) }
	// The power fails at the crashAt-th append, or just before the
	// crashAt-th file operation of one kind (write, fsync, directory
	// fsync, rename, remove), where unsynced data is most likely.
	crashAt := int64(1 + r.IntN(400))
	trigger := crashOps[r.IntN(len(crashOps))]
	if trigger.op != "append" {
		crashAt = int64(1 + r.IntN(60))
	}
	hook := &hookFS{FS: fs, op: trigger.op, path: trigger.path, at: crashAt, crash: crash}
	cfg := Config{Dir: "/s", FS: hook, BlockSize: int64(256 + r.IntN(8192)), ckptMax: int64(ckptHeaderSize + ckptRecordSize*(1+r.IntN(64)))}
	// A third of the runs compress what pays, a third every payload.
	limits := store.Config{Compress: seed%3 == 1}
	cfg.forceS2 = seed%3 == 2
	s := mustOpen(t, cfg, limits)
	cs, err := s.ConsumerStore("c")
	if err != nil {
		t.Fatal(err)
	}
	hook.armed.Store(true)
	if trigger.op != "append" {
		crashAt = 3000 // a fallback, should the operation never come
	}
	h := newHistory()
	var count atomic.Int64
	var wg sync.WaitGroup
	workers := 1 + r.IntN(6)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			appender(s, h, w, &count, crashAt, crash)
		}()
	}
	wg.Add(2)
	go func() { defer wg.Done(); remover(s, h, rand.New(rand.NewPCG(seed, 6))) }()
	go func() { defer wg.Done(); consumerWriter(cs, h) }()
	wg.Wait()
	crash()
	s.Close()
	cs.Close()
	lg := &testLog{}
	cfg.FS, cfg.Logf = crashed, lg.logf
	s2, err := Open(cfg, limits)
	if err != nil {
		t.Fatalf("seed %d: recovery failed: %v", seed, err)
	}
	defer s2.Close()
	checkRecovered(t, s2, h, seed)
	checkConsumerRecovered(t, s2, h, seed)
	return lg
}

// crashOps are the moments a power loss is triggered at.
var crashOps = []struct{ op, path string }{
	{"append", ""}, {"write", ".blk"}, {"sync", ".blk"}, {"sync", ".blk"}, {"sync", ""},
	{"syncdir", ""}, {"rename", ""}, {"remove", ""}, {"create", ".blk"},
	{"write", ckptName}, {"sync", ckptName}, {"create", ckptName},
}

// hookFS calls crash just before the at-th call of the operation op, once
// armed.
type hookFS struct {
	vfs.FS
	op    string
	path  string // a substring of the names the operation counts
	at    int64
	n     atomic.Int64
	armed atomic.Bool
	crash func()
}

func (h *hookFS) hit(op, name string) {
	if h.armed.Load() && op == h.op && strings.Contains(name, h.path) && h.n.Add(1) == h.at {
		h.crash()
	}
}

func (h *hookFS) Create(name string) (vfs.File, error) {
	h.hit("create", name)
	f, err := h.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, h: h, name: name}, nil
}

func (h *hookFS) OpenAppend(name string) (vfs.File, error) {
	f, err := h.FS.OpenAppend(name)
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, h: h, name: name}, nil
}

func (h *hookFS) Remove(name string) error { h.hit("remove", name); return h.FS.Remove(name) }

func (h *hookFS) Rename(a, b string) error { h.hit("rename", a); return h.FS.Rename(a, b) }

func (h *hookFS) SyncDir(dir string) error { h.hit("syncdir", dir); return h.FS.SyncDir(dir) }

// hookFile is a File of a hookFS.
type hookFile struct {
	vfs.File
	h    *hookFS
	name string
}

func (f *hookFile) Write(p []byte) (int, error) { f.h.hit("write", f.name); return f.File.Write(p) }

func (f *hookFile) Sync() error { f.h.hit("sync", f.name); return f.File.Sync() }

// appender appends until the store fails, recording attempts and acks;
// the appender that makes the crashAt-th append cuts the power.
func appender(s *Store, h *history, w int, count *atomic.Int64, crashAt int64, crash func()) {
	for i := 0; ; i++ {
		if count.Add(1) == crashAt {
			crash()
		}
		m := store.Msg{Subject: fmt.Sprintf("p.%d", w), Data: fmt.Appendf(nil, "%d-%d-%s", w, i, bytes.Repeat([]byte("x"), i%97)), Time: int64(i)}
		seq, err := s.Append(m)
		if err != nil {
			return
		}
		h.mu.Lock()
		h.attempted[seq] = m
		h.mu.Unlock()
		if err := s.WaitDurable(seq); err != nil {
			return
		}
		h.mu.Lock()
		h.acked[seq] = true
		h.maxAcked = max(h.maxAcked, seq)
		h.mu.Unlock()
	}
}

// remover deletes random acknowledged messages and compacts now and then.
func remover(s *Store, h *history, r *rand.Rand) {
	for {
		h.mu.Lock()
		top := h.maxAcked
		h.mu.Unlock()
		if top < 4 {
			if err := s.WaitDurable(0); err != nil {
				return
			}
			continue
		}
		if r.IntN(10) == 0 {
			seq := 1 + r.Uint64N(top/2+1)
			h.mu.Lock()
			h.compTried = max(h.compTried, seq)
			h.mu.Unlock()
			if _, err := s.Compact(seq); err != nil {
				return
			}
			h.mu.Lock()
			h.compAcked = max(h.compAcked, seq)
			h.mu.Unlock()
			continue
		}
		if r.IntN(4) == 0 {
			if !removeMany(s, h, r, top) {
				return
			}
			continue
		}
		seq := 1 + r.Uint64N(top)
		h.mu.Lock()
		h.delTried[seq] = true
		h.mu.Unlock()
		err := s.Delete(seq)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return
		}
		if err == nil {
			h.mu.Lock()
			h.delAcked[seq] = true
			h.mu.Unlock()
		}
	}
}

// removeMany deletes up to 8 random sequences at or below top with one
// DeleteMany and reports whether the store still works. Once it returns
// nil, every one of them is gone for good.
func removeMany(s *Store, h *history, r *rand.Rand, top uint64) bool {
	seqs := make([]uint64, 1+r.IntN(8))
	h.mu.Lock()
	for i := range seqs {
		seqs[i] = 1 + r.Uint64N(top)
		h.delTried[seqs[i]] = true
	}
	h.mu.Unlock()
	if _, err := s.DeleteMany(seqs); err != nil {
		return false
	}
	h.mu.Lock()
	for _, seq := range seqs {
		h.delAcked[seq] = true
	}
	h.mu.Unlock()
	return true
}

// consumerWriter updates a consumer's state until the store fails.
func consumerWriter(cs store.ConsumerStore, h *history) {
	for i := uint64(1); ; i++ {
		h.mu.Lock()
		h.stateTry = i
		h.mu.Unlock()
		st := &store.ConsumerState{Delivered: store.SequencePair{Consumer: i, Stream: i}, AckFloor: store.SequencePair{Consumer: i / 2, Stream: i / 2}}
		if err := cs.Update(st); err != nil {
			return
		}
		h.mu.Lock()
		h.stateAck = i
		h.mu.Unlock()
	}
}

// checkRecovered applies the power-loss checks (docs/durability.md
// section 5) to the recovered store.
func checkRecovered(t *testing.T, s *Store, h *history, seed uint64) {
	t.Helper()
	mustCheck(t, s, "recovery")
	st := s.State(true)
	if st.Lost != nil {
		t.Fatalf("seed %d: recovery reports lost data %+v", seed, st.Lost)
	}
	if st.LastSeq < h.maxAcked {
		t.Fatalf("seed %d: LastSeq %d below the highest acknowledged %d", seed, st.LastSeq, h.maxAcked)
	}
	var top uint64
	for seq := range h.attempted {
		got, err := s.Load(seq)
		switch {
		case err == nil:
			checkSame(t, seed, seq, got, h.attempted[seq])
			if h.removedSurely(seq) {
				t.Fatalf("seed %d: seq %d was deleted (acknowledged) but is back", seed, seq)
			}
			top = max(top, seq)
		case !errors.Is(err, store.ErrNotFound):
			t.Fatalf("seed %d: Load(%d): %v", seed, seq, err)
		case h.acked[seq] && !h.removedMaybe(seq):
			t.Fatalf("seed %d: acknowledged seq %d lost", seed, seq)
		}
	}
	for seq := uint64(1); seq <= top; seq++ {
		if _, ok := h.attempted[seq]; ok && !h.removedMaybe(seq) && !s.has(seq) {
			t.Fatalf("seed %d: seq %d missing below recovered seq %d: not a prefix", seed, seq, top)
		}
	}
	checkUsable(t, s, seed)
}

// has reports whether a message is stored at seq.
func (s *Store) has(seq uint64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.liveLocked(seq)
}

func checkSame(t *testing.T, seed, seq uint64, got *store.StoredMsg, want store.Msg) {
	t.Helper()
	if got.Subject != want.Subject || !bytes.Equal(got.Data, want.Data) || got.Seq != seq || got.Time != want.Time {
		t.Fatalf("seed %d: seq %d holds %q %q, attempted %q %q", seed, seq, got.Subject, got.Data, want.Subject, want.Data)
	}
}

// checkUsable appends after recovery and waits for durability.
func checkUsable(t *testing.T, s *Store, seed uint64) {
	t.Helper()
	seq, err := s.Append(store.Msg{Subject: "after", Data: []byte("x")})
	if err == nil {
		err = s.WaitDurable(seq)
	}
	if err != nil || seq != s.State(false).LastSeq {
		t.Fatalf("seed %d: append after recovery: %d, %v", seed, seq, err)
	}
}

// checkConsumerRecovered checks the consumer state is the last
// acknowledged one or the one attempted after it.
func checkConsumerRecovered(t *testing.T, s *Store, h *history, seed uint64) {
	t.Helper()
	cs, err := s.ConsumerStore("c")
	if err != nil {
		t.Fatalf("seed %d: consumer store: %v", seed, err)
	}
	st, err := cs.State()
	if err != nil {
		t.Fatalf("seed %d: consumer state: %v", seed, err)
	}
	if got := st.Delivered.Stream; got < h.stateAck || got > h.stateTry {
		t.Fatalf("seed %d: consumer delivered %d, acknowledged %d, tried %d", seed, got, h.stateAck, h.stateTry)
	}
}
