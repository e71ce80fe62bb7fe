package stream

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/cairnmq/cairn/internal/jserr"
)

// Fast batch publishing (ADR-50 "Fast-ingest Batch Publishing";
// nats-server v2.15.2 processJetStreamFastBatchMsg and
// jetstream_batching.go). A publisher marks each message with a reply
// subject
//
//	<prefix>.<id>.<flow>.<gap "ok"|"fail">.<batch seq>.<op>.$FI
//
// where op is 0 start (seq 1), 1 append (seq > 1), 2 commit with this
// message, 3 commit before this message (EOB, seq > 1), 4 ping (seq is
// the highest sent). The stream stores each message as it comes (there
// is no staging) and answers on the message's reply subject with:
//
//	{"type":"ack","seq":<batch seq>,"msgs":<ack every n>}   flow control
//	{"type":"gap","last_seq":<expected>,"seq":<received>}   a gap
//	{"type":"err","seq":<batch seq>,"error":{...}}          a failed check
//	{"stream":"S","seq":<stream seq>,"batch":"<id>","count":<n>}  the end
//
// or an ordinary error PubAck when the batch cannot be used at all. In
// cairn a flow ack and the final PubAck are sent only once the stream
// sequences they cover are durable (FastReply.WaitSeq).

// FastInfo is what a fast batch reply subject says (ParseFastReply).
type FastInfo struct {
	ID     string
	Seq    uint64
	Flow   uint16 // the publisher's largest ack interval: 1 to 65535 (10 when absent or not positive)
	GapOK  bool
	Commit bool // op 2 or 3
	EOB    bool // op 3
	Ping   bool // op 4
}

// Fast batch operations in a reply subject.
const (
	fastOpStart = iota
	fastOpAppend
	fastOpCommit
	fastOpCommitEOB
	fastOpPing
)

// fastSuffix ends every fast batch reply subject.
const fastSuffix = ".$FI"

// ParseFastReply reads a fast batch reply subject as nats-server v2.15.2
// getFastBatch does. isFast is false for any reply not ending in ".$FI"
// (an ordinary publish); info is nil when it ends so but does not follow
// the pattern (10206 where batch publishing is allowed).
func ParseFastReply(reply string) (info *FastInfo, isFast bool) {
	if len(reply) <= len(fastSuffix) || !strings.HasSuffix(reply, fastSuffix) {
		return nil, false
	}
	rest := reply[:len(reply)-len(fastSuffix)]
	field := func() (string, bool) {
		i := strings.LastIndexByte(rest, '.')
		if i < 0 {
			return "", false
		}
		f := rest[i+1:]
		rest = rest[:i]
		return f, true
	}
	f, ok := field()
	op := parseDigits(f)
	if !ok || op < fastOpStart || op > fastOpPing {
		return nil, true
	}
	b := &FastInfo{Ping: op == fastOpPing, EOB: op == fastOpCommitEOB}
	b.Commit = b.EOB || op == fastOpCommit
	if f, ok = field(); !ok {
		return nil, true
	}
	seq, ok := parseBatchSeq(f)
	switch {
	case !ok || seq == 0 || seq == math.MaxUint64,
		seq == 1 && b.EOB, op == fastOpStart && seq != 1, op == fastOpAppend && seq <= 1:
		return nil, true
	}
	b.Seq = seq
	if f, ok = field(); !ok || (f != "ok" && f != "fail") {
		return nil, true
	}
	b.GapOK = f == "ok"
	if f, ok = field(); !ok {
		return nil, true
	}
	switch flow := parseDigits(f); {
	case flow <= 0:
		b.Flow = 10
	case flow > math.MaxUint16:
		b.Flow = math.MaxUint16
	default:
		b.Flow = uint16(flow)
	}
	if b.ID, ok = field(); !ok {
		return nil, true
	}
	return b, true
}

// parseDigits reads ASCII digits as nats-server's parseInt64 does (-1 for
// anything else or nothing), stopping at math.MaxUint16+1 so that it
// cannot overflow.
func parseDigits(s string) int64 {
	if s == "" {
		return -1
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return -1
		}
		n = min(n*10+int64(s[i]-'0'), math.MaxUint16+1)
	}
	return n
}

