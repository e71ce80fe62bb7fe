package jsapi

import (
	"strings"

	"github.com/cairnmq/cairn/internal/jserr"
)

// apiPrefix starts every API subject.
const apiPrefix = "$JS.API."

// apiSubjects are the subscriptions of the API: everything under $JS.API
// that is answered with JSON. $JS.API.CONSUMER.MSG.NEXT.<S>.<C> and
// $JS.API.DIRECT.GET.<S> are left out, and so is
// $JS.API.CONSUMER.RESET.<S>.<C>: the consumer or stream subscribes to
// them itself, and when it is missing the requester must get a 503
// no-responders, never a JSON error (nats-server v2.15.2's JetStream API mechanics (ADR-1)). So are
// $JS.API.META, SERVER and ACCOUNT, system-account requests that
// nats-server ignores from other accounts (a clustered server serves
// META.LEADER.STEPDOWN and SERVER.REMOVE in its system account: System).
var apiSubjects = []string{
	"$JS.API.*", // INFO, and unknown one-token subjects
	"$JS.API.STREAM.>",
	"$JS.API.CONSUMER.*",
	"$JS.API.CONSUMER.CREATE.>",
	"$JS.API.CONSUMER.DURABLE.>",
	"$JS.API.CONSUMER.INFO.>",
	"$JS.API.CONSUMER.DELETE.>",
	"$JS.API.CONSUMER.NAMES.>",
	"$JS.API.CONSUMER.LIST.>",
	"$JS.API.CONSUMER.PAUSE.>",
	"$JS.API.CONSUMER.UNPIN.>",
	"$JS.API.CONSUMER.LEADER.>",
	"$JS.API.CONSUMER.PEER.>",
}

// handlerFunc answers one request. It returns the response value (never
// nil, with the shape of the endpoint's response even on failure) and the
// error to report, or nil. The caller fills in "type" and "error".
type handlerFunc func(a *API, r *request) (response, *jserr.Error)

// endpoint is one row of the routing table.
type endpoint struct {
	typ       string // the response type without typePrefix
	minArgs   int    // tokens after the key, at least
	maxArgs   int    // and at most; -1 = any number
	handle    handlerFunc
	untracked bool // successes are not counted in api.total (MSG.GET)
}

// unknownEndpoint answers subjects that match no endpoint: 10003 in a
// system_response (nats-server v2.15.2's JetStream API mechanics (ADR-1)).
var unknownEndpoint = endpoint{typ: "system_response"}

// endpoints is keyed by the tokens after "$JS.API." up to the first
// argument: "$JS.API.STREAM.INFO.ORDERS" is key "STREAM.INFO" with one
// argument. The argument counts are those of nats-server's subscriptions
// (JSApiStreamCreate "$JS.API.STREAM.CREATE.*", and so on).
var endpoints = map[string]endpoint{
	"INFO":                     {"account_info_response", 0, 0, accountInfo, false},
	"STREAM.CREATE":            {"stream_create_response", 1, 1, streamCreate, false},
	"STREAM.UPDATE":            {"stream_update_response", 1, 1, streamUpdate, false},
	"STREAM.DELETE":            {"stream_delete_response", 1, 1, streamDelete, false},
	"STREAM.INFO":              {"stream_info_response", 1, 1, streamInfo, false},
	"STREAM.NAMES":             {"stream_names_response", 0, 0, streamNames, false},
	"STREAM.LIST":              {"stream_list_response", 0, 0, streamList, false},
	"STREAM.PURGE":             {"stream_purge_response", 1, 1, streamPurge, false},
	"STREAM.MSG.GET":           {"stream_msg_get_response", 1, 1, msgGet, true},
	"STREAM.MSG.DELETE":        {"stream_msg_delete_response", 1, 1, msgDelete, false},
	"STREAM.SNAPSHOT":          {"stream_snapshot_response", 1, 1, streamSnapshot, false},
	"STREAM.RESTORE":           {"stream_restore_response", 1, 1, streamRestore, false},
	"STREAM.LEADER.STEPDOWN":   {"stream_leader_stepdown_response", 1, 1, streamLeaderStepDown, false},
	"STREAM.PEER.REMOVE":       {"stream_remove_peer_response", 1, 1, streamRemovePeer, false},
	"STREAM.PEER.EVACUATE":     {"stream_evacuate_peer_response", 1, 1, streamRemovePeer, false},
	"STREAM.CANCEL_MOVE":       {"stream_cancel_move_response", 1, 1, streamCancelMove, false},
	"CONSUMER.CREATE":          {"consumer_create_response", 1, -1, consumerCreate, false},
	"CONSUMER.DURABLE.CREATE":  {"consumer_create_response", 2, 2, consumerCreate, false},
	"CONSUMER.INFO":            {"consumer_info_response", 2, 2, consumerInfo, false},
	"CONSUMER.DELETE":          {"consumer_delete_response", 2, 2, consumerDelete, false},
	"CONSUMER.NAMES":           {"consumer_names_response", 1, 1, consumerNames, false},
	"CONSUMER.LIST":            {"consumer_list_response", 1, 1, consumerList, false},
	"CONSUMER.PAUSE":           {"consumer_pause_response", 2, 2, consumerPause, false},
	"CONSUMER.UNPIN":           {"consumer_unpin_response", 2, 2, consumerUnpin, false},
	"CONSUMER.LEADER.STEPDOWN": {"consumer_leader_stepdown_response", 2, 2, consumerLeaderStepDown, false},
	"CONSUMER.PEER.REMOVE":     {"consumer_remove_peer_response", 2, 2, consumerRemovePeer, false},
	"CONSUMER.PEER.EVACUATE":   {"consumer_evacuate_peer_response", 2, 2, consumerEvacuatePeer, false},
}

// maxKeyTokens is the most tokens an endpoint key has.
const maxKeyTokens = 3

// route finds the endpoint of r's subject and stores the stream, consumer
// and filter tokens in r.
func route(r *request) (endpoint, bool) {
	rest, ok := strings.CutPrefix(r.subject, apiPrefix)
	if !ok {
		return endpoint{}, false
	}
	toks := strings.Split(rest, ".")
	for n := 1; n <= min(maxKeyTokens, len(toks)); n++ {
		ep, found := endpoints[strings.Join(toks[:n], ".")]
		if !found {
			continue
		}
		key, args := strings.Join(toks[:n], "."), toks[n:]
		if len(args) < ep.minArgs || (ep.maxArgs >= 0 && len(args) > ep.maxArgs) {
			return endpoint{}, false
		}
		r.key = key
		r.setArgs(args)
		return ep, true
	}
	return endpoint{}, false
}

// setArgs keeps the argument tokens: stream, consumer, then the filter
// subject of CONSUMER.CREATE.<S>.<C>.<filter...>.
func (r *request) setArgs(args []string) {
	r.tokens = len(args)
	if len(args) > 0 {
		r.stream = args[0]
	}
	if len(args) > 1 {
		r.consumer = args[1]
	}
	if len(args) > 2 {
		r.filter = strings.Join(args[2:], ".")
	}
}
