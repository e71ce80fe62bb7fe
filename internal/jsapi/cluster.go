package jsapi

import (
	"strings"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
)

// Cluster is the clustered JetStream's side of the API
// (internal/cluster/jscluster; docs/cluster.md, "The cluster
// layer", "Who answers"). Every server of a cluster receives every API request (the
// API's subscriptions are the cluster's), and exactly one answers it, as
// in nats-server v2.15.2, where the meta leader answers the requests about
// the cluster's streams and a stream's leader those about the stream.
type Cluster interface {
	// Answers reports whether this server answers a request to the
	// endpoint key ("STREAM.INFO", "" for an unknown subject) naming
	// stream ("" when the endpoint names none). When it does not, the
	// request is dropped here (another server answers), or held and
	// asked about again (AnswerLater, later.go).
	Answers(key, stream string) bool
	// Meta is where the requests that change or list the cluster's
	// streams go on the server that answers them (the meta leader).
	Meta
}

// Meta is what STREAM.CREATE, UPDATE, DELETE, NAMES and LIST ask of the
// engine: the account's JetStream on one server, the meta group in a
// cluster. The errors are the API errors the response carries.
type Meta interface {
	StreamCreate(req jetstream.StreamRequest) (*jetstream.StreamInfo, *jserr.Error)
	StreamUpdate(req jetstream.StreamRequest) (*jetstream.StreamInfo, *jserr.Error)
	DeleteStream(name string) *jserr.Error
	Names(filter string) []string
	StreamInfo(name string, opts jetstream.InfoOptions) (*jetstream.StreamInfo, *jserr.Error)
}

// meta returns where the stream metadata requests go.
func (a *API) meta() Meta {
	if a.opts.Cluster != nil {
		return a.opts.Cluster
	}
	return a.js
}

// clusterResponse is the response of an endpoint that needs a cluster.
type clusterResponse struct {
	apiResponse
}

// clusterOnly answers the stream and consumer leader stepdown, peer remove
// and evacuate subjects and STREAM.CANCEL_MOVE as a single nats-server
// v2.15.2 does: 10010 "JetStream clustering support required", whatever
// the body; in a cluster without the capability they need (Peers,
// Movers and the like), 10009.
func clusterOnly(a *API, r *request) (response, *jserr.Error) {
	resp := &clusterResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if a.opts.Cluster != nil {
		// In a cluster these are not built yet (docs/cluster.md,
		// "Not yet built"): the cluster cannot handle the request.
		return resp, jserr.New(jserr.ClusterNotLeader)
	}
	return resp, jserr.New(jserr.ClusterRequired)
}

// ConsumerCluster is implemented by a Cluster whose meta group holds the
// consumers (internal/cluster/jscluster; docs/cluster.md, "Consumers
// in a cluster"), as nats-server v2.15.2's does. AnswersConsumer decides
// who answers a CONSUMER.* request (decided false leaves it to Answers):
// the meta leader creates, lists and deletes the consumers, a consumer's
// leader answers the rest about it. ConsumerCreate, ConsumerDelete,
// ConsumerNames and ConsumerInfos run on the server that answers;
// handled false means the cluster leaves the request to this server's
// engine (a stream or consumer the meta group does not hold).
// ConsumerInfos returns the infos of the named consumers that answered
// and the names of those that did not (a CONSUMER.LIST page's
// "missing").
type ConsumerCluster interface {
	AnswersConsumer(key, stream, consumer string, body []byte) (answers, decided bool)
	ConsumerCreate(stream string, cfg consumer.Config, action jetstream.ConsumerAction, pedantic bool) (info *consumer.Info, err *jserr.Error, handled bool)
	ConsumerDelete(stream, name string) (err *jserr.Error, handled bool)
	ConsumerNames(stream string) (names []string, handled bool)
	ConsumerInfos(stream string, names []string) (infos []*consumer.Info, missing []string)
}

// ConsumerHolder is implemented by a Cluster whose meta group holds the
// consumers (internal/cluster/jscluster): ConsumerMissing returns 10014
// "consumer not found" for a consumer of a stream the meta group holds
// that this server's meta state does not hold, nil otherwise (the
// endpoint goes on). The meta leader answers CONSUMER.INFO, PAUSE, UNPIN
// and LEADER.STEPDOWN of such a consumer (ConsumerCluster.AnswersConsumer),
// and its engine need not hold the stream (it would answer 10059), as
// nats-server v2.15.2's meta leader answers 10014 from its assignments
// (jsConsumerInfoRequest, jsConsumerPauseRequest).
type ConsumerHolder interface {
	ConsumerMissing(stream, consumer string) *jserr.Error
}

// unheldConsumer returns 10014 for r, a request naming a consumer, when
// the cluster's meta group holds its stream and not the consumer
// (ConsumerHolder); nil otherwise and on one server.
func (a *API) unheldConsumer(r *request) *jserr.Error {
	if h, ok := a.opts.Cluster.(ConsumerHolder); ok {
		return h.ConsumerMissing(r.stream, r.consumer)
	}
	return nil
}

// AccountCounter is implemented by a Cluster whose meta group holds the
// account's streams and consumers: $JS.API.INFO reports its counts, not
// those of the streams and consumers running on the server that answers
// (nats-server v2.15.2 JetStreamUsage counts the assignments in a
// cluster).
type AccountCounter interface {
	AccountCounts() (streams, consumers int)
}

