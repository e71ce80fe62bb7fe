package stream

import "github.com/cairnmq/cairn/internal/store"

// OpKind is the type tag of a stream operation: the first byte of its
// encoding (opcodec.go). The values reach logs, on disk and on the wire
// once streams are replicated: the list is append-only, and a number
// never changes meaning.
type OpKind uint8

// The kinds of stream operation (docs/engine.md, "Stream operations").
const (
	KindPublish      OpKind = 1
	KindCopy         OpKind = 2
	KindBatchCommit  OpKind = 3
	KindPurge        OpKind = 4
	KindDeleteMsg    OpKind = 5
	KindUpdateConfig OpKind = 6
	KindExpire       OpKind = 7
	KindRemove       OpKind = 8
	KindFire         OpKind = 9
)

// Op is one change to a stream: a *Publish, *Copy, *BatchCommit, *Purge,
// *DeleteMsg, *UpdateConfig, *Expire, *Remove or *FireSchedules. Stream.ApplyOp applies
// it; AppendOp and DecodeOp give it its byte form. An Op carries every
// time it needs: applying it reads no clock (docs/engine.md).
type Op interface {
	// Kind returns the operation's type tag.
	Kind() OpKind
}

// Publish stores publishes, each decided alone and in order as
// nats-server v2.15.2 decides a publish (processJetStreamMsg): one
// Result per entry. The entries' times were chosen when they arrived.
type Publish struct {
	Entries []Entry
}

// Copy stores messages copied from an origin stream (a mirror's or a
// source's, docs/engine.md "Sourcing") in order, stopping at the first
// one refused. With Mirror set each entry is stored at its origin
// sequence, OriginSeqs[i] (Stream.ApplyMirror); else each is a sourced
// publish (Entry.Sourced, built by SourcedEntry).
type Copy struct {
	Mirror     bool
	Entries    []Entry
	OriginSeqs []uint64 // one per entry with Mirror; nil otherwise
}

// Purge removes what Request selects, unless the stream is sealed
// (10109), denies purges (10110, "stream purge not permitted") or the request names both a sequence
// and keep (10003) (protocol facts in store.PurgeRequest).
type Purge struct {
	Request store.PurgeRequest
}

// DeleteMsg removes the message at Seq (nats-server v2.15.2
// jsMsgDeleteRequest): refused when the stream is sealed (10109),
// denies deletes (10057), or, for a file stream, Seq is 0 or outside
// the stream (10057 with the file store's text); 10043 when no message
// is stored there.
type DeleteMsg struct {
	Seq uint64
}

// UpdateConfig makes Config the stream's config (Stream.SetConfig); the
// update was allowed (CheckUpdate and the checks needing other streams
// and the consumers) before it was proposed.
type UpdateConfig struct {
	Config Config
}

// Expire removes what has expired at Time (unix nanoseconds): max_age
// and per-message TTLs, storing the subject delete markers that leaves
// (stamped Time), then forgets the Nats-Msg-Ids stored at least
// duplicate_window before Time (Stream.ExpireUpTo, ExpireDedupe). The
// proposer chooses Time from its clock; every replica expires alike.
type Expire struct {
	Time int64
}

// RemoveReason says why messages are removed by a Remove. It is carried
// for the log and for operators; applying a Remove does not depend on
// it. The values are encoded: append-only.
type RemoveReason uint8

// The reasons of a Remove.
const (
	RemoveAcked      RemoveReason = 1 // every consumer acknowledged them (interest, work queue retention)
	RemoveNoInterest RemoveReason = 2 // stored in an interest stream that no consumer would deliver them from
	RemoveCopied     RemoveReason = 3 // copied by the sourcers that read the stream, which nobody else needs
)

// Remove removes the messages at Seqs that are still stored; the
// proposer decided that they may go (docs/engine.md, "What decides
// what").
type Remove struct {
	Reason RemoveReason
	Seqs   []uint64
}

// FireSchedules stores the messages of the message schedules due at Time
// (unix nanoseconds; ADR-51, schedule.go), each stamped Time, in the
// order of the schedules' sequences, and moves each repeating schedule
// to its next time after Time. The proposer proposes it when its clock
// reaches the first schedule's time (Stream.NextSchedule); every replica
// fires alike.
type FireSchedules struct {
	Time int64
}

// Kind returns KindPublish.
func (*Publish) Kind() OpKind { return KindPublish }

// Kind returns KindCopy.
func (*Copy) Kind() OpKind { return KindCopy }

// Kind returns KindBatchCommit.
func (*BatchCommit) Kind() OpKind { return KindBatchCommit }

// Kind returns KindPurge.
func (*Purge) Kind() OpKind { return KindPurge }

// Kind returns KindDeleteMsg.
func (*DeleteMsg) Kind() OpKind { return KindDeleteMsg }

// Kind returns KindUpdateConfig.
func (*UpdateConfig) Kind() OpKind { return KindUpdateConfig }

// Kind returns KindExpire.
func (*Expire) Kind() OpKind { return KindExpire }

// Kind returns KindRemove.
func (*Remove) Kind() OpKind { return KindRemove }

// Kind returns KindFire.
func (*FireSchedules) Kind() OpKind { return KindFire }
