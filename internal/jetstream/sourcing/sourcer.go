package sourcing

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/transform"
)

// Sourcing bounds: a sourcer copies at most this many messages, or about
// this many bytes, per round, and looks for a missing or recreated origin
// this often.
const (
	sourceBatchMsgs  = 256
	sourceBatchBytes = 1 << 20
	sourceRetry      = time.Second
)

// SourceInfo is a StreamSourceInfo of the JetStream API (nats-server v2.15.2 StreamInfo and StreamState), in nats-server v2.15.2's key order: the origin's name,
// the matching messages of the origin not yet copied (lag), the last
// origin sequence copied (seq, sources only), the time since the origin
// was last seen (active, nanoseconds; -1 when never; about a second at
// most while it exists, as nats-server's heartbeats make it), the error
// that stops it (10059 while the origin does not exist) and the source's
// filter or transforms.
type SourceInfo struct {
	Name              string                    `json:"name"`
	External          *stream.ExternalStream    `json:"external,omitempty"`
	Lag               uint64                    `json:"lag"`
	Seq               uint64                    `json:"seq,omitempty"`
	Active            time.Duration             `json:"active"`
	Error             *jserr.Error              `json:"error,omitempty"`
	FilterSubject     string                    `json:"filter_subject,omitempty"`
	SubjectTransforms []stream.SubjectTransform `json:"subject_transforms,omitempty"`
}

// sourcer copies the messages of one origin stream on this server into a
// mirror or a sourcing stream (nats-server v2.15.2 StreamSource; ADR-59). Its goroutine
// reads the origin's store directly, up to the origin's durable sequence,
// and hands each batch to the stream's apply goroutine as one operation,
// so the copies are ordered with the stream's other work and acknowledged
// to consumers like any message. nats-server does the same through an
// internal consumer on the origin; on one server the store is at hand.
type sourcer struct {
	env    Env
	r      *streamrun.Stream
	src    stream.Source
	mirror bool
	iname  string
	// sole is set when s is its stream's only source of its origin: its
	// copies made under an earlier filter or transform (an update changed
	// them) are then its own too (lastCopied).
	sole   bool
	filter []string               // origin subjects to copy; nil = all
	trs    []*transform.Transform // the mapping of each filter; nil keeps the subject
	wake   chan struct{}          // buffered 1: the origin's durable sequence moved
	quit   chan struct{}
	done   chan struct{}

	// origin is the stream s reads when its goroutine starts, registered
	// with it by newSources (nil: not there yet, looked up each round);
	// once done is closed, the last origin the goroutine read.
	origin *streamrun.Stream
	next   uint64 // origin sequence to read next; 0 until found (loop goroutine)
	ident  string // the identity of the origin next belongs to (loop goroutine)
	// stale is set when next may lag the stream's replicated state (this
	// replica did not lead it, or stopped leading it since next was
	// found): the start is found again once it leads (loop goroutine).
	stale bool
	// leadGen counts the stream's changes of leadership here (Set.Lead);
	// syncedGen is the count when the loop goroutine last found its
	// start from the stream's state.
	leadGen   atomic.Uint64
	syncedGen uint64
	// refusal and refusalLogged are the last copy refusal logged and
	// when (loop goroutine).
	refusal       string
	refusalLogged time.Time
	// copied is the origin sequence through which nothing is left to
	// copy (0 until the start is found); read by the origin's retention.
	copied atomic.Uint64

	mu     sync.Mutex // guards the fields below, read by info
	lag    uint64
	seq    uint64
	active int64 // unix ns the origin was last seen, 0 = never
	err    *jserr.Error
	// extConsumer is an external sourcer's consumer of its last setup
	// (external.go), deleted when the source goes away.
	extConsumer string
}

