package server

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/subject"
)

// Message tracing (ADR-41; nats-server v2.15.2 msgtrace.go; docs/protocol.md
// section "Message tracing"). A message whose headers carry
// Nats-Trace-Dest: <subject> is traced: each server it crosses publishes
// one trace event, a JSON document, to <subject> in the publisher's
// account once it has handled the message:
//
//	{"server":  {name, host, id, cluster?, domain?, ver, jetstream, flags, seq, time},
//	 "request": {"header": {<name>: [<value>...]}, "msgsize": <bytes of header and payload>},
//	 "hops":    <routes it forwarded the message to, omitted when 0>,
//	 "events":  [ingress, then in order: subject mapping, jetstream, egress...]}
//
//	ingress         {"type":"in","ts","kind","cid","name"?,"acc","subj","error"?}
//	mapping         {"type":"sm","ts","to"}
//	stream export   {"type":"se","ts","acc","to"}
//	service import  {"type":"si","ts","acc","from","to"}
//	js              {"type":"js","ts","stream","subject"?,"nointerest"?,"error"?}
//	egress          {"type":"eg","ts","kind","cid","name"?,"hop"?,"acc"?,"sub"?,"queue"?,"error"?}
//
// kind is nats-server's connection kind: 0 client, 1 route. With
// Nats-Trace-Only: true (or 1, on) the message is not delivered: clients
// get no MSG (their egress events are still listed), a stream neither
// stores nor acknowledges it; it is still forwarded to routes, whose
// servers then trace it the same way. A message forwarded to a route
// carries Nats-Trace-Hop: <hop>, "1", "2"... for the routes of the
// first server, "<hop>.<n>" further on; the egress event to that route
// names the same hop, the remote's event carries it in its request
// headers. A Nats-Trace-Dest of "trace disabled" (a stored message's)
// traces nothing.
//
// Imports (imports.go): a traced message that a stream import carries
// into the importing account gets one "se" event per subscription there
// that receives it (acc: the importer, to: the subject it is delivered
// as); with the import's allow_trace its deliveries there are traced
// (egress events with acc and, as sub, the subscription's subject
// mapped back into the exporter, as nats-server's shadow subscription
// names it), without it they are made untraced, and a trace-only
// message stops at the "se". A request a service import carries into the
// exporter gets an "si" event (acc: the exporter, from: the subject in
// the importer, to: the one in the exporter); with the export's
// allow_trace the request goes on traced, its Nats-Trace-Dest rewritten
// to a reply subject of the exporter's that leads back to the
// destination (so a peer's event finds its way), otherwise its
// Nats-Trace-Dest becomes "trace disabled" and a trace-only request
// stops there. The response path of a service import gives an "si" too
// and never carries the trace on.
//
// Without Nats-Trace-Dest, a W3C traceparent header (any case) whose
// flags (its fourth "-" field, two hex digits read as a signed byte)
// have the sampled bit set traces the message to the account's
// msg_trace destination, if it has one, sampling percent of the time
// (decided by the server the client published to; one that decides
// against sets Nats-Trace-Dest: trace disabled, so that no peer traces
// it). A Nats-Trace-Origin-Account header (nats-server's older tracing)
// disables tracing the same way.

// Header names and values of message tracing (nats-server v2.15.2).
const (
	traceDestHdr     = "Nats-Trace-Dest"
	traceOnlyHdr     = "Nats-Trace-Only"
	traceHopHdr      = "Nats-Trace-Hop"
	traceDestOff     = "trace disabled"
	traceKindClient  = 0 // nats-server CLIENT
	traceKindRouter  = 1 // nats-server ROUTER
	traceTypeIngress = "in"
	traceTypeMapping = "sm"
	traceTypeExport  = "se" // a stream export (import) crossed
	traceTypeImport  = "si" // a service import crossed
	traceTypeJS      = "js"
	traceTypeEgress  = "eg"
	// traceParentHdr is the W3C trace context header, matched in any
	// case (https://www.w3.org/TR/trace-context/#header-name).
	traceParentHdr = "traceparent"
	// traceOriginAccHdr, from nats-server's older tracing, disables
	// tracing.
	traceOriginAccHdr = "Nats-Trace-Origin-Account"
)

