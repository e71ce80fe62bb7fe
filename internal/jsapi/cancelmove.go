package jsapi

import (
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
)

// Movers is what $JS.API.STREAM.CANCEL_MOVE asks of a clustered
// JetStream that records stream moves (an optional capability of
// Cluster; without it the subject answers 10009).
type Movers interface {
	// StreamCancelMove turns the account's stream's move in flight back
	// to the servers and placement it began from, on the meta leader
	// (docs/cluster.md, "Moving a stream"), and returns the stream's
	// info with the origin's placement in its config. Errors: 10059 no
	// such stream, 10129 "stream reconfiguration not in progress" when
	// no move is in flight, 10008 when the meta group cannot decide.
	StreamCancelMove(stream string) (*jetstream.StreamInfo, *jserr.Error)
}

// streamCancelMoveResponse is nats-server v2.15.2's
// JSApiStreamCancelMoveResponse: the stream's info beside the type.
type streamCancelMoveResponse struct {
	apiResponse
	*jetstream.StreamInfo
}

// streamCancelMove follows nats-server v2.15.2 jsStreamCancelMoveRequest:
// on a single server 10010 (clusterOnly); in a cluster the level
// (10185), then the meta leader (Movers: 10059, 10129). The body is
// ignored.
func streamCancelMove(a *API, r *request) (response, *jserr.Error) {
	m, ok := a.opts.Cluster.(Movers)
	if !ok {
		return clusterOnly(a, r)
	}
	resp := &streamCancelMoveResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	si, err := m.StreamCancelMove(r.stream)
	if err != nil {
		return resp, err
	}
	resp.StreamInfo = si
	return resp, nil
}
