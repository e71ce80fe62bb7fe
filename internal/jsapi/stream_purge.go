package jsapi

import (
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
)

// JSApiStreamPurgeRequest is the optional body of STREAM.PURGE
// (nats-server v2.15.2 STREAM.PURGE, jsStreamPurgeRequest; the purge variants, ADR-10).
type JSApiStreamPurgeRequest struct {
	Sequence uint64 `json:"seq,omitempty"`
	Subject  string `json:"filter,omitempty"`
	Keep     uint64 `json:"keep,omitempty"`
}

// streamPurgeResponse always has "purged", 0 on errors (nats-server
// v2.15.2).
type streamPurgeResponse struct {
	apiResponse
	Success bool   `json:"success,omitempty"`
	Purged  uint64 `json:"purged"`
}

// streamPurge follows nats-server v2.15.2 jsStreamPurgeRequest: level, the
// body decoded only when it is a JSON object or array (anything else
// purges everything), seq with keep (10003, before the stream is looked
// up), then the engine (10059, 10109 sealed, 10110 deny_purge).
func streamPurge(a *API, r *request) (response, *jserr.Error) {
	resp := &streamPurgeResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	var req JSApiStreamPurgeRequest
	if isJSONObjectOrArray(r.data) {
		if err := decode(r.data, &req); err != nil {
			return resp, err
		}
		if req.Sequence > 0 && req.Keep > 0 {
			return resp, jserr.New(jserr.BadRequest)
		}
	}
	n, err := a.js.Purge(r.stream, store.PurgeRequest{Subject: req.Subject, Seq: req.Sequence, Keep: req.Keep})
	if err != nil {
		resp.errorIsResult = a.purgeFailed(r.stream, err)
		return resp, err
	}
	resp.Success, resp.Purged = true, n
	return resp, nil
}

// purgeFailed reports whether err came from the purge itself rather than
// from the checks before it (missing stream, sealed, deny_purge): any
// other error, or a 10110 on a stream without deny_purge.
func (a *API) purgeFailed(name string, err *jserr.Error) bool {
	switch jserr.ErrCode(err.ErrCode) {
	case jserr.StreamNotFound, jserr.StreamSealed, jserr.BadRequest:
		return false
	case jserr.StreamPurgeFailed:
		si, ierr := a.js.StreamInfo(name, jetstream.InfoOptions{})
		return ierr == nil && !si.Config.DenyPurge
	}
	return true
}
