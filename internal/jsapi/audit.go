package jsapi

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/nats-io/nuid"
)

// The API audit advisory (nats-server v2.15.2 jetstream_api.go
// sendJetStreamAPIAuditAdvisory, jetstream_events.go JSAPIAudit). The
// server that answers a request publishes, after the response, in the
// request's account:
//
//	$JS.EVENT.ADVISORY.API
//	{"type":"io.nats.jetstream.advisory.v1.api_audit","id":"<nuid>",
//	 "timestamp":"<RFC 3339, UTC>","server":"<server name>",
//	 "client":{"start":…,"host":…,"id":…,"acc":…,"user":…,"name":…,
//	           "lang":…,"ver":…,"rtt":<ns>,"server":…,"cluster":…,
//	           "kind":"Client","client_type":"nats"},
//	 "subject":"$JS.API.STREAM.INFO.ORDERS",
//	 "request":"<the request body as a JSON string; left out when empty>",
//	 "response":"<the response body as a JSON string>",
//	 "domain":"<the JetStream domain; left out when none>"}
//
// Which requests: exactly those nats-server counts in the API statistics
// (it audits in sendAPIResponse and sendAPIErrResponse, which count),
// with or without a reply subject: every answered request but a
// successful STREAM.MSG.GET and the answer to a restore's last chunk.
// Requests another server of the cluster answers are audited there.
// Consumers' and streams' own subjects ($JS.API.CONSUMER.MSG.NEXT,
// DIRECT.GET, CONSUMER.RESET) are not API requests and are not audited.
//
// Cost: the advisory is built only while something listens on
// AuditSubject: when a request arrives the API asks the transport
// whether the subject has interest (a subject-index lookup, cached), and
// only then takes the requester's description (Requester), which a
// snapshot or restore request also takes for its own advisories; it asks
// again before publishing. A request that arrived with nobody listening is not
// audited.

// AuditSubject is the subject of the API audit advisory (nats-server
// JSAuditAdvisory).
const AuditSubject = "$JS.EVENT.ADVISORY.API"

// auditType is the advisory's type (nats-server JSAPIAuditType).
const auditType = "io.nats.jetstream.advisory.v1.api_audit"

// Requester describes who published an API request. The server's
// connections implement it (internal/server apiclient.go).
type Requester interface {
	// AppendClientInfo appends to dst the JSON object describing the
	// client that published the request whose header block is hdr (nil
	// when none), as nats-server's ClientInfo shows it in advisories,
	// and returns dst unchanged when it cannot tell (the advisory then
	// says "client":null).
	AppendClientInfo(dst, hdr []byte) []byte
}

// RequestHandler receives an API request with its publisher, on the
// publisher's goroutine; the slices are valid only during the call.
type RequestHandler func(subject, reply string, hdr, data []byte, from Requester)

// RequestSubscriber is a capability of a jetstream.Transport: a
// subscription whose handler also learns who published each message. The
// API subscribes through it when the transport has it; without it,
// audits say "client":null.
type RequestSubscriber interface {
	SubscribeRequests(subject string, h RequestHandler) (jetstream.Subscription, error)
}

// subscribeRequests subscribes h to subj through tr, with the
// publisher when tr can tell it.
func subscribeRequests(tr jetstream.Transport, subj string, h RequestHandler) (jetstream.Subscription, error) {
	if rs, ok := tr.(RequestSubscriber); ok {
		return rs.SubscribeRequests(subj, h)
	}
	return tr.Subscribe(subj, "", func(subject, reply string, hdr, data []byte) {
		h(subject, reply, hdr, data, nil)
	})
}

// apiAudit is nats-server's JSAPIAudit.
type apiAudit struct {
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	Time     time.Time       `json:"timestamp"`
	Server   string          `json:"server"`
	Client   json.RawMessage `json:"client"`
	Subject  string          `json:"subject"`
	Request  string          `json:"request,omitempty"`
	Response string          `json:"response"`
	Domain   string          `json:"domain,omitempty"`
}

// auditor publishes the audit advisories of one account's API.
type auditor struct {
	tr     jetstream.Transport
	server string // the server's name
	domain string // the JetStream domain, "" for none
}

// listening reports whether anything subscribes to AuditSubject, here or
// on a peer.
func (au *auditor) listening() bool { return au.tr.HasInterest(AuditSubject) }

// note marks r for an audit when something listens, and takes the
// requester's description when r is audited or starts a snapshot or a
// restore (namesRequester): the client may be gone by the time r is
// answered.
func (au *auditor) note(r *request, from Requester) {
	if au.listening() {
		r.audit = true
	}
	if from != nil && (r.audit || namesRequester(r.subject)) {
		r.client = from.AppendClientInfo(nil, r.hdr)
	}
}

// namesRequester reports whether the request on subj starts something
// whose advisories name the requester whether or not anyone audits: a
// snapshot or a restore (nats-server v2.15.2 fills "client" of
// SNAPSHOT_CREATE, SNAPSHOT_COMPLETE, RESTORE_CREATE, RESTORE_COMPLETE
// with the requester's ClientInfo).
func namesRequester(subj string) bool {
	return strings.HasPrefix(subj, "$JS.API.STREAM.SNAPSHOT.") || strings.HasPrefix(subj, "$JS.API.STREAM.RESTORE.")
}

// send publishes the audit of r, answered with response, when r was
// noted and something still listens.
func (au *auditor) send(r *request, response []byte) {
	if !r.audit || !au.listening() {
		return
	}
	adv := &apiAudit{
		Type: auditType, ID: nuid.Next(), Time: time.Now().UTC(), Server: au.server,
		Subject: r.subject, Request: string(r.data), Response: string(response), Domain: au.domain,
	}
	if len(r.client) > 0 {
		adv.Client = r.client
	}
	b, err := json.Marshal(adv)
	if err != nil && adv.Client != nil { // not JSON: the requester is not known after all
		adv.Client = nil
		b, err = json.Marshal(adv)
	}
	if err == nil {
		au.tr.Publish(AuditSubject, "", nil, b)
	}
}
