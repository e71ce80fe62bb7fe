package filestore

import (
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// journalSync journals ops for cs and waits until they are durable.
func journalSync(t *testing.T, cs store.ConsumerStore, ops ...store.ConsumerOp) error {
	t.Helper()
	ch := make(chan error, 1)
	cs.(store.ConsumerJournal).Journal(ops, func(err error) { ch <- err })
	return <-ch
}

func ackOp(seq uint64) store.ConsumerOp {
	return store.ConsumerOp{Kind: store.OpAck, Stream: seq, Consumer: seq}
}

func openConsumer(t *testing.T, s *Store, name string) store.ConsumerStore {
	t.Helper()
	cs, err := s.ConsumerStore(name)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestAckJournalSurvivesPowerLoss: every op whose journal write was
// confirmed durable is replayed after a power loss, whatever the crash
// leaves of the unsynced tail; unconfirmed ops may or may not be, and a
// torn record never turns into garbage ops.
func TestAckJournalSurvivesPowerLoss(t *testing.T) {
	for seed := range uint64(40) {
		fs := vfs.NewCrashFS()
		s := mustOpen(t, memConfig(fs, 0), store.Config{})
		a, b := openConsumer(t, s, "a"), openConsumer(t, s, "b")
		var confirmed []store.ConsumerOp
		for i := uint64(1); i <= 20; i++ {
			if err := journalSync(t, a, ackOp(i)); err != nil {
				t.Fatal(err)
			}
			confirmed = append(confirmed, ackOp(i))
			b.(store.ConsumerJournal).Journal([]store.ConsumerOp{ackOp(100 + i)}, nil) // not waited for
		}
		a.(store.ConsumerJournal).Journal([]store.ConsumerOp{ackOp(21)}, nil)
		crashed := fs.Crash(vfs.CrashOptions{Tail: vfs.TailAny, Rand: rand.New(rand.NewPCG(seed, 7))})
		s.Close()
		s2 := mustOpen(t, memConfig(crashed, 0), store.Config{})
		got := openConsumer(t, s2, "a").(store.ConsumerJournal).Journaled()
		if len(got) < len(confirmed) || !slices.Equal(got[:len(confirmed)], confirmed) {
			t.Fatalf("seed %d: replayed %v, want %v first", seed, got, confirmed)
		}
		for _, op := range got[len(confirmed):] {
			if op != ackOp(21) {
				t.Fatalf("seed %d: replayed an op never journaled: %+v", seed, op)
			}
		}
		for _, op := range openConsumer(t, s2, "b").(store.ConsumerJournal).Journaled() {
			if op.Stream <= 100 || op.Stream > 120 {
				t.Fatalf("seed %d: b replayed an op never journaled: %+v", seed, op)
			}
		}
		s2.Close()
	}
}

// TestAckJournalNewConsumerInheritsNothing: a consumer created under the
// name of a deleted one never replays the old one's acks, also after a
// power loss.
func TestAckJournalNewConsumerInheritsNothing(t *testing.T) {
	fs := vfs.NewCrashFS()
	s := mustOpen(t, memConfig(fs, 0), store.Config{})
	c := openConsumer(t, s, "c")
	if err := journalSync(t, c, ackOp(1), ackOp(2)); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(); err != nil {
		t.Fatal(err)
	}
	c = openConsumer(t, s, "c")
	if ops := c.(store.ConsumerJournal).Journaled(); ops != nil {
		t.Fatalf("new consumer got %v", ops)
	}
	if err := journalSync(t, c, ackOp(9)); err != nil {
		t.Fatal(err)
	}
	crashed := fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	s.Close()
	s2 := mustOpen(t, memConfig(crashed, 0), store.Config{})
	defer s2.Close()
	if got := openConsumer(t, s2, "c").(store.ConsumerJournal).Journaled(); !slices.Equal(got, []store.ConsumerOp{ackOp(9)}) {
		t.Fatalf("replayed %v, want only the new consumer's ack 9", got)
	}
}

// TestAckJournalTrim: once every consumer's stored state holds its
// records, the old generations' files are removed, and what is not
// covered stays.
func TestAckJournalTrim(t *testing.T) {
	fs := vfs.NewCrashFS()
	s := mustOpen(t, memConfig(fs, 0), store.Config{})
	defer s.Close()
	a, b := openConsumer(t, s, "a"), openConsumer(t, s, "b")
	ja, jb := a.(store.ConsumerJournal), b.(store.ConsumerJournal)
	if err := journalSync(t, b, ackOp(1)); err != nil { // b: first generation, never covered
		t.Fatal(err)
	}
	ops := make([]store.ConsumerOp, 1000)
	for i := range ops {
		ops[i] = ackOp(uint64(i + 1))
	}
	for range 3 * ackRotateSize / (1000 * (ackRecFixed + 1)) {
		if err := journalSync(t, a, ops...); err != nil {
			t.Fatal(err)
		}
	}
	files := func() []string {
		names, err := fs.ReadDir("/store/acks")
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	if n := len(files()); n < 3 {
		t.Fatalf("%d journal files, want rotation to 3 or more", n)
	}
	ja.Covered(ja.JournalGen()) // the newest copy covers them, the older does not
	if err := journalSync(t, a, ackOp(5)); err != nil {
		t.Fatal(err)
	}
	if n := len(files()); n < 3 {
		t.Fatalf("%d journal files left after one covering save: the older state copy needs them", n)
	}
	ja.Covered(ja.JournalGen())                         // now both copies do
	if err := journalSync(t, a, ackOp(5)); err != nil { // kicks the trim
		t.Fatal(err)
	}
	if got := files(); !slices.Contains(got, ackFileName(1)) {
		t.Fatalf("files %v: generation 1 holds b's uncovered ack and must stay", got)
	}
	jb.Covered(jb.JournalGen())
	jb.Covered(jb.JournalGen())
	waitFor(t, func() bool { return len(files()) == 1 }, "one journal file left after every consumer is covered")
}

// waitFor polls cond until it holds or 20 s pass.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAckJournalDamage: a flipped bit in a record ends the replay of its
// file there, with a warning naming the file; the records before it are
// replayed and nothing invented.
func TestAckJournalDamage(t *testing.T) {
	fs := vfs.NewCrashFS()
	s := mustOpen(t, memConfig(fs, 0), store.Config{})
	c := openConsumer(t, s, "c")
	for i := uint64(1); i <= 10; i++ {
		if err := journalSync(t, c, ackOp(i)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	name := path.Join("/store/acks", ackFileName(1))
	recLen := int64(ackRecFixed + 1)
	// The reset record of "c" comes first, then the acks: damage the 6th.
	if err := fs.FlipBit(name, 8*(ackHeaderSize+6*recLen+12)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs []string
	cfg := memConfig(fs, 0)
	cfg.Logf = func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }
	s2 := mustOpen(t, cfg, store.Config{})
	defer s2.Close()
	got := openConsumer(t, s2, "c").(store.ConsumerJournal).Journaled()
	want := []store.ConsumerOp{ackOp(1), ackOp(2), ackOp(3), ackOp(4), ackOp(5)}
	if !slices.Equal(got, want) {
		t.Fatalf("replayed %v, want %v", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, ackFileName(1)) }) {
		t.Fatalf("no warning naming the damaged file in %q", logs)
	}
}

// TestAckJournalWriteFailure: a journal whose write fails reports the
// error to the waiting ops and to every later one; nothing is confirmed.
func TestAckJournalWriteFailure(t *testing.T) {
	ffs := vfs.NewFaultFS(vfs.NewCrashFS())
	s := mustOpen(t, Config{Dir: "/store", FS: ffs}, store.Config{})
	defer s.Close()
	c := openConsumer(t, s, "c")
	ffs.Inject(vfs.Rule{Op: vfs.OpSync, Path: "/acks/", Err: syscall.EIO})
	if err := journalSync(t, c, ackOp(1)); err == nil {
		t.Fatal("journal confirmed an op whose fsync failed")
	}
	ffs.Clear()
	if err := journalSync(t, c, ackOp(2)); err == nil {
		t.Fatal("a failed journal confirmed a later op")
	}
}

// TestConsumerStateSurvivesOneDamagedCopy: a flipped byte in the newest
// copy of a consumer's state leaves the other copy (one save older) in
// use, with a warning; the damaged copy is kept aside and never written
// over by later saves.
func TestConsumerStateSurvivesOneDamagedCopy(t *testing.T) {
	fs := vfs.NewCrashFS()
	s := mustOpen(t, memConfig(fs, 0), store.Config{})
	cs := openConsumer(t, s, "c")
	older := &store.ConsumerState{Delivered: store.SequencePair{Consumer: 5, Stream: 5}, AckFloor: store.SequencePair{Consumer: 5, Stream: 5}}
	newer := &store.ConsumerState{Delivered: store.SequencePair{Consumer: 9, Stream: 9}, AckFloor: store.SequencePair{Consumer: 9, Stream: 9}}
	for _, st := range []*store.ConsumerState{older, newer} {
		if err := cs.Update(st); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	dir := "/store/consumers/c"
	var newest string
	for _, slot := range stateSlots {
		b, _ := fs.ReadFile(path.Join(dir, slot))
		if st, _, err := decodeConsumerState(b); err == nil && st.Delivered.Stream == 9 {
			newest = slot
		}
	}
	if newest == "" {
		t.Fatal("no copy holds the newest state")
	}
	if err := fs.FlipBit(path.Join(dir, newest), 8*30); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs []string
	cfg := memConfig(fs, 0)
	cfg.Logf = func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }
	s2 := mustOpen(t, cfg, store.Config{})
	defer s2.Close()
	cs2 := openConsumer(t, s2, "c")
	got, err := cs2.State()
	if err != nil || got.Delivered.Stream != 5 || got.AckFloor.Stream != 5 {
		t.Fatalf("State after damage: %+v, %v; want the older copy (5/5)", got, err)
	}
	mu.Lock()
	warned := slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, "consumer state damaged") })
	mu.Unlock()
	if !warned {
		t.Fatalf("no warning in %q", logs)
	}
	kept, err := fs.ReadFile(path.Join(dir, stateDamaged))
	if err != nil {
		t.Fatalf("damaged copy not kept aside: %v", err)
	}
	// The fallback wrote the good copy again at once: two good copies,
	// so a second damaged one before the next save still finds one.
	for _, slot := range stateSlots {
		b, err := fs.ReadFile(path.Join(dir, slot))
		if err != nil {
			t.Fatalf("copy %s after the fallback: %v", slot, err)
		}
		if st, _, err := decodeConsumerState(b); err != nil || st.Delivered.Stream != 5 {
			t.Fatalf("copy %s after the fallback: %+v, %v; want the older state (5/5)", slot, st, err)
		}
	}
	for range 3 {
		if err := cs2.Update(newer); err != nil {
			t.Fatal(err)
		}
	}
	if again, _ := fs.ReadFile(path.Join(dir, stateDamaged)); !slices.Equal(again, kept) {
		t.Fatal("a save wrote over the damaged copy kept aside")
	}
}

// TestConfirmedAckSurvivesDamagedNewestCopy: an ack journaled after the
// older state copy was taken stays in the journal when the newest copy
// covers it, so that a damaged newest copy found at the next open
// leaves the older copy plus the journal, which still hold the ack.
func TestConfirmedAckSurvivesDamagedNewestCopy(t *testing.T) {
	fs := vfs.NewCrashFS()
	s := mustOpen(t, memConfig(fs, 0), store.Config{})
	cs := openConsumer(t, s, "c")
	jc := cs.(store.ConsumerJournal)
	older := &store.ConsumerState{Delivered: store.SequencePair{Consumer: 7, Stream: 7}}
	if err := cs.Update(older); err != nil {
		t.Fatal(err)
	}
	jc.Covered(jc.JournalGen())
	if err := journalSync(t, cs, ackOp(7)); err != nil { // confirmed
		t.Fatal(err)
	}
	ackGen := jc.JournalGen()
	filler := make([]store.ConsumerOp, 1000)
	for i := range filler {
		filler[i] = ackOp(7)
	}
	for range 2 * ackRotateSize / (1000 * (ackRecFixed + 1)) {
		if err := journalSync(t, cs, filler...); err != nil {
			t.Fatal(err)
		}
	}
	newer := &store.ConsumerState{Delivered: store.SequencePair{Consumer: 7, Stream: 7}, AckFloor: store.SequencePair{Consumer: 7, Stream: 7}}
	gen := jc.JournalGen()
	if gen == ackGen {
		t.Fatal("the journal did not rotate")
	}
	if err := cs.Update(newer); err != nil {
		t.Fatal(err)
	}
	jc.Covered(gen)
	s.acks.mu.Lock()
	first := s.acks.mu.track["c"].first
	s.acks.mu.Unlock()
	if first == 0 || first > ackGen {
		t.Fatalf("the journal may drop generation %d (kept from %d on) which only the newest state copy covers", ackGen, first)
	}
	s.Close()

	dir := "/store/consumers/c"
	for _, slot := range stateSlots {
		b, _ := fs.ReadFile(path.Join(dir, slot))
		if st, _, err := decodeConsumerState(b); err == nil && st.AckFloor.Stream == 7 {
			if err := fs.FlipBit(path.Join(dir, slot), 8*30); err != nil {
				t.Fatal(err)
			}
		}
	}
	s2 := mustOpen(t, memConfig(fs, 0), store.Config{})
	defer s2.Close()
	cs2 := openConsumer(t, s2, "c")
	st, err := cs2.State()
	if err != nil || st.AckFloor.Stream != 0 {
		t.Fatalf("State: %+v %v; want the older copy", st, err)
	}
	if ops := cs2.(store.ConsumerJournal).Journaled(); !slices.Contains(ops, ackOp(7)) {
		t.Fatalf("the confirmed ack of 7 is in neither the older copy nor the journal (%d ops replayed)", len(ops))
	}
}