// newSourcer prepares the sourcer of src (a mirror when mirror is set).
// The config was validated, so the transforms compile.
func newSourcer(env Env, r *streamrun.Stream, src stream.Source, mirror bool) *sourcer {
	s := &sourcer{
		env: env, r: r, src: src, mirror: mirror, iname: src.IndexName(),
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
	if src.FilterSubject != "" {
		s.filter = []string{src.FilterSubject}
		s.trs = []*transform.Transform{nil}
	}
	for _, tr := range src.SubjectTransforms {
		from := tr.Source
		if from == "" {
			from = ">"
		}
		var t *transform.Transform
		if tr.Destination != "" {
			t, _ = transform.New(from, tr.Destination)
		}
		s.filter = append(s.filter, from)
		s.trs = append(s.trs, t)
	}
	return s
}

// Signal wakes the sourcer; it never blocks.
func (s *sourcer) Signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// stop ends the goroutine and waits for it.
func (s *sourcer) stop() {
	close(s.quit)
	<-s.done
}

// run is the sourcer's goroutine.
func (s *sourcer) run() {
	switch {
	case s.src.Consumer != nil:
		s.runDurable()
		return
	case s.src.External != nil:
		s.runExternal()
		return
	}
	defer close(s.done)
	o := s.origin // registered by newSources
	// The stopper reads the last origin (stopSources) once done closes.
	defer func() { s.origin = o }()
	for {
		select {
		case <-s.quit: // also between rounds of a busy origin
			return
		default:
		}
		if cur := s.env.Lookup(s.src.Name); cur != o || cur == nil {
			unwatch(o, s) // gone or replaced: nothing of it to keep
			o = cur
			watch(o, s)
			if o == nil && s.env.Clustered {
				// No replica of the origin here: through its consumer
				// API (remote.go), until one runs here.
				if !s.runRemote() {
					return
				}
				continue
			}
			s.setErr(o == nil)
		}
		if o != nil && s.copyRound(o) {
			continue
		}
		select {
		case <-s.quit:
			return
		case <-s.wake:
		case <-time.After(sourceRetry):
		}
	}
}

// copyRound copies one batch from origin o and reports whether it copied
// anything (so the loop goes on at once).
func (s *sourcer) copyRound(o *streamrun.Stream) bool {
	ident := stream.Identity(o.Created())
	if s.next != 0 && ident != s.ident && !s.mirror {
		s.env.Logf("stream %s: source stream %s was recreated, resetting source state", s.r.Name(), s.src.Name)
		s.next = 0
	}
	s.heard()
	if gen := s.leadGen.Load(); gen != s.syncedGen && s.r.Replicated() {
		s.stale = true // the leadership moved: others may have copied
	}
	if s.next == 0 || s.stale {
		if !s.synced() {
			if s.next == 0 {
				// A follower's start, as a floor for the origin's
				// retention; found again when it leads.
				s.resume(o, ident, false)
			}
			return false
		}
		s.resume(o, ident, false)
		if s.next > 1 {
			// While s was registered without a start it needed every
			// message, so what the sourcer it replaced (an update of the
			// sources) copied meanwhile stayed in an interest origin.
			o.DropUnneeded()
		}
	}
	top := o.Acknowledged()
	msgs := s.load(o, top)
	defer s.updateLag(o)
	if len(msgs) == 0 {
		return false
	}
	applied, own := s.apply(msgs, ident)
	if applied == 0 {
		s.updateLag(o)      // before the wait: what is left, refused included
		s.wait(sourceRetry) // refused (a limit, a store error): retry later
		return false
	}
	last := msgs[applied-1].Seq
	s.next = last + 1
	if o.Retention() != stream.LimitsPolicy {
		// The origin may remove what was copied: only once the copies
		// are durable here. (A store that cannot make them durable is
		// fenced; the origin then keeps them.)
		if err := s.r.Store().WaitDurable(own); err != nil {
			s.wait(sourceRetry)
			return false
		}
		s.copied.Store(last)
		o.OnSourced(s, msgs[:applied], false)
	}
	s.copied.Store(last) // limits origin: nobody reads it
	s.mu.Lock()
	s.seq = last
	s.mu.Unlock()
	s.heard()
	return true
}

// synced reports whether the sourcer may copy into its stream from the
// position the stream's state gives: always for a stream that is not
// replicated; for a replicated one only where it leads, once every
// operation its log committed before is applied here (SyncLog), so that
// a new leader goes on where the committed copies end, with no gap and
// no copy made twice. It clears stale and notes the leadership it
// synced under.
func (s *sourcer) synced() bool {
	if !s.r.Replicated() {
		s.stale = false
		return true
	}
	gen := s.leadGen.Load()
	if !s.r.Leads() || !s.r.SyncLog() {
		s.stale = true
		return false
	}
	s.stale, s.syncedGen = false, gen
	return true
}

// load reads the next batch of matching origin messages through top.
func (s *sourcer) load(o *streamrun.Stream, top uint64) []*store.StoredMsg {
	var msgs []*store.StoredMsg
	size := 0
	for len(msgs) < sourceBatchMsgs && size < sourceBatchBytes && s.next <= top {
		sm, err := o.Store().LoadNext(s.filter, s.next)
		if errors.Is(err, store.ErrCorrupt) {
			s.env.Logf("stream %s: source %s: %v (skipped)", s.r.Name(), s.src.Name, err)
			s.next++
			continue
		}
		if err != nil || sm.Seq > top {
			break
		}
		msgs = append(msgs, sm)
		size += len(sm.Subject) + len(sm.Header) + len(sm.Data)
		s.next = sm.Seq + 1
	}
	if len(msgs) > 0 {
		s.next = msgs[0].Seq // advanced only for what is applied
	}
	return msgs
}

// apply proposes the batch to the stream as one Copy operation and
// returns how many messages, from the first, were stored (or were
// duplicates), and the highest sequence of this stream they were stored
// at; it logs the refusal that stopped the copy, if any.
func (s *sourcer) apply(msgs []*store.StoredMsg, ident string) (applied int, top uint64) {
	now := s.env.Now().UnixNano()
	op := &stream.Copy{Mirror: s.mirror, Entries: make([]stream.Entry, 0, len(msgs))}
	for _, sm := range msgs {
		op.Entries = append(op.Entries, s.entry(sm, ident, now))
		if s.mirror {
			op.OriginSeqs = append(op.OriginSeqs, sm.Seq)
		}
	}
	out, ok := s.r.Do(op)
	if !ok {
		// Not led here (any more), or the log dropped the proposal: what
		// the stream holds decides where copying goes on.
		s.stale = s.r.Replicated()
		return 0, 0
	}
	for i, res := range out.Results {
		if res.Err != nil {
			s.logRefusal(msgs[i].Seq, res.Err.Description)
			break
		}
		applied, top = applied+1, max(top, res.Seq)
	}
	return applied, top
}

// logRefusal logs that the stream refused the copy of origin message
// seq: at once when the reason changed, else at most every
// streamrun.RefusalLogEvery (the copy is retried every sourceRetry).
func (s *sourcer) logRefusal(seq uint64, why string) {
	now := s.env.Now()
	if why == s.refusal && now.Sub(s.refusalLogged) < streamrun.RefusalLogEvery {
		return
	}
	s.refusal, s.refusalLogged = why, now
	s.env.Logf("stream %s: source %s: message %d: %s (retrying every %v)", s.r.Name(), s.src.Name, seq, why, sourceRetry)
}

// Matches reports whether the sourcer copies messages on subj.
func (s *sourcer) Matches(subj string) bool {
	return len(s.filter) == 0 || store.MatchFilters(subj, s.filter)
}

// NeedsAllAbove reports whether the sourcer copies every subject of its
// origin, and so needs every message above what it copied
// (streamrun.Watcher).
func (s *sourcer) NeedsAllAbove() (uint64, bool) { return s.copied.Load(), len(s.filter) == 0 }

// Needs reports whether the sourcer has still to copy the message seq on
// subj (the origin's interest retention keeps it until then).
func (s *sourcer) Needs(seq uint64, subj string) bool {
	return seq > s.copied.Load() && s.Matches(subj)
}

// entry builds the entry to apply for an origin message.
func (s *sourcer) entry(sm *store.StoredMsg, ident string, now int64) stream.Entry {
	subj := s.mapSubject(sm.Subject)
	if s.mirror {
		return stream.Entry{Subject: subj, Header: stream.MirroredHeader(sm.Header), Data: sm.Data, Time: sm.Time}
	}
	return stream.SourcedEntry(sm, s.iname, ident, subj, now)
}

// mapSubject applies the first transform whose filter matches.
func (s *sourcer) mapSubject(subj string) string {
	for _, t := range s.trs {
		if t == nil {
			continue
		}
		if out, ok := t.Map(subj); ok {
			return out
		}
	}
	return subj
}

// startSeq finds where copying starts (nats-server v2.15.2
// setupMirrorConsumer, setupSourceConsumer): a mirror after its last
// sequence; a source after what the stream already holds from this
// origin (and seq then shows it at once; for a sole source of its origin
// whatever filter or transforms the copies were made under, so that an
// update changing them goes on from there rather than copying again),
// else at the source's
// opt_start_seq, else at the first origin message at or after
// opt_start_time or the stream's last message time, whichever is later;
// else, for a stream whose first sequence is above 1 and that never read
// a recreated origin, at its last message time (a promoted mirror picks
// up near where it stopped); else the origin's first message.
// resumed is set when the stream already holds copies from this origin
// made under the source's current filter and transforms.
func (s *sourcer) startSeq(o *streamrun.Stream) (next uint64, resumed bool) {
	own := s.r.Store().State(false)
	var found bool
	switch {
	case s.mirror && own.LastSeq > 0:
		return own.LastSeq + 1, true
	case !s.mirror:
		var seq uint64
		var same, exact bool
		if seq, found, same, exact = s.lastCopied(s.ident); found && same {
			s.mu.Lock()
			s.seq = seq
			s.mu.Unlock()
			// Copies made under another filter say nothing of what this
			// one matches below seq: nothing to reclaim from them.
			return seq + 1, exact
		}
	}
	if s.src.OptStartSeq == 0 && s.src.OptStartTime == nil && !s.mirror && own.FirstSeq > 1 && own.LastTime != 0 && !found {
		return s.atTime(o, own.LastTime), false
	}
	return s.optStart(o, own.LastTime), false
}

// optStart is the origin sequence the source's opt_start_seq or
// opt_start_time names (a time no earlier than notBefore, unix ns), else
// 1.
func (s *sourcer) optStart(o *streamrun.Stream, notBefore int64) uint64 {
	switch {
	case s.src.OptStartSeq > 0:
		return s.src.OptStartSeq
	case s.src.OptStartTime != nil:
		return s.atTime(o, max(s.src.OptStartTime.UnixNano(), notBefore))
	}
	return 1
}

// atTime returns the first origin sequence stored at or after t (unix
// ns).
func (s *sourcer) atTime(o *streamrun.Stream, t int64) uint64 {
	st := o.Store().State(false)
	return consumer.FirstAtTime(o.Store(), t, st.FirstSeq, st.LastSeq)
}

// resume finds where copying from o (of identity ident) starts and,
// when it resumes earlier copies, reclaims them; wait makes it return
// only once the origin has applied the removals.
func (s *sourcer) resume(o *streamrun.Stream, ident string, wait bool) {
	s.ident = ident
	var resumed bool
	s.next, resumed = s.startSeq(o)
	s.copied.Store(s.next - 1)
	if resumed {
		s.reclaim(o, wait)
	}
}

// reclaim runs when copying resumes from a workqueue or interest origin:
// the messages copied before (from the source's start through next-1;
// for a mirror from its own first sequence) may still be in the origin,
// because the removal that follows a copy is not redone if the server
// was killed before it reached the origin's disk. They are handed to
// onSourced as after a copy, in batches, once this stream's copies are
// durable; wait as for resume.
func (s *sourcer) reclaim(o *streamrun.Stream, wait bool) {
	if o.Retention() == stream.LimitsPolicy {
		return
	}
	own := s.r.Store().State(false)
	if err := s.r.Store().WaitDurable(own.LastSeq); err != nil {
		return
	}
	seq := s.optStart(o, 0)
	if s.mirror {
		seq = max(seq, own.FirstSeq)
	}
	for seq < s.next {
		var msgs []*store.StoredMsg
		for len(msgs) < sourceBatchMsgs && seq < s.next {
			sm, err := o.Store().LoadNext(s.filter, seq)
			if err != nil || sm.Seq >= s.next {
				seq = s.next
				break
			}
			msgs = append(msgs, sm)
			seq = sm.Seq + 1
		}
		o.OnSourced(s, msgs, wait)
	}
}

// lastCopied scans the sourcing stream from its end for the last message
// that came through this source, by its Nats-Stream-Source header, and
// reports whether one was found, whether it came from the origin of
// identity ident, and whether it was copied under this source's current
// filter and transforms (exact; else it came through the same origin
// before an update changed them, which counts only for a sole source).
// One from an earlier origin of the same name (the origin was deleted and
// created again) means copying starts over, as in nats-server v2.15.2.
func (s *sourcer) lastCopied(ident string) (seq uint64, found, same, exact bool) {
	st := s.r.Store().State(false)
	for n := st.LastSeq; n >= st.FirstSeq && n > 0; n-- {
		sm, err := s.r.Store().Load(n)
		if err != nil {
			continue
		}
		iname, oseq, from, ok := stream.SourcedFrom(sm.Header)
		if !ok {
			continue
		}
		exact = iname == s.iname
		if origin, _, _ := strings.Cut(iname, " "); exact || (s.sole && origin == s.src.Name) {
			return oseq, true, from == "" || from == ident, exact
		}
	}
	return 0, false, false, false
}

// heard records that the origin was there (active; nats-server counts
// its source consumer's heartbeats, one a second when idle).
func (s *sourcer) heard() {
	s.mu.Lock()
	s.active = s.env.Now().UnixNano()
	s.mu.Unlock()
}

// wait sleeps for d unless stopped.
func (s *sourcer) wait(d time.Duration) {
	select {
	case <-s.quit:
	case <-time.After(d):
	}
}

func (s *sourcer) setErr(missing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = nil
	if missing {
		s.err = jserr.New(jserr.StreamNotFound)
	}
}

// updateLag sets lag to what o holds for s to copy, up to o's durable
// sequence now (not the round's start: a round that waits after a
// refusal would report what was left before it).
func (s *sourcer) updateLag(o *streamrun.Stream) {
	n := o.Store().NumPending(s.filter, s.next, o.Acknowledged())
	s.mu.Lock()
	s.lag = n
	s.mu.Unlock()
}

// info returns the sourcer's StreamSourceInfo.
func (s *sourcer) info(now time.Time) *SourceInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	si := &SourceInfo{
		Name: s.src.Name, External: s.src.External, Lag: s.lag, Active: -1, Error: s.err,
		FilterSubject: s.src.FilterSubject, SubjectTransforms: s.src.SubjectTransforms,
	}
	if !s.mirror {
		si.Seq = s.seq
	}
	if s.active != 0 {
		si.Active = now.Sub(time.Unix(0, s.active))
	}
	return si
}

