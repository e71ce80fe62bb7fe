package jetstream

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream/consumerrun"
	"github.com/cairnmq/cairn/internal/jetstream/sourcing"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/jserr"
)

// The types the engine shares with its runtimes (jetstream/streamrun),
// under the names the server and the tests know them by.
type (
	// Transport is what JetStream needs from the messaging layer
	// (streamrun.Transport); the server implements it.
	Transport = streamrun.Transport
	// MsgHandler receives a message on an internal subscription.
	MsgHandler = streamrun.MsgHandler
	// TracedHandler is a MsgHandler that also receives the publish's
	// message trace (streamrun.TracedSubscriber; ADR-41).
	TracedHandler = streamrun.TracedHandler
	// Tracer receives a stream's "js" trace event (streamrun.Tracer).
	Tracer = streamrun.Tracer
	// Subscription is an internal subscription.
	Subscription = streamrun.Subscription
	// Log orders the operations of a stream or consumer (docs/engine.md).
	Log[O any] = streamrun.Log[O]
	// Applier applies the committed operations of a log.
	Applier[O any] = streamrun.Applier[O]
	// NewLogFunc makes a stream's log (Config.NewLog).
	NewLogFunc = streamrun.NewLogFunc
	// NewConsumerLogFunc makes a consumer's log (Config.NewConsumerLog).
	NewConsumerLogFunc = streamrun.NewConsumerLogFunc
	// SourceInfo is a StreamSourceInfo of the JetStream API.
	SourceInfo = sourcing.SourceInfo
)

// The logs of a stream and a consumer when Config.NewLog and
// Config.NewConsumerLog are nil. The package's tests replace them with
// logs that apply every operation through its byte form (log_test.go).
var (
	defaultNewLog         NewLogFunc         = streamrun.NewLocalLog
	defaultNewConsumerLog NewConsumerLogFunc = streamrun.NewLocalConsumerLog
)

// streamEntry is the engine's hold on one stream of its table: the
// stream's runtime, and what the engine keeps beside it, its consumer
// table and its own sourcers.
type streamEntry struct {
	*streamrun.Stream
	js   *JetStream
	cons consumerTable
	srcs *sourcing.Set // the mirror's or sources' sourcers
}

// consumerTable is a stream's consumers (streamrun.ConsumerSet).
type consumerTable struct {
	mu     sync.Mutex                       // guards the fields below
	byName map[string]*consumerrun.Consumer // by name
	// done is set when the stream stops: no consumer is created after
	// it, so none writes into a directory being removed (or into the
	// directory of a new stream of the same name).
	done     bool
	deleting map[string]bool // consumers being deleted (files not yet removed)
	// unrestored names the consumers whose directories a start could not
	// restore (a damaged meta.json, an unreadable state): their files stay
	// and, while any is left, interest retention removes nothing, since
	// nobody knows what they still need (held).
	unrestored map[string]bool
	held       atomic.Bool // len(unrestored) > 0
	// retireTo, when set (DetachStream), makes StopAll hand each
	// consumer to it instead of stopping it: it retires them for their
	// next runtimes here (JetStream.retire).
	retireTo func(*consumerrun.Consumer)
}

// List returns the consumers (streamrun.ConsumerSet).
func (t *consumerTable) List() []streamrun.Consumer {
	t.mu.Lock()
	defer t.mu.Unlock()
	cs := make([]streamrun.Consumer, 0, len(t.byName))
	for _, c := range t.byName {
		cs = append(cs, c)
	}
	return cs
}

// Held reports whether a consumer a start could not restore holds
// interest retention (streamrun.ConsumerSet).
func (t *consumerTable) Held() bool { return t.held.Load() }

// Len returns the number of consumers.
func (t *consumerTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byName)
}

// StopAll stops every consumer (stream deleted: status 409 Consumer
// Deleted; shutdown: none), in parallel, and adds none after; with
// retireTo set and no status (DetachStream), it hands each to
// retireTo instead, which retires it.
func (t *consumerTable) StopAll(status []byte) {
	t.mu.Lock()
	t.done = true
	cs := make([]*consumerrun.Consumer, 0, len(t.byName))
	for _, c := range t.byName {
		cs = append(cs, c)
	}
	t.byName = map[string]*consumerrun.Consumer{}
	retireTo := t.retireTo
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if retireTo == nil || status != nil {
				c.Stop(status)
			} else {
				retireTo(c)
			}
		}()
	}
	wg.Wait()
}