// Egress errors, nats-server v2.15.2's texts.
const (
	traceErrNoEcho    = "Not delivered because of no echo"
	traceErrSubDeny   = "Not delivered because subscription denies this subject"
	traceErrAutoUnsub = "Not delivered because auto-unsubscribe exceeded"
)

// traceServerInfo is the "server" object (nats-server ServerInfo).
type traceServerInfo struct {
	Name    string `json:"name"`
	Host    string `json:"host"`
	ID      string `json:"id"`
	Cluster string `json:"cluster,omitempty"`
	Domain  string `json:"domain,omitempty"`
	Version string `json:"ver"`
	// Tags are Options.Tags (server_tags).
	Tags []string `json:"tags,omitempty"`
	// FeatureFlags are nats-server's experimental switches; cairn
	// serves none of them, so all are false (nats-server v2.15.2
	// feature_flags.go defaults).
	FeatureFlags map[string]bool `json:"feature_flags,omitempty"`
	JetStream    bool            `json:"jetstream"`
	Flags        uint64          `json:"flags"`
	Seq          uint64          `json:"seq"`
	Time         time.Time       `json:"time"`
}

type traceRequest struct {
	Header  map[string][]string `json:"header,omitempty"`
	MsgSize int                 `json:"msgsize,omitempty"`
}

// traceEvent is the document a server publishes to the trace destination.
type traceEvent struct {
	Server  traceServerInfo `json:"server"`
	Request traceRequest    `json:"request"`
	Hops    int             `json:"hops,omitempty"`
	Events  []any           `json:"events"`
}

type traceIngress struct {
	Type    string    `json:"type"`
	TS      time.Time `json:"ts"`
	Kind    int       `json:"kind"`
	CID     uint64    `json:"cid"`
	Name    string    `json:"name,omitempty"`
	Account string    `json:"acc"`
	Subject string    `json:"subj"`
	Error   string    `json:"error,omitempty"`
}

type traceMapping struct {
	Type     string    `json:"type"`
	TS       time.Time `json:"ts"`
	MappedTo string    `json:"to"`
}

type traceStreamExport struct {
	Type    string    `json:"type"`
	TS      time.Time `json:"ts"`
	Account string    `json:"acc"`
	To      string    `json:"to"`
}

type traceServiceImport struct {
	Type    string    `json:"type"`
	TS      time.Time `json:"ts"`
	Account string    `json:"acc"`
	From    string    `json:"from"`
	To      string    `json:"to"`
}

type traceJetStream struct {
	Type       string    `json:"type"`
	TS         time.Time `json:"ts"`
	Stream     string    `json:"stream"`
	Subject    string    `json:"subject,omitempty"`
	NoInterest bool      `json:"nointerest,omitempty"`
	Error      string    `json:"error,omitempty"`
}

type traceEgress struct {
	Type    string    `json:"type"`
	TS      time.Time `json:"ts"`
	Kind    int       `json:"kind"`
	CID     uint64    `json:"cid"`
	Name    string    `json:"name,omitempty"`
	Hop     string    `json:"hop,omitempty"`
	Account string    `json:"acc,omitempty"`
	Sub     string    `json:"sub,omitempty"`
	Queue   string    `json:"queue,omitempty"`
	Error   string    `json:"error,omitempty"`
}

// msgTrace is the trace of the message a client or route is dispatching.
// It is owned by that connection's read goroutine (client.trace), from
// initTrace to sendTrace; nothing else touches it but the internal
// publishers through which an import delivers the message, on that same
// goroutine (internal.go publishTraced).
type msgTrace struct {
	acc  *account
	dest string
	only bool
	hop  string // the Nats-Trace-Hop this message came with ("" from a client)
	ev   traceEvent
}

// traceSeq numbers the trace events' server info, as nats-server's
// ServerInfo.seq numbers its system messages.
var traceSeq atomic.Uint64