// FastReply is one message to send to a fast batch message's reply
// subject, in order, once the stream's sequence WaitSeq is durable (0:
// nothing to wait for).
type FastReply struct {
	Payload []byte
	WaitSeq uint64
}

// FastStep is what FastBatches.Before decided for one message: replies
// to send first, and whether to apply Entry (Entry.FastBatch is set) and
// then call After with its result.
type FastStep struct {
	Replies []FastReply
	Apply   bool
	Entry   Entry
}

// FastBatches tracks the open fast batches of one stream: a state
// machine with the clock passed in, owned by the stream's apply
// goroutine like AtomicBatches. Before and After decide each fast batch
// message around its Apply.
type FastBatches struct {
	name   string // the stream, for PubAcks
	domain string // the JetStream domain, for PubAcks ("" for none; SetDomain)
	limits BatchLimits
	global *BatchInflight
	open   map[string]*fastBatch
}

// fastBatch is one open fast batch (nats-server fastBatch on one server,
// where a message is persisted before the next is looked at).
type fastBatch struct {
	lseq   uint64 // the last batch sequence received
	pseq   uint64 // the last batch sequence decided (stored, or skipped as a duplicate)
	fseq   uint64 // the batch sequence of the last flow ack
	sseq   uint64 // the stream sequence of the batch's last stored message
	ack    uint16 // a flow ack every ack messages
	maxAck uint16 // the publisher's largest (FastInfo.Flow)
	gapOK  bool
	last   int64 // unix ns of its last message
}

// NewFastBatches returns the fast batches of the stream named name.
func NewFastBatches(name string, limits BatchLimits, global *BatchInflight) *FastBatches {
	return &FastBatches{name: name, limits: limits.WithDefaults(), global: global, open: map[string]*fastBatch{}}
}

// SetDomain sets the JetStream domain the successful PubAcks name
// ("domain" after "stream", as nats-server's PubAck template).
func (f *FastBatches) SetDomain(domain string) { f.domain = domain }

// Len returns the number of open batches.
func (f *FastBatches) Len() int { return len(f.open) }

// Before decides a message whose reply subject ParseFastReply read as
// info (nil: not the pattern), received at now (unix ns), in nats-server
// v2.15.2's order: sealed 10109, out of storage 10023, over max_msg_size
// 10054, no allow_batched 10205, not the pattern 10206, id over 64 bytes
// 10207; an unknown id not at sequence 1 (or a ping) 10208, too many
// batches open on the stream or the server 10211; a
// Nats-Required-Api-Level above the server's 10185 (the batch ends).
// These are error PubAcks (none with no_ack). Then a ping answers with a
// gap report if one is due and the last flow ack; a gap is reported and,
// unless the batch allows gaps going forward, ends the batch with its
// PubAck; a commit with EOB ends it at once. A first message that does
// not commit gets the flow ack {"seq":0}. Otherwise the message is to be
// applied.
func (f *FastBatches) Before(p BatchPolicy, info *FastInfo, e Entry, now int64) FastStep {
	var st FastStep
	fail := func(err *jserr.Error) FastStep {
		if !p.NoAck {
			st.Replies = append(st.Replies, FastReply{Payload: AppendPubAck(nil, f.name, Result{Err: err}, "")})
		}
		return st
	}
	if err := checkFastMsg(p, info, &e); err != nil {
		return fail(err)
	}
	b := f.open[info.ID]
	if b != nil && now-b.last >= int64(f.limits.Timeout) {
		f.drop(info.ID)
		b = nil
	}
	if b == nil {
		var err *jserr.Error
		if b, err = f.begin(info); err != nil {
			return fail(err)
		}
	}
	if RequiredLevelAbove(e.Header, f.limits.APILevel) {
		f.drop(info.ID)
		return fail(jserr.New(jserr.RequiredApiLevel))
	}
	e.Header = removeHeader(e.Header, "Nats-Required-Api-Level")
	b.last = now
	if info.Ping {
		st.Replies = f.ping(b, info)
		return st
	}
	b.lseq++
	if b.lseq != info.Seq {
		st.Replies = append(st.Replies, FastReply{Payload: gapReply(b.lseq, info.Seq)})
		if !b.gapOK || info.Seq < b.lseq {
			b.lseq--
			st.Replies = append(st.Replies, f.end(info.ID, b))
			return st
		}
		b.lseq = info.Seq
	}
	if info.EOB {
		b.lseq--
		b.pseq = b.lseq
		st.Replies = append(st.Replies, f.end(info.ID, b))
		return st
	}
	if info.Seq == 1 && !info.Commit && !p.NoAck {
		st.Replies = append(st.Replies, FastReply{Payload: flowAck(0, b.ack)})
	}
	e.FastBatch = true
	st.Apply, st.Entry = true, e
	return st
}

