package streamrun

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
)

// boundedLog is a replicated log's stand-in whose entries are bounded
// (EntryLimiter): it records the byte form of every operation proposed,
// and commits none.
type boundedLog struct {
	max int
	ops [][]byte
}

func (l *boundedLog) Propose(op stream.Op, _ uint64) error {
	b, err := stream.AppendOp(nil, op)
	if err != nil {
		return err
	}
	l.ops = append(l.ops, b)
	return nil
}

func (l *boundedLog) MaxEntryBytes() int { return l.max }

// unboundedLog is the same without a bound: one server's log.
type unboundedLog struct{ ops [][]byte }

func (l *unboundedLog) Propose(op stream.Op, _ uint64) error {
	b, err := stream.AppendOp(nil, op)
	l.ops = append(l.ops, b)
	return err
}

func boundedStream(t *testing.T, log Log[stream.Op], out *[]answer) *Stream {
	return boundedStreamOf(t, log, out, stream.MemoryStorage)
}

// boundedStreamOf is boundedStream with a config of storage (a memory
// store holds it either way: the log commits nothing).
func boundedStreamOf(t *testing.T, log Log[stream.Op], out *[]answer, storage stream.StorageType) *Stream {
	cfg := stream.Config{Name: "G", Subjects: []string{"g.>"}, Storage: storage, AllowAtomicPublish: true, AllowBatchPublish: true}
	cfg.SetDefaults()
	env := Env{Transport: recordingTransport{out: out}, Now: time.Now, Logf: t.Logf, Storage: NewStorage(nil, "", NewUsage(), time.Now, t.Logf, t.Logf),
		Batches: &stream.BatchInflight{}, NewLog: func(string, Applier[stream.Op]) Log[stream.Op] { return log }}
	return New(env, cfg, time.Now(), "", memstore.New(cfg.StoreConfig()))
}

func atomicMsg(id string, seq int, commit bool, size int) stream.Entry {
	h := fmt.Sprintf("NATS/1.0\r\nNats-Batch-Id: %s\r\nNats-Batch-Sequence: %d\r\n", id, seq)
	if commit {
		h += "Nats-Batch-Commit: 1\r\n"
	}
	return stream.Entry{Subject: "g.b", Header: []byte(h + "\r\n"), Data: make([]byte, size), Time: time.Now().UnixNano()}
}

// errCode returns the err_code a PubAck answer carries (0: none).
func errCode(a answer) int {
	var code int
	if i := bytes.Index(a.data, []byte(`"err_code":`)); i >= 0 {
		fmt.Sscanf(string(a.data[i+len(`"err_code":`):]), "%d", &code)
	}
	return code
}

// replies returns the answers to publishers, without the advisories.
func replies(out []answer) []answer {
	var rs []answer
	for _, a := range out {
		if strings.HasPrefix(a.subject, "_INBOX.") {
			rs = append(rs, a)
		}
	}
	return rs
}