// Env is what sourcing takes from the engine.
type Env struct {
	Now  func() time.Time                 // the clock of the copies' times and of info's active
	Logf func(format string, args ...any) // problems
	// Lookup returns the runtime of the stream of that name, nil when
	// there is none; it may take the engine's lock.
	Lookup func(name string) *streamrun.Stream
	// Transport is the account's messaging layer: a durable sourcer
	// talks to its origin's consumer through it (durable.go).
	Transport streamrun.Transport
	// Account and Domain name the stream's account ("" is $G) and the
	// server's JetStream domain ("" for none): an external sourcer's
	// consumer name and metadata carry them (external.go).
	Account, Domain string
	// Clustered is set in a clustered JetStream: an origin with no
	// replica on this server may run on another, and is then read
	// through its consumer API (remote.go).
	Clustered bool
	// After is the durable sourcers' timer (nil: time.After): the reset
	// answer's wait, the retry backoff and the health check.
	After func(d time.Duration) <-chan time.Time
}

// Set is a stream's own sourcers (a mirror's one, or one per source);
// the sourcers of other streams that read it as their origin are
// registered with its runtime (streamrun.Stream.Watch). It implements
// streamrun.SourceSet.
type Set struct {
	env Env
	r   *streamrun.Stream // the stream the sourcers copy into

	// life serializes replacing the sourcers (restartSources) with
	// closing them (closeSources), so that two updates cannot leave a
	// sourcer running that no one will stop; it is taken before mu.
	life   sync.Mutex
	closed bool          // closeSources ran: no sourcer starts again (under life)
	from   stream.Config // the mirror and sources own was started from (under life)

	mu  sync.Mutex
	own []*sourcer
}

