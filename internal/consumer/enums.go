package consumer

import "fmt"

// DeliverPolicy says where a new consumer starts (nats-server v2.15.2 selectStartingSeqNo).
type DeliverPolicy int

// Deliver policies, in nats-server's order; the zero value is "all".
const (
	DeliverAll             DeliverPolicy = iota // "all" (also read from "undefined")
	DeliverLast                                 // "last"
	DeliverNew                                  // "new"
	DeliverByStartSequence                      // "by_start_sequence"
	DeliverByStartTime                          // "by_start_time"
	DeliverLastPerSubject                       // "last_per_subject"
)

// AckPolicy says which deliveries need an acknowledgement (nats-server v2.15.2 ConsumerConfig).
type AckPolicy int

// Ack policies; the zero value is "none", as in nats-server.
const (
	AckNone        AckPolicy = iota // "none"
	AckAll                          // "all"
	AckExplicit                     // "explicit"
	AckFlowControl                  // "flow_control" (nats-server 2.14+, internal)
)

// ReplayPolicy says how fast stored messages are delivered.
type ReplayPolicy int

// Replay policies; the zero value is "instant".
const (
	ReplayInstant  ReplayPolicy = iota // "instant"
	ReplayOriginal                     // "original"
)

// PriorityPolicy selects the priority group behaviour (ADR-42); cairn
// accepts only "none" (others are refused at create).
type PriorityPolicy int

// Priority policies; the zero value is "none" and is omitted from JSON.
const (
	PriorityNone         PriorityPolicy = iota // "none"
	PriorityOverflow                           // "overflow"
	PriorityPinnedClient                       // "pinned_client"
	PriorityPrioritized                        // "prioritized"
)

var (
	deliverNames  = []string{"all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"}
	ackNames      = []string{"none", "all", "explicit", "flow_control"}
	replayNames   = []string{"instant", "original"}
	priorityNames = []string{"none", "overflow", "pinned_client", "prioritized"}
)

func enumJSON(v int, names []string) ([]byte, error) {
	if v < 0 || v >= len(names) {
		return nil, fmt.Errorf("can not marshal %v", v)
	}
	return []byte(`"` + names[v] + `"`), nil
}

func enumFromJSON(data []byte, names []string) (int, error) {
	for i, n := range names {
		if string(data) == `"`+n+`"` {
			return i, nil
		}
	}
	return 0, fmt.Errorf("can not unmarshal %q", data)
}

func enumName(v int, names []string) string {
	if v < 0 || v >= len(names) {
		return fmt.Sprintf("unknown(%d)", v)
	}
	return names[v]
}

// String returns the JSON name of p.
func (p DeliverPolicy) String() string { return enumName(int(p), deliverNames) }

// MarshalJSON encodes p by name; nats-server writes "undefined" for an
// unknown value.
func (p DeliverPolicy) MarshalJSON() ([]byte, error) {
	if b, err := enumJSON(int(p), deliverNames); err == nil {
		return b, nil
	}
	return []byte(`"undefined"`), nil
}

// UnmarshalJSON accepts the names above and "undefined" (read as "all").
func (p *DeliverPolicy) UnmarshalJSON(data []byte) error {
	if string(data) == `"undefined"` {
		*p = DeliverAll
		return nil
	}
	v, err := enumFromJSON(data, deliverNames)
	if err == nil {
		*p = DeliverPolicy(v)
	}
	return err
}

// String returns the JSON name of a.
func (a AckPolicy) String() string { return enumName(int(a), ackNames) }

// MarshalJSON encodes a as "none", "all", "explicit" or "flow_control".
func (a AckPolicy) MarshalJSON() ([]byte, error) { return enumJSON(int(a), ackNames) }

// UnmarshalJSON accepts exactly the names MarshalJSON writes.
func (a *AckPolicy) UnmarshalJSON(data []byte) error {
	v, err := enumFromJSON(data, ackNames)
	if err == nil {
		*a = AckPolicy(v)
	}
	return err
}

// String returns the JSON name of r.
func (r ReplayPolicy) String() string { return enumName(int(r), replayNames) }

// MarshalJSON encodes r as "instant" or "original".
func (r ReplayPolicy) MarshalJSON() ([]byte, error) { return enumJSON(int(r), replayNames) }

// UnmarshalJSON accepts exactly "instant" or "original".
func (r *ReplayPolicy) UnmarshalJSON(data []byte) error {
	v, err := enumFromJSON(data, replayNames)
	if err == nil {
		*r = ReplayPolicy(v)
	}
	return err
}

// String returns the JSON name of p.
func (p PriorityPolicy) String() string { return enumName(int(p), priorityNames) }

// MarshalJSON encodes p by name.
func (p PriorityPolicy) MarshalJSON() ([]byte, error) {
	if b, err := enumJSON(int(p), priorityNames); err == nil {
		return b, nil
	}
	return nil, fmt.Errorf("unknown priority policy: %v", int(p))
}

// UnmarshalJSON accepts exactly the names MarshalJSON writes, with
// nats-server's text otherwise.
func (p *PriorityPolicy) UnmarshalJSON(data []byte) error {
	v, err := enumFromJSON(data, priorityNames)
	if err != nil {
		return fmt.Errorf("unknown priority policy: %v", string(data))
	}
	*p = PriorityPolicy(v)
	return nil
}
