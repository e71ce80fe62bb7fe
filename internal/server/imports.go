package server

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/subject"
	"github.com/cairnmq/cairn/internal/transform"
)

// Exports and imports between accounts (docs/security.md; nats-server
// v2.15.2 accounts.go), set up at start from the configuration, which
// checked that every import is exported to its importer:
//
//   - A stream import of subject S from account A into account B is an
//     internal subscription to S in A. Each message it receives is
//     delivered in B under its local subject (S itself, the prefix
//     followed by S, or the import's "to"), to this server's subscribers
//     only: every server imports for its own subscribers. The
//     subscription is announced to the peers, so that A's messages
//     published on another server come here.
//   - A service import of subject S from A, reached in B as T, is an
//     internal subscription to T in B (not announced: the server where a
//     client of B sends a request imports it). A request is published in
//     A on S with a reply subject of A's own, _R_.<server prefix>.<n>;
//     A's response to it is delivered in B to the request's reply
//     subject. A "single" export's reply subject takes one response; a
//     "stream" or "chunked" one takes responses until the export's
//     response_threshold (2 minutes by default) passes. The request
//     carries who sent it (Nats-Request-Info: importRequestInfo); one
//     that nothing in A receives counts as not delivered, so that its
//     requester gets the no-responders status (dispatch.go).
//
// A message an import delivers is not imported again (no chains, no
// loops at run time; the configuration refuses cycles anyway).

// Bounds of an account's pending service responses (imports.pending):
// pruned of expired entries every respPruneEvery requests; beyond respMax
// the oldest are dropped.
const (
	defaultRespThreshold = 2 * time.Minute // nats-server DEFAULT_SERVICE_EXPORT_RESPONSE_THRESHOLD
	respPruneEvery       = 1024
	respMax              = 1 << 16
)

// imports is an account's routing of the responses to the service
// requests imported into it: the reply subjects it handed out, each with
// where the response goes.
type imports struct {
	mu      sync.Mutex
	prefix  string // "_R_.<random>.": this server's reply subjects in the account
	sub     *InternalSub
	pending map[string]*pendingResp // guarded by mu
	next    uint64                  // guarded by mu
	since   int                     // requests since the last prune; guarded by mu
}

// pendingResp is where the responses to one imported request go.
type pendingResp struct {
	to      *account // the importing account
	reply   string   // the requester's reply subject there
	single  bool     // one response only
	expires time.Time
}

// startImports installs every account's imports. It runs once, in Start,
// before clients are accepted.
func (s *Server) startImports() error {
	table := s.accountTable()
	for _, acc := range s.accountsSorted() {
		if err := s.installImports(acc, table); err != nil {
			return err
		}
	}
	return nil
}

// installImports installs the configured imports of acc, from the
// accounts of table, records their subscriptions in acc.importSubs and
// shadows acc's subscriptions for its stream imports (shadow.go).
func (s *Server) installImports(acc *account, table accountTable) error {
	cfg := acc.cfg.Load()
	if cfg == nil {
		return nil
	}
	var streams []*streamImport
	defer func() { s.shadowImports(acc, streams) }() // those installed
	for i := range cfg.Imports {
		im := &cfg.Imports[i]
		from := table[im.Account]
		if from == nil {
			return fmt.Errorf("server: account %s imports from unknown account %s", acc.name, im.Account)
		}
		var sub *InternalSub
		var err error
		if im.Service {
			sub, err = s.importService(acc, from, im)
		} else {
			var si *streamImport
			sub, si, err = s.importStream(acc, from, im)
			if si != nil {
				streams = append(streams, si)
			}
		}
		if err != nil {
			return fmt.Errorf("server: account %s, import of %q from %s: %w", acc.name, im.Subject, im.Account, err)
		}
		acc.importSubs = append(acc.importSubs, sub)
	}
	return nil
}

// removeImports removes the subscriptions of acc's configured imports
// and the shadows of acc's subscriptions (shadow.go).
func (s *Server) removeImports(acc *account) {
	for _, sub := range acc.importSubs {
		sub.Unsubscribe()
	}
	acc.importSubs = nil
	s.shadowImports(acc, nil)
}