// NewSet returns the (empty) set of sourcers of stream r.
func NewSet(env Env, r *streamrun.Stream) *Set { return &Set{env: env, r: r} }

// Start starts a sourcer for cfg's mirror or each of its sources, each
// registered with its origin first (lookup finds a stream by name: Env's
// Lookup, or the engine's table itself when the caller holds its lock).
func (ss *Set) Start(cfg stream.Config, lookup func(string) *streamrun.Stream) {
	ss.launch(ss.newSources(cfg, lookup), cfg)
}

// newSources returns the sourcers of cfg's mirror or of each of its
// sources, not yet started, each registered with its origin (watch) if
// lookup finds it: from then on the origin keeps what they need.
func (ss *Set) newSources(cfg stream.Config, lookup func(string) *streamrun.Stream) []*sourcer {
	var own []*sourcer
	if cfg.Mirror != nil {
		own = append(own, newSourcer(ss.env, ss.r, *cfg.Mirror, true))
	}
	per := map[string]int{}
	for _, src := range cfg.Sources {
		own = append(own, newSourcer(ss.env, ss.r, *src, false))
		per[src.Name]++
	}
	for _, s := range own {
		s.sole = per[s.src.Name] == 1
		if s.src.Consumer != nil || s.src.External != nil {
			continue // the consumer keeps what it has to deliver; or not here
		}
		s.origin = lookup(s.src.Name)
		watch(s.origin, s)
	}
	return own
}

