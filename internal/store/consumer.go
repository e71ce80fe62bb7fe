package store

import (
	"cmp"
	"slices"
)

// SequencePair is a consumer sequence with the stream sequence it
// delivered (docs/protocol.md 5.7, SequenceInfo).
type SequencePair struct {
	Consumer uint64
	Stream   uint64
}

// Pending is one delivered message awaiting acknowledgement: the consumer
// sequence of its last delivery and when that was (unix nanoseconds).
type Pending struct {
	Sequence  uint64
	Timestamp int64
}

// StreamPending is one entry of ConsumerState.Pending: a stream sequence
// awaiting acknowledgement and its Pending.
type StreamPending struct {
	Stream uint64
	Pending
}

// ConsumerState is what a durable consumer must keep across restarts: the
// last delivered pair, the ack floor (everything at or below it is
// acknowledged), the messages awaiting acknowledgement in ascending
// stream sequence, the delivery counts of redelivered messages (stream
// sequence to number of deliveries beyond the first; an entry without a
// Pending entry is a message that ran out of deliveries and is still
// held), and the messages being moved to the consumer's dead-letter
// subject (each key is also a stream sequence of Pending, or a held
// message's key of Redelivered; docs/dead-letter.md).
//
// Pending is a sorted slice rather than a map (nats-server's
// ConsumerState has map[uint64]*Pending) because a consumer hands a
// snapshot of its whole pending set to the store at every save: for a
// million pending acknowledgements a slice is 24 MB, a map about twice
// that, and the file format wants them sorted anyway.
type ConsumerState struct {
	Delivered   SequencePair
	AckFloor    SequencePair
	Pending     []StreamPending // ascending Stream, no duplicates
	Redelivered map[uint64]uint64
	DeadLetter  map[uint64]DeadLetter
}

// DeadLetterReason is why a message is moved to its consumer's
// dead-letter subject (docs/dead-letter.md). The values are on disk
// (filestore's consumer state file); the names are the values of the
// copy's Cairn-Dlq-Reason header.
type DeadLetterReason uint8

// The dead-letter reasons.
const (
	// DeadLetterMaxDeliver: the message was delivered max_deliver times
	// and its last delivery was NAKed or not acknowledged in time.
	DeadLetterMaxDeliver DeadLetterReason = 1
	// DeadLetterTerm: a client terminated the delivery with +TERM.
	DeadLetterTerm DeadLetterReason = 2
)

// String returns "max_deliver" or "term" ("" for an unknown reason).
func (r DeadLetterReason) String() string {
	switch r {
	case DeadLetterMaxDeliver:
		return "max_deliver"
	case DeadLetterTerm:
		return "term"
	}
	return ""
}

// DeadLetter marks a pending delivery whose message is being moved to
// the dead-letter subject, or a message out of deliveries that a +TERM
// moves: it is not redelivered, and it leaves pending (counted as
// acknowledged), or is released, only once the stream capturing that
// subject stored the copy durably. After is the last sequence of that stream
// when the move was prepared, before any copy was published: a copy
// stored by an earlier attempt is above it.
type DeadLetter struct {
	Reason DeadLetterReason
	After  uint64
}

// PendingAt returns the Pending of stream sequence seq, and false when
// seq is not pending; a binary search of st.Pending.
func (st *ConsumerState) PendingAt(seq uint64) (Pending, bool) {
	i, ok := slices.BinarySearchFunc(st.Pending, seq, func(p StreamPending, s uint64) int { return cmp.Compare(p.Stream, s) })
	if !ok {
		return Pending{}, false
	}
	return st.Pending[i].Pending, true
}

// ConsumerStore keeps one consumer's state beside its stream.
type ConsumerStore interface {
	// Update replaces the stored state. It returns only once the new state
	// is durable (the file store writes a new file, fsyncs it, renames it
	// over the old one and fsyncs the directory), or an error.
	Update(st *ConsumerState) error
	// State returns the stored state (an empty state for a new consumer),
	// or an error wrapping ErrCorrupt when the stored state is damaged; a
	// damaged state is never silently reset.
	State() (*ConsumerState, error)
	// Delete removes the consumer's state for good.
	Delete() error
	// Close releases the consumer store.
	Close() error
}

// ConsumerOpKind is the kind of a journaled consumer operation.
type ConsumerOpKind uint8

// The journaled operations: the acknowledgements a client asked to have
// confirmed (docs/protocol.md section 5.3, "double ack"). The values are on
// disk (filestore's ack journal).
const (
	// OpAck is +ACK or +NXT: Stream was acknowledged with consumer
	// sequence Consumer.
	OpAck ConsumerOpKind = 1
	// OpNak is -NAK: Stream is redelivered at Time (unix ns) at the
	// earliest, or ends its deliveries when it reached max_deliver.
	OpNak ConsumerOpKind = 2
	// OpTerm is +TERM: Stream, if still pending, is acknowledged.
	OpTerm ConsumerOpKind = 3
)

// ConsumerOp is one journaled change to a consumer's state. Replaying an
// op onto a state that already holds it changes nothing that matters
// (an ack of something not pending is ignored; a NAK only moves a
// redelivery earlier), so a journal may be replayed onto any snapshot
// taken before or after the op.
type ConsumerOp struct {
	Kind     ConsumerOpKind
	Stream   uint64
	Consumer uint64
	Time     int64
}

// ConsumerJournal is implemented by a ConsumerStore whose confirmed
// acknowledgements are made durable by appending them to a journal shared
// with the other consumers of the stream, one fsync for every op waiting
// (group commit), instead of rewriting the state file
// (docs/durability.md item 2: a confirmed ack is durable when it is
// confirmed).
type ConsumerJournal interface {
	// Journal appends ops and calls done once they are durable (err nil)
	// or once they cannot be (the journal failed or closed). done runs on
	// the journal's goroutine and must not block.
	Journal(ops []ConsumerOp, done func(error))
	// JournalGen returns the journal's generation now. Read it before
	// taking a state snapshot, and pass it to Covered once Update stored
	// that snapshot.
	JournalGen() uint64
	// Covered records that the stored state holds every op this consumer
	// journaled before generation gen, so that those journal files can be
	// removed.
	Covered(gen uint64)
	// Journaled returns the ops of this consumer found in the journal when
	// the store opened, oldest first, to replay onto State; nil when none.
	Journaled() []ConsumerOp
}
