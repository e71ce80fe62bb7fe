package jsapi

import (
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
)

// JSApiMsgDeleteRequest is the body of STREAM.MSG.DELETE. NoErase is
// accepted and ignored: the engine removes the message without
// overwriting it either way.
type JSApiMsgDeleteRequest struct {
	Seq     uint64 `json:"seq"`
	NoErase bool   `json:"no_erase,omitempty"`
}

// msgDeleteResponse is {"type":…,"success":true}.
type msgDeleteResponse struct {
	apiResponse
	Success bool `json:"success,omitempty"`
}

// msgDelete follows nats-server v2.15.2 jsMsgDeleteRequest: level, an
// empty body (10003), JSON (10025), then the engine: 10059, 10109 sealed,
// 10057 deny_delete, 10043 "sequence <n> not found" (also for seq 0).
func msgDelete(a *API, r *request) (response, *jserr.Error) {
	resp := &msgDeleteResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if isEmptyRequest(r.data) {
		return resp, jserr.New(jserr.BadRequest)
	}
	var req JSApiMsgDeleteRequest
	if err := decode(r.data, &req); err != nil {
		return resp, err
	}
	if err := a.js.DeleteMsg(r.stream, req.Seq); err != nil {
		resp.errorIsResult = a.deleteFailed(r.stream, err)
		return resp, err
	}
	resp.Success = true
	return resp, nil
}

// deleteFailed reports whether err came from removing the message rather
// than from the checks before it (missing stream, sealed, deny_delete):
// 10043, or a 10057 on a stream without deny_delete.
func (a *API) deleteFailed(name string, err *jserr.Error) bool {
	switch jserr.ErrCode(err.ErrCode) {
	case jserr.SequenceNotFound:
		return true
	case jserr.StreamMsgDeleteFailed:
		si, ierr := a.js.StreamInfo(name, jetstream.InfoOptions{})
		return ierr == nil && !si.Config.DenyDelete
	}
	return false
}
