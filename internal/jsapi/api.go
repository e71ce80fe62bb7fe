package jsapi

import (
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
)

// APILevel is the JetStream API level cairn advertises (ADR-44;
// nats-server v2.15.2 advertises 5): 4, the level of fast batch publishing
// (allow_batched, nats-server 2.14), which cairn serves, as it serves
// what levels 1 and 2 brought (per-message TTLs and subject delete
// markers; counters, atomic batches, schedules and persist_mode async)
// and the flow_control ack policy of level 4. Of level 4 it lacks, in a
// cluster, durable source and mirror consumers and external mirrors and
// sources, refused with 10052; docs/compatibility.md lists this. It is advertised in $JS.API.INFO, in the INFO of every
// connection (api_lvl) and checked against Nats-Required-Api-Level; the
// engine must be configured with the same level (jetstream.Config.APILevel),
// which it reports as _nats.level in stream and consumer configs.
const APILevel = 4

// Defaults of Options.
const (
	DefaultWorkers  = 4
	DefaultQueueLen = 10_000 // nats-server JSDefaultRequestQueueLimit
	// DefaultCloseWait bounds how long Close waits for the requests
	// being served (issue 12: a shutdown finishes within its deadline
	// whatever a request is doing).
	DefaultCloseWait = 5 * time.Second
)

// Options configures the API. Zero values mean the defaults.
type Options struct {
	Workers  int // goroutines serving requests; 0 = DefaultWorkers
	QueueLen int // requests waiting at most; 0 = DefaultQueueLen
	// CloseWait is how long Close waits for the requests being served
	// before it returns without them; 0 = DefaultCloseWait.
	CloseWait time.Duration
	Logf      func(format string, args ...any)
	// Cluster, on a server whose JetStream is clustered, picks the one
	// server that answers each request and takes the requests that change
	// the cluster's streams (cluster.go); nil on one server.
	Cluster Cluster

	serveHook func(subject string) // tests: runs before each request is answered
}

