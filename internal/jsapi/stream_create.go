package jsapi

import (
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// StreamConfig is stream.Config under the name nats-server gives it, so
// that a decoding error names the field as nats-server v2.15.2 does:
// "invalid JSON: json: cannot unmarshal number into Go struct field
// StreamConfigRequest.StreamConfig.name of type string".
type StreamConfig = stream.Config

// StreamConfigRequest is the body of STREAM.CREATE and STREAM.UPDATE
// (nats-server v2.15.2 STREAM.CREATE, jsStreamCreateRequest; nats-server v2.15.2 STREAM.UPDATE, jsStreamUpdateRequest): a StreamConfig that may also
// carry "pedantic": refuse what would otherwise be fixed (10157,
// stream.Config.CheckPedantic).
type StreamConfigRequest struct {
	StreamConfig
	Pedantic bool `json:"pedantic,omitempty"`
}

// streamCreateResponse is the STREAM.CREATE response: the StreamInfo keys
// inline, then did_create. nats-server v2.15.2 sends "cluster" here only
// in a cluster, and did_create:true on every success, including an
// identical re-create.
type streamCreateResponse struct {
	apiResponse
	*jetstream.StreamInfo
	DidCreate bool `json:"did_create,omitempty"`
}

// streamUpdateResponse is the STREAM.UPDATE response: the StreamInfo keys
// inline, "cluster" only in a cluster (as nats-server v2.15.2 sends it).
type streamUpdateResponse struct {
	apiResponse
	*jetstream.StreamInfo
}

// streamCreate follows nats-server v2.15.2 jsStreamCreateRequest: level
// (10185), JSON (10025), then the engine, which checks the config in
// one place (stream.Config.PrepareCreate: the name against the subject
// token 10056, so that an empty body or name gives 10056 too and nothing
// is taken from the subject; 10128, sealed, mirror_direct, pedantic
// 10157, validation) and then against the server (10058, 10065, ...).
func streamCreate(a *API, r *request) (response, *jserr.Error) {
	resp := &streamCreateResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	var req StreamConfigRequest
	if err := decode(r.data, &req); err != nil {
		return resp, err
	}
	si, err := a.meta().StreamCreate(jetstream.StreamRequest{Config: req.StreamConfig, Pedantic: req.Pedantic, Subject: r.stream})
	if err != nil {
		return resp, err
	}
	resp.StreamInfo = a.changed(si)
	resp.StreamInfo.Domain = "" // nats-server's create answer has no domain (its update answer has)
	resp.DidCreate = true
	return resp, nil
}

// streamUpdate follows nats-server v2.15.2 jsStreamUpdateRequest: level,
// JSON, then the engine, which checks the config in one place
// (stream.Config.PrepareUpdate: pedantic 10157, defaults and validation,
// so that an empty body gives 10052 before the name check 10056) and
// then against the stream (10059, update rules, 10065).
func streamUpdate(a *API, r *request) (response, *jserr.Error) {
	resp := &streamUpdateResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	var req StreamConfigRequest
	if err := decode(r.data, &req); err != nil {
		return resp, err
	}
	si, err := a.meta().StreamUpdate(jetstream.StreamRequest{Config: req.StreamConfig, Pedantic: req.Pedantic, Subject: r.stream})
	if err != nil {
		return resp, err
	}
	resp.StreamInfo = a.changed(si)
	return resp, nil
}

// changed prepares the info a create or update returns: as the engine
// gives it (the config with the server's version metadata), without
// cluster on a single server; in a cluster with it, as nats-server
// v2.15.2's clustered answers carry it.
func (a *API) changed(si *jetstream.StreamInfo) *jetstream.StreamInfo {
	if a.opts.Cluster == nil {
		si.Cluster = nil
	}
	return si
}
