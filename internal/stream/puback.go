package stream

import (
	"encoding/json"
	"strconv"

	"github.com/cairnmq/cairn/internal/jserr"
)

// AppendPubAck appends to dst the PubAck nats-server v2.15.2 sends for r
// on the stream named stream, byte for byte (nats-server v2.15.2 PubAck, JSPubAckResponse and
// 4.3; server/stream.go, the pubAck template and JSPubAckResponse):
//
//	{"stream":"ORDERS","seq":7}
//	{"stream":"ORDERS","domain":"hub","seq":7}              (domain != "")
//	{"stream":"ORDERS","seq":7,"duplicate": true}           (r.Duplicate)
//	{"stream":"HITS","seq":7,"val":"42"}                     (a counter stream, r.Value; ADR-49)
//	{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 6"},"stream":"ORDERS","seq":0}
//
// As in nats-server, the success forms quote the names the way Go's %q
// does (strconv.Quote) and the error form is encoding/json's, which
// escapes <, > and & and carries no domain.
func AppendPubAck(dst []byte, stream string, r Result, domain string) []byte {
	if r.Err != nil {
		return appendErrorAck(dst, stream, r.Err)
	}
	dst = append(dst, `{"stream":`...)
	dst = strconv.AppendQuote(dst, stream)
	if domain != "" {
		dst = append(dst, `,"domain":`...)
		dst = strconv.AppendQuote(dst, domain)
	}
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, r.Seq, 10)
	switch {
	case r.Duplicate:
		dst = append(dst, `,"duplicate": true`...)
	case r.Value != "":
		dst = append(dst, `,"val":`...)
		dst = strconv.AppendQuote(dst, r.Value)
	}
	return append(dst, '}')
}

// errorAck is nats-server's JSPubAckResponse with an error: the ApiError
// first, then the PubAck fields of a failed publish.
type errorAck struct {
	Error  *jserr.Error `json:"error"`
	Stream string       `json:"stream"`
	Seq    uint64       `json:"seq"`
}

func appendErrorAck(dst []byte, stream string, e *jserr.Error) []byte {
	b, err := json.Marshal(errorAck{Error: e, Stream: stream})
	if err != nil { // cannot happen: the types hold only strings and numbers
		panic("stream: encode PubAck: " + err.Error())
	}
	return append(dst, b...)
}
