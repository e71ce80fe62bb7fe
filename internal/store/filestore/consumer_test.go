package filestore

import (
	"bytes"
	"errors"
	"hash/crc32"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// removeGate holds the first Remove of a name containing sub until
// release is closed, after closing entered.
type removeGate struct {
	vfs.FS
	sub     string
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *removeGate) Remove(name string) error {
	if strings.Contains(name, g.sub) {
		g.once.Do(func() { close(g.entered); <-g.release })
	}
	return g.FS.Remove(name)
}

// TestConsumerOpenDuringDelete opens a consumer while a consumer of the
// same name is being deleted: the open waits for the deletion and creates
// the consumer again, instead of returning a store whose directory the
// deletion then removes (whose Update failed and fenced it).
func TestConsumerOpenDuringDelete(t *testing.T) {
	gate := &removeGate{FS: vfs.NewCrashFS(), sub: "consumers/c/state", entered: make(chan struct{}), release: make(chan struct{})}
	s := mustOpen(t, Config{Dir: "/s", FS: gate}, store.Config{})
	defer s.Close()
	cs, err := s.ConsumerStore("c")
	if err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error)
	go func() { deleted <- cs.Delete() }()
	<-gate.entered
	opened := make(chan store.ConsumerStore)
	go func() {
		cs2, err := s.ConsumerStore("c")
		if err != nil {
			t.Error(err)
		}
		opened <- cs2
	}()
	var cs2 store.ConsumerStore
	select {
	case cs2 = <-opened: // before the deletion ended: the bug
	case <-time.After(100 * time.Millisecond):
	}
	close(gate.release)
	if err := <-deleted; err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if cs2 == nil {
		cs2 = <-opened
	}
	want := &store.ConsumerState{Delivered: store.SequencePair{Consumer: 1, Stream: 1}}
	if err := cs2.Update(want); err != nil {
		t.Fatalf("Update of the consumer opened during the delete: %v", err)
	}
	if got, err := cs2.State(); err != nil || got.Delivered != want.Delivered {
		t.Fatalf("State() = %+v, %v", got, err)
	}
}

// consumerDirSync matches the directory fsyncs of consumer c's creation
// (/s/consumers) or of its updates (/s/consumers/c).
func consumerDirSync(dir string) func(string) bool {
	return func(name string) bool { return strings.HasSuffix(name, dir) }
}

// TestConsumerCreateDirSyncFails fails the directory fsync that makes a
// new consumer's directory durable: ConsumerStore fails, and a second
// ConsumerStore, which finds the directory in place, makes it durable
// before its Update is acknowledged; the state survives a power loss.
func TestConsumerCreateDirSyncFails(t *testing.T) {
	inner := vfs.NewCrashFS()
	ffs := vfs.NewFaultFS(inner)
	s := mustOpen(t, Config{Dir: "/s", FS: ffs}, store.Config{})
	ffs.Inject(vfs.Rule{Op: vfs.OpSyncDir, Match: consumerDirSync("/consumers"), Count: 1})
	if _, err := s.ConsumerStore("c"); err == nil {
		t.Fatal("ConsumerStore succeeded on a failing disk")
	}
	cs, err := s.ConsumerStore("c")
	if err != nil {
		t.Fatalf("ConsumerStore again: %v", err)
	}
	want := &store.ConsumerState{Delivered: store.SequencePair{Consumer: 7, Stream: 7}}
	if err := cs.Update(want); err != nil {
		t.Fatalf("Update: %v", err)
	}
	s.Close()
	checkConsumerAfterPowerLoss(t, inner, want)
}

// TestConsumerStateReadIsDurable fails the directory fsync of an Update
// (the state file was renamed in place), reopens the store without a
// power loss and reads the state: what State returned survives a power
// loss, as what recovery reads of the messages does.
func TestConsumerStateReadIsDurable(t *testing.T) {
	inner := vfs.NewCrashFS()
	ffs := vfs.NewFaultFS(inner)
	cfg := Config{Dir: "/s", FS: ffs}
	s := mustOpen(t, cfg, store.Config{})
	cs, err := s.ConsumerStore("c")
	if err != nil {
		t.Fatal(err)
	}
	ffs.Inject(vfs.Rule{Op: vfs.OpSyncDir, Match: consumerDirSync("/consumers/c"), Count: 1})
	if err := cs.Update(&store.ConsumerState{Delivered: store.SequencePair{Consumer: 7, Stream: 7}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Update on a failing disk: %v", err)
	}
	s.Close()
	s2 := mustOpen(t, cfg, store.Config{}) // a restart, not a power loss
	cs2, err := s2.ConsumerStore("c")
	if err != nil {
		t.Fatal(err)
	}
	read, err := cs2.State()
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	checkConsumerAfterPowerLoss(t, inner, read)
}

// checkConsumerAfterPowerLoss keeps only the synced state of fs, opens the
// store on it and checks consumer c's state is want.
func checkConsumerAfterPowerLoss(t *testing.T, fs *vfs.CrashFS, want *store.ConsumerState) {
	t.Helper()
	s := mustOpen(t, Config{Dir: "/s", FS: fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})}, store.Config{})
	defer s.Close()
	cs, err := s.ConsumerStore("c")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := cs.State(); err != nil || got.Delivered != want.Delivered {
		t.Fatalf("consumer state after a power loss: %+v, %v; want %+v", got, err, want)
	}
}

