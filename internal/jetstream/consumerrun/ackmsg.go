package consumerrun

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// ackKind is what an acknowledgement asks for (the ack kinds of nats-server v2.15.2's processAck).
type ackKind int

const (
	ackAck  ackKind = iota // empty, +ACK or +OK
	ackNak                 // -NAK [delay]
	ackWPI                 // +WPI
	ackNext                // +NXT [n | pull request JSON]
	ackTerm                // +TERM [reason]
)

// ackMsg is a parsed acknowledgement.
type ackMsg struct {
	kind   ackKind
	delay  time.Duration // -NAK delay
	reason string        // +TERM reason
	next   []byte        // +NXT request body
	dc     uint64        // delivery count from the ack subject
	sseq   uint64        // stream sequence
	cseq   uint64        // consumer sequence
	reply  string        // the ack publish's reply (double ack, +NXT inbox)
}

// ParseAckSubject reads the v1 ack reply subject
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
// (the v1 ack reply subject, ADR-15) and reports whether it is well formed.
func ParseAckSubject(subj string) (dc, sseq, cseq uint64, ok bool) {
	t := strings.Split(subj, ".")
	if len(t) != 9 || t[0] != "$JS" || t[1] != "ACK" {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	dc, err1 = strconv.ParseUint(t[4], 10, 64)
	sseq, err2 = strconv.ParseUint(t[5], 10, 64)
	cseq, err3 = strconv.ParseUint(t[6], 10, 64)
	return dc, sseq, cseq, err1 == nil && err2 == nil && err3 == nil
}

// parseAckBody reads the ack payload. An unknown payload is treated as
// an ack, as nats-server does.
func parseAckBody(body []byte) ackMsg {
	body = bytes.TrimSpace(body)
	switch {
	case bytes.HasPrefix(body, []byte("-NAK")):
		return ackMsg{kind: ackNak, delay: nakDelay(bytes.TrimSpace(body[4:]))}
	case bytes.HasPrefix(body, []byte("+WPI")):
		return ackMsg{kind: ackWPI}
	case bytes.HasPrefix(body, []byte("+NXT")):
		return ackMsg{kind: ackNext, next: append([]byte(nil), bytes.TrimSpace(body[4:])...)}
	case bytes.HasPrefix(body, []byte("+TERM")):
		return ackMsg{kind: ackTerm, reason: string(bytes.TrimSpace(body[5:]))}
	}
	return ackMsg{kind: ackAck}
}

// nakDelay reads a -NAK delay: JSON {"delay": ns} or a Go duration; an
// unparsable delay is a plain NAK.
func nakDelay(b []byte) time.Duration {
	if len(b) == 0 {
		return 0
	}
	if b[0] == '{' {
		var d struct {
			Delay time.Duration `json:"delay"`
		}
		if json.Unmarshal(b, &d) == nil {
			return max(d.Delay, 0)
		}
		return 0
	}
	if d, err := time.ParseDuration(string(b)); err == nil {
		return max(d, 0)
	}
	return 0
}