// list returns the consumers as the engine's type.
func (t *consumerTable) list() []*consumerrun.Consumer {
	t.mu.Lock()
	defer t.mu.Unlock()
	cs := make([]*consumerrun.Consumer, 0, len(t.byName))
	for _, c := range t.byName {
		cs = append(cs, c)
	}
	return cs
}

// streamNamed returns the table entry of a stream, or nil.
func (js *JetStream) streamNamed(name string) *streamEntry {
	js.mu.Lock()
	defer js.mu.Unlock()
	return js.streams[name]
}

// streamRuntime returns the runtime of a stream, or nil (sourcing.Env's
// Lookup).
func (js *JetStream) streamRuntime(name string) *streamrun.Stream {
	if r := js.streamNamed(name); r != nil {
		return r.Stream
	}
	return nil
}

// SetStreamLeader tells a replicated stream that this server leads its
// log now (leader) or no longer does: it subscribes to its subjects,
// shared with the cluster, or drops them (streamrun.Stream.SetLeader),
// and its sourcers learn of it (sourcing.Set.Lead).
// A new leader first refreshes the account's tables that follow the
// streams' subjects (refreshTables): as a follower it applied config
// updates from the stream's log without them. Errors: 10059 when the
// stream does not exist here; Subscribe's.
func (js *JetStream) SetStreamLeader(name string, leader bool) error {
	r := js.streamRuntime(name)
	if r == nil {
		return jserr.New(jserr.StreamNotFound)
	}
	if leader {
		js.refreshTables() // config updates it applied as a follower (assigned.go)
	}
	err := r.SetLeader(leader)
	if e := js.streamNamed(name); e != nil {
		e.srcs.Lead() // where copying goes on, and who copies (sourcing.Set.Lead)
	}
	return err
}

// StreamWithdraw is the first step of handing a replicated stream's
// leadership over (docs/cluster.md, "Lame duck mode and shutdown"):
// the stream's subscriptions stop being announced to the other servers,
// which stop routing its publishes here, while those already on their
// way are still taken (streamrun.Stream.Withdraw). The server then
// flushes its routes, and StreamHandOver follows. Errors: 10059 when the
// stream does not exist here.
func (js *JetStream) StreamWithdraw(name string) error {
	r := js.streamRuntime(name)
	if r == nil {
		return jserr.New(jserr.StreamNotFound)
	}
	r.Withdraw()
	return nil
}

// StreamHandOver prepares this server's replica of a replicated stream,
// which leads the stream's log, to hand its leadership over
// (docs/cluster.md, "Lame duck mode and shutdown"): it drops the
// stream's subscriptions, so that no publish reaches it any more
// (SetStreamLeader false: they stay dropped even if it keeps leading),
// and returns once the stream has proposed every publish it took before,
// so that the leadership transfer finds them in the log rather than
// dropping them, or, once patience passed, answered those it had not
// proposed yet with 503, which clients retry with the new leader
// (streamrun.Stream.Quiesce). It returns at once when the stream has
// stopped. Errors: 10059 when the stream does not exist here.
func (js *JetStream) StreamHandOver(name string, patience time.Duration) error {
	r := js.streamRuntime(name)
	if r == nil {
		return jserr.New(jserr.StreamNotFound)
	}
	if err := r.SetLeader(false); err != nil {
		return err
	}
	r.Quiesce(patience)
	return nil
}

// sourcingEnv is what the sourcers take from the engine.
func (js *JetStream) sourcingEnv() sourcing.Env {
	return sourcing.Env{Now: js.cfg.Now, Logf: js.cfg.Logf, Lookup: js.streamRuntime, Transport: js.tr,
		Account: js.cfg.Account, Domain: js.cfg.Domain, Clustered: js.cfg.NewReplicatedLog != nil}
}

// ExactInterest is a capability a Transport may have: HasExactInterest
// reports whether a plain subscription is on exactly the literal subject
// (a wildcard that matches it does not count), as nats-server's interest
// notifications see it. A snapshot waits for such a subscription on its
// deliver subject (Snapshot): a client's request inbox matches its
// reply wildcard long before it subscribes to the inbox itself. Without
// the capability, HasInterest is used.
type ExactInterest interface {
	HasExactInterest(subject string) bool
}

// hasExactInterest asks the transport for an exact subscription on subj,
// or for any interest when it cannot tell.
func (js *JetStream) hasExactInterest(subj string) bool {
	if ei, ok := js.tr.(ExactInterest); ok {
		return ei.HasExactInterest(subj)
	}
	return js.tr.HasInterest(subj)
}