// checkFastMsg runs the checks of Before up to the id's length.
func checkFastMsg(p BatchPolicy, info *FastInfo, e *Entry) *jserr.Error {
	if err := p.messageErr(e); err != nil {
		return err
	}
	switch {
	case !p.AllowBatched:
		return jserr.New(jserr.BatchPublishDisabled)
	case info == nil:
		return jserr.New(jserr.BatchPublishInvalidPattern)
	case len(info.ID) > maxBatchIDLen:
		return jserr.New(jserr.BatchPublishInvalidBatchID)
	}
	return nil
}

// begin opens the batch of info, or returns the error for an unknown id.
func (f *FastBatches) begin(info *FastInfo) (*fastBatch, *jserr.Error) {
	switch {
	case info.Seq != 1 || info.Ping:
		return nil, jserr.New(jserr.BatchPublishUnknownBatchID)
	case len(f.open)+1 > f.limits.FastInflight,
		!f.global.acquire(&f.global.fast, f.limits.FastTotal):
		return nil, jserr.New(jserr.BatchPublishTooManyInflight)
	}
	b := &fastBatch{gapOK: info.GapOK, maxAck: info.Flow, ack: min(maxFastAckMessages, info.Flow)}
	if len(f.open) > 0 {
		b.ack = 1 // others publish too: start slow (nats-server fastBatchInit)
	}
	f.open[info.ID] = b
	return b, nil
}

// ping answers a ping: a gap when the ping is ahead of the last message
// received (which either moves the batch on, or ends it), then the last
// flow ack unless a new one or the end was sent.
func (f *FastBatches) ping(b *fastBatch, info *FastInfo) []FastReply {
	var out []FastReply
	if info.Seq > b.lseq {
		out = append(out, FastReply{Payload: gapReply(b.lseq+1, info.Seq+1)})
		if !b.gapOK {
			return append(out, f.end(info.ID, b))
		}
		b.lseq, b.pseq = info.Seq, info.Seq
		if r, ok := f.flow(b); ok {
			return append(out, r)
		}
	}
	return append(out, FastReply{Payload: flowAck(b.fseq, b.ack), WaitSeq: b.sseq})
}

// After decides what follows the Apply of a message Before let through,
// given its result: for a stored message, the PubAck when it commits the
// batch, else a flow ack when one is due; for a duplicate Nats-Msg-Id
// (not stored), a flow ack when due, and the PubAck when it commits; for
// a failed check, an error PubAck when it is the first message of a batch
// that allows no gap, else {"type":"err"}, after which a batch that
// allows gaps goes on and any other ends with its PubAck.
func (f *FastBatches) After(info *FastInfo, res Result) []FastReply {
	b := f.open[info.ID]
	if b == nil {
		return nil
	}
	var out []FastReply
	switch {
	case res.Err == nil && !res.Duplicate:
		b.sseq, b.pseq = res.Seq, b.lseq
		if info.Commit {
			return []FastReply{f.end(info.ID, b)}
		}
		if r, ok := f.flow(b); ok {
			out = append(out, r)
		}
		return out
	case res.Duplicate:
		b.pseq = info.Seq
		if r, ok := f.flow(b); ok {
			out = append(out, r)
		}
		if !info.Commit {
			return out
		}
		if !b.gapOK && b.lseq == 1 {
			f.drop(info.ID)
			return append(out, FastReply{Payload: appendFastDupAck(nil, f.name, f.domain, res.Seq, info.ID, info.Seq)})
		}
		return append(out, f.end(info.ID, b))
	}
	if !b.gapOK && b.lseq == 1 {
		f.drop(info.ID)
		return []FastReply{{Payload: AppendPubAck(nil, f.name, res, f.domain)}}
	}
	out = append(out, FastReply{Payload: errReply(info.Seq, res.Err)})
	if b.gapOK && !info.Commit {
		return out
	}
	b.lseq--
	b.pseq = b.lseq
	return append(out, f.end(info.ID, b))
}

