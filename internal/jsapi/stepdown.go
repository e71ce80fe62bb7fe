package jsapi

import (
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// Leaders is what the leadership endpoints ask of a clustered JetStream
// (internal/cluster/jscluster; docs/cluster.md, "Step-down"): a
// Cluster that has it serves $JS.API.STREAM.LEADER.STEPDOWN, and the
// system account's System serves $JS.API.META.LEADER.STEPDOWN through it.
// A Cluster without it answers those subjects 10009, as before.
type Leaders interface {
	// StreamLeaderStepDown hands the leadership of the account's stream
	// to another replica, on the server that leads it. placement parses
	// the request's optional placement, called only when the step-down
	// gets that far (nats-server's order: a stream with one replica
	// answers success whatever the body). Errors: 10059 no such stream,
	// 10008 no leader, the placement's 10025 and 10005 (nats-server
	// v2.15.2 getStepDownPreferredPlacement: `preferred server "x" not
	// known`, `... is already leader`, `no replacement peer connected`),
	// 10041 when the Raft layer refuses.
	StreamLeaderStepDown(stream string, placement func() (*stream.Placement, *jserr.Error)) *jserr.Error
}

// leaderStepDownRequest is the optional body of the step-down requests
// (nats-server JSApiLeaderStepdownRequest).
type leaderStepDownRequest struct {
	Placement *stream.Placement `json:"placement,omitempty"`
}

// successResponse is a response whose success is {"success":true}
// (nats-server's step-down responses); success is left out on failure.
type successResponse struct {
	apiResponse
	Success bool `json:"success,omitempty"`
}

// parsePlacement returns a step-down request body's placement: none when
// the body is not a JSON object or array (nats-server
// isJSONObjectOrArray: the body is then ignored), 10025 when it does not
// decode.
func parsePlacement(body []byte) (*stream.Placement, *jserr.Error) {
	if !isJSONObjectOrArray(body) {
		return nil, nil
	}
	var req leaderStepDownRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	return req.Placement, nil
}

// streamLeaderStepDown follows nats-server v2.15.2
// jsStreamLeaderStepDownRequest: on a single server 10010 (clusterOnly);
// in a cluster the level (10185), then the cluster (Leaders), answered by
// the stream's leader (Cluster.Answers).
func streamLeaderStepDown(a *API, r *request) (response, *jserr.Error) {
	l, ok := a.opts.Cluster.(Leaders)
	if !ok {
		return clusterOnly(a, r)
	}
	resp := &successResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if err := l.StreamLeaderStepDown(r.stream, func() (*stream.Placement, *jserr.Error) { return parsePlacement(r.data) }); err != nil {
		return resp, err
	}
	resp.Success = true
	return resp, nil
}

// Peers is what $JS.API.STREAM.PEER.REMOVE and STREAM.PEER.EVACUATE
// ask of a clustered JetStream (an optional capability of Cluster;
// without it the subjects answer 10009). Both move the replica as
// nats-server v2.15.2's evacuate does (a new replica caught up before
// the old one leaves: docs/cluster.md, "Evacuating a server"), with
// requireReplicas: no server to take it is 10075.
type Peers interface {
	// StreamRemovePeer moves the replica on peer (a server name or peer
	// ID) of the account's stream to another server, on the meta leader
	// (docs/cluster.md, "Replacing a replica"). Errors: 10059 no such
	// stream, 10040 peer not a member, 10075 when no server can take it.
	StreamRemovePeer(stream, peer string) *jserr.Error
}

// streamRemovePeerRequest is PEER.REMOVE's body (nats-server
// JSApiStreamRemovePeerRequest).
type streamRemovePeerRequest struct {
	Peer string `json:"peer"`
}

// streamRemovePeer answers STREAM.PEER.REMOVE and STREAM.PEER.EVACUATE
// (each its own response type: route.go), following nats-server v2.15.2
// jsStreamRemapPeerRequest:
// on a single server 10010 (clusterOnly); in a cluster, on the meta
// leader (Cluster.Answers): the level (10185), an empty body (10003),
// JSON (10025), no peer named (10003), then the cluster (Peers).
func streamRemovePeer(a *API, r *request) (response, *jserr.Error) {
	p, ok := a.opts.Cluster.(Peers)
	if !ok {
		return clusterOnly(a, r)
	}
	resp := &successResponse{}
	peer, err := peerOf(r)
	if err != nil {
		return resp, err
	}
	if err := p.StreamRemovePeer(r.stream, peer); err != nil {
		return resp, err
	}
	resp.Success = true
	return resp, nil
}

// ConsumerLeaders is what $JS.API.CONSUMER.LEADER.STEPDOWN asks of a
// clustered JetStream that replicates consumers (an optional capability
// of Cluster; without it the subject answers 10009).
type ConsumerLeaders interface {
	// ConsumerLeaderStepDown hands the leadership of the stream's
	// consumer to another replica, on the server whose replica leads it
	// (a consumer the cluster does not replicate answers success where
	// it runs, as nats-server's consumers without a Raft group). Errors:
	// 10059, 10014, 10008 no leader, the placement's 10025 and 10005,
	// 10041 when the Raft layer refuses.
	ConsumerLeaderStepDown(stream, consumer string, placement func() (*stream.Placement, *jserr.Error)) *jserr.Error
}

// consumerLeaderStepDown follows nats-server v2.15.2
// jsConsumerLeaderStepDownRequest: on a single server 10010
// (clusterOnly); in a cluster the level (10185), a consumer the meta
// group does not hold (10014, unheldConsumer, on the meta leader), then
// the cluster (ConsumerLeaders), answered by the consumer's leader
// (ConsumerCluster.AnswersConsumer).
func consumerLeaderStepDown(a *API, r *request) (response, *jserr.Error) {
	l, ok := a.opts.Cluster.(ConsumerLeaders)
	if !ok {
		return clusterOnly(a, r)
	}
	resp := &successResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if err := a.unheldConsumer(r); err != nil {
		return resp, err
	}
	if err := l.ConsumerLeaderStepDown(r.stream, r.consumer, func() (*stream.Placement, *jserr.Error) { return parsePlacement(r.data) }); err != nil {
		return resp, err
	}
	resp.Success = true
	return resp, nil
}

// ConsumerPeers is what $JS.API.CONSUMER.PEER.EVACUATE and
// CONSUMER.PEER.REMOVE ask of a clustered JetStream that replicates
// consumers (an optional capability of Cluster; without it the subjects
// answer 10009).
type ConsumerPeers interface {
	// ConsumerEvacuatePeer moves the replica on peer (a server name or
	// peer ID) of the account's stream's consumer to another server of
	// the stream, on the meta leader (docs/cluster.md, "Evacuating a
	// server"). Errors: 10059 no such stream, 10014 no such consumer,
	// 10040 peer not a member, 10075 when no server can take it.
	ConsumerEvacuatePeer(stream, consumer, peer string) *jserr.Error
	// ConsumerRemovePeer is CONSUMER.PEER.REMOVE: the replica on peer
	// leaves the consumer for another server of the stream, as
	// ConsumerEvacuatePeer moves it, with its errors (docs/cluster.md,
	// "Evacuating a server").
	ConsumerRemovePeer(stream, consumer, peer string) *jserr.Error
}

// consumerEvacuatePeer follows nats-server v2.15.2
// jsConsumerRemapPeerRequest: on a single server 10010 (clusterOnly); in
// a cluster, on the meta leader (ConsumerCluster.AnswersConsumer): the
// level (10185), an empty body (10003), JSON (10025), no peer named
// (10003), then the cluster (ConsumerPeers.ConsumerEvacuatePeer).
func consumerEvacuatePeer(a *API, r *request) (response, *jserr.Error) {
	return consumerRemap(a, r, ConsumerPeers.ConsumerEvacuatePeer)
}

// consumerRemovePeer answers CONSUMER.PEER.REMOVE as consumerEvacuatePeer
// answers CONSUMER.PEER.EVACUATE (nats-server v2.15.2 serves both with
// jsConsumerRemapPeerRequest, its remove flag set for this one), the
// cluster's ConsumerRemovePeer doing the move.
func consumerRemovePeer(a *API, r *request) (response, *jserr.Error) {
	return consumerRemap(a, r, ConsumerPeers.ConsumerRemovePeer)
}

// consumerRemap checks request r as consumerEvacuatePeer says and hands
// the peer it names to remap of the cluster.
func consumerRemap(a *API, r *request, remap func(ConsumerPeers, string, string, string) *jserr.Error) (response, *jserr.Error) {
	p, ok := a.opts.Cluster.(ConsumerPeers)
	if !ok {
		return clusterOnly(a, r)
	}
	resp := &successResponse{}
	peer, err := peerOf(r)
	if err != nil {
		return resp, err
	}
	if err := remap(p, r.stream, r.consumer, peer); err != nil {
		return resp, err
	}
	resp.Success = true
	return resp, nil
}

// peerOf checks a peer remove or evacuate request r as nats-server
// v2.15.2 checks it (jsStreamRemapPeerRequest, jsConsumerRemapPeerRequest)
// and returns the peer it names: the API level (10185), an empty body
// (10003), JSON (10025), no peer named (10003).
func peerOf(r *request) (string, *jserr.Error) {
	if err := r.checkLevel(); err != nil {
		return "", err
	}
	if isEmptyRequest(r.data) {
		return "", jserr.New(jserr.BadRequest)
	}
	var req streamRemovePeerRequest
	if err := decode(r.data, &req); err != nil {
		return "", err
	}
	if req.Peer == "" {
		return "", jserr.New(jserr.BadRequest)
	}
	return req.Peer, nil
}