func (o *Options) setDefaults() {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.QueueLen <= 0 {
		o.QueueLen = DefaultQueueLen
	}
	if o.CloseWait <= 0 {
		o.CloseWait = DefaultCloseWait
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// API serves the $JS.API subjects for one JetStream engine.
type API struct {
	js    *jetstream.JetStream
	tr    jetstream.Transport
	opts  Options
	audit auditor

	queue   chan *request
	done    chan struct{}
	closed  atomic.Bool
	workers sync.WaitGroup

	subsMu sync.Mutex // guards subs
	subs   []jetstream.Subscription

	total   atomic.Uint64 // responses counted in api.total
	errors  atomic.Uint64 // error responses, api.errors
	dropped atomic.Uint64 // requests dropped since the last warning
	warnAt  atomic.Int64  // unix nanoseconds of the last drop warning
}

// New starts the workers and subscribes to the API subjects through tr.
func New(js *jetstream.JetStream, tr jetstream.Transport, opts Options) (*API, error) {
	if js == nil || tr == nil {
		return nil, errors.New("jsapi: New needs a JetStream and a Transport")
	}
	opts.setDefaults()
	a := &API{
		js: js, tr: tr, opts: opts,
		audit: auditor{tr: tr, server: js.ServerName(), domain: js.Domain()},
		queue: make(chan *request, opts.QueueLen),
		done:  make(chan struct{}),
	}
	for range opts.Workers {
		a.workers.Add(1)
		go a.work()
	}
	if err := a.subscribe(); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func (a *API) subscribe() error {
	for _, subj := range apiSubjects {
		sub, err := subscribeRequests(a.tr, subj, a.enqueue)
		if err != nil {
			return err
		}
		a.subsMu.Lock()
		a.subs = append(a.subs, sub)
		a.subsMu.Unlock()
	}
	return nil
}

// Close unsubscribes and stops the workers after the requests they are
// serving, waiting at most Options.CloseWait for them: a request still
// running then is left to fail against the stopping engine, and Close
// logs it and returns. Requests still queued are dropped. Close may be
// called more than once.
func (a *API) Close() {
	if !a.closed.CompareAndSwap(false, true) {
		return
	}
	a.subsMu.Lock()
	subs := a.subs
	a.subs = nil
	a.subsMu.Unlock()
	for _, s := range subs {
		s.Unsubscribe()
	}
	close(a.done)
	stopped := make(chan struct{})
	go func() {
		a.workers.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(a.opts.CloseWait):
		a.opts.Logf("jsapi: %v passed and requests are still being served; closing without them", a.opts.CloseWait)
	}
}

// enqueue is the subscription handler. It runs on the publisher's read
// loop: it copies the message (and, while someone listens for the audit
// advisory, the requester's description) and queues it without blocking.
func (a *API) enqueue(subject, reply string, hdr, data []byte, from Requester) {
	if a.closed.Load() {
		return
	}
	r := newRequest(subject, reply, hdr, data)
	a.audit.note(r, from)
	select {
	case a.queue <- r:
	default:
		a.warnDropped(subject)
	}
}

// warnDropped counts a dropped request and logs at most one warning a
// second with the number dropped since the previous one.
func (a *API) warnDropped(subject string) {
	n := a.dropped.Add(1)
	now := time.Now().UnixNano()
	last := a.warnAt.Load()
	if now-last < int64(time.Second) || !a.warnAt.CompareAndSwap(last, now) {
		return
	}
	n = a.dropped.Swap(0)
	a.opts.Logf("jsapi: request queue full (%d), dropped %d request(s), last on %q", a.opts.QueueLen, n, subject)
}

func (a *API) work() {
	defer a.workers.Done()
	for {
		select {
		case r := <-a.queue:
			a.serve(r)
		case <-a.done:
			return
		}
	}
}

// serve answers one request: exactly one response to its reply subject,
// none when it has no reply subject, then its audit advisory (audit.go).
func (a *API) serve(r *request) {
	if a.opts.serveHook != nil {
		a.opts.serveHook(r.subject)
	}
	body, tracked, after, ok := a.answer(r)
	if ok && r.reply != "" {
		a.tr.Publish(r.reply, "", nil, body)
	}
	if ok && tracked {
		a.audit.send(r, body)
	}
	if after != nil {
		after()
	}
}

// answer runs the request's endpoint and encodes the response; ok is false
// when nothing is to be sent. tracked says the response counts in the API
// statistics, and so is audited (nats-server counts and audits in the
// same calls). after is the response's after hook (nil for most).
func (a *API) answer(r *request) (body []byte, tracked bool, after func(), ok bool) {
	ep, found := route(r)
	if !a.answers(r) {
		// Another server of the cluster answers, or this one will
		// shortly (hold).
		a.hold(r)
		return nil, false, nil, false
	}
	if !found {
		body, ok = a.encode(unknownEndpoint, &apiResponse{}, jserr.New(jserr.BadRequest), true)
		return body, true, nil, ok
	}
	if a.unavailable(r) {
		body, ok = a.encode(ep, emptyResponse(r.key), jserr.New(jserr.ClusterNotAvail), true)
		return body, true, nil, ok
	}
	if err := a.offline(r); err != nil {
		if a.delayOffline(r) {
			return nil, false, nil, false
		}
		body, ok = a.encode(ep, emptyResponse(r.key), err, true)
		return body, true, nil, ok
	}
	resp, err := ep.handle(a, r)
	tracked = !ep.untracked || err != nil
	body, ok = a.encode(ep, resp, err, tracked)
	return body, tracked, resp.base().after, ok
}

// encode fills in the type and error of resp, counts it in the API
// statistics when track is set, and marshals it.
func (a *API) encode(ep endpoint, resp response, err *jserr.Error, track bool) ([]byte, bool) {
	base := resp.base()
	base.Type = typePrefix + ep.typ
	base.Error = err
	body, merr := json.Marshal(resp)
	if merr != nil {
		a.opts.Logf("jsapi: encode %s response: %v", ep.typ, merr)
		return nil, false
	}
	if track {
		a.total.Add(1)
		if base.Error != nil && !base.errorIsResult {
			a.errors.Add(1)
		}
	}
	return body, true
}

// Stats returns the responses counted in api.total and the error
// responses counted in api.errors (nats-server v2.15.2 JetStreamAPIStats).
func (a *API) Stats() (total, errors uint64) { return a.total.Load(), a.errors.Load() }