// subjectMap returns how an import renames a subject matching from into
// the subject to: unchanged, a literal, or a wildcard transform
// (nats-server addMappedStreamImportWithClaim: each "*" of to takes the
// token of the same rank in from).
func subjectMap(from, to string) (func(string) string, error) {
	switch {
	case to == from:
		return func(s string) string { return s }, nil
	case !strings.ContainsAny(to, "*>"):
		return func(string) string { return to }, nil
	}
	tr, err := transform.New(from, transform.Tokenize(to))
	if err != nil {
		return nil, err
	}
	return func(s string) string {
		if out, ok := tr.Map(s); ok {
			return out
		}
		return s
	}, nil
}

// streamImport is a stream import as its traced deliveries and the
// shadows of the importer's subscriptions see it (msgtrace.go,
// shadow.go): the importing account, the exporting account's name, the
// subjects in the exporter (from) and in the importer (local), and
// whether the import lets the trace cross (allow_trace).
type streamImport struct {
	acc        *account
	exporter   string
	from       string
	local      string
	allowTrace bool
}

// importStream installs a stream import of from's im.Subject into acc and
// returns its subscription and the import.
func (s *Server) importStream(acc, from *account, im *config.Import) (*InternalSub, *streamImport, error) {
	local := im.LocalSubject()
	mapSubj := func(subj string) string { return subj }
	switch {
	case im.To != "":
		m, err := subjectMap(im.Subject, im.To)
		if err != nil {
			return nil, nil, err
		}
		mapSubj = m
	case im.Prefix != "":
		prefix := strings.TrimSuffix(im.Prefix, ".") + "."
		mapSubj = func(subj string) string { return prefix + subj }
	}
	si := &streamImport{acc: acc, exporter: from.name, from: im.Subject, local: local, allowTrace: im.AllowTrace}
	sub := &subscription{acc: from, subject: im.Subject, imported: true}
	// A message routed by another subject than it shows (a JetStream
	// consumer's delivery: routed by the deliver subject, showing the
	// stored subject) is routed in acc by the mapped deliver subject and
	// keeps the subject it shows, as nats-server delivers it through a
	// stream import (an external source's deliveries,
	// docs/external-sourcing.md).
	route := func(c *client, subj []byte) (match, shown string) {
		shown = string(subj)
		if c != nil && c.routedBy != nil && string(c.routedBy) != shown {
			return mapSubj(string(c.routedBy)), shown
		}
		to := mapSubj(shown)
		return to, to
	}
	sub.svc = func(c *client, subj, reply []byte, hdrLen int, msg []byte) bool {
		match, shown := route(c, subj)
		hdr, data := splitMsg(hdrLen, msg)
		// Delivered only if something in acc took it: a request that only
		// an idle import matches gets the no-responders status, as in
		// nats-server v2.15.2.
		return s.publishIn(acc, match, shown, string(reply), hdr, data, pubLocal)
	}
	sub.interest = func(subj string, depth int) bool { return s.interestIn(acc, mapSubj(subj), depth) }
	sub.crossing = func(c *client, t *msgTrace, subj, reply []byte, hdrLen int, msg []byte) bool {
		match, shown := route(c, subj)
		hdr, data := splitMsg(hdrLen, msg)
		return s.publishTraced(acc, match, shown, string(reply), hdr, data, pubLocal, t, si)
	}
	is, err := s.insertInternal(sub)
	if err != nil {
		return nil, nil, err
	}
	s.log.Debugf("Account %s imports stream %q from %s as %q", acc.name, im.Subject, from.name, local)
	return is, si, nil
}

// splitMsg splits a message into its header block (nil when none) and
// payload.
func splitMsg(hdrLen int, msg []byte) (hdr, data []byte) {
	if hdrLen > 0 {
		return msg[:hdrLen:hdrLen], msg[hdrLen:]
	}
	return nil, msg
}

// exporterSubject is the subject nats-server v2.15.2 gives the shadow
// subscription that a subscription on sub in the importing account has
// in the exporter (client.go addShadowSubscriptions, addShadowSub), which
// its trace events name: the import's subject when sub is the import's
// local subject or wider; sub mapped back into the exporter when
// narrower (as published when the import keeps the subjects, the
// import's subject when it is literal); for a sub that only overlaps the
// local subject, the overlap, mapped back the same way.
func (si *streamImport) exporterSubject(sub string) string {
	from, to := si.from, si.local
	switch {
	case sub == to || subject.SubsetOf(to, sub):
		return from
	case subject.IsLiteral(from):
		return from
	case subject.SubsetOf(sub, to):
		if from == to {
			return sub
		}
		return reverseImport(from, to, sub)
	}
	ov := overlapSubject(sub, to)
	if from == to {
		return ov
	}
	return reverseImport(from, to, ov)
}

