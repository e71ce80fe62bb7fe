package jsapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/nats-io/nuid"
)

// CreateConsumerRequest is the body of the consumer create subjects
// (nats-server v2.15.2 consumer create, jsConsumerCreateRequest).
type CreateConsumerRequest struct {
	Stream   string          `json:"stream_name"`
	Config   consumer.Config `json:"config"`
	Action   consumerAction  `json:"action"`
	Pedantic bool            `json:"pedantic,omitempty"`
}

// consumerAction accepts the JSON strings "", "create" and "update".
type consumerAction string

// UnmarshalJSON refuses other actions with nats-server's text.
func (c *consumerAction) UnmarshalJSON(b []byte) error {
	switch s := string(b); s {
	case `""`, `"create"`, `"update"`:
		*c = consumerAction(strings.Trim(s, `"`))
		return nil
	default:
		return fmt.Errorf("unknown consumer action: %s", s)
	}
}

func (c consumerAction) engine() jetstream.ConsumerAction {
	switch c {
	case "create":
		return jetstream.CreateOnly
	case "update":
		return jetstream.UpdateOnly
	}
	return jetstream.CreateOrUpdate
}

// consumerCreateResponse is the ConsumerInfo inline.
type consumerCreateResponse struct {
	apiResponse
	*consumer.Info
}

// consumerCreate follows nats-server v2.15.2 jsConsumerCreateRequest:
// JSON first (10025), then level, then the subject and name checks, the
// replicas (10074), the stream (10059), and the engine's checks.
func consumerCreate(a *API, r *request) (response, *jserr.Error) {
	resp := &consumerCreateResponse{}
	var req CreateConsumerRequest
	if err := decode(r.data, &req); err != nil {
		return resp, err
	}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if err := checkCreateSubject(r, &req); err != nil {
		return resp, err
	}
	cfg := req.Config
	if r.tokens > 1 {
		cfg.Name = r.consumer
	}
	if cfg.Direct && cfg.Sourcing && cfg.Name != "" {
		// A sourcing stream names its consumer stably; each create is a
		// new consumer (nats-server v2.15.2 jsConsumerCreateRequest
		// appends a random suffix; docs/external-sourcing.md), in a
		// cluster too (docs/cluster.md, "Sourcing in a cluster").
		cfg.Name += "-" + stream.Hash8(nuid.Next())
	}
	if cc, ok := a.opts.Cluster.(ConsumerCluster); ok {
		if info, err, handled := cc.ConsumerCreate(req.Stream, cfg, req.Action.engine(), req.Pedantic); handled {
			resp.Info = info
			return resp, err
		}
	}
	if req.Config.Replicas > 1 {
		return resp, jserr.New(jserr.StreamReplicasNotSupported)
	}
	if err := a.streamExists(req.Stream); err != nil {
		return resp, err
	}
	info, err := a.js.CreateConsumer(req.Stream, cfg, req.Action.engine(), req.Pedantic)
	if err != nil {
		return resp, err
	}
	resp.Info = info
	return resp, nil
}

// checkCreateSubject checks the request against the create subject, in
// nats-server's order: stream name (10056), path separators in the
// consumer name (10127), the durable name rules (10018, 10017, 10020) and
// the filter in the subject (10137, 10131).
func checkCreateSubject(r *request, req *CreateConsumerRequest) *jserr.Error {
	legacyDurable := r.key == "CONSUMER.DURABLE.CREATE"
	legacyEphemeral := !legacyDurable && r.tokens == 1
	name := r.consumer
	if legacyEphemeral {
		name = req.Config.Name
	}
	durable := req.Config.Durable
	switch {
	case r.stream != req.Stream:
		return jserr.New(jserr.StreamMismatch)
	case strings.ContainsAny(name, `\/`):
		return jserr.New(jserr.ConsumerNameContainsPathSeparators)
	case legacyDurable && durable == "":
		return jserr.New(jserr.ConsumerDurableNameNotSet)
	case !legacyEphemeral && durable != "" && durable != name:
		return jserr.New(jserr.ConsumerDurableNameNotMatchSubject)
	case legacyEphemeral && durable != "":
		return jserr.New(jserr.ConsumerEphemeralWithDurableName)
	case r.filter != "" && len(req.Config.FilterSubjects) != 0:
		return jserr.New(jserr.ConsumerMultipleFiltersNotAllowed)
	case r.filter != "" && req.Config.FilterSubject != r.filter:
		return jserr.New(jserr.ConsumerCreateFilterSubjectMismatch)
	}
	return nil
}

// streamExists returns 10059 when the stream is missing.
func (a *API) streamExists(name string) *jserr.Error {
	_, err := a.js.StreamInfo(name, jetstream.InfoOptions{})
	return err
}

// consumerMissing is the answer for a named consumer: 10059 without the
// stream, else 10014.
func (a *API) consumerMissing(stream string) *jserr.Error {
	if err := a.streamExists(stream); err != nil {
		return err
	}
	return jserr.New(jserr.ConsumerNotFound)
}