// MetaUnavailable is implemented by a Cluster whose server may answer a
// request only because it knows no meta leader (jscluster: none for 2 s,
// as nats-server v2.15.2's isLeaderless): Unavailable reports, for a
// request this server answers, whether it answers it for the meta group
// without leading it. Such a request gets 10008 "JetStream system
// temporarily unavailable" in the endpoint's response, whatever it asked,
// as nats-server's leaderless servers answer (jsStreamNamesRequest and
// the others): never this server's own view of the cluster's streams,
// which may be behind (a server still replaying its log after a restart
// knows none of them yet; docs/cluster.md, "Restarts").
type MetaUnavailable interface {
	Unavailable(key, stream, consumer string, body []byte) bool
}

// unavailable reports whether r, which this server answers, gets 10008
// (MetaUnavailable).
func (a *API) unavailable(r *request) bool {
	u, ok := a.opts.Cluster.(MetaUnavailable)
	return ok && u.Unavailable(r.key, r.stream, r.consumer, r.data)
}

// emptyResponse returns the response of endpoint key with nothing but
// the fields an error answer has in nats-server v2.15.2 (the lists of
// the list endpoints empty, as their handlers make them).
func emptyResponse(key string) response {
	switch key {
	case "INFO":
		return &accountInfoResponse{}
	case "STREAM.CREATE":
		return &streamCreateResponse{}
	case "STREAM.UPDATE":
		return &streamUpdateResponse{}
	case "STREAM.DELETE":
		return &streamDeleteResponse{}
	case "STREAM.INFO":
		return &streamInfoResponse{}
	case "STREAM.NAMES":
		return &streamNamesResponse{}
	case "STREAM.LIST":
		return &streamListResponse{Streams: []*jetstream.StreamInfo{}}
	case "STREAM.PURGE":
		return &streamPurgeResponse{}
	case "STREAM.MSG.GET":
		return &msgGetResponse{}
	case "STREAM.MSG.DELETE":
		return &msgDeleteResponse{}
	case "STREAM.SNAPSHOT":
		return &snapshotResponse{}
	case "STREAM.RESTORE":
		return &restoreResponse{}
	case "STREAM.LEADER.STEPDOWN", "STREAM.PEER.REMOVE", "STREAM.PEER.EVACUATE", "CONSUMER.LEADER.STEPDOWN", "CONSUMER.PEER.EVACUATE", "CONSUMER.PEER.REMOVE":
		return &successResponse{}
	case "CONSUMER.CREATE", "CONSUMER.DURABLE.CREATE":
		return &consumerCreateResponse{}
	case "CONSUMER.INFO":
		return &consumerInfoResponse{}
	case "CONSUMER.DELETE":
		return &consumerDeleteResponse{}
	case "CONSUMER.NAMES":
		return &consumerNamesResponse{Consumers: []string{}}
	case "CONSUMER.LIST":
		return &consumerListResponse{Consumers: []*consumer.Info{}}
	case "CONSUMER.PAUSE":
		return &consumerPauseResponse{}
	case "CONSUMER.UNPIN":
		return &consumerUnpinResponse{}
	}
	return &clusterResponse{}
}

// answers reports whether this server answers r in a cluster (always
// on one server).
func (a *API) answers(r *request) bool {
	c := a.opts.Cluster
	if c == nil {
		return true
	}
	if cc, ok := c.(ConsumerCluster); ok && strings.HasPrefix(r.key, "CONSUMER.") {
		if ans, decided := cc.AnswersConsumer(r.key, r.stream, r.consumer, r.data); decided {
			return ans
		}
	}
	return c.Answers(r.key, r.stream)
}

// ConsumerInfoReader is implemented by a Cluster whose consumer leader
// may run on a server whose replica of the stream follows
// (internal/cluster/jscluster): ConsumerInfo answers CONSUMER.INFO once
// that replica has applied what its stream's group committed, at most
// about a second, so that the pending counts include every publish
// acknowledged before the request (nats-server v2.15.2's leader counts
// from its own replica; its clients expect an acknowledged publish to
// count). handled false leaves the request to the engine.
type ConsumerInfoReader interface {
	ConsumerInfo(stream, consumer string) (info *consumer.Info, err *jserr.Error, handled bool)
}

// ConsumerLeaderless is implemented by a Cluster whose members of a
// leaderless consumer group answer CONSUMER.INFO with 10008 (JetStream
// system temporarily unavailable) instead of staying silent, as
// nats-server v2.15.2's jsConsumerInfoRequest does
// (internal/cluster/jscluster leaderless.go).
type ConsumerLeaderless interface {
	ConsumerLeaderless(stream, consumer string) bool
}

// StreamInfoGatherer is implemented by a Cluster whose STREAM.LIST
// carries the info of the server that leads each stream, as nats-server
// v2.15.2's clustered STREAM.LIST does (internal/cluster/jscluster
// gather.go). It returns one info per name, in order, nil for one gone
// or not answered for, and the names of the streams the list's
// "missing" holds (nats-server v2.15.2 jsClusteredStreamListRequest: not
// answered for within 4 s, or all of whose servers are offline).
type StreamInfoGatherer interface {
	StreamInfos(names []string) (infos []*jetstream.StreamInfo, missing []string)
}

// ClusterUsage is implemented by a Cluster whose account info counts the
// storage of every replica of the account's streams, as nats-server
// v2.15.2's does (internal/cluster/jscluster usage.go): memory and file
// storage in bytes.
type ClusterUsage interface {
	AccountUsage() (memory, store uint64)
}
