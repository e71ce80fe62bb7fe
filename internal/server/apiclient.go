package server

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jsapi"
)

// Who sent a JetStream API request, for the API audit advisory
// ($JS.EVENT.ADVISORY.API, internal/jsapi audit.go). nats-server v2.15.2
// serves the API in its system account behind a service import, which
// puts the requester's ClientInfo into the request's Nats-Request-Info
// header on the server the client is connected to; the server that
// answers reads it from there. cairn's API subscribes in the account
// itself (jsTransport.SubscribeRequests), and learns the requester so:
//
//   - a request published by a client of this server: from the client
//     (clientInfoJSON);
//   - one that an account's service import published: from the
//     Nats-Request-Info header the import wrote (imports.go), which never
//     holds the requester's own;
//   - one from a peer: from the header apiClientHeader that the peer the
//     client is connected to added to the copy it routed, while someone
//     listened for the audit advisory (withAPIClient). The receiving
//     route takes the header out before anything is delivered
//     (takeAPIClient), so no subscriber sees it, and the sending server
//     drops one a client wrote itself, so a client cannot speak for
//     another.
//
// Without a listener nothing of this runs but a prefix test on routed
// messages and a subject-interest lookup for the API's.

// apiClientHeader carries, between cairn servers, the ClientInfo JSON of
// the client that sent a JetStream API request.
const apiClientHeader = "Cairn-Api-Client"

// apiSubjectPrefix starts the subjects of JetStream API requests.
var apiSubjectPrefix = []byte("$JS.API.")

// apiClientInfo is nats-server v2.15.2's ClientInfo (events.go), with
// the fields a cairn client has, in nats-server's order: as the
// advisories show it (forAdvisory: no jwt, no alts) and as a service
// import's Nats-Request-Info carries it (imports.go importRequestInfo,
// which alone sets jwt and reply).
type apiClientInfo struct {
	Start      *time.Time    `json:"start,omitempty"`
	Host       string        `json:"host,omitempty"`
	ID         uint64        `json:"id,omitempty"`
	Account    string        `json:"acc,omitempty"`
	User       string        `json:"user,omitempty"`
	Name       string        `json:"name,omitempty"`
	Lang       string        `json:"lang,omitempty"`
	Version    string        `json:"ver,omitempty"`
	RTT        time.Duration `json:"rtt,omitempty"`
	Server     string        `json:"server,omitempty"`
	Cluster    string        `json:"cluster,omitempty"`
	Jwt        string        `json:"jwt,omitempty"`
	IssuerKey  string        `json:"issuer_key,omitempty"`
	NameTag    string        `json:"name_tag,omitempty"`
	Tags       []string      `json:"tags,omitempty"`
	Kind       string        `json:"kind,omitempty"`
	ClientType string        `json:"client_type,omitempty"`
	Reply      string        `json:"reply,omitempty"`
}

// clientInfoJSON describes the client c as nats-server's getClientInfo
// (detailed) does: its connection, its account and user (the raw
// user: name, nkey, "[REDACTED]" for a token), its round-trip time, this
// server and its cluster, and for a JWT or nkey user the issuer key.
// It runs on c's read loop, which owns c.opts and c.user.
func (c *client) clientInfoJSON() []byte {
	ci := c.apiClientInfo()
	b, _ := json.Marshal(&ci) // strings, numbers and a time: cannot fail
	return b
}

// apiClientInfo is clientInfoJSON's value, not yet encoded.
func (c *client) apiClientInfo() apiClientInfo {
	start := c.started.UTC()
	ci := apiClientInfo{
		Start: &start, Host: c.ip, ID: c.cid, Account: c.acc.name,
		Name: c.opts.Name, Lang: c.opts.Lang, Version: c.opts.Version,
		RTT:    time.Duration(c.rtt.Load()),
		Server: c.srv.Name(), Cluster: c.srv.ClusterName(),
		Kind: "Client", ClientType: "nats",
	}
	if u := c.user; u != nil {
		ci.User, ci.NameTag, ci.IssuerKey, ci.Tags = u.Name, u.NameTag, u.IssuerKey, u.Tags
		if u.Nkey && ci.IssuerKey == "" {
			ci.IssuerKey = u.Account // nats-server issuerForClient: the nkey user's account
		}
	}
	if ci.User == "" && c.opts.Token != "" {
		ci.User = "[REDACTED]" // nats-server getRawAuthUser
	}
	return ci
}