// A replicated stream's proposer never proposes an operation larger than
// its log's largest entry (EntryLimiter: the raft entry no follower
// could receive, which stalled the stream): a publish group is flushed
// before a message that would take it over; a message that would not
// fit alone is answered 10054; an atomic batch that would not fit 10199
// and is not proposed; a sourcer's copy is cut before the message that
// would take it over, or refused with 10054 when the first would not
// fit. One server's log has no bound: the same publishes are proposed
// as before (R1 unchanged).
func TestProposerKeepsWithinEntryLimit(t *testing.T) {
	const limit = 4096
	var out []answer
	log := &boundedLog{max: limit}
	r := boundedStream(t, log, &out)

	// A group of three 1,000-byte publishes, then one of 3,000 bytes: it
	// would take the group past the bound, so it starts the next.
	for _, size := range []int{1000, 1000, 1000, 3000} {
		r.take(&item{entry: stream.Entry{Subject: "g.x", Data: make([]byte, size), Time: time.Now().UnixNano()}, reply: "_INBOX.p"})
	}
	r.flushPublishes()
	if len(log.ops) != 2 {
		t.Fatalf("%d operations proposed for 4 publishes, want 2 (3 + 1)", len(log.ops))
	}
	// A publish that would not fit alone: 10054, nothing proposed.
	r.take(&item{entry: stream.Entry{Subject: "g.x", Data: make([]byte, limit)}, reply: "_INBOX.big"})
	r.flushPublishes()
	if len(log.ops) != 2 || len(out) != 1 || out[0].subject != "_INBOX.big" || errCode(out[0]) != 10054 {
		t.Fatalf("a publish over the bound: %d operations, answers %q", len(log.ops), out)
	}
	// An atomic batch whose commit would not fit: 10199 at the message
	// that takes it over, nothing proposed.
	out = out[:0]
	for seq := 1; seq <= 3; seq++ {
		r.take(&item{entry: atomicMsg("a", seq, seq == 3, 1500), reply: "_INBOX.a"})
	}
	if rs := replies(out); len(log.ops) != 2 || len(rs) != 3 || errCode(rs[2]) != 10199 || !bytes.Contains(rs[2].data, []byte(fmt.Sprintf("too large: %d bytes", limit))) {
		t.Fatalf("an atomic batch over the bound: %d operations, answers %q", len(log.ops), out)
	}
	// One that fits is proposed.
	for seq := 1; seq <= 2; seq++ {
		r.take(&item{entry: atomicMsg("b", seq, seq == 2, 1500), reply: "_INBOX.b"})
	}
	if len(log.ops) != 3 {
		t.Fatalf("an atomic batch within the bound: %d operations, want 3", len(log.ops))
	}
	// A fast batch message that would not fit alone: 10054.
	out = out[:0]
	r.take(&item{entry: stream.Entry{Subject: "g.f", Data: make([]byte, limit)}, reply: "_INBOX.f.f1.10.ok.1.0.$FI"})
	if len(log.ops) != 3 || len(out) == 0 || !bytes.Contains(out[len(out)-1].data, []byte(`"err_code":10054`)) {
		t.Fatalf("a fast batch message over the bound: %d operations, answers %q", len(log.ops), out)
	}
	// A copy is cut before the entry that would take it over; one whose
	// first entry would not fit is refused with 10054.
	cp := &stream.Copy{}
	for _, size := range []int{1000, 1000, 1000, 3000} {
		cp.Entries = append(cp.Entries, stream.Entry{Subject: "g.s", Data: make([]byte, size), Sourced: true})
	}
	req := &request{}
	r.proposeCopy(cp, req)
	if len(log.ops) != 4 || len(cp.Entries) != 3 || len(req.out.Results) != 0 {
		t.Fatalf("a copy over the bound: %d operations, %d entries proposed, results %+v", len(log.ops), len(cp.Entries), req.out.Results)
	}
	req = &request{}
	r.proposeCopy(&stream.Copy{Entries: []stream.Entry{{Subject: "g.s", Data: make([]byte, limit)}}}, req)
	if len(log.ops) != 4 || len(req.out.Results) != 1 || req.out.Results[0].Err.ErrCode != uint16(jserr.StreamMessageExceedsMaximum) {
		t.Fatalf("a copy whose first entry is over the bound: %d operations, results %+v", len(log.ops), req.out.Results)
	}
	for i, op := range log.ops {
		if len(op) > limit {
			t.Errorf("operation %d proposed with %d bytes, over %d", i, len(op), limit)
		}
	}

	// One server's log: no bound, everything proposed as before.
	out = out[:0]
	local := &unboundedLog{}
	r1 := boundedStream(t, local, &out)
	for _, size := range []int{1000, 1000, 1000, 3000, limit} {
		r1.take(&item{entry: stream.Entry{Subject: "g.x", Data: make([]byte, size)}, reply: "_INBOX.p"})
	}
	r1.flushPublishes()
	for seq := 1; seq <= 3; seq++ {
		r1.take(&item{entry: atomicMsg("a", seq, seq == 3, 1500), reply: "_INBOX.a"})
	}
	if len(local.ops) != 2 || len(out) != 2 {
		t.Fatalf("without a bound: %d operations (want one group and one batch), answers %q", len(local.ops), out)
	}
}

// A replicated file stream answers a message whose file record would pass
// 32 MiB with 10077 "message too large" before proposing it, as
// nats-server v2.15.2's clustered path does (checkMsgHeadersPreClusteredProposal),
// also past the largest entry, where it answered 10054 (trial 36,
// finding 6: 67,108,700 bytes), and in an atomic batch. A replicated memory
// stream has no 32 MiB bound: it proposes 33 MiB and answers 10054 only
// past the largest entry.
func TestProposerFileRecordBound(t *testing.T) {
	const maxEntry = 64<<20 - 150
	for _, storage := range []stream.StorageType{stream.FileStorage, stream.MemoryStorage} {
		var out []answer
		log := &boundedLog{max: maxEntry}
		r := boundedStreamOf(t, log, &out, storage)
		for i, size := range []int{33 << 20, maxEntry} {
			out = out[:0]
			r.take(&item{entry: stream.Entry{Subject: "g.x", Data: make([]byte, size)}, reply: "_INBOX.big"})
			r.flushPublishes()
			want := 10077
			if storage == stream.MemoryStorage {
				want = []int{0, 10054}[i]
			}
			got := 0
			if len(out) > 0 {
				got = errCode(out[0])
			}
			if got != want {
				t.Errorf("%v stream, %d bytes: answered %d (%q), want %d", storage, size, got, out, want)
			}
			if proposed := len(log.ops) == 1; proposed != (want == 0) {
				t.Errorf("%v stream, %d bytes: proposed %v", storage, size, proposed)
			}
			log.ops = nil
		}
		if storage == stream.MemoryStorage {
			continue
		}
		out = out[:0]
		r.take(&item{entry: atomicMsg("a", 1, false, 1000), reply: "_INBOX.a1"})
		r.take(&item{entry: atomicMsg("a", 2, true, 33<<20), reply: "_INBOX.a2"})
		if rs := replies(out); len(rs) != 2 || errCode(rs[1]) != 10077 || len(log.ops) != 0 {
			t.Errorf("an atomic batch with a message over 32 MiB: %d operations, answers %q", len(log.ops), rs)
		}
	}
}
