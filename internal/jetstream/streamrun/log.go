package streamrun

import (
	"errors"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/stream"
)

// Log orders the operations of one stream (O is stream.Op) or one
// consumer (consumer.Op) (docs/engine.md). The runtime proposes
// operations; the log hands each one it commits to its Applier, in log
// order. On one server the log is local (localLog): it commits an
// operation the moment it is proposed. A replicated stream or consumer
// puts a Raft log behind the same interface.
type Log[O any] interface {
	// Propose appends op to the log under the proposer's key (a number
	// the proposer chose, increasing with each proposal; 0 when nobody
	// waits for the outcome). Once op is committed the log calls its
	// Applier with op and, on the node that proposed it, key. It returns
	// an error when op will never be applied (a replicated log that lost
	// its leadership); then its key is never handed back. Propose must not
	// keep op after it returns, since the proposer reuses it: a log that
	// commits later encodes it (stream.AppendOp, consumer.AppendOp) first.
	Propose(op O, key uint64) error
}

// Applier applies the committed operations of one log, in log order, on
// one goroutine.
type Applier[O any] interface {
	// Apply applies op, committed at index (1, 2, ...); key is the key
	// it was proposed under on this node, 0 when another node proposed
	// it or nobody waits. Indexes increase but need not be consecutive: a
	// replicated log passes its Raft indexes, which skip the entries raft
	// makes itself (docs/engine.md, "Logs that commit later").
	Apply(index uint64, op O, key uint64)
}

// Forgetter is implemented by an Applier whose proposer keeps waiters by
// key, to learn of an asynchronous failure: a log that commits later
// (a replicated one) calls Forget once for a key whose Propose returned
// nil but whose operation will never be handed back with that key on
// this node (raftnode.ErrNoReply: another entry took its index, or the
// leader lost its leadership and learnt nothing of it for ten election
// timeouts; or the node stopped; an operation the next leader committed
// is handed back with its key here as on the leader). The operation may
// still be applied, without the key, under another leader, so the waiter
// must tell its client nothing (no PubAck, no error): the client's
// timeout and retry, deduplicated by Nats-Msg-Id, settle it
// (docs/cluster.md decision 7). An err that wraps ErrUnproposed says
// the operation never entered the log (raft dropped it during a
// leadership transfer, or the replica lost its leadership before
// stepping it): nothing of it can be applied anywhere, so a publish is
// answered 503 as one Propose refused (Stream.refuseUnproposed). Forget
// may be called from any goroutine, concurrently with Apply, and may
// come after a later key's Apply. The local log never calls it.
type Forgetter interface {
	Forget(key uint64, err error)
}

// ErrUnproposed is wrapped by the error a log that commits later gives
// Forgetter.Forget for an operation that never entered the log, as
// opposed to one that entered it and lost its leader (which may still
// commit elsewhere). Source: raftnode's proposal errors
// (internal/raftnode/types.go): ErrNoReply alone means "entered".
var ErrUnproposed = errors.New("streamrun: operation never entered the log")

// Leader is implemented by a log whose node may or may not lead it (a
// replicated one): Leader reports whether this node's proposals can
// enter the log now. A stream whose log is not the leader's makes no
// decision of its own: no expiry pass, no retention removal; it applies
// what the leader's node proposed (docs/engine.md, "Logs that commit
// later"). A log without it always leads (the local log).
type Leader interface {
	Leader() bool
}

// EntryLimiter is implemented by a log whose entries are bounded in
// size (a replicated one: internal/cluster/streamlog, whose raft
// entries must reach the followers in one transport frame;
// docs/cluster.md, "Entries larger than a frame"). MaxEntryBytes returns
// the largest operation, in byte form (stream.AppendOp), it carries.
// The proposer keeps every operation within it before proposing: a
// publish group is flushed before a message that would take it over; a
// message that would not fit alone is answered 10054 (a publish, a
// batch message, the first message of a sourcer's copy); an atomic
// batch that would not fit 10199 (stream.BatchPolicy.MaxEntryBytes); a
// copy is cut before the message that would take it over, the sourcer
// goes on from there. A log without it (the local log) has no bound.
type EntryLimiter interface {
	MaxEntryBytes() int
}

// laterApplier is the Applier a stream gives a log that commits later
// (Env.NewReplicatedLog): it queues each committed operation, and each
// forgotten key, for the stream's apply goroutine, in the order the log
// hands them over, so that the state machine has one owner. They go
// into the ingest queue's committed lane (queue.pushCommitted), which
// the apply goroutine takes before the publishes and also between two
// proposals (Stream.applyCommitted): behind the publishes, the PubAcks
// of a 100 MB object put waited until the apply goroutine had proposed
// the whole object, its followers long done storing it (trial 140). It
// never blocks: committed operations are never refused; once the stream
// stopped they are dropped (the log keeps them: a restart applies them
// again after the stream's checkpoint).
type laterApplier struct{ r *Stream }

// Apply queues op, committed at index under key, for the apply goroutine.
func (a laterApplier) Apply(index uint64, op stream.Op, key uint64) {
	a.r.in.pushCommitted(item{req: &request{kind: reqApply, op: op, index: index, key: key}})
}

// Forget queues the failure of key's proposal for the apply goroutine,
// which drops its waiter and, when err wraps ErrUnproposed, answers its
// publishes 503 (Forgetter).
func (a laterApplier) Forget(key uint64, err error) {
	a.r.in.pushCommitted(item{req: &request{kind: reqForget, key: key, unproposed: errors.Is(err, ErrUnproposed)}})
}

// NewLogFunc makes the log of the stream named name, which hands what it
// commits to a (jetstream.Config.NewLog). It is called once per stream start.
type NewLogFunc func(name string, a Applier[stream.Op]) Log[stream.Op]

// NewConsumerLogFunc makes the log of consumer name of stream
// streamName, which hands what it commits to a (jetstream.Config.NewConsumerLog).
// It is called once per consumer start.
type NewConsumerLogFunc func(streamName, name string, a Applier[consumer.Op]) Log[consumer.Op]

// localLog is a log on one server: Propose commits op at the next index
// and applies it before returning, on the proposer's goroutine (a
// stream's apply goroutine, a consumer's loop), so that a single server
// runs the proposer and apply steps a replica will, in the same order.
// Durability is the store's: a PubAck waits for store.WaitDurable, as a
// replica's will wait for the log's commit.
type localLog[O any] struct {
	a     Applier[O]
	index uint64
}

// NewLocalLog returns the log of a stream on one server (the default of
// jetstream.Config.NewLog).
func NewLocalLog(_ string, a Applier[stream.Op]) Log[stream.Op] {
	return &localLog[stream.Op]{a: a}
}

// NewLocalConsumerLog returns the log of a consumer on one server (the
// default of jetstream.Config.NewConsumerLog).
func NewLocalConsumerLog(_, _ string, a Applier[consumer.Op]) Log[consumer.Op] {
	return &localLog[consumer.Op]{a: a}
}

// Propose applies op at once.
func (l *localLog[O]) Propose(op O, key uint64) error {
	l.index++
	l.a.Apply(l.index, op, key)
	return nil
}
