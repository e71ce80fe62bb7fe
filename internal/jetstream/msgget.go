package jetstream

import (
	"errors"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
)

// MsgGetRequest selects one message (nats-server v2.15.2 STREAM.MSG.GET and STREAM.MSG.DELETE): by
// sequence, last by subject, or next at or after Seq by subject.
type MsgGetRequest struct {
	Seq       uint64 `json:"seq,omitempty"`
	LastFor   string `json:"last_by_subj,omitempty"`
	NextFor   string `json:"next_by_subj,omitempty"`
	NoHeaders bool   `json:"no_hdr,omitempty"`
}

// GetMsg loads the message a request selects. No selector, or last_by_subj
// with a sequence, gives 10003; nothing found gives 10037.
func (js *JetStream) GetMsg(name string, req MsgGetRequest) (*store.StoredMsg, *jserr.Error) {
	r, jerr := js.lookup(name)
	if jerr != nil {
		return nil, jerr
	}
	var sm *store.StoredMsg
	var err error
	switch {
	case req.LastFor != "" && req.Seq == 0 && req.NextFor == "":
		sm, err = r.Store().LoadLast(req.LastFor)
	case req.NextFor != "" && req.LastFor == "":
		sm, err = r.Store().LoadNext([]string{req.NextFor}, req.Seq)
	case req.Seq > 0 && req.LastFor == "" && req.NextFor == "":
		sm, err = r.Store().Load(req.Seq)
	default:
		return nil, jserr.New(jserr.BadRequest)
	}
	if errors.Is(err, store.ErrCorrupt) {
		// Never served; the operator gets the details, the client the
		// answer nats-server gives for a damaged message (10037).
		js.logf("stream %s: message get: %v", name, err)
	}
	return sm, msgGetError(err)
}

func msgGetError(err error) *jserr.Error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrEOF), errors.Is(err, store.ErrCorrupt):
		return jserr.New(jserr.NoMessageFound)
	}
	return jserr.From(err, jserr.StreamGeneralError)
}

// AccountInfo is the usage and limits part of $JS.API.INFO (nats-server
// v2.15.2 $JS.API.INFO, jsAccountInfoRequest); bytes for memory and storage, -1 for unlimited.
type AccountInfo struct {
	Memory    uint64        `json:"memory"`
	Store     uint64        `json:"storage"`
	Streams   int           `json:"streams"`
	Consumers int           `json:"consumers"`
	Limits    AccountLimits `json:"limits"`
}

// AccountLimits are the account's JetStream limits; -1 is unlimited.
type AccountLimits struct {
	MaxMemory    int64 `json:"max_memory"`
	MaxStore     int64 `json:"max_storage"`
	MaxStreams   int   `json:"max_streams"`
	MaxConsumers int   `json:"max_consumers"`
}

// Account returns the account's usage and limits.
func (js *JetStream) Account() AccountInfo {
	js.mu.Lock()
	runners := make([]*streamEntry, 0, len(js.streams))
	for _, r := range js.streams {
		runners = append(runners, r)
	}
	js.mu.Unlock()
	ai := AccountInfo{Streams: len(runners), Limits: js.limits()}
	for _, r := range runners {
		st := r.Store().State(false)
		ai.Consumers += r.numConsumers()
		if r.Config().Storage == stream.MemoryStorage {
			ai.Memory += st.Bytes
		} else {
			ai.Store += st.Bytes
		}
	}
	return ai
}

// limits returns the account's limits: none (-1). The server's
// max_memory_store and max_file_store are not account limits, and
// nats-server v2.15.2 reports -1 with them set too.
func (js *JetStream) limits() AccountLimits {
	return AccountLimits{MaxMemory: -1, MaxStore: -1, MaxStreams: -1, MaxConsumers: -1}
}
