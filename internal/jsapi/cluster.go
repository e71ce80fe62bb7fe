package jsapi

import "github.com/cairnmq/cairn/internal/jserr"

// clusterResponse is the response of an endpoint that needs a cluster.
type clusterResponse struct {
	apiResponse
}

// clusterOnly answers the stream and consumer leader stepdown, peer remove
// and evacuate subjects and STREAM.CANCEL_MOVE as a single nats-server
// v2.15.2 does: 10010 "JetStream clustering support required", whatever
// the body.
func clusterOnly(_ *API, r *request) (response, *jserr.Error) {
	resp := &clusterResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	return resp, jserr.New(jserr.ClusterRequired)
}

// snapshotResponse is the STREAM.SNAPSHOT error response.
type snapshotResponse struct {
	apiResponse
}

// streamSnapshot answers 10003: snapshots are not implemented (nats-server
// v2.15.2 gives 10003 to an empty body, and streams the snapshot
// otherwise).
func streamSnapshot(_ *API, r *request) (response, *jserr.Error) {
	resp := &snapshotResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	return resp, jserr.New(jserr.BadRequest)
}

// restoreResponse always has deliver_subject, "" on errors (nats-server
// v2.15.2).
type restoreResponse struct {
	apiResponse
	DeliverSubject string `json:"deliver_subject"`
}

// streamRestore answers 10003: restores are not implemented.
func streamRestore(_ *API, r *request) (response, *jserr.Error) {
	resp := &restoreResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	return resp, jserr.New(jserr.BadRequest)
}
