package streamrun

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
)

// Direct get (the direct get headers, ADR-31): with allow_direct, a stream
// answers $JS.API.DIRECT.GET.<S> (a JSON request) and
// $JS.API.DIRECT.GET.<S>.<subject> (last message on that subject) with the
// raw stored message plus Nats-Stream, Nats-Subject, Nats-Sequence and
// Nats-Time-Stamp headers, or a status frame; batches (ADR-31) add
// Nats-Num-Pending and Nats-Last-Sequence to each message and end with a
// 204 EOB status (directGet, directMulti). Requests are copied and
// served by one goroutine per stream, never on the publisher's read loop.

const (
	directPrefix   = "$JS.API.DIRECT.GET."
	maxDirectQueue = 4096
)

// directRequest is the JSON body of a direct get.
type directRequest struct {
	Seq       uint64     `json:"seq,omitempty"`
	LastFor   string     `json:"last_by_subj,omitempty"`
	NextFor   string     `json:"next_by_subj,omitempty"`
	Batch     int        `json:"batch,omitempty"`
	MaxBytes  int        `json:"max_bytes,omitempty"`
	MultiLast []string   `json:"multi_last,omitempty"`
	UpToSeq   uint64     `json:"up_to_seq,omitempty"`
	UpToTime  *time.Time `json:"up_to_time,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
	NoHeaders bool       `json:"no_hdr,omitempty"`
}

// directJob is one copied request.
type directJob struct {
	subject string // the request subject
	reply   string
	body    []byte
}

// Status frames of direct get, as nats-server v2.15.2 sends them.
var (
	statusEmpty     = []byte("NATS/1.0 408 Empty Request\r\n\r\n")
	statusMalformed = []byte("NATS/1.0 408 Malformed Request\r\n\r\n")
	statusBad       = []byte("NATS/1.0 408 Bad Request\r\n\r\n")
	statusNotFound  = []byte("NATS/1.0 404 Message Not Found\r\n\r\n")
)

// StatusRequiredAPILevel is the status frame of a direct get or pull
// request whose Nats-Required-Api-Level is above the server's (nats-server
// v2.15.2: "NATS/1.0 412 Required Api Level").
var StatusRequiredAPILevel = []byte("NATS/1.0 412 Required Api Level\r\n\r\n")

// subscribeDirect subscribes the direct-get subjects of the stream.
func (r *Stream) subscribeDirect() ([]Subscription, error) {
	h := func(subj, reply string, hdr, data []byte) {
		if reply == "" {
			return
		}
		if stream.RequiredLevelAbove(hdr, r.env.APILevel) {
			r.env.Transport.Publish(reply, "", StatusRequiredAPILevel, nil)
			return
		}
		r.direct.push(directJob{subject: subj, reply: reply, body: append([]byte(nil), data...)})
	}
	base := directPrefix + r.name
	a, err := r.env.Transport.Subscribe(base, "", h)
	if err != nil {
		return nil, err
	}
	b, err := r.env.Transport.Subscribe(base+".>", "", h)
	if err != nil {
		a.Unsubscribe()
		return nil, err
	}
	return []Subscription{a, b}, nil
}

// directLoop serves direct gets until the queue closes.
func (r *Stream) directLoop() {
	defer r.done.Done()
	var jobs []directJob
	for {
		var ok bool
		if jobs, ok = r.direct.take(jobs); !ok {
			return
		}
		for _, j := range jobs {
			r.serveDirect(j)
		}
	}
}

func (r *Stream) serveDirect(j directJob) {
	base := directPrefix + r.name
	if subj, ok := strings.CutPrefix(j.subject, base+"."); ok {
		r.directLastFor(j, subj)
		return
	}
	req, status := parseDirect(j.body)
	if status != nil {
		r.env.Transport.Publish(j.reply, "", status, nil)
		return
	}
	if len(req.MultiLast) > 0 {
		r.directMulti(j.reply, req)
		return
	}
	r.directGet(j.reply, req)
}

// directLastFor answers the subject form: the last message on subj. A
// body (any non-empty one must be JSON) may only carry no_hdr and
// max_bytes (nats-server v2.15.2 processDirectGetLastBySubjectRequest).
func (r *Stream) directLastFor(j directJob, subj string) {
	var req directRequest
	if len(j.body) > 0 && json.Unmarshal(j.body, &req) != nil {
		r.env.Transport.Publish(j.reply, "", statusMalformed, nil)
		return
	}
	if req.LastFor != "" || req.NextFor != "" || len(req.MultiLast) > 0 || req.Seq != 0 || req.Batch != 0 ||
		req.StartTime != nil || req.UpToSeq != 0 || req.UpToTime != nil {
		r.env.Transport.Publish(j.reply, "", statusBad, nil)
		return
	}
	req.LastFor = subj
	r.directGet(j.reply, req)
}

// parseDirect decodes and checks a JSON request in nats-server v2.15.2's
// order (processDirectGetRequest): an empty body, malformed JSON, no
// selector, conflicting options; it returns the status frame to answer
// when the request is unusable.
func parseDirect(body []byte) (directRequest, []byte) {
	var req directRequest
	if len(body) == 0 {
		return req, statusEmpty
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return req, statusMalformed
	}
	if req.Seq == 0 && req.LastFor == "" && req.NextFor == "" && len(req.MultiLast) == 0 && req.StartTime == nil {
		return req, statusEmpty
	}
	if conflicting(req) {
		return req, statusBad
	}
	return req, nil
}

// conflicting reports the option combinations nats-server refuses.
func conflicting(q directRequest) bool {
	return (q.Seq > 0 && q.LastFor != "") ||
		(q.Seq > 0 && q.StartTime != nil) ||
		(q.StartTime != nil && q.LastFor != "") ||
		(q.LastFor != "" && q.NextFor != "") ||
		(q.LastFor != "" && q.Batch > 0) ||
		(q.LastFor != "" && len(q.MultiLast) > 0) ||
		(q.NextFor != "" && len(q.MultiLast) > 0) ||
		(q.UpToSeq > 0 && q.UpToTime != nil)
}

// maxBytes is a request's max_bytes, or the server's max_pending when
// unset (ADR-31; nats-server fills in its MaxPending).
func (r *Stream) maxBytes(req directRequest) int {
	if req.MaxBytes > 0 {
		return req.MaxBytes
	}
	return int(r.maxPending())
}

// directGet answers a single or batched get (nats-server v2.15.2
// getDirectRequest): from start_time's sequence or seq, the message at
// that sequence (a single get without next_by_subj), the next ones
// (matching next_by_subj when set), or the last on last_by_subj. A batch
// sends up to batch messages (and stops once max_bytes are sent), each
// with Nats-Num-Pending and Nats-Last-Sequence, then the EOB status;
// nothing found is 404, as is a first message that cannot be loaded.
func (r *Stream) directGet(reply string, req directRequest) {
	seq := req.Seq
	if req.StartTime != nil {
		seq = SeqFromTime(r.store, req.StartTime.UnixNano())
	}
	var filters []string
	if req.NextFor != "" {
		filters = []string{req.NextFor}
	}
	isBatch, batch := req.Batch > 0, max(req.Batch, 1)
	var np, validThrough uint64
	if isBatch {
		validThrough = r.store.State(false).LastSeq
		np = r.store.NumPending(filters, max(seq, 1), 0)
	}
	mb, sent := r.maxBytes(req), 0
	var lseq uint64
	for i := 0; i < batch; i++ {
		var sm *store.StoredMsg
		var err error
		switch {
		case seq > 0 && req.NextFor == "" && i == 0 && !isBatch:
			sm, err = r.store.Load(seq)
		case seq > 0 || req.NextFor != "":
			sm, err = r.store.LoadNext(filters, seq)
		default:
			sm, err = r.store.LoadLast(req.LastFor)
		}
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrEOF) {
				r.env.Logf("stream %s: direct get: %v", r.name, err)
			}
			if batch > 1 && i > 0 {
				break
			}
			r.env.Transport.Publish(reply, "", statusNotFound, nil)
			return
		}
		seq = sm.Seq + 1
		var pos *batchPos
		if isBatch && !req.NoHeaders {
			// nats-server counts down only the messages it sends with
			// headers: with no_hdr the EOB reports the count from before
			// the batch.
			np = max(np, 1) - 1
			pos = &batchPos{pending: np, last: lseq}
		}
		r.env.Transport.Publish(reply, "", directHeader(r.name, sm, req.NoHeaders, pos), sm.Data)
		lseq = sm.Seq
		if sent += len(sm.Subject) + len(sm.Header) + len(sm.Data); sent >= mb {
			break
		}
	}
	if !isBatch {
		return
	}
	if r.store.State(false).LastSeq > validThrough {
		np = r.store.NumPending(filters, max(seq, 1), 0)
	}
	eob := "NATS/1.0 204 EOB\r\nNats-Num-Pending: " + strconv.FormatUint(np, 10) +
		"\r\nNats-Last-Sequence: " + strconv.FormatUint(lseq, 10) + "\r\n\r\n"
	r.env.Transport.Publish(reply, "", []byte(eob), nil)
}

func (r *Stream) sendDirect(reply string, sm *store.StoredMsg, err error, noHdr bool) {
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrEOF) {
			r.env.Logf("stream %s: direct get: %v", r.name, err)
		}
		r.env.Transport.Publish(reply, "", statusNotFound, nil)
		return
	}
	r.env.Transport.Publish(reply, "", directHeader(r.name, sm, noHdr, nil), sm.Data)
}

// batchPos is where a message stands in a batch reply: the matching
// messages left after it and the sequence sent before it (0 for the
// first), sent as Nats-Num-Pending and Nats-Last-Sequence.
type batchPos struct {
	pending, last uint64
}

// directHeader returns the stored header block with the direct-get fields
// appended, or nil with noHdr (no header block at all) (nats-server v2.15.2 stream.go dg/dgb), and
// the batch fields when pos is not nil.
func directHeader(streamName string, sm *store.StoredMsg, noHdr bool, pos *batchPos) []byte {
	if noHdr {
		return nil // a plain message, as nats-server sends it
	}
	b := stream.AppendStoredFields(nil, sm.Header, streamName, sm.Subject, sm.Seq, sm.Time)
	if pos != nil {
		b = append(b, "Nats-Num-Pending: "...)
		b = strconv.AppendUint(b, pos.pending, 10)
		b = append(b, "\r\nNats-Last-Sequence: "...)
		b = strconv.AppendUint(b, pos.last, 10)
		b = append(b, "\r\n"...)
	}
	return append(b, "\r\n"...)
}

// Multi-subject gets (ADR-31 multi_last; nats-server v2.15.2
// getDirectMulti and its stores' MultiLastMsgs): the last message of
// every subject matching the filters, at or below up_to_seq (or the last
// sequence before up_to_time; the stream's last sequence when neither is
// set), from seq on, in ascending sequence, each with Nats-Num-Pending
// (the matched messages left) and Nats-Last-Sequence, then an EOB status
// with Nats-UpTo-Sequence, the cursor for the next page. At most
// maxMultiSubjects subjects may match (413 beyond); none is 404 No
// Results.
const maxMultiSubjects = 1024

var (
	statusNoResults  = []byte("NATS/1.0 404 No Results\r\n\r\n")
	statusTooMany    = []byte("NATS/1.0 413 Too Many Results\r\n\r\n")
	errTooManyResult = errors.New("too many results")
)

func (r *Stream) directMulti(reply string, req directRequest) {
	upTo := req.UpToSeq
	if req.UpToTime != nil {
		upTo = SeqFromTime(r.store, req.UpToTime.UnixNano())
		if upTo <= r.store.State(false).FirstSeq {
			r.env.Transport.Publish(reply, "", statusNoResults, nil)
			return
		}
		upTo-- // the last sequence before the time
	}
	if upTo == 0 {
		upTo = r.store.State(false).LastSeq
	}
	seqs, err := r.multiLastSeqs(req.MultiLast, upTo)
	if errors.Is(err, errTooManyResult) {
		r.env.Transport.Publish(reply, "", statusTooMany, nil)
		return
	}
	if len(seqs) == 0 {
		r.env.Transport.Publish(reply, "", statusNoResults, nil)
		return
	}
	mb := r.maxBytes(req)
	np := uint64(len(seqs))
	var lseq uint64
	var bytes, sent int
	for _, seq := range seqs {
		np--
		if seq < req.Seq {
			continue
		}
		sm, err := r.store.Load(seq)
		if err != nil {
			r.env.Logf("stream %s: direct get: %v", r.name, err)
			r.env.Transport.Publish(reply, "", statusNotFound, nil)
			return
		}
		r.env.Transport.Publish(reply, "", directHeader(r.name, sm, false, &batchPos{pending: np, last: lseq}), sm.Data)
		lseq = seq
		if bytes += len(sm.Subject) + len(sm.Header) + len(sm.Data); bytes >= mb {
			break
		}
		if sent++; req.Batch > 0 && sent >= req.Batch {
			break
		}
	}
	eob := "NATS/1.0 204 EOB\r\nNats-Num-Pending: " + strconv.FormatUint(np, 10) +
		"\r\nNats-Last-Sequence: " + strconv.FormatUint(lseq, 10) +
		"\r\nNats-UpTo-Sequence: " + strconv.FormatUint(upTo, 10) + "\r\n\r\n"
	r.env.Transport.Publish(reply, "", []byte(eob), nil)
}

// multiLastSeqs returns, ascending and without duplicates, the sequence
// of the last message at or below upTo of every subject matching one of
// filters; errTooManyResult once more than maxMultiSubjects match.
func (r *Stream) multiLastSeqs(filters []string, upTo uint64) ([]uint64, error) {
	seen := map[uint64]bool{}
	var seqs []uint64
	for _, f := range filters {
		for subj, ss := range r.store.SubjectsState(f) {
			seq := ss.Last
			if seq > upTo {
				seq = r.lastOnSubjectBefore(subj, ss.First, upTo)
			}
			if seq != 0 && !seen[seq] {
				seen[seq] = true
				seqs = append(seqs, seq)
			}
		}
		if len(seqs) > maxMultiSubjects {
			return nil, errTooManyResult
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

// lastOnSubjectBefore returns the sequence of the last message on subj
// at or below upTo, looking from first (its first message) on; 0 when
// there is none.
func (r *Stream) lastOnSubjectBefore(subj string, first, upTo uint64) uint64 {
	var last uint64
	for seq := first; seq <= upTo; {
		sm, err := r.store.LoadNext([]string{subj}, seq)
		if err != nil || sm.Seq > upTo {
			break
		}
		last, seq = sm.Seq, sm.Seq+1
	}
	return last
}

// SeqFromTime returns the sequence of the first stored message whose
// time is at or after t (unix nanoseconds), or LastSeq+1 when there is
// none (nats-server v2.15.2 GetSeqFromTime). It binary-searches the
// sequences, stepping over gaps, on the times messages are stored with,
// which do not go down along the stream.
func SeqFromTime(st store.Store, t int64) uint64 {
	state := st.State(false)
	if state.Msgs == 0 || t > state.LastTime {
		return state.LastSeq + 1
	}
	lo, hi := state.FirstSeq, state.LastSeq
	for lo < hi {
		mid := lo + (hi-lo)/2
		sm, err := st.LoadNext(nil, mid)
		switch {
		case err != nil:
			hi = mid // nothing at or after mid (removed meanwhile)
		case sm.Time >= t:
			hi = min(mid, sm.Seq)
		default:
			lo = sm.Seq + 1
		}
	}
	if sm, err := st.LoadNext(nil, lo); err == nil {
		return sm.Seq
	}
	return state.LastSeq + 1
}

// defaultMaxPending is nats-server's default max_pending (64 MiB).
const defaultMaxPending = 64 << 20

// maxPending returns the server's max_pending (Env.MaxPending).
func (r *Stream) maxPending() int64 {
	if r.env.MaxPending > 0 {
		return r.env.MaxPending
	}
	return defaultMaxPending
}
