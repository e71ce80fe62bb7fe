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
