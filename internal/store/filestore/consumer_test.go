package filestore

import (
	"errors"
	"reflect"
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