// AppendClientInfo implements jsapi.Requester for the publisher c of the
// request being delivered: see the comment at the top of this file.
func (c *client) AppendClientInfo(dst, hdr []byte) []byte {
	switch {
	case c.route != nil:
		return append(dst, c.apiClient...)
	case c.internal:
		if v, ok := headerValue(hdr, requestInfoHeader); ok {
			return append(dst, v...)
		}
		return dst
	default:
		return append(dst, c.clientInfoJSON()...)
	}
}

// isAPISubject reports whether subj is a JetStream API request's.
func isAPISubject(subj []byte) bool { return bytes.HasPrefix(subj, apiSubjectPrefix) }

// withAPIClient returns the message to route for a JetStream API request
// that c publishes: without an apiClientHeader of the publisher's own,
// and, while the account's audit advisory has a listener, with one
// describing the publisher. Other messages are returned as they are.
func (c *client) withAPIClient(match []byte, hdrLen int, msg []byte) (int, []byte) {
	if c.route != nil || !isAPISubject(match) {
		return hdrLen, msg
	}
	var hdr []byte
	if hdrLen > 0 {
		hdr = msg[:hdrLen]
		if bytes.Contains(hdr, []byte(apiClientHeader)) {
			hdr = removeHeader(hdr, apiClientHeader)
			hdr = append(hdr, "\r\n"...)
		}
	}
	if !c.srv.hasInterestIn(c.acc, jsapi.AuditSubject) {
		if hdrLen > 0 && len(hdr) != hdrLen {
			return len(hdr), append(hdr, msg[hdrLen:]...)
		}
		return hdrLen, msg
	}
	ci := c.AppendClientInfo(nil, hdr)
	if len(ci) == 0 {
		return hdrLen, msg
	}
	var out []byte
	if hdrLen > 0 {
		out = append(out, hdr[:len(hdr)-2]...) // without the final empty line
	} else {
		out = append(out, "NATS/1.0\r\n"...)
	}
	out = append(append(append(out, apiClientHeader+": "...), ci...), "\r\n\r\n"...)
	n := len(out)
	return n, append(out, msg[max(hdrLen, 0):]...)
}

// takeAPIClient takes the apiClientHeader out of a JetStream API request
// a peer routed, keeping its value in c.apiClient for the delivery, and
// returns the message without it.
func (c *client) takeAPIClient(subj []byte, hdrLen int, msg []byte) (int, []byte) {
	c.apiClient = c.apiClient[:0]
	if hdrLen <= 0 || !isAPISubject(subj) || !bytes.Contains(msg[:hdrLen], []byte(apiClientHeader)) {
		return hdrLen, msg
	}
	v, ok := headerValue(msg[:hdrLen], apiClientHeader)
	if !ok {
		return hdrLen, msg
	}
	c.apiClient = append(c.apiClient, v...)
	hdr := append(removeHeader(msg[:hdrLen], apiClientHeader), "\r\n"...)
	n := len(hdr)
	if n == len("NATS/1.0\r\n\r\n") && bytes.Equal(hdr, []byte("NATS/1.0\r\n\r\n")) {
		return -1, msg[hdrLen:] // the header was ours alone
	}
	return n, append(hdr, msg[hdrLen:]...)
}

// headerValue returns the value of the first header line named key in
// the header block hdr (compared exactly, as nats-server compares header
// keys), with the spaces after the colon skipped.
func headerValue(hdr []byte, key string) ([]byte, bool) {
	for _, l := range bytes.Split(hdr, []byte("\r\n")) {
		if len(l) > len(key) && l[len(key)] == ':' && string(l[:len(key)]) == key {
			return bytes.TrimLeft(l[len(key)+1:], " "), true
		}
	}
	return nil, false
}

// SubscribeRequests implements jsapi.RequestSubscriber: h receives each
// request with its publisher (a *client, as jsapi.Requester).
func (t jsTransport) SubscribeRequests(subj string, h jsapi.RequestHandler) (jetstream.Subscription, error) {
	sub := &subscription{acc: t.acc, subject: subj}
	sub.svc = func(c *client, subj, reply []byte, hdrLen int, msg []byte) bool {
		var hdr []byte
		data := msg
		if hdrLen > 0 {
			hdr, data = msg[:hdrLen:hdrLen], msg[hdrLen:]
		}
		h(string(subj), string(reply), hdr, data, c)
		return true
	}
	if t.shared {
		return t.subscribe(sub)
	}
	if err := t.acc.sl.Insert(sub.subject, sub.queue, sub); err != nil {
		return nil, err
	}
	return &InternalSub{srv: t.s, sub: sub}, nil
}