// flow returns the flow ack due once pseq moved, if one is: every ack
// messages (skipping to the last when several are due), with the
// interval moved toward 500 divided by the stream's open batches, at
// most the publisher's Flow (nats-server checkFlowControl).
func (f *FastBatches) flow(b *fastBatch) (FastReply, bool) {
	am := uint64(b.ack)
	if b.pseq < b.fseq+am {
		return FastReply{}, false
	}
	b.fseq += (b.pseq - b.fseq) / am * am
	target := max(maxFastAckMessages/uint16(min(len(f.open), int(maxFastAckMessages))), 1)
	target = min(target, b.maxAck)
	switch {
	case b.ack < target:
		b.ack = min(b.ack*2, target)
	case b.ack > target:
		b.ack = max(b.ack/2, target)
	}
	return FastReply{Payload: flowAck(b.fseq, b.ack), WaitSeq: b.sseq}, true
}

// end closes the batch and returns its PubAck: the stream sequence of its
// last stored message and the batch sequence it reached.
func (f *FastBatches) end(id string, b *fastBatch) FastReply {
	f.drop(id)
	return FastReply{Payload: AppendBatchPubAck(nil, f.name, f.domain, b.sseq, id, b.lseq), WaitSeq: b.sseq}
}

func (f *FastBatches) drop(id string) {
	if _, ok := f.open[id]; ok {
		delete(f.open, id)
		f.global.release(&f.global.fast)
	}
}

// Expire forgets the batches with no message since now - Timeout,
// without a reply (nats-server's cleanup timer).
func (f *FastBatches) Expire(now int64) {
	for id, b := range f.open {
		if now-b.last >= int64(f.limits.Timeout) {
			f.drop(id)
		}
	}
}

// Clear forgets every open batch (the stream stops, or an update turned
// allow_batched off).
func (f *FastBatches) Clear() {
	for id := range f.open {
		f.drop(id)
	}
}

// AppendBatchPubAck appends the PubAck that ends a batch, as nats-server
// v2.15.2 builds it: {"stream":"S","seq":7,"batch":"id","count":3}
// (with "domain" after "stream" when domain is not "").
func AppendBatchPubAck(dst []byte, stream, domain string, seq uint64, id string, count uint64) []byte {
	dst = AppendPubAck(dst, stream, Result{Seq: seq}, domain)
	return appendBatchFields(dst[:len(dst)-1], id, count)
}

// appendFastDupAck is the PubAck of a one-message fast batch whose
// message was a duplicate, with nats-server's spacing:
// {"stream":"S","seq":7,"duplicate": true,"batch":"id","count":1}.
func appendFastDupAck(dst []byte, stream, domain string, seq uint64, id string, count uint64) []byte {
	dst = AppendPubAck(dst, stream, Result{Seq: seq, Duplicate: true}, domain)
	return appendBatchFields(dst[:len(dst)-1], id, count)
}

func appendBatchFields(dst []byte, id string, count uint64) []byte {
	dst = append(dst, `,"batch":`...)
	dst = strconv.AppendQuote(dst, id)
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendUint(dst, count, 10)
	return append(dst, '}')
}

func flowAck(seq uint64, msgs uint16) []byte {
	return []byte(`{"type":"ack","seq":` + strconv.FormatUint(seq, 10) + `,"msgs":` + strconv.Itoa(int(msgs)) + `}`)
}

func gapReply(expected, got uint64) []byte {
	return []byte(`{"type":"gap","last_seq":` + strconv.FormatUint(expected, 10) + `,"seq":` + strconv.FormatUint(got, 10) + `}`)
}

func errReply(seq uint64, err *jserr.Error) []byte {
	b, e := json.Marshal(struct {
		Type  string       `json:"type"`
		Seq   uint64       `json:"seq"`
		Error *jserr.Error `json:"error"`
	}{"err", seq, err})
	if e != nil { // cannot happen: strings and numbers only
		panic("stream: encode batch error: " + e.Error())
	}
	return b
}