// initTrace looks at the header block of the message c is about to
// dispatch (msg[:hdrLen]) and, when it asks for a trace, sets c.trace.
// It returns the message to dispatch and its header length (the
// message itself, or a copy with Nats-Trace-Dest: trace disabled when
// this server decided not to trace it), and skip when the message must
// not be processed: a trace-only message whose destination is invalid,
// or a destination c may not publish to (the client then gets
// nats-server's publish permission violation for the destination). subj
// is the subject as published. It follows nats-server v2.15.2
// initMsgTrace.
func (c *client) initTrace(subj []byte, hdrLen int, msg []byte) (int, []byte, bool) {
	hdr := msg[:hdrLen]
	// Nats-Trace-Dest or Nats-Trace-Origin-Account, or a traceparent in
	// an account that traces them; anything else is not looked at.
	if !bytes.Contains(hdr, []byte("Nats-Trace-")) && (c.acc.trace.Load() == nil || !containsFold(hdr, traceParentHdr)) {
		return hdrLen, msg, false
	}
	headers, external := traceHeaders(hdr)
	if headers == nil {
		return hdrLen, msg, false
	}
	only, dest := false, ""
	if !external {
		switch strings.ToLower(first(headers[traceOnlyHdr])) {
		case "1", "true", "on":
			only = true
		}
		if dest = first(headers[traceDestHdr]); dest == "" {
			return hdrLen, msg, only
		}
	}
	if v := first(headers[traceOriginAccHdr]); v != "" {
		c.log.Errorf("Message tracing disabled because of header %q with value=%q", traceOriginAccHdr, v)
		if !only {
			hdrLen, msg = withTraceDisabled(msg, hdrLen)
		}
		return hdrLen, msg, only
	}
	if external {
		tr := c.acc.trace.Load()
		if tr == nil {
			return hdrLen, msg, false
		}
		dest = tr.Dest
		// The server the client published to decides, once.
		if c.route == nil && !sampled(tr.Sampling, c.srv.traceIntN) {
			hdrLen, msg = withTraceDisabled(msg, hdrLen)
			return hdrLen, msg, false
		}
	}
	if !subject.ValidLiteral(dest) {
		c.log.Errorf("Destination %q is not valid, won't be able to trace events", dest)
		return hdrLen, msg, only
	}
	kind, name, hop := traceKindClient, c.opts.Name, ""
	if c.route != nil {
		kind, name, hop = traceKindRouter, c.route.remoteName(), first(headers[traceHopHdr])
	} else if hasAnyPrefix([]byte(dest), reservedSubjectPrefixes) || !c.mayPublish([]byte(dest)) {
		c.pubViolation([]byte(dest))
		return hdrLen, msg, true
	}
	c.trace = &msgTrace{
		acc: c.acc, dest: dest, only: only, hop: hop,
		ev: traceEvent{
			Request: traceRequest{Header: headers, MsgSize: len(msg)},
			Events: []any{&traceIngress{
				Type: traceTypeIngress, TS: time.Now().UTC(), Kind: kind, CID: c.cid,
				Name: name, Account: c.acc.name, Subject: string(subj),
			}},
		},
	}
	return hdrLen, msg, false
}

// sampled reports whether a message sampled by its traceparent is traced
// at the account's sampling percentage: always outside 1..99, otherwise
// when intn(100) <= sampling (nats-server v2.15.2 sample; its <= makes
// 50 trace 51%). intn is rand.Int32N outside the tests.
func sampled(sampling int, intn func(int32) int32) bool {
	if sampling <= 0 || sampling >= 100 {
		return true
	}
	return intn(100) <= int32(sampling)
}

// withTraceDisabled returns the message with Nats-Trace-Dest: trace
// disabled in its header block (a copy), and its new header length.
func withTraceDisabled(msg []byte, hdrLen int) (int, []byte) {
	hdr := setHeader(msg[:hdrLen:hdrLen], traceDestHdr, traceDestOff)
	return len(hdr), append(hdr, msg[hdrLen:]...)
}