// TestConsumerStateVersions: a state file is version 2 unless the state
// has dead-letter marks (version 3, package comment "Consumer state
// file"); messages out of deliveries alone (redelivered entries without
// pending entries, some with a count of 0 for max_deliver 1) stay
// version 2. Both round-trip; a version-3 mark of a sequence neither
// pending nor out of deliveries is refused.
func TestConsumerStateVersions(t *testing.T) {
	base := func() *store.ConsumerState {
		return &store.ConsumerState{
			Delivered:   store.SequencePair{Consumer: 9, Stream: 9},
			AckFloor:    store.SequencePair{Consumer: 5, Stream: 5},
			Pending:     []store.StreamPending{{Stream: 7, Pending: store.Pending{Sequence: 7, Timestamp: 70}}},
			Redelivered: map[uint64]uint64{3: 0, 6: 2, 7: 1},
		}
	}
	pendingMark, heldMark := base(), base()
	pendingMark.DeadLetter = map[uint64]store.DeadLetter{7: {Reason: store.DeadLetterMaxDeliver, After: 4}}
	heldMark.DeadLetter = map[uint64]store.DeadLetter{3: {Reason: store.DeadLetterTerm, After: 8}}
	for _, tc := range []struct {
		name    string
		st      *store.ConsumerState
		version uint32
	}{
		{"out of deliveries", base(), consumerStateVersion},
		{"pending mark", pendingMark, consumerVersionDL},
		{"held mark", heldMark, consumerVersionDL},
	} {
		if err := store.CheckConsumerState(tc.st); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b := encodeConsumerState(tc.st, 42)
		if v := le.Uint32(b[8:]); v != tc.version {
			t.Errorf("%s: version %d, want %d", tc.name, v, tc.version)
		}
		got, gen, err := decodeConsumerState(b)
		if err != nil || gen != 42 || !reflect.DeepEqual(got, tc.st) {
			t.Errorf("%s: decoded %+v gen %d %v, want %+v", tc.name, got, gen, err, tc.st)
		}
	}
	bad := base()
	bad.DeadLetter = map[uint64]store.DeadLetter{4: {Reason: store.DeadLetterTerm}}
	if err := store.CheckConsumerState(bad); !errors.Is(err, store.ErrBadRequest) {
		t.Errorf("CheckConsumerState of a mark of 4 = %v", err)
	}
	if _, _, err := decodeConsumerState(encodeConsumerState(bad, 1)); err == nil {
		t.Error("a state file with a mark of 4 decoded")
	}
}

