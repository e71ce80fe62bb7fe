package jsapi

import (
	"maps"
	"slices"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
)

// ApiPagedRequest is the paging part of a request (nats-server's name, so
// decoding errors read "JSApiStreamInfoRequest.ApiPagedRequest.offset").
type ApiPagedRequest struct {
	Offset int `json:"offset"`
}

// JSApiStreamInfoRequest is the optional body of STREAM.INFO (nats-server
// v2.15.2 STREAM.INFO, jsStreamInfoRequest).
type JSApiStreamInfoRequest struct {
	ApiPagedRequest
	DeletedDetails bool   `json:"deleted_details,omitempty"`
	SubjectsFilter string `json:"subjects_filter,omitempty"`
}

// streamInfoResponse is the STREAM.INFO response: type, error, the paging
// keys (always, even on errors), then the StreamInfo keys inline.
type streamInfoResponse struct {
	apiResponse
	apiPaged
	*jetstream.StreamInfo
}

// streamInfo follows nats-server v2.15.2 jsStreamInfoRequest: level, the
// body decoded only when it is a JSON object or array (10025), the stream
// (10059). The engine's info is sent as it is: the config with the
// server's version metadata, "cluster":{"leader":<server name>}.
func streamInfo(a *API, r *request) (response, *jserr.Error) {
	resp := &streamInfoResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	var req JSApiStreamInfoRequest
	if isJSONObjectOrArray(r.data) {
		if err := decode(r.data, &req); err != nil {
			return resp, err
		}
	}
	opts := jetstream.InfoOptions{DeletedDetails: req.DeletedDetails, SubjectsFilter: req.SubjectsFilter}
	si, err := a.js.StreamInfo(r.stream, opts)
	if err != nil {
		return resp, err
	}
	if req.SubjectsFilter != "" {
		pageSubjects(&resp.apiPaged, &si.State, max(req.Offset, 0))
	}
	resp.StreamInfo = si
	return resp, nil
}

// pageSubjects cuts the subject counts down to one page of at most
// subjectsInfoLimit subjects in name order, starting at offset. As in
// nats-server v2.15.2: with no matching subject the paging keys stay 0;
// otherwise total is the number of matching subjects, limit 100000 and
// offset the requested offset, not clamped (an offset past the end
// reports that offset and no "subjects").
func pageSubjects(p *apiPaged, st *jetstream.StreamState, offset int) {
	n := len(st.Subjects)
	if n == 0 {
		return
	}
	p.Total, p.Offset, p.Limit = n, offset, subjectsInfoLimit
	if offset == 0 && n <= subjectsInfoLimit {
		return
	}
	keys := slices.Sorted(maps.Keys(st.Subjects))
	start, end := page(n, offset, subjectsInfoLimit)
	var pg map[string]uint64
	if end > start {
		pg = make(map[string]uint64, end-start)
		for _, k := range keys[start:end] {
			pg[k] = st.Subjects[k]
		}
	}
	st.Subjects = pg
}
