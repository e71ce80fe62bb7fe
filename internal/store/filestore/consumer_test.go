package filestore

import (
	"errors"
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
