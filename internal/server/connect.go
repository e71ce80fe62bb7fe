package server

import (
	"encoding/json"

	"github.com/cairnmq/cairn/internal/protocol"
)

// connectOpts are the CONNECT fields cairn acts on (protocol.md 1.5). A
// connection starts with verbose, pedantic and echo on, as nats-server's
// does, until a CONNECT says otherwise.
type connectOpts struct {
	Verbose      bool   `json:"verbose"`
	Pedantic     bool   `json:"pedantic"`
	Echo         bool   `json:"echo"`
	Headers      bool   `json:"headers"`
	NoResponders bool   `json:"no_responders"`
	Protocol     int    `json:"protocol"`
	Name         string `json:"name"`
	Lang         string `json:"lang"`
	Version      string `json:"version"`
}

// Protocol errors raised while processing CONNECT (protocol.md 1.11).
var (
	errInvalidProtocol = &protocol.Error{Text: "invalid client protocol", Close: true}
	errNoRespHeaders   = &protocol.Error{Text: "no responders requires headers support", Close: true}
	errBadConnect      = &protocol.Error{Close: true}
)

// parseConnect decodes a CONNECT argument over the current options. It
// returns the new options or a protocol error.
func parseConnect(arg []byte, cur connectOpts) (connectOpts, error) {
	next := cur
	if err := json.Unmarshal(arg, &next); err != nil {
		return cur, errBadConnect
	}
	if next.Protocol < 0 || next.Protocol > 1 {
		return cur, errInvalidProtocol
	}
	if next.NoResponders && !next.Headers {
		return cur, errNoRespHeaders
	}
	return next, nil
}
