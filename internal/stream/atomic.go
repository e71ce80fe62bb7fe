package stream

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cairnmq/cairn/internal/jserr"
)

// AbandonReason says why an atomic batch was abandoned, as the
// io.nats.jetstream.advisory.v1.stream_batch_abandoned advisory names it
// (nats-server v2.15.2 BatchAbandonReason).
type AbandonReason string

// The reasons of an abandoned batch.
const (
	AbandonTimeout     AbandonReason = "timeout"
	AbandonLarge       AbandonReason = "large"
	AbandonIncomplete  AbandonReason = "incomplete"
	AbandonUnsupported AbandonReason = "unsupported"
)

// Abandoned is one abandoned atomic batch, for an advisory.
type Abandoned struct {
	ID     string
	Reason AbandonReason
}

// StageResult is what Stage decided for one message of an atomic batch.
// At most one of Err, Empty and Commit is set; none means no reply.
type StageResult struct {
	// Err is the error PubAck to answer.
	Err *jserr.Error
	// Empty: answer with an empty message, the batch took the message.
	Empty bool
	// Commit is the batch to apply (ApplyBatch), whose PubAck answers
	// the message.
	Commit *BatchCommit
	// Abandoned lists the batches abandoned on the way, for advisories.
	Abandoned []Abandoned
}

// AtomicBatches stages the open atomic batches of one stream until their
// commit (ADR-50; nats-server v2.15.2 processJetStreamAtomicBatchMsg): it
// decides each message carrying Nats-Batch-Id from the stream's
// BatchPolicy, the message and the time, and turns a complete batch into
// a BatchCommit. It is a state machine with the clock passed in: it
// starts no goroutine and reads no clock; a batch with no message for
// BatchLimits.Timeout is abandoned by the next Stage of its id or by
// Expire. One goroutine (the stream's apply goroutine) owns it.
type AtomicBatches struct {
	limits BatchLimits
	global *BatchInflight
	open   map[string]*staged
	// tooLarge remembers the batches abandoned for passing the log's
	// largest entry, by id: their later messages and commit get the same
	// 10199 rather than 10176 "incomplete" for an id no longer open
	// (trial 36). An entry goes with a first message of its id, with no
	// message of its id for Timeout, or with Clear; at most
	// AtomicInflight are kept.
	tooLarge map[string]abandonedLarge
}

// abandonedLarge is a batch abandoned for its size: the answer its later
// messages get, and when its last message came (unix ns).
type abandonedLarge struct {
	err  *jserr.Error
	last int64
}

// staged is one open atomic batch.
type staged struct {
	entries []Entry
	bytes   int64 // header and payload bytes, counted in BatchInflight
	enc     int   // bytes of the entries in the BatchCommit's byte form (batchEntrySize)
	last    int64 // unix ns of its last message
}

// NewAtomicBatches returns the atomic batches of a stream, with limits
// (defaults filled in) and the server's shared counters.
func NewAtomicBatches(limits BatchLimits, global *BatchInflight) *AtomicBatches {
	return &AtomicBatches{limits: limits.WithDefaults(), global: global, open: map[string]*staged{}, tooLarge: map[string]abandonedLarge{}}
}

// Len returns the number of open batches.
func (a *AtomicBatches) Len() int { return len(a.open) }

