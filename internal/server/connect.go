package server

import (
	"encoding/json"

	"github.com/cairnmq/cairn/internal/protocol"
)

// connectOpts are the CONNECT fields cairn acts on (docs/protocol.md 1.5). A
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

	// Credentials (auth.go): never logged.
	User  string `json:"user"`
	Pass  string `json:"pass"`
	Token string `json:"auth_token"`
	Nkey  string `json:"nkey"`
	Sig   string `json:"sig"`
	JWT   string `json:"jwt"`
	// Account and NewAccount are refused: a client does not choose its
	// account (CVE-2022-24450).
	Account    string `json:"account"`
	NewAccount bool   `json:"new_account"`
}

// Protocol errors raised while processing CONNECT (docs/protocol.md 1.11).
var (
	errInvalidProtocol = &protocol.Error{Text: "invalid client protocol", Close: true}
	errNoRespHeaders   = &protocol.Error{Text: "no responders requires headers support", Close: true}
	errBadConnect      = &protocol.Error{Close: true}
)

// parseConnect decodes a CONNECT argument over the current options, as
// nats-server does (a field a second CONNECT leaves out keeps its value).
// It returns the new options or errBadConnect.
func parseConnect(arg []byte, cur connectOpts) (connectOpts, error) {
	next := cur
	if err := json.Unmarshal(arg, &next); err != nil {
		return cur, errBadConnect
	}
	return next, nil
}

// checkConnect applies the protocol checks nats-server makes once the
// client authenticated (client.go processConnect).
func checkConnect(next *connectOpts) error {
	if next.Protocol < 0 || next.Protocol > 1 {
		return errInvalidProtocol
	}
	if next.NoResponders && !next.Headers {
		return errNoRespHeaders
	}
	return nil
}