// consumerInfoResponse is the ConsumerInfo inline.
type consumerInfoResponse struct {
	apiResponse
	*consumer.Info
}

// consumerInfo follows nats-server v2.15.2 jsConsumerInfoRequest: a
// non-empty body first (10038), then, in a cluster, a consumer the meta
// group does not hold (10014, unheldConsumer), then level, stream
// (10059), consumer (10014).
func consumerInfo(a *API, r *request) (response, *jserr.Error) {
	resp := &consumerInfoResponse{}
	if !isEmptyRequest(r.data) {
		return resp, jserr.New(jserr.NotEmptyRequest)
	}
	if err := a.unheldConsumer(r); err != nil {
		return resp, err
	}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if l, ok := a.opts.Cluster.(ConsumerLeaderless); ok && l.ConsumerLeaderless(r.stream, r.consumer) {
		return resp, jserr.New(jserr.ClusterNotAvail)
	}
	info, err := a.readConsumerInfo(r.stream, r.consumer)
	if err != nil {
		return resp, err
	}
	resp.Info = info
	return resp, nil
}

// readConsumerInfo returns the info of consumer name of stream from the
// cluster where it reads it (ConsumerInfoReader), else from the engine.
func (a *API) readConsumerInfo(stream, name string) (*consumer.Info, *jserr.Error) {
	if cr, ok := a.opts.Cluster.(ConsumerInfoReader); ok {
		if info, err, handled := cr.ConsumerInfo(stream, name); handled {
			return info, err
		}
	}
	return a.js.ConsumerInfo(stream, name)
}

// consumerDeleteResponse is {"type":…,"success":true} on success.
type consumerDeleteResponse struct {
	apiResponse
	Success bool `json:"success,omitempty"`
}

// consumerDelete follows nats-server v2.15.2 jsConsumerDeleteRequest:
// level, a non-empty body (10038), stream (10059), consumer (10014).
func consumerDelete(a *API, r *request) (response, *jserr.Error) {
	resp := &consumerDeleteResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if !isEmptyRequest(r.data) {
		return resp, jserr.New(jserr.NotEmptyRequest)
	}
	if cc, ok := a.opts.Cluster.(ConsumerCluster); ok {
		if err, handled := cc.ConsumerDelete(r.stream, r.consumer); handled {
			resp.Success = err == nil
			return resp, err
		}
	}
	if err := a.js.DeleteConsumer(r.stream, r.consumer); err != nil {
		return resp, err
	}
	resp.Success = true
	return resp, nil
}

// JSApiConsumersRequest is the optional body of CONSUMER.NAMES and
// CONSUMER.LIST.
type JSApiConsumersRequest struct {
	ApiPagedRequest
}

// consumerNamesResponse: consumers is [] when empty, also on errors
// (nats-server v2.15.2), unlike stream names.
type consumerNamesResponse struct {
	apiResponse
	apiPaged
	Consumers []string `json:"consumers"`
}

// consumerListResponse: consumers is [] when empty, also on errors;
// missing names, in a cluster, the consumers whose leader did not answer
// (nats-server v2.15.2 JSApiConsumerListResponse).
type consumerListResponse struct {
	apiResponse
	apiPaged
	Consumers []*consumer.Info `json:"consumers"`
	Missing   []string         `json:"missing,omitempty"`
}

func consumerNames(a *API, r *request) (response, *jserr.Error) {
	resp := &consumerNamesResponse{Consumers: []string{}}
	names, start, end, err := a.consumerPage(r, &resp.apiPaged, namesLimit)
	if err == nil {
		resp.Consumers = append(resp.Consumers, names[start:end]...)
	}
	return resp, err
}

func consumerList(a *API, r *request) (response, *jserr.Error) {
	resp := &consumerListResponse{Consumers: []*consumer.Info{}}
	names, start, end, err := a.consumerPage(r, &resp.apiPaged, listLimit)
	if err != nil {
		return resp, err
	}
	if cc, ok := a.opts.Cluster.(ConsumerCluster); ok && a.clusterHolds(cc, r.stream) {
		infos, missing := cc.ConsumerInfos(r.stream, names[start:end])
		for _, info := range infos {
			resp.Consumers = append(resp.Consumers, storedMetadata(info))
		}
		resp.Missing = missing
		return resp, nil
	}
	for _, name := range names[start:end] {
		if info, ierr := a.js.ConsumerInfo(r.stream, name); ierr == nil {
			resp.Consumers = append(resp.Consumers, storedMetadata(info))
		}
	}
	return resp, nil
}

// clusterHolds reports whether the cluster's meta group holds stream
// (its consumers are then listed from the meta group's assignments).
func (a *API) clusterHolds(cc ConsumerCluster, stream string) bool {
	_, handled := cc.ConsumerNames(stream)
	return handled
}

