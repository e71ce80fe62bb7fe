package jetstream

import (
	"errors"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
)

// MsgGetRequest selects one message (nats-server v2.15.2 STREAM.MSG.GET,
// jsMsgGetRequest): by sequence, last by subject, next at or after Seq by
// subject, or the first at or after StartTime (with NextFor: the first on
// that subject from there).
type MsgGetRequest struct {
	Seq       uint64     `json:"seq,omitempty"`
	LastFor   string     `json:"last_by_subj,omitempty"`
	NextFor   string     `json:"next_by_subj,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
	NoHeaders bool       `json:"no_hdr,omitempty"`
}

// GetMsg loads the message a request selects, as nats-server v2.15.2
// jsMsgGetRequest does: start_time stands for the sequence of the first
// message at or after it (streamrun.SeqFromTime). No selector, or selectors that
// conflict (seq, last_by_subj and start_time are exclusive; last_by_subj
// goes with no next_by_subj), give 10003; nothing found gives 10037.
func (js *JetStream) GetMsg(name string, req MsgGetRequest) (*store.StoredMsg, *jserr.Error) {
	r, jerr := js.lookup(name)
	if jerr != nil {
		return nil, jerr
	}
	if (req.Seq > 0 && (req.LastFor != "" || req.StartTime != nil)) ||
		(req.LastFor != "" && (req.NextFor != "" || req.StartTime != nil)) ||
		(req.Seq == 0 && req.LastFor == "" && req.NextFor == "" && req.StartTime == nil) {
		return nil, jserr.New(jserr.BadRequest)
	}
	seq := req.Seq
	if req.StartTime != nil {
		seq = streamrun.SeqFromTime(r.Store(), req.StartTime.UnixNano())
	}
	var sm *store.StoredMsg
	var err error
	switch {
	case seq > 0 && req.NextFor == "":
		sm, err = r.Store().Load(seq)
	case req.NextFor != "":
		sm, err = r.Store().LoadNext([]string{req.NextFor}, seq)
	default:
		sm, err = r.Store().LoadLast(req.LastFor)
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

// AccountLimits are an account's JetStream limits, in nats-server
// v2.15.2's keys (JetStreamAccountLimits); -1 is unlimited. MaxConsumers
// is per stream; MaxAckPending bounds each consumer's max_ack_pending
// (consumer.AccountLimits).
type AccountLimits struct {
	MaxMemory            int64 `json:"max_memory"`
	MaxStore             int64 `json:"max_storage"`
	MaxStreams           int   `json:"max_streams"`
	MaxConsumers         int   `json:"max_consumers"`
	MaxAckPending        int   `json:"max_ack_pending"`
	MemoryMaxStreamBytes int64 `json:"memory_max_stream_bytes"`
	StoreMaxStreamBytes  int64 `json:"storage_max_stream_bytes"`
	MaxBytesRequired     bool  `json:"max_bytes_required"`
}

// Unlimited are the limits of an account with none: every one -1.
var Unlimited = AccountLimits{-1, -1, -1, -1, -1, -1, -1, false}

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

// limits returns the account's limits (Config.Limits, -1 for none). The
// server's max_memory_store and max_file_store are not account limits,
// and nats-server v2.15.2 reports -1 with them set too.
func (js *JetStream) limits() AccountLimits {
	l := js.acctLimits()
	if l == nil {
		return Unlimited
	}
	return *l
}

// consumerLimits returns the account's limits that bound a consumer's
// config.
func (js *JetStream) consumerLimits() consumer.AccountLimits {
	return consumer.AccountLimits{MaxAckPending: js.limits().MaxAckPending}
}

// checkAccountLimitsLocked applies the account's limits to a new or
// changed stream config, in nats-server v2.15.2's order and with its
// errors: the number of streams (10027, new streams only), max_bytes
// required (10113), a stream's max_bytes above the account's per-stream
// maximum (10122). The caller holds js.mu.
func (js *JetStream) checkAccountLimitsLocked(cfg *stream.Config, isNew bool) *jserr.Error {
	l := js.acctLimits()
	if l == nil {
		return nil
	}
	if isNew && l.MaxStreams > 0 && len(js.streams) >= l.MaxStreams {
		return jserr.New(jserr.MaximumStreamsLimit)
	}
	return js.checkPerStreamLimits(l, cfg)
}

// checkPerStreamLimits applies the account's limits l that bear on one
// stream's config: max_bytes required (10113), and its max_bytes above
// the account's per-stream maximum (10122).
func (js *JetStream) checkPerStreamLimits(l *AccountLimits, cfg *stream.Config) *jserr.Error {
	if l.MaxBytesRequired && cfg.MaxBytes <= 0 {
		return jserr.New(jserr.StreamMaxBytesRequired)
	}
	perStream := l.StoreMaxStreamBytes
	if cfg.Storage == stream.MemoryStorage {
		perStream = l.MemoryMaxStreamBytes
	}
	if perStream > 0 && cfg.MaxBytes > perStream {
		return jserr.New(jserr.StreamMaxStreamBytesExceeded)
	}
	return nil
}