// overlapSubject narrows the pattern sub to the part of the import's
// local subject to it overlaps (nats-server addShadowSubscriptions): each
// "*" of sub takes to's token of the same rank unless that is ">"; a
// final ">" takes to's tokens from there on. It returns sub when the
// result is not within to.
func overlapSubject(sub, to string) string {
	st, tt := strings.Split(sub, "."), strings.Split(to, ".")
	for i, tok := range st {
		if i < len(tt) && tok == "*" && tt[i] != ">" {
			st[i] = tt[i]
		}
	}
	if last := len(st) - 1; st[last] == ">" && len(tt) >= len(st) {
		st[last] = tt[last]
		st = append(st, tt[len(st):]...)
	}
	ov := strings.Join(st, ".")
	if !subject.SubsetOf(ov, to) {
		return sub
	}
	return ov
}

// reverseImport maps sub, a pattern within an import's local subject to,
// back to the exporter's subject from: each wildcard of from takes the
// tokens of sub where to has the same wildcard (the n-th "*" of to is the
// n-th of from, as subjectMap maps them; a final ">" the rest).
func reverseImport(from, to, sub string) string {
	ft, tt, st := strings.Split(from, "."), strings.Split(to, "."), strings.Split(sub, ".")
	var stars []int // positions of to's "*"s
	fwc := -1       // position of to's ">"
	for i, tok := range tt {
		switch tok {
		case "*":
			stars = append(stars, i)
		case ">":
			fwc = i
		}
	}
	out := make([]string, 0, len(st))
	n := 0
	for _, tok := range ft {
		switch tok {
		case "*":
			if n < len(stars) && stars[n] < len(st) {
				tok = st[stars[n]]
			}
			n++
		case ">":
			if fwc >= 0 && fwc < len(st) {
				out = append(out, st[fwc:]...)
				continue
			}
		}
		out = append(out, tok)
	}
	return strings.Join(out, ".")
}

// importService installs a service import of from's im.Subject into acc,
// reached there as im.LocalSubject(), and returns its subscription (not
// announced to the peers, so its Unsubscribe withdraws nothing).
func (s *Server) importService(acc, from *account, im *config.Import) (*InternalSub, error) {
	local := im.LocalSubject()
	toExporter, err := subjectMap(local, im.Subject)
	if err != nil {
		return nil, err
	}
	ex := from.export(im.Subject)
	single, ttl, allowTrace, share := true, defaultRespThreshold, false, im.Share
	if ex != nil {
		single = ex.ResponseType == "" || ex.ResponseType == "single"
		if ex.ResponseThreshold > 0 {
			ttl = ex.ResponseThreshold
		}
		allowTrace = ex.AllowTrace
	}
	if err := s.startResponses(from); err != nil {
		return nil, err
	}
	// serve carries a request into the exporter; t is its trace, nil
	// when it is not traced (msgtrace.go, "Imports").
	serve := func(c *client, t *msgTrace, subj, reply []byte, hdrLen int, msg []byte) bool {
		target := toExporter(string(subj))
		if t != nil {
			t.traceServiceImport(from.name, string(subj), target)
			if t.only && !allowTrace {
				return false
			}
		}
		rs := ""
		if len(reply) > 0 {
			rs = from.imp.add(&pendingResp{to: acc, reply: string(reply), single: single, expires: time.Now().Add(ttl)})
		}
		info := c.importRequestInfo(acc, reply, share, from == s.sysacc)
		hdr, data := withRequestInfo(msg, hdrLen, info)
		switch {
		case t == nil:
			return s.importRequest(from, target, rs, hdr, data)
		case !allowTrace:
			// The rest is not traced, here or by a peer.
			hdr = setHeader(hdr, traceDestHdr, traceDestOff)
			return s.importRequest(from, target, rs, hdr, data)
		}
		// Traced on: a peer sends its event to a reply subject of the
		// exporter's that leads to the destination in acc.
		back := from.imp.add(&pendingResp{to: acc, reply: t.dest, expires: time.Now().Add(ttl)})
		hdr = setHeader(hdr, traceDestHdr, back)
		hops := t.ev.Hops
		delivered := s.publishTraced(from, target, target, rs, hdr, data, pubImported, t, nil)
		if t.ev.Hops == hops {
			from.imp.remove(back) // no peer got it: only this server's event, sent to t.dest
		}
		if rs != "" && (t.only || !delivered) {
			from.imp.remove(rs) // nothing will respond
		}
		return delivered
	}
	sub := &subscription{acc: acc, subject: local, imported: true, crossing: serve}
	sub.svc = func(c *client, subj, reply []byte, hdrLen int, msg []byte) bool {
		return serve(c, nil, subj, reply, hdrLen, msg)
	}
	// Not announced: the server a request reaches first imports it.
	if err := acc.sl.Insert(sub.subject, "", sub); err != nil {
		return nil, err
	}
	s.log.Debugf("Account %s imports service %q from %s as %q", acc.name, im.Subject, from.name, local)
	return &InternalSub{sub: sub}, nil
}

