package streamrun

import (
	"encoding/json"
	"errors"
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
// Nats-Time-Stamp headers, or a status frame. Requests are copied and
// served by one goroutine per stream, never on the publisher's read loop.

const (
	directPrefix   = "$JS.API.DIRECT.GET."
	maxDirectQueue = 4096
	maxDirectBatch = 1 << 16
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
	if req.Batch > 0 {
		r.directBatch(j.reply, req)
		return
	}
	sm, err := r.loadDirect(req)
	r.sendDirect(j.reply, sm, err, req.NoHeaders)
}

// directLastFor answers the subject form: the last message on subj. A
// body may only carry no_hdr.
func (r *Stream) directLastFor(j directJob, subj string) {
	var req directRequest
	if len(strings.TrimSpace(string(j.body))) > 0 {
		if json.Unmarshal(j.body, &req) != nil || req.Seq != 0 || req.LastFor != "" || req.NextFor != "" || req.Batch != 0 {
			r.env.Transport.Publish(j.reply, "", statusBad, nil)
			return
		}
	}
	sm, err := r.store.LoadLast(subj)
	r.sendDirect(j.reply, sm, err, req.NoHeaders)
}

// parseDirect decodes and checks a JSON request; it returns the status
// frame to answer when the request is unusable.
func parseDirect(body []byte) (directRequest, []byte) {
	var req directRequest
	if len(strings.TrimSpace(string(body))) == 0 {
		return req, statusEmpty
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return req, statusMalformed
	}
	if conflicting(req) {
		return req, statusBad
	}
	if req.Seq == 0 && req.LastFor == "" && req.NextFor == "" && req.StartTime == nil && len(req.MultiLast) == 0 {
		return req, statusEmpty
	}
	return req, nil
}

// conflicting reports the option combinations nats-server refuses, and
// the ones cairn does not serve yet (start_time, multi_last).
func conflicting(q directRequest) bool {
	return (q.Seq > 0 && q.LastFor != "") ||
		(q.LastFor != "" && (q.NextFor != "" || q.Batch > 0)) ||
		(q.UpToSeq > 0 && q.UpToTime != nil) ||
		q.StartTime != nil || len(q.MultiLast) > 0
}

func (r *Stream) loadDirect(req directRequest) (*store.StoredMsg, error) {
	switch {
	case req.LastFor != "":
		return r.store.LoadLast(req.LastFor)
	case req.NextFor != "":
		return r.store.LoadNext([]string{req.NextFor}, req.Seq)
	}
	return r.store.Load(req.Seq)
}

// directBatch sends up to Batch messages from Seq (matching NextFor when
// set), then the EOB status with what is left.
func (r *Stream) directBatch(reply string, req directRequest) {
	var filters []string
	if req.NextFor != "" {
		filters = []string{req.NextFor}
	}
	seq, last, sent, bytes := req.Seq, uint64(0), 0, 0
	left := r.pendingFrom(filters, seq)
	for sent < min(req.Batch, maxDirectBatch) && (req.MaxBytes == 0 || bytes < req.MaxBytes) {
		sm, err := r.store.LoadNext(filters, seq)
		if err != nil {
			break
		}
		left--
		hdr := directHeader(r.name, sm, req.NoHeaders, &batchPos{pending: left, last: last})
		r.env.Transport.Publish(reply, "", hdr, sm.Data)
		last, seq, sent, bytes = sm.Seq, sm.Seq+1, sent+1, bytes+len(sm.Subject)+len(sm.Data)+len(sm.Header)
	}
	if sent == 0 {
		r.env.Transport.Publish(reply, "", statusNotFound, nil)
		return
	}
	eob := "NATS/1.0 204 EOB\r\nNats-Num-Pending: " + strconv.FormatUint(left, 10) +
		"\r\nNats-Last-Sequence: " + strconv.FormatUint(last, 10) + "\r\n\r\n"
	r.env.Transport.Publish(reply, "", []byte(eob), nil)
}

// pendingFrom counts the messages matching filters at or after seq.
func (r *Stream) pendingFrom(filters []string, seq uint64) uint64 {
	var n uint64
	for {
		sm, err := r.store.LoadNext(filters, seq)
		if err != nil {
			return n
		}
		n, seq = n+1, sm.Seq+1
	}
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
