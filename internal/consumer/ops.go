package consumer

import (
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

// OpKind is the type tag of a consumer operation: the first byte of its
// encoding (package comment). The list is append-only: a number never
// changes meaning.
type OpKind uint8

// The kinds of consumer operation (docs/engine.md, "Consumer operations").
const (
	KindDeliver      OpKind = 1
	KindRedeliver    OpKind = 2
	KindAck          OpKind = 3
	KindNak          OpKind = 4
	KindTerm         OpKind = 5
	KindProgress     OpKind = 6
	KindExpireAcks   OpKind = 7
	KindSkipTo       OpKind = 8
	KindDrop         OpKind = 9
	KindPause        OpKind = 10
	KindUpdatePolicy OpKind = 11
	KindDeadLetter   OpKind = 12
	KindReset        OpKind = 13
	KindPullRequest  OpKind = 14
)

// Op is one change to a consumer's delivery state: a *Deliver,
// *Redeliver, *Ack, *Nak, *Term, *Progress, *ExpireAcks, *SkipTo, *Drop,
// *Pause, *UpdatePolicy, *DeadLetter, *Reset or *PullRequest.
// State.ApplyOp applies it (a PullRequest changes no delivery state);
// AppendOp and DecodeOp give it its byte form. An Op carries every time
// it needs: applying it reads no clock.
type Op interface {
	// Kind returns the operation's type tag.
	Kind() OpKind
}

// Deliver records the first delivery of stream sequence Stream at Time
// (unix ns) (State.DeliverNew).
type Deliver struct {
	Stream uint64
	Time   int64
}

// Redeliver records a redelivery of Stream at Time (State.Redeliver).
type Redeliver struct {
	Stream uint64
	Time   int64
}

// Ack is a client's acknowledgement (+ACK, an empty ack, +NXT) of the
// delivery of stream sequence Stream with consumer sequence Consumer,
// both from the ack reply subject (State.Ack).
type Ack struct {
	Stream, Consumer uint64
}

// Nak is a -NAK of Stream at Time with Delay (0: redeliver at once):
// the delivery reaches max_deliver (State.ExhaustedByNak) or is
// scheduled for redelivery (State.Nak).
type Nak struct {
	Stream uint64
	Delay  time.Duration
	Time   int64
}

// Term is a +TERM of Stream: a pending or held delivery is acknowledged
// (the ack kinds of nats-server v2.15.2's processAck; the dead-letter move of a terminated
// delivery is a DeadLetter mark instead).
type Term struct {
	Stream, Consumer uint64
}

// Progress is a +WPI of Stream at Time: a new ack deadline
// (State.Progress).
type Progress struct {
	Stream uint64
	Time   int64
}

// ExpireAcks moves the deliveries whose ack deadline passed by Time to
// redelivery, ending those at max_deliver (State.Expire).
type ExpireAcks struct {
	Time int64
}

// SkipTo notes that the stream holds nothing below Stream any more (a
// purge): the floors move up (State.SkipTo).
type SkipTo struct {
	Stream uint64
}

// Drop forgets the pending deliveries, and the messages out of
// deliveries, of the stream sequences Seqs, whose messages the stream no
// longer holds (State.DropGone). The proposer looked them up.
type Drop struct {
	Seqs []uint64
}

// Pause pauses deliveries until Until (unix ns); 0 resumes them
// (nats-server v2.15.2 CONSUMER.PAUSE; ADR-44 on the API level a pause
// needs).
type Pause struct {
	Until int64
}

// UpdatePolicy gives the state machine the policy of an updated config
// and whether the consumer has a dead-letter subject (State.SetPolicy,
// State.SetDeadLetter).
type UpdatePolicy struct {
	Policy     Policy
	DeadLetter bool
}

// DeadLetterStep says what a DeadLetter operation does to a dead-letter
// mark (docs/dead-letter.md). The values are encoded: append-only.
type DeadLetterStep uint8

// The steps of a dead-letter move.
const (
	DeadLetterMark    DeadLetterStep = 1 // mark Stream with Reason at Value (unix ns) (State.MarkDeadLetter)
	DeadLetterAfter   DeadLetterStep = 2 // record After = Value (State.SetMoveAfter)
	DeadLetterRetryAt DeadLetterStep = 3 // arm the mark's retry at Value (unix ns) (State.RetryMoveAt)
	DeadLetterMoved   DeadLetterStep = 4 // the copy is stored: the mark ends as acknowledged (State.DeadLettered)
	DeadLetterUnmark  DeadLetterStep = 5 // no stream captures the subject: the mark ends without a move (State.Unmark)
)

// DeadLetter is one step of the dead-letter move of Stream.
type DeadLetter struct {
	Step   DeadLetterStep
	Stream uint64
	Reason store.DeadLetterReason // DeadLetterMark
	Value  int64                  // DeadLetterMark, DeadLetterRetryAt: a time; DeadLetterAfter: a stream sequence
}

// Reset restarts the delivery state at stream sequence Stream (a
// consumer reset, ADR-60; State.Reset): nothing pending, redelivered or
// out of deliveries any more, the next delivery at Stream or after. The
// proposer checked Stream against the deliver policy (nats-server
// v2.15.2 processResetReq).
type Reset struct {
	Stream uint64
}

// PullRequest records that a pull request whose replies go to Reply
// waits on the consumer's leader until Expires (unix ns), as the leader
// saw it at Time (unix ns). It changes no delivery state (State.ApplyOp
// ignores it): the replicas of a replicated consumer keep the reply
// subjects it names, so that a leader elected after its predecessor went
// silent, or after every replica restarted, tells each waiting client
// that the leadership changed (internal/jetstream/consumerrun pulls.go;
// nats-server v2.15.2 proposes each waiting request to the consumer's
// group likewise: consumer.go addClusterPendingRequest).
type PullRequest struct {
	Reply         string
	Expires, Time int64
}

// Kind returns KindDeliver.
func (*Deliver) Kind() OpKind { return KindDeliver }

// Kind returns KindRedeliver.
func (*Redeliver) Kind() OpKind { return KindRedeliver }

// Kind returns KindAck.
func (*Ack) Kind() OpKind { return KindAck }

// Kind returns KindNak.
func (*Nak) Kind() OpKind { return KindNak }

// Kind returns KindTerm.
func (*Term) Kind() OpKind { return KindTerm }

// Kind returns KindProgress.
func (*Progress) Kind() OpKind { return KindProgress }

// Kind returns KindExpireAcks.
func (*ExpireAcks) Kind() OpKind { return KindExpireAcks }

// Kind returns KindSkipTo.
func (*SkipTo) Kind() OpKind { return KindSkipTo }

// Kind returns KindDrop.
func (*Drop) Kind() OpKind { return KindDrop }

// Kind returns KindPause.
func (*Pause) Kind() OpKind { return KindPause }

// Kind returns KindUpdatePolicy.
func (*UpdatePolicy) Kind() OpKind { return KindUpdatePolicy }

// Kind returns KindDeadLetter.
func (*DeadLetter) Kind() OpKind { return KindDeadLetter }

// Kind returns KindPullRequest.
func (*PullRequest) Kind() OpKind { return KindPullRequest }

// Kind returns KindReset.
func (*Reset) Kind() OpKind { return KindReset }
