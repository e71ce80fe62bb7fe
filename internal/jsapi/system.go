package jsapi

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// The system account's JetStream requests (nats-server v2.15.2
// jsLeaderStepDownRequest, jsLeaderServerRemoveRequest): a clustered
// server subscribes, in its system account and shared with the cluster,
//
//	$JS.API.META.LEADER.STEPDOWN   meta_leader_stepdown_response {"success":true}
//	$JS.API.SERVER.REMOVE          meta_server_remove_response
//	$JS.API.SERVER.EVACUATE        meta_server_evacuate_response
//
// and only the meta leader answers them (SystemCluster.MetaLeader); the
// other servers stay silent, as nats-server's. A user of another account
// reaches no subscription (accounts are separate subject spaces): its
// request gets no responders, where nats-server's ignores it (a timeout;
// docs/compatibility.md).

// SystemCluster is what the system account's JetStream requests ask of a
// clustered JetStream (internal/cluster/jscluster).
type SystemCluster interface {
	// MetaLeader reports whether this server leads the meta group: only
	// the meta leader answers.
	MetaLeader() bool
	// MetaLeaderStepDown hands the meta group's leadership to another
	// server, chosen by the optional placement as a stream's step-down
	// chooses (Leaders). Errors: 10005 as there, 10041 when the Raft
	// layer refuses.
	MetaLeaderStepDown(p *stream.Placement) *jserr.Error
	// RemoveServer removes the server named name (or whose peer ID is
	// peerID, which takes precedence) from the meta group, returning once
	// the removal committed (docs/cluster.md, "Removing a server").
	// Errors: 10044 when no member has that name or ID, 10202 while the
	// meta group's membership changes, 10009 when the removal cannot be
	// made, 10008 when it does not commit in time.
	RemoveServer(name, peerID string) *jserr.Error
	// EvacuateServer checks a SERVER.EVACUATE as SERVER.REMOVE is
	// checked: 10044 when no member has that name or ID; 10009 for a
	// member, since moving every replica off a server is not built
	// (docs/cluster.md, "Not yet built").
	EvacuateServer(name, peerID string) *jserr.Error
}

// systemQueueLen bounds the system requests waiting for the worker;
// beyond it a request is dropped (the requester times out), as the API
// drops requests when its queue is full.
const systemQueueLen = 64

// System serves the system account's JetStream requests for a clustered
// JetStream: one worker goroutine answers them in turn (CONCURRENCY.md).
// Make it with NewSystem, end it with Close.
type System struct {
	c     SystemCluster
	tr    jetstream.Transport
	audit auditor
	logf  func(string, ...any)
	queue chan *request
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	mu   sync.Mutex
	subs []jetstream.Subscription
}

// systemEndpoints are the System's subjects and response types.
var systemEndpoints = map[string]string{
	"$JS.API.META.LEADER.STEPDOWN": "meta_leader_stepdown_response",
	"$JS.API.SERVER.REMOVE":        "meta_server_remove_response",
	"$JS.API.SERVER.EVACUATE":      "meta_server_evacuate_response",
}

// NewSystem subscribes the system requests through tr (the system
// account's transport, shared with the cluster) and starts the worker.
// server and domain name the server and its JetStream domain in the
// requests' audit advisories (audit.go), which the meta leader publishes
// in the system account as nats-server does. logf may be nil. Errors: a
// nil argument, the subscriptions'.
func NewSystem(c SystemCluster, tr jetstream.Transport, server, domain string, logf func(string, ...any)) (*System, error) {
	if c == nil || tr == nil {
		return nil, errors.New("jsapi: NewSystem needs a SystemCluster and a Transport")
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := &System{c: c, tr: tr, audit: auditor{tr: tr, server: server, domain: domain}, logf: logf, queue: make(chan *request, systemQueueLen), done: make(chan struct{})}
	s.wg.Add(1)
	go s.work()
	for subj := range systemEndpoints {
		sub, err := subscribeRequests(tr, subj, s.enqueue)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.mu.Lock()
		s.subs = append(s.subs, sub)
		s.mu.Unlock()
	}
	return s, nil
}

// Close unsubscribes and stops the worker once it has answered the
// request it is on; queued requests are dropped. It may be called more
// than once.
func (s *System) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		subs := s.subs
		s.subs = nil
		s.mu.Unlock()
		for _, sub := range subs {
			sub.Unsubscribe()
		}
		close(s.done)
		s.wg.Wait()
	})
}

// enqueue runs on the publisher's goroutine: it copies the request and
// queues it without blocking.
func (s *System) enqueue(subject, reply string, hdr, data []byte, from Requester) {
	if reply == "" {
		return
	}
	r := newRequest(subject, reply, hdr, data)
	s.audit.note(r, from)
	select {
	case s.queue <- r:
	default:
		s.logf("jsapi: system request queue full (%d): dropped a request on %s", systemQueueLen, subject)
	}
}

func (s *System) work() {
	defer s.wg.Done()
	for {
		select {
		case <-s.done:
			return
		case r := <-s.queue:
			if body, ok := s.answer(r); ok {
				s.tr.Publish(r.reply, "", nil, body)
				s.audit.send(r, body)
			}
		}
	}
}

// answer answers one request on the meta leader; ok is false elsewhere.
func (s *System) answer(r *request) (body []byte, ok bool) {
	typ, known := systemEndpoints[r.subject]
	if !known || !s.c.MetaLeader() {
		return nil, false
	}
	var resp response
	var err *jserr.Error
	if strings.HasSuffix(r.subject, ".STEPDOWN") {
		resp, err = s.metaStepDown(r)
	} else {
		// SERVER.EVACUATE (nats-server v2.15.2
		// jsLeaderServerEvacuateRequest) checks as SERVER.REMOVE does,
		// with the same body (SystemCluster.EvacuateServer).
		resp, err = s.removeServer(r, strings.HasSuffix(r.subject, ".EVACUATE"))
	}
	base := resp.base()
	base.Type, base.Error = typePrefix+typ, err
	b, merr := json.Marshal(resp)
	if merr != nil {
		s.logf("jsapi: encode %s: %v", typ, merr)
		return nil, false
	}
	return b, true
}

// metaStepDown follows nats-server v2.15.2 jsLeaderStepDownRequest: the
// level (10185), the optional placement (10025, then 10005), the
// step-down (10041).
func (s *System) metaStepDown(r *request) (response, *jserr.Error) {
	resp := &successResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	p, err := parsePlacement(r.data)
	if err != nil {
		return resp, err
	}
	if err := s.c.MetaLeaderStepDown(p); err != nil {
		return resp, err
	}
	resp.Success = true
	return resp, nil
}

// serverRemoveRequest is SERVER.REMOVE's body (nats-server
// JSApiMetaServerRemoveRequest).
type serverRemoveRequest struct {
	Server string `json:"peer"`
	PeerID string `json:"peer_id,omitempty"`
}

// removeServer follows nats-server v2.15.2 jsLeaderServerRemoveRequest:
// the level (10185), an empty body (10003), JSON (10025), then the
// cluster (10044, 10009).
func (s *System) removeServer(r *request, evacuate bool) (response, *jserr.Error) {
	resp := &successResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	if isEmptyRequest(r.data) {
		return resp, jserr.New(jserr.BadRequest)
	}
	var req serverRemoveRequest
	if err := decode(r.data, &req); err != nil {
		return resp, err
	}
	act := s.c.RemoveServer
	if evacuate {
		act = s.c.EvacuateServer
	}
	if err := act(req.Server, req.PeerID); err != nil {
		return resp, err
	}
	resp.Success = true
	return resp, nil
}