// storedMetadata takes the server's version and level back out of a
// consumer's metadata: nats-server v2.15.2 lists consumers with their
// stored config, as it lists streams.
func storedMetadata(info *consumer.Info) *consumer.Info {
	if info.Config == nil || info.Config.Metadata == nil {
		return info
	}
	md := maps.Clone(info.Config.Metadata)
	delete(md, stream.MetaServerVersion)
	delete(md, stream.MetaServerLevel)
	info.Config.Metadata = md
	return info
}

// consumerPage follows nats-server v2.15.2 jsConsumerNamesRequest: level,
// the body decoded when it is a JSON object or array (10025), the stream
// (10059), then one page of sorted names (the offset clamps to the
// total).
func (a *API) consumerPage(r *request, p *apiPaged, limit int) (names []string, start, end int, jerr *jserr.Error) {
	if err := r.checkLevel(); err != nil {
		return nil, 0, 0, err
	}
	var req JSApiConsumersRequest
	if isJSONObjectOrArray(r.data) {
		if err := decode(r.data, &req); err != nil {
			return nil, 0, 0, err
		}
	}
	handled := false
	if cc, ok := a.opts.Cluster.(ConsumerCluster); ok {
		names, handled = cc.ConsumerNames(r.stream)
	}
	if !handled {
		names, jerr = a.js.ConsumerNames(r.stream)
		if jerr != nil {
			return nil, 0, 0, jerr
		}
	}
	start, end = page(len(names), req.Offset, limit)
	*p = apiPaged{Total: len(names), Offset: start, Limit: limit}
	return names, start, end, nil
}

// JSApiConsumerPauseRequest is the optional body of CONSUMER.PAUSE.
type JSApiConsumerPauseRequest struct {
	PauseUntil time.Time `json:"pause_until,omitempty"`
}

// consumerPauseResponse always has paused and pause_until, also on errors
// ("paused":false,"pause_until":"0001-01-01T00:00:00Z", nats-server
// v2.15.2). pause_remaining is nanoseconds.
type consumerPauseResponse struct {
	apiResponse
	Paused         bool          `json:"paused"`
	PauseUntil     time.Time     `json:"pause_until"`
	PauseRemaining time.Duration `json:"pause_remaining,omitempty"`
}

// consumerPause follows nats-server v2.15.2 jsConsumerPauseRequest: JSON
// when the body is an object or array (10025), level, in a cluster a
// consumer the meta group does not hold (10014, unheldConsumer), stream,
// consumer; a zero or past time resumes (nats-server v2.15.2
// CONSUMER.PAUSE, jsConsumerPauseRequest).
func consumerPause(a *API, r *request) (response, *jserr.Error) {
	resp := &consumerPauseResponse{}
	var req JSApiConsumerPauseRequest
	if isJSONObjectOrArray(r.data) {
		if err := decode(r.data, &req); err != nil {
			return resp, err
		}
	}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if err := a.unheldConsumer(r); err != nil {
		return resp, err
	}
	res, err := a.js.PauseConsumer(r.stream, r.consumer, req.PauseUntil)
	if err != nil {
		return resp, err
	}
	resp.Paused, resp.PauseUntil, resp.PauseRemaining = res.Paused, res.Until, res.Remaining
	return resp, nil
}

// JSApiConsumerUnpinRequest is the body of CONSUMER.UNPIN.
type JSApiConsumerUnpinRequest struct {
	Group string `json:"group"`
}

// consumerUnpinResponse has no success fields.
type consumerUnpinResponse struct {
	apiResponse
}

// consumerUnpin follows nats-server v2.15.2 jsConsumerUnpinRequest: in a
// cluster, a consumer the meta group does not hold first (10014,
// unheldConsumer); level, JSON (decoded with json.Unmarshal, so an empty
// body is "unexpected end of JSON input"), the group (10025 "consumer
// group not specified", 10162), stream (10059), consumer (10014), the
// group among the consumer's (10160); then the pin ends (ADR-42).
func consumerUnpin(a *API, r *request) (response, *jserr.Error) {
	resp := &consumerUnpinResponse{}
	if err := a.unheldConsumer(r); err != nil {
		return resp, err
	}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	var req JSApiConsumerUnpinRequest
	if err := json.Unmarshal(r.data, &req); err != nil {
		return resp, jserr.New(jserr.InvalidJSON, jserr.Sub("err", err))
	}
	if req.Group == "" {
		return resp, jserr.New(jserr.InvalidJSON, jserr.Sub("err", "consumer group not specified"))
	}
	if !validGroupName(req.Group) {
		return resp, jserr.New(jserr.ConsumerInvalidGroupName)
	}
	return resp, a.js.UnpinConsumer(r.stream, r.consumer, req.Group)
}

// validGroupName matches nats-server's ^[a-zA-Z0-9/_=-]{1,16}$.
func validGroupName(g string) bool {
	if len(g) == 0 || len(g) > 16 {
		return false
	}
	for _, c := range g {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/_=-", c)
		if !ok {
			return false
		}
	}
	return true
}
