package stream

import (
	"bytes"
	"math"
	"reflect"
	"strconv"
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
)

// sizeEntries are entries whose fields take every width of their
// prefixes: no header and an empty one, times that are negative, zero
// and far off, a counter's MaxPayload.
func sizeEntries() []Entry {
	return []Entry{
		{Subject: "a"},
		{Subject: "orders.a", Header: []byte{}, Data: []byte("x"), Time: -1},
		{Subject: string(bytes.Repeat([]byte{'s'}, 200)), Header: hdrBlock("K:v"), Data: make([]byte, 127), Time: math.MaxInt64},
		{Subject: "b", Header: make([]byte, 127), Data: make([]byte, 128), Time: math.MinInt64, Sourced: true, FastBatch: true},
		{Subject: "c", Data: make([]byte, 70000), Time: 1_700_000_000_000_000_000, MaxPayload: 1 << 20},
		{Subject: "d", MaxPayload: math.MaxInt64},
	}
}

// The sizes the proposer counts are the lengths AppendOp writes.
func TestOpSizes(t *testing.T) {
	es := sizeEntries()
	for k := 0; k <= len(es); k++ {
		pub := &Publish{Entries: es[:k]}
		entries := 0
		for i := range pub.Entries {
			entries += EntrySize(&pub.Entries[i])
		}
		if got, want := PublishSize(k, entries), len(mustAppend(t, pub)); got != want {
			t.Fatalf("Publish of %d entries: PublishSize %d, AppendOp %d", k, got, want)
		}
		for _, mirror := range []bool{false, true} {
			cp := &Copy{Mirror: mirror, Entries: es[:k]}
			if mirror {
				for i := range k {
					cp.OriginSeqs = append(cp.OriginSeqs, uint64(1)<<(9*i))
				}
			}
			entries := 0
			for i := range k {
				entries += CopyEntrySize(cp, i)
			}
			if got, want := CopySize(k, entries), len(mustAppend(t, cp)); got != want {
				t.Fatalf("Copy of %d entries (mirror %v): CopySize %d, AppendOp %d", k, mirror, got, want)
			}
		}
		c := &BatchCommit{ID: "batch" + strconv.Itoa(k), Time: int64(k) * 1e17, MaxPayload: int64(k) << 20, Entries: es[:k]}
		if got, want := BatchCommitSize(c), len(mustAppend(t, c)); got != want {
			t.Fatalf("BatchCommit of %d entries: BatchCommitSize %d, AppendOp %d", k, got, want)
		}
	}
	many := &Publish{Entries: make([]Entry, 300)} // a two-byte count
	entries := 0
	for i := range many.Entries {
		many.Entries[i].Subject = "x"
		entries += EntrySize(&many.Entries[i])
	}
	if got, want := PublishSize(300, entries), len(mustAppend(t, many)); got != want {
		t.Fatalf("Publish of 300 entries: PublishSize %d, AppendOp %d", got, want)
	}
}

