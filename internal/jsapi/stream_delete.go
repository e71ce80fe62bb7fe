package jsapi

import "github.com/cairnmq/cairn/internal/jserr"

// streamDeleteResponse is {"type":…,"success":true}.
type streamDeleteResponse struct {
	apiResponse
	Success bool `json:"success,omitempty"`
}

// streamDelete follows nats-server v2.15.2 jsStreamDeleteRequest: level
// (10185), a non-empty body (10038, checked before the stream), then the
// engine (10059).
func streamDelete(a *API, r *request) (response, *jserr.Error) {
	resp := &streamDeleteResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if !isEmptyRequest(r.data) {
		return resp, jserr.New(jserr.NotEmptyRequest)
	}
	if err := a.meta().DeleteStream(r.stream); err != nil {
		return resp, err
	}
	resp.Success = true
	return resp, nil
}