// requestInfoHeader is the header in which a service request carries who
// sent it into the exporting account (nats-server ClientInfoHdr).
const requestInfoHeader = "Nats-Request-Info"

// importRequest publishes a request that a service import carries into
// the exporting account from, with the reply subject rs ("" for none),
// and reports whether anything there received it. A request nothing
// received forgets its pending response: the requester gets the
// no-responders status instead (dispatch; nats-server v2.15.2
// processServiceImport removes the response import when it did not
// deliver, and the requester's processInboundClientMsg sends the 503).
func (s *Server) importRequest(from *account, target, rs string, hdr, data []byte) bool {
	delivered := s.publishIn(from, target, target, rs, hdr, data, pubImported)
	if !delivered && rs != "" {
		from.imp.remove(rs)
	}
	return delivered
}

// importRequestInfo returns the Nats-Request-Info JSON of a request that
// c publishes through a service import of account acc (nats-server
// v2.15.2 processServiceImport, getClientInfo; ClientInfo's keys and
// order, docs/security.md "Accounts"):
//
//   - share (the import's share: true, and the system account's
//     USER.INFO import): every detail of the client, as clientInfoJSON
//     gives them, and the user JWT from its CONNECT (jwt);
//   - otherwise the importing account and the client's round-trip time
//     in nanoseconds (acc, rtt), with this server's name and cluster
//     (server, cluster) when the exporter is the system account (sys).
//
// A request whose reply subject ends in ".$FI" (a fast batch publish)
// also carries that reply subject (reply). An internal publisher (c is
// not a client) is described by acc alone. Empty values are omitted.
func (c *client) importRequestInfo(acc *account, reply []byte, share, sys bool) []byte {
	var ci apiClientInfo
	switch {
	case c.internal:
		ci.Account = acc.name
	case share:
		ci = c.apiClientInfo()
		ci.Account, ci.Jwt = acc.name, c.opts.JWT
	default:
		ci.Account, ci.RTT = acc.name, time.Duration(c.rtt.Load())
		if sys {
			ci.Server, ci.Cluster = c.srv.Name(), c.srv.ClusterName()
		}
	}
	if !c.internal && bytes.HasSuffix(reply, []byte(fastBatchSuffix)) {
		ci.Reply = string(reply)
	}
	b, _ := json.Marshal(&ci) // strings, numbers and a time: cannot fail
	return b
}

// fastBatchSuffix ends the reply subject of a fast batch publish
// (nats-server v2.15.2 FastBatchSuffix).
const fastBatchSuffix = ".$FI"

// withRequestInfo returns the header block and payload of a request
// imported through a service import: the request's headers without any
// Nats-Request-Info of the requester's (a client may not speak for the
// server: CVE-2026-33223), followed by the server's, whose value is info
// (importRequestInfo).
func withRequestInfo(msg []byte, hdrLen int, info []byte) (hdr, data []byte) {
	data = msg
	var b []byte
	if hdrLen > 0 {
		data = msg[hdrLen:]
		b = removeHeader(msg[:hdrLen], requestInfoHeader)
	} else {
		b = []byte("NATS/1.0\r\n")
	}
	b = append(b, requestInfoHeader+": "...)
	b = append(b, info...)
	return append(b, "\r\n\r\n"...), data
}