// launch starts the goroutines of own and makes them the stream's
// sourcers.
func (ss *Set) launch(own []*sourcer, cfg stream.Config) {
	ss.from = stream.Config{Mirror: cfg.Mirror, Sources: cfg.Sources}
	for _, s := range own {
		go s.run()
	}
	ss.mu.Lock()
	ss.own = own
	ss.mu.Unlock()
}

// StartRestored starts the sourcers of the streams a starting
// server restored, before any client is served, in three steps. Every
// sourcer first registers with its origin (newSources), so that no copy
// or reclaim removes from a workqueue or interest origin what another
// sourcer has yet to copy. Then each sourcer of such an origin finds
// where it resumes and removes from the origin what it had copied
// before the restart, waiting for the removals, so that no consumer of
// the origin is handed a message already copied (one of a limits origin
// finds its start in its own goroutine, as after a create: the scan for
// it may be long and removes nothing), and each interest stream drops
// what nobody needs any more (an ephemeral consumer's messages: those
// consumers end with the server). Then the goroutines start.
func StartRestored(restored []*Set) {
	owns := make([][]*sourcer, len(restored))
	for i, ss := range restored {
		owns[i] = ss.newSources(ss.r.Config(), ss.env.Lookup)
	}
	for _, own := range owns {
		for _, s := range own {
			if o := s.origin; o != nil && o.Retention() != stream.LimitsPolicy {
				s.heard()
				s.resume(o, stream.Identity(o.Created()), true)
			}
		}
	}
	for _, ss := range restored {
		ss.r.DropUnneededWait() // before the server answers anyone
	}
	for i, ss := range restored {
		ss.launch(owns[i], ss.r.Config())
	}
}