func mustAppend(t *testing.T, op Op) []byte {
	t.Helper()
	b, err := AppendOp(nil, op)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A replicated stream's proposer refuses what its log cannot carry
// (BatchPolicy.MaxEntryBytes): a message that would not fit alone in a
// Publish with 10054, in an atomic or a fast batch; an atomic batch
// whose BatchCommit would not fit with 10199, its text naming the bound
// in bytes, abandoned ("large"), by the message that would take it over
// or by an "eob" commit whose header takes it over. What fits exactly is
// taken. Without the bound (0, one server's log) nothing changes.
func TestStageOverEntryLimit(t *testing.T) {
	var in BatchInflight
	a := NewAtomicBatches(BatchLimits{APILevel: 4}, &in)
	e1, e2 := batchEntry("b", 1, "", ""), batchEntry("b", 2, "1", "")
	e1.Data, e2.Data = make([]byte, 500), make([]byte, 500)
	exact := func(es ...Entry) int { // the commit's size, made as Stage makes it
		c := &BatchCommit{ID: "b", Time: t0, Entries: es}
		return BatchCommitSize(c)
	}
	limit := exact(e1, e2)
	p := atomicPolicy
	p.MaxEntryBytes = limit
	if r := a.Stage(p, "b", e1, t0); !r.Empty {
		t.Fatalf("first message: %+v", r)
	}
	r := a.Stage(p, "b", e2, t0)
	if r.Commit == nil || BatchCommitSize(r.Commit) != limit {
		t.Fatalf("a batch of exactly %d bytes: %+v", limit, r)
	}

	p.MaxEntryBytes = limit - 1
	a.Stage(p, "b", e1, t0)
	r = a.Stage(p, "b", e2, t0)
	wantCode(t, "one byte over", r.Err, jserr.AtomicPublishTooLargeBatch)
	if want := "atomic publish batch is too large: " + strconv.Itoa(limit-1) + " bytes"; r.Err.Description != want {
		t.Errorf("text %q, want %q", r.Err.Description, want)
	}
	if !reflect.DeepEqual(r.Abandoned, []Abandoned{{"b", AbandonLarge}}) || a.Len() != 0 {
		t.Errorf("abandoned %v, open %d", r.Abandoned, a.Len())
	}
	if n, _, staged := in.Open(); n != 0 || staged != 0 {
		t.Errorf("inflight %d, staged %d after the refusal", n, staged)
	}

	// An "eob" commit adds Nats-Batch-Commit to the last message: a
	// batch that fit while staged may not once committed.
	e2.Header = batchEntry("b", 2, "", "").Header
	staged := exact(e1, e2)
	p.MaxEntryBytes = staged
	a.Stage(p, "b", e1, t0)
	if r := a.Stage(p, "b", e2, t0); !r.Empty {
		t.Fatalf("second message, exactly at the bound: %+v", r)
	}
	r = a.Stage(p, "b", batchEntry("b", 3, "eob", ""), t0)
	wantCode(t, "eob over", r.Err, jserr.AtomicPublishTooLargeBatch)
	if r.Commit != nil || a.Len() != 0 || r.Abandoned[0].Reason != AbandonLarge {
		t.Errorf("eob over the bound: %+v, open %d", r, a.Len())
	}

	// A message that would not fit alone in a Publish: 10054, in an
	// atomic batch as in a fast one.
	one := e1
	p.MaxEntryBytes = PublishSize(1, EntrySize(&one)) - 1
	wantCode(t, "atomic message over", a.Stage(p, "b", e1, t0).Err, jserr.StreamMessageExceedsMaximum)
	if err := checkFastMsg(p, &FastInfo{ID: "f"}, &one); err == nil || err.ErrCode != uint16(jserr.StreamMessageExceedsMaximum) {
		t.Errorf("fast message over: %v", err)
	}
	p.MaxEntryBytes++
	if err := checkFastMsg(p, &FastInfo{ID: "f"}, &one); err != nil {
		t.Errorf("fast message at the bound: %v", err)
	}

	// No bound: a batch of any size.
	p.MaxEntryBytes = 0
	a.Stage(p, "b", e1, t0)
	if r := a.Stage(p, "b", batchEntry("b", 2, "1", ""), t0); r.Commit == nil {
		t.Fatalf("without a bound: %+v", r)
	}
}

// A batch abandoned by a middle message for passing the log's largest
// entry answers its later messages and its commit with the same 10199,
// not 10176 "incomplete" for an id no longer open (trial 36, finding 4),
// with no second advisory; a new first message of the id starts a new
// batch, and the memory goes after Timeout without a message.
func TestStageOverEntryLimitLaterMessages(t *testing.T) {
	var in BatchInflight
	a := NewAtomicBatches(BatchLimits{APILevel: 4}, &in)
	msg := func(seq int, commit string) Entry {
		e := batchEntry("b", seq, commit, "")
		e.Data = make([]byte, 500)
		return e
	}
	p := atomicPolicy
	p.MaxEntryBytes = BatchCommitSize(&BatchCommit{ID: "b", Time: t0, Entries: []Entry{msg(1, ""), msg(2, "")}})
	a.Stage(p, "b", msg(1, ""), t0)
	a.Stage(p, "b", msg(2, ""), t0)
	r := a.Stage(p, "b", msg(3, ""), t0)
	wantCode(t, "the message over", r.Err, jserr.AtomicPublishTooLargeBatch)
	for seq, commit := range map[int]string{4: "", 5: "1"} {
		r := a.Stage(p, "b", msg(seq, commit), t0+1)
		wantCode(t, "message "+strconv.Itoa(seq), r.Err, jserr.AtomicPublishTooLargeBatch)
		if want := "atomic publish batch is too large: " + strconv.Itoa(p.MaxEntryBytes) + " bytes"; r.Err.Description != want {
			t.Errorf("message %d: text %q, want %q", seq, r.Err.Description, want)
		}
		if len(r.Abandoned) != 0 {
			t.Errorf("message %d: abandoned again %v", seq, r.Abandoned)
		}
	}
	if r := a.Stage(p, "b", msg(1, "1"), t0+2); r.Commit == nil {
		t.Fatalf("a new batch of the id: %+v", r)
	}
	a.Stage(p, "b", msg(1, ""), t0)
	a.Stage(p, "b", msg(2, ""), t0)
	a.Stage(p, "b", msg(3, ""), t0)
	late := t0 + int64(DefaultBatchTimeout)
	wantCode(t, "after the timeout", a.Stage(p, "b", msg(4, "1"), late).Err, jserr.AtomicPublishIncompleteBatch)
}