// removeHeader returns a copy of the header block hdr without its final
// empty line and without the lines of key (compared as nats-server
// compares header keys: exactly).
func removeHeader(hdr []byte, key string) []byte {
	out := make([]byte, 0, len(hdr)+64)
	lines := bytes.Split(bytes.TrimSuffix(hdr, []byte("\r\n\r\n")), []byte("\r\n"))
	for i, l := range lines {
		if i > 0 && bytes.HasPrefix(l, []byte(key+":")) {
			continue
		}
		out = append(append(out, l...), "\r\n"...)
	}
	return out
}

// export returns the service export of the account that contains subj.
func (a *account) export(subj string) *config.Export {
	var exports []config.Export
	if cfg := a.cfg.Load(); cfg != nil {
		exports = cfg.Exports
	}
	for _, list := range [][]config.Export{exports, a.sysExports} {
		for i := range list {
			ex := &list[i]
			if ex.Service && (ex.Subject == subj || subject.SubsetOf(subj, ex.Subject)) {
				return ex
			}
		}
	}
	return nil
}

// startResponses subscribes, once per exporting account, to the reply
// subjects this server hands out in it; announced, so that a responder on
// another server reaches it.
func (s *Server) startResponses(acc *account) error {
	im := &acc.imp
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.sub != nil {
		return nil
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	im.prefix = "_R_." + string(b[:]) + "."
	im.pending = map[string]*pendingResp{}
	sub := &subscription{acc: acc, subject: im.prefix + ">", imported: true}
	sub.handler = func(subj, reply string, hdr, data []byte) {
		p := im.take(subj)
		if p == nil {
			return
		}
		s.publishIn(p.to, p.reply, p.reply, reply, hdr, data, pubImported)
	}
	// A traced response: an "si" event, and the trace stops (nats-server
	// v2.15.2 gives its response imports no allow_trace).
	sub.crossing = func(_ *client, t *msgTrace, subj, reply []byte, hdrLen int, msg []byte) bool {
		p := im.take(string(subj))
		if p == nil {
			return false
		}
		t.traceServiceImport(p.to.name, string(subj), p.reply)
		if t.only {
			return false
		}
		hdr, data := splitMsg(hdrLen, msg)
		hdr = setHeader(hdr, traceDestHdr, traceDestOff)
		s.publishIn(p.to, p.reply, p.reply, string(reply), hdr, data, pubImported)
		return true
	}
	is, err := s.insertInternal(sub)
	if err != nil {
		return err
	}
	im.sub = is
	return nil
}

// stop removes the subscription to the reply subjects (an account a
// reload removed).
func (im *imports) stop() {
	im.mu.Lock()
	sub := im.sub
	im.sub = nil
	im.mu.Unlock()
	if sub != nil {
		sub.Unsubscribe()
	}
}

// add records a request's pending response and returns its reply subject
// in the exporting account.
func (im *imports) add(p *pendingResp) string {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.next++
	subj := im.prefix + strconv.FormatUint(im.next, 36)
	im.pending[subj] = p
	if im.since++; im.since >= respPruneEvery {
		im.pruneLocked(time.Now())
	}
	for len(im.pending) > respMax {
		im.evictLocked()
	}
	return subj
}

// remove forgets the pending response of reply subject subj.
func (im *imports) remove(subj string) {
	im.mu.Lock()
	delete(im.pending, subj)
	im.mu.Unlock()
}

// take returns where a response goes, or nil when its request is unknown
// or expired; a single response's mapping goes with it.
func (im *imports) take(subj string) *pendingResp {
	im.mu.Lock()
	defer im.mu.Unlock()
	p := im.pending[subj]
	switch {
	case p == nil:
		return nil
	case time.Now().After(p.expires):
		delete(im.pending, subj)
		return nil
	case p.single:
		delete(im.pending, subj)
	}
	return p
}

func (im *imports) pruneLocked(now time.Time) {
	for k, p := range im.pending {
		if now.After(p.expires) {
			delete(im.pending, k)
		}
	}
	im.since = 0
}

// evictLocked drops the oldest of a sample of 64 pending responses.
func (im *imports) evictLocked() {
	var oldest string
	var at time.Time
	n := 0
	for k, p := range im.pending {
		if oldest == "" || p.expires.Before(at) {
			oldest, at = k, p.expires
		}
		if n++; n >= 64 {
			break
		}
	}
	delete(im.pending, oldest)
}
