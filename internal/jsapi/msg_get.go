package jsapi

import (
	"time"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
)

// JSApiMsgGetRequest is the body of STREAM.MSG.GET (nats-server v2.15.2 STREAM.MSG.GET and STREAM.MSG.DELETE). It has every key nats-server v2.15.2 decodes, so that the
// conflicts are checked as it checks them; batch, max_bytes and the multi
// keys belong to direct get and make the request a bad one.
type JSApiMsgGetRequest struct {
	Seq          uint64     `json:"seq,omitempty"`
	LastFor      string     `json:"last_by_subj,omitempty"`
	NextFor      string     `json:"next_by_subj,omitempty"`
	Batch        int        `json:"batch,omitempty"`
	MaxBytes     int        `json:"max_bytes,omitempty"`
	StartTime    *time.Time `json:"start_time,omitempty"`
	MultiLastFor []string   `json:"multi_last,omitempty"`
	UpToSeq      uint64     `json:"up_to_seq,omitempty"`
	UpToTime     *time.Time `json:"up_to_time,omitempty"`
	NoHeaders    bool       `json:"no_hdr,omitempty"`
}

// msgGetResponse is {"type":…,"message":{…}}.
type msgGetResponse struct {
	apiResponse
	Message *storedMsg `json:"message,omitempty"`
}

// storedMsg is nats-server's StoredMsg: the header block and the payload
// in base64 (left out when empty), the time in RFC 3339 UTC. For example
// (nats-server v2.15.2):
//
//	{"subject":"y.b","seq":2,"hdrs":"TkFUUy8xLjANCkgxOiB2MQ0KDQo=","data":"dHdv","time":"2026-11-29T10:43:37.891349903Z"}
type storedMsg struct {
	Subject  string    `json:"subject"`
	Sequence uint64    `json:"seq"`
	Header   []byte    `json:"hdrs,omitempty"`
	Data     []byte    `json:"data,omitempty"`
	Time     time.Time `json:"time"`
}

// msgGet follows nats-server v2.15.2 jsMsgGetRequest: level, an empty body
// (10003), JSON (10025), batch or max_bytes (10003), conflicting or
// missing selectors (10003), all before the stream is looked up (10059);
// nothing found is 10037. A successful response is not counted in the
// API statistics, as in nats-server.
func msgGet(a *API, r *request) (response, *jserr.Error) {
	resp := &msgGetResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if isEmptyRequest(r.data) {
		return resp, jserr.New(jserr.BadRequest)
	}
	var req JSApiMsgGetRequest
	if err := decode(r.data, &req); err != nil {
		return resp, err
	}
	if !req.valid() {
		return resp, jserr.New(jserr.BadRequest)
	}
	sm, err := a.js.GetMsg(r.stream, jetstream.MsgGetRequest{Seq: req.Seq, LastFor: req.LastFor, NextFor: req.NextFor, StartTime: req.StartTime})
	if err != nil {
		return resp, err
	}
	resp.Message = toStoredMsg(sm, req.NoHeaders)
	return resp, nil
}

// valid reports whether the selectors go together: no batch or max_bytes;
// seq, last_by_subj and start_time exclusive; next_by_subj not with
// last_by_subj; at least one selector.
func (q *JSApiMsgGetRequest) valid() bool {
	switch {
	case q.Batch > 0 || q.MaxBytes > 0:
		return false
	case q.Seq == 0 && q.LastFor == "" && q.NextFor == "" && q.StartTime == nil:
		return false
	case q.Seq > 0 && (q.LastFor != "" || q.StartTime != nil):
		return false
	case q.LastFor != "" && (q.StartTime != nil || q.NextFor != ""):
		return false
	}
	return true
}

func toStoredMsg(sm *store.StoredMsg, noHeaders bool) *storedMsg {
	m := &storedMsg{Subject: sm.Subject, Sequence: sm.Seq, Data: sm.Data, Time: time.Unix(0, sm.Time).UTC()}
	if !noHeaders {
		m.Header = sm.Header
	}
	return m
}
