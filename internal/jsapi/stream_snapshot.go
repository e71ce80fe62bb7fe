package jsapi

import (
	"encoding/json"
	"strings"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/subject"
)

// JSApiStreamSnapshotRequest is the body of STREAM.SNAPSHOT (nats-server
// v2.15.2 JSApiStreamSnapshotRequest). jsck (check every message's
// checksum first) needs nothing from cairn: every message the snapshot
// reads is checked against its checksum as it is loaded, and a damaged
// one fails the snapshot.
type JSApiStreamSnapshotRequest struct {
	DeliverSubject string `json:"deliver_subject"`
	NoConsumers    bool   `json:"no_consumers,omitempty"`
	ChunkSize      int    `json:"chunk_size,omitempty"`
	WindowSize     int    `json:"window_size,omitempty"`
	CheckMsgs      bool   `json:"jsck,omitempty"`
}

// snapshotResponse is the STREAM.SNAPSHOT response: the stream's stored
// config and its state when the snapshot began.
type snapshotResponse struct {
	apiResponse
	Config *stream.Config         `json:"config,omitempty"`
	State  *jetstream.StreamState `json:"state,omitempty"`
}

// streamSnapshot follows nats-server v2.15.2 jsStreamSnapshotRequest:
// level, an empty body (10003), the stream (10059), JSON (10025), a
// deliver subject one may publish to (10015); then it answers and
// streams the snapshot (jetstream.JetStream.Snapshot).
func streamSnapshot(a *API, r *request) (response, *jserr.Error) {
	resp := &snapshotResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if isEmptyRequest(r.data) {
		return resp, jserr.New(jserr.BadRequest)
	}
	if err := a.streamExists(r.stream); err != nil {
		return resp, err
	}
	var req JSApiStreamSnapshotRequest
	if err := decode(r.data, &req); err != nil {
		return resp, err
	}
	if !subject.ValidLiteral(req.DeliverSubject) {
		return resp, jserr.New(jserr.SnapshotDeliverSubjectInvalid)
	}
	start, err := a.js.Snapshot(r.stream, jetstream.SnapshotRequest{
		DeliverSubject: req.DeliverSubject, NoConsumers: req.NoConsumers,
		ChunkSize: req.ChunkSize, WindowSize: req.WindowSize, Client: r.client,
	})
	if err != nil {
		return resp, err
	}
	resp.Config, resp.State = &start.Config, &start.State
	resp.after = start.Send
	return resp, nil
}

// JSApiStreamRestoreRequest is the body of STREAM.RESTORE: the stream's
// config and the state its snapshot holds (nats-server v2.15.2
// JSApiStreamRestoreRequest). The state is not used: the snapshot
// carries its own.
type JSApiStreamRestoreRequest struct {
	Config StreamConfig    `json:"config"`
	State  json.RawMessage `json:"state"`
}

// restoreResponse always has deliver_subject, "" on errors (nats-server
// v2.15.2).
type restoreResponse struct {
	apiResponse
	DeliverSubject string `json:"deliver_subject"`
}

// streamRestore follows nats-server v2.15.2 jsStreamRestoreRequest:
// level, an empty body (10003), JSON (10025), the config's name (taken
// from the subject when empty; 10056 when it differs), path separators
// (10128), then the engine (the config, the limits, 10130); it answers
// with the subject to send the chunks to.
func streamRestore(a *API, r *request) (response, *jserr.Error) {
	resp := &restoreResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if isEmptyRequest(r.data) {
		return resp, jserr.New(jserr.BadRequest)
	}
	var req JSApiStreamRestoreRequest
	if err := decode(r.data, &req); err != nil {
		return resp, err
	}
	cfg := req.Config
	if cfg.Name == "" {
		cfg.Name = r.stream
	}
	if cfg.Name != r.stream {
		return resp, jserr.New(jserr.StreamMismatch)
	}
	if strings.ContainsAny(r.stream, `\/`) {
		return resp, jserr.New(jserr.StreamNameContainsPathSeparators)
	}
	begin := a.js.BeginRestore
	if a.opts.Cluster != nil {
		// In a cluster the meta group places and assigns the stream
		// (Restorer); installing it on the answering server alone would
		// make a stream the cluster does not know.
		rc, ok := a.opts.Cluster.(Restorer)
		if !ok {
			return resp, jserr.New(jserr.ClusterNotLeader)
		}
		begin = rc.StreamRestore
	}
	subj, err := begin(cfg, r.client, a.restoreDone)
	if err != nil {
		return resp, err
	}
	resp.DeliverSubject = subj
	return resp, nil
}

// Restorer is implemented by a Cluster that takes stream restores
// (internal/cluster/jscluster restore.go, as nats-server v2.15.2's
// jsClusteredStreamRestoreRequest): as jetstream.BeginRestore, it
// returns the subject the chunks go to, and done answers the last one.
type Restorer interface {
	StreamRestore(cfg stream.Config, client []byte, done jetstream.RestoreDone) (string, *jserr.Error)
}

// restoreResultResponse is the answer to the last chunk of a restore, a
// stream_create_response: the stream's info, or the error.
type restoreResultResponse struct {
	apiResponse
	*jetstream.StreamInfo
}

// restoreDone answers the end of a restore (jetstream.RestoreDone). As in
// nats-server, the answer is not counted in the API statistics.
func (a *API) restoreDone(reply string, info *jetstream.StreamInfo, err *jserr.Error) {
	if reply == "" {
		return
	}
	resp := &restoreResultResponse{StreamInfo: info}
	resp.Type = typePrefix + "stream_create_response"
	resp.Error = err
	if info != nil {
		info.Cluster, info.Domain = nil, "" // as nats-server's restore answer
	}
	body, merr := json.Marshal(resp)
	if merr != nil {
		a.opts.Logf("jsapi: encode restore response: %v", merr)
		return
	}
	a.tr.Publish(reply, "", nil, body)
}