// refStateFile builds a consumer state file the way every earlier build
// wrote it, in one buffer, from the package comment ("Consumer state
// file"): version 1 without the generation, 2, or 3 with the
// dead-letter section.
func refStateFile(st *store.ConsumerState, version uint32, gen uint64) []byte {
	var body []byte
	if version > 1 {
		body = le.AppendUint64(body, gen)
	}
	for _, v := range []uint64{st.Delivered.Consumer, st.Delivered.Stream, st.AckFloor.Consumer, st.AckFloor.Stream} {
		body = le.AppendUint64(body, v)
	}
	body = le.AppendUint32(body, uint32(len(st.Pending)))
	for _, p := range st.Pending {
		body = le.AppendUint64(le.AppendUint64(body, p.Stream), p.Sequence)
		body = le.AppendUint64(body, uint64(p.Timestamp))
	}
	body = le.AppendUint32(body, uint32(len(st.Redelivered)))
	for _, seq := range slices.Sorted(maps.Keys(st.Redelivered)) {
		body = le.AppendUint64(le.AppendUint64(body, seq), st.Redelivered[seq])
	}
	if version == 3 {
		body = le.AppendUint32(body, uint32(len(st.DeadLetter)))
		for _, seq := range slices.Sorted(maps.Keys(st.DeadLetter)) {
			body = le.AppendUint64(le.AppendUint64(body, seq), st.DeadLetter[seq].After)
			body = append(body, byte(st.DeadLetter[seq].Reason))
		}
	}
	b := append([]byte("CAIRNCSM"), 0, 0, 0, 0, 0, 0, 0, 0)
	le.PutUint32(b[8:], version)
	le.PutUint32(b[12:], uint32(len(body)))
	b = append(b, body...)
	return le.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// bigState returns a consumer state with n pending deliveries (every
// third one redelivered), messages out of deliveries between them, and,
// with marks, dead-letter marks of both kinds.
func bigState(n int, marks bool) *store.ConsumerState {
	st := &store.ConsumerState{AckFloor: store.SequencePair{Consumer: 40, Stream: 100}, Redelivered: map[uint64]uint64{}}
	seq, cseq := uint64(100), uint64(40)
	for i := range n {
		seq += 1 + uint64(i%3)
		cseq++
		st.Pending = append(st.Pending, store.StreamPending{Stream: seq, Pending: store.Pending{Sequence: cseq, Timestamp: 1e18 + int64(i)}})
		if i%3 == 0 {
			st.Redelivered[seq] = uint64(1 + i%7)
		}
		if i%1000 == 1 {
			st.Redelivered[seq-1] = 4 // out of deliveries, between pending ones
		}
	}
	st.Delivered = store.SequencePair{Consumer: cseq + 9, Stream: seq}
	if marks {
		st.DeadLetter = map[uint64]store.DeadLetter{
			st.Pending[7].Stream:        {Reason: store.DeadLetterMaxDeliver, After: 12},
			st.Pending[n-1].Stream:      {Reason: store.DeadLetterTerm},
			st.Pending[1001].Stream - 1: {Reason: store.DeadLetterTerm, After: 3},
		}
	}
	return st
}

// TestConsumerStateLargeFiles: the state file written in 64 KiB pieces
// from the sorted pending slice is byte for byte the file earlier builds
// wrote from the whole body (version 2, and 3 with dead-letter marks),
// for a pending set much larger than a piece; files of versions 1, 2 and
// 3 as earlier builds wrote them read back as the same state; and the
// consumer store returns the large state it was given.
func TestConsumerStateLargeFiles(t *testing.T) {
	for _, marks := range []bool{false, true} {
		st := bigState(60_000, marks)
		if err := store.CheckConsumerState(st); err != nil {
			t.Fatal(err)
		}
		version := uint32(2)
		if marks {
			version = 3
		}
		got := encodeConsumerState(st, 77)
		if want := refStateFile(st, version, 77); !bytes.Equal(got, want) {
			t.Fatalf("marks %v: %d-byte file, the earlier encoder's is %d bytes (first difference at %d)", marks, len(got), len(want), firstDiff(got, want))
		}
		versions := []uint32{version}
		if !marks {
			versions = []uint32{1, 2}
		}
		for _, v := range versions {
			dec, gen, err := decodeConsumerState(refStateFile(st, v, 77))
			if wantGen := map[bool]uint64{true: 0, false: 77}[v == 1]; err != nil || gen != wantGen || !reflect.DeepEqual(dec, st) {
				t.Fatalf("version %d: decoded gen %d, %v; same state %v", v, gen, err, reflect.DeepEqual(dec, st))
			}
		}
		s := mustOpen(t, memConfig(vfs.NewCrashFS(), 0), store.Config{})
		cs, err := s.ConsumerStore("big")
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // both copies
			if err := cs.Update(st); err != nil {
				t.Fatal(err)
			}
			if got, err := cs.State(); err != nil || !reflect.DeepEqual(got, st) {
				t.Fatalf("marks %v: State() = %d pending, %v; same state %v", marks, len(got.Pending), err, reflect.DeepEqual(got, st))
			}
		}
		s.Close()
	}
}

// TestConsumerStateUnsortedRefused: a file whose pending entries are
// not ascending (no build wrote one) fails its checks like a damaged
// one, although its CRC matches: the state's Pending must be sorted.
func TestConsumerStateUnsortedRefused(t *testing.T) {
	st := bigState(10, false)
	st.Pending[3], st.Pending[4] = st.Pending[4], st.Pending[3]
	if _, _, err := decodeConsumerState(refStateFile(st, 2, 1)); !errors.Is(err, errBody) {
		t.Fatalf("decode of unsorted pending entries: %v, want errBody", err)
	}
	st.Pending[4] = st.Pending[3] // repeated
	if _, _, err := decodeConsumerState(refStateFile(st, 2, 1)); !errors.Is(err, errBody) {
		t.Fatalf("decode of a repeated pending entry: %v, want errBody", err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
