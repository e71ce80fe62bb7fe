package store

// SequencePair is a consumer sequence with the stream sequence it
// delivered (protocol.md section 3.5, SequenceInfo).
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

// ConsumerState is what a durable consumer must keep across restarts: the
// last delivered pair, the ack floor (everything at or below it is
// acknowledged), the messages awaiting acknowledgement keyed by stream
// sequence, and the delivery counts of redelivered messages (stream
// sequence to number of deliveries beyond the first).
type ConsumerState struct {
	Delivered   SequencePair
	AckFloor    SequencePair
	Pending     map[uint64]Pending
	Redelivered map[uint64]uint64
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