// containsFold reports whether hdr contains s in any case (s is lower
// case ASCII).
func containsFold(hdr []byte, s string) bool {
	for i := 0; i+len(s) <= len(hdr); i++ {
		if (hdr[i]|0x20) == s[0] && bytes.EqualFold(hdr[i:i+len(s)], []byte(s)) {
			return true
		}
	}
	return false
}

// first is the first of vs, "" when none.
func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// traceHeaders parses a header block into a map that keeps the names'
// case (nats-server v2.15.2 genHeaderMapIfTraceHeadersPresent: empty
// names and values are left out, spaces and tabs around a value
// trimmed). It returns nil when the block asks for no trace: it has
// neither Nats-Trace-Dest nor a sampled traceparent, or its first
// Nats-Trace-Dest is "trace disabled". external reports a trace asked
// by traceparent alone, whose destination is the account's.
func traceHeaders(hdr []byte) (m map[string][]string, external bool) {
	_, rest, ok := bytes.Cut(hdr, []byte("\r\n"))
	m = make(map[string][]string)
	dest, parent := false, false
	for ok && len(rest) > 0 {
		var line []byte
		line, rest, ok = bytes.Cut(rest, []byte("\r\n"))
		k, v, colon := bytes.Cut(line, []byte(":"))
		if !colon {
			continue
		}
		v = bytes.Trim(v, " \t")
		if len(k) == 0 || len(v) == 0 {
			continue
		}
		switch {
		case !parent && bytes.EqualFold(k, []byte(traceParentHdr)):
			parent = traceParentSampled(v)
		case !dest && string(k) == traceDestHdr:
			if string(v) == traceDestOff {
				return nil, false
			}
			dest = true
		}
		m[string(k)] = append(m[string(k)], string(v))
	}
	if !dest && !parent {
		return nil, false
	}
	return m, !dest
}

// traceParentSampled reports whether a traceparent value
// (version-traceid-parentid-flags) has the sampled flag: four
// "-"-separated fields, the last two characters that parse as a signed
// 8-bit hexadecimal number with bit 0 set, as nats-server v2.15.2 reads
// it (so flags from 80 up, out of the signed range, are not sampled).
func traceParentSampled(v []byte) bool {
	tk := bytes.Split(v, []byte("-"))
	if len(tk) != 4 || len(tk[3]) != 2 {
		return false
	}
	n, err := strconv.ParseInt(string(tk[3]), 16, 8)
	return err == nil && n&1 == 1
}

// remoteName is the peer's server name for trace events ("" until its
// INFO); it takes cluster.mu, which guards routeConn.info.
func (rc *routeConn) remoteName() string {
	cl := rc.c.srv.cl
	if cl == nil {
		return ""
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if rc.info == nil {
		return ""
	}
	return rc.info.Name
}

// traceMapped records a subject mapping (the JetStream domain's).
func (t *msgTrace) traceMapped(to []byte) {
	t.ev.Events = append(t.ev.Events, &traceMapping{Type: traceTypeMapping, TS: time.Now().UTC(), MappedTo: string(to)})
}

// traceEgress records the delivery to a client's subscription sub,
// named subj in the event (its subject, or what a stream import maps it
// back to), with nats-server's error text when it was not delivered.
func (t *msgTrace) traceEgress(sub *subscription, subj, errText string) {
	rc := sub.client
	e := &traceEgress{Type: traceTypeEgress, TS: time.Now().UTC(), Kind: traceKindClient, CID: rc.cid,
		Name: rc.connName(), Sub: subj, Queue: sub.queue, Error: errText}
	if sub.acc != t.acc {
		e.Account = sub.acc.name
	}
	t.ev.Events = append(t.ev.Events, e)
}

// traceStreamExport records that a stream import delivers the message
// in account acc as subject to (nats-server addStreamExportEvent).
func (t *msgTrace) traceStreamExport(acc, to string) {
	t.ev.Events = append(t.ev.Events, &traceStreamExport{Type: traceTypeExport, TS: time.Now().UTC(), Account: acc, To: to})
}

// traceServiceImport records that a service import carries the message
// from subject from into account acc as subject to (nats-server
// addServiceImportEvent).
func (t *msgTrace) traceServiceImport(acc, from, to string) {
	t.ev.Events = append(t.ev.Events, &traceServiceImport{Type: traceTypeImport, TS: time.Now().UTC(), Account: acc, From: from, To: to})
}

// connName is the name a client gave in CONNECT.
func (c *client) connName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.meta.name
}