// Stage decides e, a publish whose header carries Nats-Batch-Id id,
// received at now (unix ns), in nats-server v2.15.2's order:
//
//  1. sealed 10109, out of storage 10023, over max_msg_size 10054,
//     no allow_atomic 10174, id over 64 bytes 10179, a missing or
//     unreadable Nats-Batch-Sequence 10175 (the batch, if open, stays);
//  2. an unknown id: 10199 when the sequence (less an "eob" commit) is
//     over the size limit, or when the id's batch was abandoned for
//     passing BatchPolicy.MaxEntryBytes (its later messages and commit
//     get that 10199, the real reason), else 10176 unless the sequence
//     is 1; then
//     10210 when the stream or the server has too many batches open;
//  3. a Nats-Batch-Commit other than "1" or "eob", 10200; a
//     Nats-Required-Api-Level above the server's, 10185 ("unsupported");
//     a sequence that does not follow the last, or "eob" at sequence 1,
//     10176 ("incomplete"); a batch over the size limit, 10199 ("large");
//     a batch whose BatchCommit, committed with this message, would pass
//     the log's largest entry (BatchPolicy.MaxEntryBytes), 10199
//     ("large", its text naming that bound: "atomic publish batch is too
//     large: <n> bytes"); staging over BatchLimits.StagedBytes, 10176
//     ("incomplete"). Each abandons the batch (with an advisory where a
//     reason is named). A commit is checked against MaxEntryBytes again
//     once made (an "eob" commit adds its header to the last message):
//     nothing larger is ever returned.
//  4. Otherwise the message is staged: without a commit the answer is
//     an empty message; with "1" it is the batch's last message, with
//     "eob" the batch ends before it (and its last message gets
//     "Nats-Batch-Commit: 1"), and the result carries the BatchCommit.
func (a *AtomicBatches) Stage(p BatchPolicy, id string, e Entry, now int64) StageResult {
	var res StageResult
	fail := func(err *jserr.Error, reason AbandonReason) StageResult {
		if reason != "" {
			res.Abandoned = append(res.Abandoned, Abandoned{ID: id, Reason: reason})
		}
		res.Err = err
		return res
	}
	if err := checkAtomicMsg(p, id, &e); err != nil {
		return fail(err, "")
	}
	seq, ok := parseBatchSeq(headerString(e.Header, hdrBatchSeq))
	if !ok {
		return fail(jserr.New(jserr.AtomicPublishMissingSeq), "")
	}
	commit, hasCommit := headerValue(e.Header, hdrBatchCommit)
	eob := hasCommit && string(commit) == "eob"
	size := seq
	if eob {
		size--
	}
	b := a.open[id]
	if b != nil && now-b.last >= int64(a.limits.Timeout) {
		a.drop(id)
		res.Abandoned = append(res.Abandoned, Abandoned{ID: id, Reason: AbandonTimeout})
		b = nil
	}
	if b == nil {
		if err := a.forgotten(id, seq, now); err != nil {
			return fail(err, "")
		}
		if err := a.begin(id, seq, size); err != nil {
			return fail(err, "")
		}
		b = a.open[id]
	}
	switch {
	case hasCommit && !eob && string(commit) != "1":
		a.drop(id)
		return fail(jserr.New(jserr.AtomicPublishInvalidBatchCommit), "")
	case RequiredLevelAbove(e.Header, a.limits.APILevel):
		a.drop(id)
		return fail(jserr.New(jserr.RequiredApiLevel), AbandonUnsupported)
	}
	e.Header = removeHeader(e.Header, "Nats-Required-Api-Level")
	switch {
	case seq != uint64(len(b.entries))+1 || seq == 1 && eob:
		a.drop(id)
		return fail(jserr.New(jserr.AtomicPublishIncompleteBatch), AbandonIncomplete)
	case size > uint64(a.limits.AtomicMaxSize):
		a.drop(id)
		return fail(jserr.New(jserr.AtomicPublishTooLargeBatch, jserr.Sub("size", a.limits.AtomicMaxSize)), AbandonLarge)
	case !eob && p.MaxEntryBytes > 0 &&
		batchCommitSize(id, now, e.MaxPayload, len(b.entries)+1, b.enc+batchEntrySize(&e)) > p.MaxEntryBytes:
		a.drop(id)
		return fail(a.rememberLarge(id, tooLargeForLog(p), now), AbandonLarge)
	}
	b.last = now
	if !eob {
		n := int64(len(e.Header) + len(e.Data))
		if !a.global.stage(n, a.limits.StagedBytes) {
			a.drop(id)
			return fail(jserr.New(jserr.AtomicPublishIncompleteBatch), AbandonIncomplete)
		}
		b.bytes += n
		b.enc += batchEntrySize(&e)
		b.entries = append(b.entries, e)
	}
	if !hasCommit {
		res.Empty = true
		return res
	}
	c := a.commit(id, b, eob, now)
	c.MaxPayload = e.MaxPayload
	if p.MaxEntryBytes > 0 && BatchCommitSize(c) > p.MaxEntryBytes {
		return fail(tooLargeForLog(p), AbandonLarge)
	}
	res.Commit = c
	return res
}

