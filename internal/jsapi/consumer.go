package jsapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
)

// The consumer endpoints wait for consumers (issue 5). Until then they
// answer as nats-server v2.15.2 answers for a stream without consumers:
// INFO, DELETE, PAUSE and UNPIN give 10014 consumer not found (10059 when
// the stream is missing), NAMES and LIST give empty pages, and CREATE runs
// nats-server's checks on the subject and request and then refuses with
// 10012 "consumers are not implemented yet".

// errConsumersMissing is the description of the 10012 a create gets.
var errConsumersMissing = errors.New("consumers are not implemented yet")

// CreateConsumerRequest is the body of the consumer create subjects
// (protocol.md section 2.6.9), reduced to the keys the subject checks use.
type CreateConsumerRequest struct {
	Stream   string         `json:"stream_name"`
	Config   consumerConfig `json:"config"`
	Action   consumerAction `json:"action"`
	Pedantic bool           `json:"pedantic,omitempty"`
}

// consumerConfig holds the ConsumerConfig keys the create checks read.
type consumerConfig struct {
	Durable        string   `json:"durable_name,omitempty"`
	Name           string   `json:"name,omitempty"`
	FilterSubject  string   `json:"filter_subject,omitempty"`
	FilterSubjects []string `json:"filter_subjects,omitempty"`
	Replicas       int      `json:"num_replicas"`
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

// consumerCreateResponse has no success fields until consumers exist.
type consumerCreateResponse struct {
	apiResponse
}

// consumerCreate follows nats-server v2.15.2 jsConsumerCreateRequest:
// JSON first (10025), then level, then the subject and name checks, the
// replicas (10074) and the stream (10059).
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
	if req.Config.Replicas > 1 {
		return resp, jserr.New(jserr.StreamReplicasNotSupported)
	}
	if err := a.streamExists(req.Stream); err != nil {
		return resp, err
	}
	return resp, jserr.New(jserr.ConsumerCreate, jserr.Sub("err", errConsumersMissing))
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

// consumerInfoResponse has no success fields until consumers exist.
type consumerInfoResponse struct {
	apiResponse
}

// consumerInfo follows nats-server v2.15.2 jsConsumerInfoRequest: a
// non-empty body first (10038), then level, stream, consumer.
func consumerInfo(a *API, r *request) (response, *jserr.Error) {
	resp := &consumerInfoResponse{}
	if !isEmptyRequest(r.data) {
		return resp, jserr.New(jserr.NotEmptyRequest)
	}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	return resp, a.consumerMissing(r.stream)
}

// consumerDeleteResponse is {"type":…,"success":true} on success.
type consumerDeleteResponse struct {
	apiResponse
	Success bool `json:"success,omitempty"`
}

// consumerDelete follows nats-server v2.15.2 jsConsumerDeleteRequest:
// level, a non-empty body (10038), stream, consumer.
func consumerDelete(a *API, r *request) (response, *jserr.Error) {
	resp := &consumerDeleteResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if !isEmptyRequest(r.data) {
		return resp, jserr.New(jserr.NotEmptyRequest)
	}
	return resp, a.consumerMissing(r.stream)
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

// consumerListResponse: consumers is [] when empty, also on errors.
type consumerListResponse struct {
	apiResponse
	apiPaged
	Consumers []json.RawMessage `json:"consumers"`
}

func consumerNames(a *API, r *request) (response, *jserr.Error) {
	resp := &consumerNamesResponse{Consumers: []string{}}
	return resp, a.emptyConsumerPage(r, &resp.apiPaged, namesLimit)
}

func consumerList(a *API, r *request) (response, *jserr.Error) {
	resp := &consumerListResponse{Consumers: []json.RawMessage{}}
	return resp, a.emptyConsumerPage(r, &resp.apiPaged, listLimit)
}

// emptyConsumerPage follows nats-server v2.15.2 jsConsumerNamesRequest:
// level, the body decoded when it is a JSON object or array (10025), the
// stream (10059), then a page of nothing (the offset clamps to 0).
func (a *API) emptyConsumerPage(r *request, p *apiPaged, limit int) *jserr.Error {
	if err := r.checkLevel(); err != nil {
		return err
	}
	if isJSONObjectOrArray(r.data) {
		var req JSApiConsumersRequest
		if err := decode(r.data, &req); err != nil {
			return err
		}
	}
	if err := a.streamExists(r.stream); err != nil {
		return err
	}
	p.Limit = limit
	return nil
}

// JSApiConsumerPauseRequest is the optional body of CONSUMER.PAUSE.
type JSApiConsumerPauseRequest struct {
	PauseUntil time.Time `json:"pause_until,omitempty"`
}

// consumerPauseResponse always has paused and pause_until, also on errors
// ("paused":false,"pause_until":"0001-01-01T00:00:00Z", nats-server
// v2.15.2).
type consumerPauseResponse struct {
	apiResponse
	Paused         bool          `json:"paused"`
	PauseUntil     time.Time     `json:"pause_until"`
	PauseRemaining time.Duration `json:"pause_remaining,omitempty"`
}

// consumerPause follows nats-server v2.15.2 jsConsumerPauseRequest: JSON
// when the body is an object or array (10025), level, stream, consumer.
func consumerPause(a *API, r *request) (response, *jserr.Error) {
	resp := &consumerPauseResponse{}
	if isJSONObjectOrArray(r.data) {
		var req JSApiConsumerPauseRequest
		if err := decode(r.data, &req); err != nil {
			return resp, err
		}
	}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	return resp, a.consumerMissing(r.stream)
}

// JSApiConsumerUnpinRequest is the body of CONSUMER.UNPIN.
type JSApiConsumerUnpinRequest struct {
	Group string `json:"group"`
}

// consumerUnpinResponse has no success fields.
type consumerUnpinResponse struct {
	apiResponse
}

// consumerUnpin follows nats-server v2.15.2 jsConsumerUnpinRequest: level,
// JSON (decoded with json.Unmarshal, so an empty body is "unexpected end
// of JSON input"), the group (10025 "consumer group not specified",
// 10162), stream, consumer.
func consumerUnpin(a *API, r *request) (response, *jserr.Error) {
	resp := &consumerUnpinResponse{}
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
	return resp, a.consumerMissing(r.stream)
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
