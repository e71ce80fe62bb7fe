package jsapi

import (
	"encoding/json"
	"errors"
	"sync"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
)

// Disabled answers the $JS.API requests of an account without JetStream
// (an account the configuration does not enable it for) as nats-server
// v2.15.2 does: each known endpoint gets its response type with error
// 10039 "JetStream not enabled for account" and the empty paging fields
// nats-server adds to some of them; an unknown subject gets no answer.
// Each answer is audited as the API's are (audit.go), with or without a
// reply subject, as nats-server audits them.
type Disabled struct {
	tr    jetstream.Transport
	audit auditor
	mu    sync.Mutex
	subs  []jetstream.Subscription
}

// NewDisabled subscribes to the API subjects through tr. server is the
// server's name and domain its JetStream domain ("" for none), as the
// audit advisories name them.
func NewDisabled(tr jetstream.Transport, server, domain string) (*Disabled, error) {
	if tr == nil {
		return nil, errors.New("jsapi: NewDisabled needs a Transport")
	}
	d := &Disabled{tr: tr, audit: auditor{tr: tr, server: server, domain: domain}}
	for _, subj := range apiSubjects {
		sub, err := subscribeRequests(tr, subj, d.answer)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.mu.Lock()
		d.subs = append(d.subs, sub)
		d.mu.Unlock()
	}
	return d, nil
}

// Close unsubscribes; it may be called more than once.
func (d *Disabled) Close() {
	d.mu.Lock()
	subs := d.subs
	d.subs = nil
	d.mu.Unlock()
	for _, s := range subs {
		s.Unsubscribe()
	}
}

// answer runs on the publisher's goroutine; it only encodes and
// publishes.
func (d *Disabled) answer(subject, reply string, hdr, data []byte, from Requester) {
	r := &request{subject: subject, hdr: hdr, data: data}
	ep, found := route(r)
	if !found {
		return
	}
	body := DisabledResponse(ep.typ)
	if reply != "" {
		d.tr.Publish(reply, "", nil, body)
	}
	d.audit.note(r, from)
	d.audit.send(r, body)
}

// disabledPaging are the fields nats-server v2.15.2 adds after the error
// of some responses of an account without JetStream.
var disabledPaging = map[string]string{
	"stream_info_response":    `,"total":0,"offset":0,"limit":0`,
	"stream_names_response":   `,"total":0,"offset":0,"limit":0,"streams":null`,
	"stream_list_response":    `,"total":0,"offset":0,"limit":0,"streams":[]`,
	"consumer_names_response": `,"total":0,"offset":0,"limit":0,"consumers":[]`,
	"consumer_list_response":  `,"total":0,"offset":0,"limit":0,"consumers":[]`,
}

// DisabledResponse is the body answering a request of response type typ
// (without typePrefix) in an account without JetStream.
func DisabledResponse(typ string) []byte {
	e, _ := json.Marshal(jserr.New(jserr.NotEnabledForAccount))
	b := append([]byte(`{"type":"`+typePrefix+typ+`","error":`), e...)
	b = append(b, disabledPaging[typ]...)
	return append(b, '}')
}
