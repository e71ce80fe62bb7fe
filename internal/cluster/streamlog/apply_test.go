package streamlog

import (
	"runtime"
	"testing"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// keepOps is an Applier that keeps what it is handed, as a stream
// runtime keeps a committed operation queued for its apply goroutine.
type keepOps struct{ ops []stream.Op }

func (k *keepOps) Apply(_ uint64, op stream.Op, _ uint64) { k.ops = append(k.ops, op) }

// Applying a committed entry hands the Applier an operation decoded from
// the entry's own data, not from a copy of it: the log holds those bytes
// until it is compacted (raftnode.Entry), and a copy per entry committed
// and not yet applied held 100 MB and more a second time on a leader
// taking a burst (docs/memory.md, "Memory after bursts").
func TestApplyDoesNotCopyEntries(t *testing.T) {
	const size = 1 << 20
	data, err := stream.AppendOp(nil, &stream.Publish{Entries: []stream.Entry{{Subject: "orders.x", Data: make([]byte, size), Time: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	k := &keepOps{}
	l := New(Config{Group: group}, k)
	defer l.Close()
	sm := l.StateMachine()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range 8 {
		if err := sm.Apply([]raftnode.Entry{{Index: uint64(i + 1), Term: 1, Data: data}}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > size/2 {
		t.Errorf("applying 8 entries of %d bytes allocated %d bytes: the entries were copied", len(data), got)
	}
	if len(k.ops) != 8 {
		t.Fatalf("%d operations applied, want 8", len(k.ops))
	}
	if pub, ok := k.ops[7].(*stream.Publish); !ok || len(pub.Entries) != 1 || len(pub.Entries[0].Data) != size {
		t.Fatalf("applied %#v, want the publish of %d bytes", k.ops[7], size)
	}
}
