package snapshot

import "encoding/json"

// ConsumerEntry is the payload of a "consumers/<name>" entry: the
// consumer's config (kept raw: the caller decodes and checks it) and its
// state.
type ConsumerEntry struct {
	Config json.RawMessage `json:"config"`
	State  *ConsumerState  `json:"state"`
}

// ConsumerState is nats-server v2.15.2's ConsumerState as JSON (its
// store.go): the last delivered pair, the ack floor, the deliveries
// awaiting an ack by stream sequence, and the redelivery counts by stream
// sequence (deliveries beyond the first).
type ConsumerState struct {
	Delivered   SequencePair        `json:"delivered"`
	AckFloor    SequencePair        `json:"ack_floor"`
	Pending     map[uint64]*Pending `json:"pending,omitempty"`
	Redelivered map[uint64]uint64   `json:"redelivered,omitempty"`
}

// SequencePair is a consumer sequence and the stream sequence it
// delivered.
type SequencePair struct {
	Consumer uint64 `json:"consumer_seq"`
	Stream   uint64 `json:"stream_seq"`
}

// Pending is one delivery awaiting an ack: its consumer sequence and when
// it was delivered (unix nanoseconds). nats-server gives the fields no
// JSON names, so they are "Sequence" and "Timestamp".
type Pending struct {
	Sequence  uint64
	Timestamp int64
}