// traceRoute records the forwarding to route rc and returns the hop id
// the forwarded message carries in Nats-Trace-Hop.
func (t *msgTrace) traceRoute(rc *client) string {
	t.ev.Hops++
	hop := strconv.Itoa(t.ev.Hops)
	if t.hop != "" {
		hop = t.hop + "." + hop
	}
	t.ev.Events = append(t.ev.Events, &traceEgress{Type: traceTypeEgress, TS: time.Now().UTC(),
		Kind: traceKindRouter, CID: rc.cid, Name: rc.route.remoteName(), Hop: hop})
	return hop
}

// Only implements jetstream.Tracer.
func (t *msgTrace) Only() bool { return t.only }

// JetStream implements jetstream.Tracer: the stream's "js" event.
func (t *msgTrace) JetStream(streamName, subj string, err error) {
	e := &traceJetStream{Type: traceTypeJS, TS: time.Now().UTC(), Stream: streamName, Subject: subj}
	if err != nil {
		e.Error = err.Error()
	}
	t.ev.Events = append(t.ev.Events, e)
}

var _ jetstream.Tracer = (*msgTrace)(nil)

// sendTrace publishes c's trace event, if it has one, to its
// destination in the publisher's account and forgets it.
func (c *client) sendTrace() {
	t := c.trace
	if t == nil {
		return
	}
	c.trace = nil
	s := c.srv
	t.ev.Server = traceServerInfo{
		Name: s.opts.ServerName, Host: s.opts.Host, ID: s.id, Domain: s.opts.JetStreamDomain,
		Version: NATSVersion, Tags: s.opts.Tags, FeatureFlags: FeatureFlags(), JetStream: s.opts.JetStream, Seq: traceSeq.Add(1), Time: time.Now().UTC(),
	}
	if s.cl != nil {
		s.cl.mu.Lock()
		t.ev.Server.Cluster = s.cl.name
		s.cl.mu.Unlock()
	}
	if t.ev.Server.JetStream {
		t.ev.Server.Flags = 1 // nats-server JetStreamEnabled
	}
	body, err := json.Marshal(&t.ev)
	if err != nil {
		return
	}
	s.publishIn(t.acc, t.dest, t.dest, "", nil, body, pubNormal)
}

// FeatureFlags returns nats-server v2.15.2's feature flags
// (feature_flags.go), each off (the v1 ack and API reply formats, no
// raft delete ranges or snapshot sources), as cairn behaves: the
// feature_flags of /varz, of the $SYS replies' server and of trace
// events. The configuration's feature_flags key is ignored
// (docs/configuration.md). A new map at each call.
func FeatureFlags() map[string]bool {
	return map[string]bool{"js_ack_fc_v2": false, "js_api_reply_v2": false,
		"js_raft_delete_range": false, "js_snapshot_sources": false}
}

// withHop returns the message (header block of hdrLen bytes, then the
// payload) with Nats-Trace-Hop set to hop, and its new header length.
func withHop(msg []byte, hdrLen int, hop string) ([]byte, int) {
	hdr := setHeader(msg[:hdrLen:hdrLen], traceHopHdr, hop)
	return append(hdr, msg[hdrLen:]...), len(hdr)
}

// setHeader returns a copy of the header block hdr with key set to value
// (its earlier lines removed), ending in the empty line.
func setHeader(hdr []byte, key, value string) []byte {
	if len(hdr) == 0 {
		hdr = []byte("NATS/1.0\r\n\r\n")
	}
	out := removeHeader(hdr, key)
	out = append(out, key+": "+value+"\r\n"...)
	return append(out, "\r\n"...)
}