// stopSources stops the stream's sourcers and waits for them. With
// release set (the stream is deleted, or an update replaces its
// sources) they stop counting as interest in their origins, and an
// interest origin removes what only they still needed; without it (the
// server shuts down) the origins keep everything for them, so that
// nothing they have yet to copy is lost to the shutdown. The caller must
// not hold the engine's lock (a sourcer may be waiting for it, Lookup).
func (ss *Set) stop(release bool) {
	ss.mu.Lock()
	own := ss.own
	ss.own = nil
	ss.mu.Unlock()
	for _, s := range own {
		s.stop()
	}
	if !release {
		return
	}
	for _, s := range own {
		s.dropExternal() // the origin's consumer is of no use any more
	}
	for _, s := range own {
		unwatch(s.origin, s)
	}
	for _, s := range own {
		if s.origin != nil {
			s.origin.DropUnneeded()
		}
	}
}

// Restart replaces the sourcers when the stream's config (after
// an update) has another mirror or other sources than those running;
// sources that stay resume from the stream's messages (their
// Nats-Stream-Source headers). The new sourcers register with their
// origins before the old ones let go, so that an interest origin keeps
// what a source that stays has yet to copy. It reads the config itself,
// under srcs.life, so that of two updates racing the last one applied
// wins.
func (ss *Set) Restart() {
	ss.life.Lock()
	defer ss.life.Unlock()
	cfg := ss.r.Config()
	if ss.closed || sameSources(ss.from, cfg) {
		return
	}
	own := ss.newSources(cfg, ss.env.Lookup)
	ss.stop(true)
	ss.launch(own, cfg)
}