// forgotten returns the 10199 of batch id when it was abandoned for its
// size and this is not a first message, which starts the id afresh.
func (a *AtomicBatches) forgotten(id string, seq uint64, now int64) *jserr.Error {
	g, ok := a.tooLarge[id]
	switch {
	case !ok:
		return nil
	case seq == 1 || now-g.last >= int64(a.limits.Timeout):
		delete(a.tooLarge, id)
		return nil
	}
	g.last = now
	a.tooLarge[id] = g
	return g.err
}

// rememberLarge records that batch id was abandoned with err, the 10199
// of its size, for its later messages (forgotten), and returns err.
func (a *AtomicBatches) rememberLarge(id string, err *jserr.Error, now int64) *jserr.Error {
	if len(a.tooLarge) < a.limits.AtomicInflight {
		a.tooLarge[id] = abandonedLarge{err: err, last: now}
	}
	return err
}

// tooLargeForLog is the 10199 of a batch whose BatchCommit would pass
// the log's largest entry: its {size} is that bound, in bytes
// (nats-server v2.15.2 puts its count limit there, which cairn's count
// check does too).
func tooLargeForLog(p BatchPolicy) *jserr.Error {
	return jserr.New(jserr.AtomicPublishTooLargeBatch, jserr.Sub("size", fmt.Sprintf("%d bytes", p.MaxEntryBytes)))
}

// checkAtomicMsg runs the checks of Stage step 1 before the sequence.
func checkAtomicMsg(p BatchPolicy, id string, e *Entry) *jserr.Error {
	if err := p.messageErr(e); err != nil {
		return err
	}
	switch {
	case !p.AllowAtomic:
		return jserr.New(jserr.AtomicPublishDisabled)
	case len(id) > maxBatchIDLen:
		return jserr.New(jserr.AtomicPublishInvalidBatchID)
	}
	return nil
}

// begin opens batch id for a message at sequence seq (size counting
// toward the limit), or returns the error for an unknown id.
func (a *AtomicBatches) begin(id string, seq, size uint64) *jserr.Error {
	switch {
	case seq != 1 && size > uint64(a.limits.AtomicMaxSize):
		return jserr.New(jserr.AtomicPublishTooLargeBatch, jserr.Sub("size", a.limits.AtomicMaxSize))
	case seq != 1:
		return jserr.New(jserr.AtomicPublishIncompleteBatch)
	case len(a.open)+1 > a.limits.AtomicInflight,
		!a.global.acquire(&a.global.atomic, a.limits.AtomicTotal):
		return jserr.New(jserr.AtomicPublishTooManyInflight)
	}
	a.open[id] = &staged{}
	return nil
}

// commit closes batch id and returns its BatchCommit, stamped with the
// commit's time.
func (a *AtomicBatches) commit(id string, b *staged, eob bool, now int64) *BatchCommit {
	a.drop(id)
	if eob {
		last := &b.entries[len(b.entries)-1]
		last.Header = setHeader(last.Header, hdrBatchCommit, "1")
	}
	return &BatchCommit{ID: id, Time: now, Entries: b.entries}
}

// drop forgets batch id and gives back what it held.
func (a *AtomicBatches) drop(id string) {
	b := a.open[id]
	if b == nil {
		return
	}
	delete(a.open, id)
	a.global.release(&a.global.atomic)
	a.global.unstage(b.bytes)
}

// Expire abandons the batches with no message since now - Timeout and
// returns them, for the timeout advisories (nats-server's cleanup timer).
func (a *AtomicBatches) Expire(now int64) []Abandoned {
	var out []Abandoned
	for id, g := range a.tooLarge {
		if now-g.last >= int64(a.limits.Timeout) {
			delete(a.tooLarge, id)
		}
	}
	for id, b := range a.open {
		if now-b.last >= int64(a.limits.Timeout) {
			a.drop(id)
			out = append(out, Abandoned{ID: id, Reason: AbandonTimeout})
		}
	}
	slices.SortFunc(out, func(x, y Abandoned) int { return strings.Compare(x.ID, y.ID) })
	return out
}

// Clear abandons every open batch without advisories (the stream stops,
// or an update turned allow_atomic off).
func (a *AtomicBatches) Clear() {
	for id := range a.open {
		a.drop(id)
	}
	clear(a.tooLarge)
}
