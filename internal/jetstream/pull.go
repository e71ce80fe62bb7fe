package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// JSApiConsumerGetNextRequest is a request on
// $JS.API.CONSUMER.MSG.NEXT.<S>.<C> (protocol.md section 5.6). Expires and
// Heartbeat are nanoseconds in JSON. The type has nats-server's name
// because a decoding error names it in the 400 status a client sees.
type JSApiConsumerGetNextRequest struct {
	Batch     int           `json:"batch,omitempty"`
	Expires   time.Duration `json:"expires,omitempty"`
	MaxBytes  int           `json:"max_bytes,omitempty"`
	NoWait    bool          `json:"no_wait,omitempty"`
	Heartbeat time.Duration `json:"idle_heartbeat,omitempty"`
	Group     string        `json:"group,omitempty"`
}

// parsePull reads a pull request body as nats-server v2.15.2
// nextReqFromMsg does: empty (batch 1), a number as text (the batch), or
// JSON; anything else is a request for one message. It returns the text
// of a 400 Bad Request status for bad JSON or an idle_heartbeat above
// half of expires (no expires counts as 0).
func parsePull(body []byte) (pullRequest, string) {
	req := pullRequest{Batch: 1}
	body = bytes.TrimSpace(body)
	switch {
	case len(body) == 0:
		return req, ""
	case body[0] == '{':
		if err := json.Unmarshal(body, &req); err != nil {
			return req, err.Error()
		}
	default:
		if n, err := strconv.Atoi(string(body)); err == nil {
			req.Batch = n
		}
	}
	if req.Batch <= 0 {
		req.Batch = 1
	}
	if req.Heartbeat > 0 && req.Heartbeat*2 > req.Expires {
		return req, "heartbeat value too large"
	}
	return req, ""
}

// pullRequest is the engine's short name for the request type.
type pullRequest = JSApiConsumerGetNextRequest

// waiting is a queued pull request.
type waiting struct {
	reply     string
	n         int   // messages still owed
	bytes     int   // byte budget left; 0 = no budget
	maxBytes  bool  // the request set max_bytes
	noWait    bool  // end with 404 when nothing (more) is available
	expires   int64 // unix ns; 0 = never
	heartbeat time.Duration
	lastHB    int64 // last delivery or heartbeat (unix ns)
	delivered int   // messages delivered to it
}

// Status frames of pull and push delivery (protocol.md sections 5.6 and
// 5.7), written exactly as nats-server v2.15.2 writes them.
func statusHeader(code int, text string, kv ...string) []byte {
	b := fmt.Appendf(nil, "NATS/1.0 %d %s\r\n", code, text)
	for i := 0; i+1 < len(kv); i += 2 {
		b = fmt.Appendf(b, "%s: %s\r\n", kv[i], kv[i+1])
	}
	return append(b, '\r', '\n')
}

func pendingHeader(code int, text string, msgs, bytes int) []byte {
	return statusHeader(code, text, "Nats-Pending-Messages", strconv.Itoa(msgs), "Nats-Pending-Bytes", strconv.Itoa(bytes))
}

func heartbeatHeader(lastConsumer, lastStream uint64, stalled string) []byte {
	kv := []string{"Nats-Last-Consumer", strconv.FormatUint(lastConsumer, 10), "Nats-Last-Stream", strconv.FormatUint(lastStream, 10)}
	if stalled != "" {
		kv = append(kv, "Nats-Consumer-Stalled", stalled)
	}
	return statusHeader(100, "Idle Heartbeat", kv...)
}

var (
	hdrNoMessages     = statusHeader(404, "No Messages")
	hdrPushBased      = statusHeader(409, "Consumer is push based")
	hdrDeleted        = statusHeader(409, "Consumer Deleted")
	hdrMaxWaiting     = statusHeader(409, "Exceeded MaxWaiting")
	hdrFlowControlReq = statusHeader(100, "FlowControl Request")
)