// Close stops the stream's sourcers for good (stop), after any restart
// in progress; none starts again (streamrun.SourceSet).
func (ss *Set) Close(release bool) {
	ss.life.Lock()
	defer ss.life.Unlock()
	ss.closed = true
	ss.stop(release)
}

// sameSources reports whether two configs have the same mirror and
// sources.
func sameSources(a, b stream.Config) bool {
	x := stream.Config{Mirror: a.Mirror, Sources: a.Sources}
	y := stream.Config{Mirror: b.Mirror, Sources: b.Sources}
	return x.Equal(&y)
}

// Lead tells the sourcers that this replica of their replicated stream
// came to lead it or stopped leading it (jetstream.SetStreamLeader): each
// finds its start again from the stream's state before it copies more,
// and a sourcer reading its origin through the consumer API (remote.go)
// runs only while the stream leads here.
func (ss *Set) Lead() {
	ss.mu.Lock()
	own := ss.own
	ss.mu.Unlock()
	for _, s := range own {
		s.leadGen.Add(1)
		s.Signal()
	}
}

// Infos returns the StreamSourceInfo of the mirror (nil if none) and of
// each source.
func (ss *Set) Infos() (mirror *SourceInfo, sources []*SourceInfo) {
	ss.mu.Lock()
	own := ss.own
	ss.mu.Unlock()
	now := ss.env.Now()
	for _, s := range own {
		if s.mirror {
			mirror = s.info(now)
		} else {
			sources = append(sources, s.info(now))
		}
	}
	return mirror, sources
}

// watch registers s with origin o, which may be nil.
func watch(o *streamrun.Stream, s *sourcer) {
	if o != nil {
		o.Watch(s)
	}
}

// unwatch undoes watch; o may be nil.
func unwatch(o *streamrun.Stream, s *sourcer) {
	if o != nil {
		o.Unwatch(s)
	}
}
