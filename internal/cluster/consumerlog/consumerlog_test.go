package consumerlog

import (
	"reflect"
	"testing"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/raftnode"
)

type fakeReplica struct {
	ops     []consumer.Op
	tags    []uint64
	leading []bool
}

func (f *fakeReplica) Apply(_ uint64, op consumer.Op, tag uint64) {
	f.ops = append(f.ops, op)
	f.tags = append(f.tags, tag)
}
func (f *fakeReplica) SetLeading(on bool) { f.leading = append(f.leading, on) }
func (f *fakeReplica) CommittedSnapshot() (uint64, []byte, error) {
	return uint64(len(f.ops)), []byte("{}"), nil
}
func (f *fakeReplica) RestoreCommitted(uint64, []byte) error { return nil }

func entry(t *testing.T, index, term uint64, op consumer.Op, tag uint64) raftnode.Entry {
	t.Helper()
	e := raftnode.Entry{Index: index, Term: term, Tag: tag}
	if op != nil {
		b, err := consumer.AppendOp(nil, op)
		if err != nil {
			t.Fatal(err)
		}
		e.Data = b
	}
	return e
}

// A replica is told it leads only once the empty entry of its own term
// has applied (it then holds every entry of earlier terms), whichever
// comes first, and that it no longer leads when raft says so; committed
// operations reach the consumer with their tags, empty entries never.
func TestLeadingAfterOwnTermsEmptyEntry(t *testing.T) {
	f := &fakeReplica{}
	sm := New(Config{Group: 7}, f).StateMachine()
	lo := sm.(raftnode.LeaderObserver)
	must := func(es ...raftnode.Entry) {
		t.Helper()
		if err := sm.Apply(es); err != nil {
			t.Fatal(err)
		}
	}
	must(entry(t, 1, 1, nil, 0), entry(t, 2, 1, &consumer.Reset{Stream: 5}, 0))
	lo.LeaderChanged(true, 2)
	must(entry(t, 3, 1, &consumer.Deliver{Stream: 5, Time: 9}, 0))
	if len(f.leading) != 0 {
		t.Fatalf("told it leads before its term's empty entry applied: %v", f.leading)
	}
	must(entry(t, 4, 2, nil, 0), entry(t, 5, 2, &consumer.Ack{Stream: 5, Consumer: 1}, 11))
	lo.LeaderChanged(false, 2)
	// Its next term's empty entry applies before raft reports the
	// leadership (it may, within one round): told at LeaderChanged.
	must(entry(t, 6, 4, nil, 0))
	lo.LeaderChanged(true, 4)
	if want := []bool{true, false, true}; !reflect.DeepEqual(f.leading, want) {
		t.Fatalf("leadership told %v, want %v", f.leading, want)
	}
	if len(f.ops) != 3 || !reflect.DeepEqual(f.tags, []uint64{0, 0, 11}) {
		t.Fatalf("applied %d operations with tags %v", len(f.ops), f.tags)
	}
	// Damage fences the replica.
	if err := sm.Apply([]raftnode.Entry{{Index: 7, Term: 4, Data: []byte{0xff, 1, 2}}}); err == nil {
		t.Fatal("an entry that does not decode applied")
	}
}
