package catchup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/store"
)

// Limits of the protocol (package comment, "Flow control").
const (
	// Window is the number of requests a fetch keeps in flight.
	Window = 4
	// Span is the most sequences one request asks for.
	Span = 1 << 16
	// MaxGaps is the most gaps one request carries.
	MaxGaps = 4096
	// ChunkBytes is the bytes of messages a fetcher asks one chunk for.
	ChunkBytes = 1 << 20
	// MaxQueued is the requests a source queues; beyond, it refuses (busy).
	MaxQueued = 64
	// DefaultRequestTimeout is how long a fetch waits for a request's
	// answer before it fails the source.
	DefaultRequestTimeout = 10 * time.Second
	// maxChunkBytes caps what a source puts in a chunk whatever it was
	// asked; maxFrame is the transport's frame cap (transport.MaxFrameBytes).
	maxChunkBytes = 8 << 20
	maxFrame      = 64 << 20
	// busyWait is how long a fetch waits before asking a busy source again;
	// maxBusy how many times in a row before it gives up on it.
	busyWait = 200 * time.Millisecond
	maxBusy  = 50
)

// ErrUnavailable is returned by Fetch when no source could serve the
// whole range: each refused (it lacks a sequence, is damaged, holds no
// replica), did not answer in time, or could not be reached. The stream
// abandons the snapshot for now (raftnode.ErrRestoreRetry) and is sent a
// newer one later.
var ErrUnavailable = errors.New("catchup: no source could serve the messages")

// ErrClosed is returned by Fetch once the Service is closed.
var ErrClosed = errors.New("catchup: closed")

// Source is a replica whose messages a Service serves: a replicated
// stream's store on this server.
type Source interface {
	// Message returns the message at seq as the replica stored it, even if
	// it was removed since, as long as the replica still has it
	// (filestore.Store.LoadRemoved). Errors: an error wrapping
	// store.ErrNotFound when it has not, or store.ErrCorrupt when its
	// record is damaged.
	Message(seq uint64) (*store.StoredMsg, error)
}

// Config configures a Service.
type Config struct {
	// Send hands a frame to the transport for server to; it must not
	// block (transport.Transport.Send). Required.
	Send func(to raftnode.ServerID, frame []byte) error
	// Workers serve requests (default 2).
	Workers int
	// RequestTimeout is DefaultRequestTimeout when 0.
	RequestTimeout time.Duration
	// Logf receives refusals and failed sources; nil discards.
	Logf func(format string, args ...any)
}

// Service serves this server's registered replicas to fetchers and
// fetches for this server's replicas catching up. Its methods are safe
// for concurrent use. New starts its workers; Close ends them.
type Service struct {
	cfg   Config
	queue chan job
	quit  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	// gones counts the servers in mu.gone, so that a frame's arrival
	// (Heard) takes no lock while none is marked.
	gones atomic.Int32

	mu struct {
		sync.Mutex
		sources map[raftnode.GroupID]Source
		fetches map[uint64]*fetch
		// gone are the servers PeerGone marked and no frame came from
		// since: a fetch does not ask them.
		gone map[raftnode.ServerID]bool
	}
}

type job struct {
	from raftnode.ServerID
	r    *request
}

// New returns a running Service.
func New(cfg Config) *Service {
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	s := &Service{cfg: cfg, queue: make(chan job, MaxQueued), quit: make(chan struct{})}
	s.mu.sources = map[raftnode.GroupID]Source{}
	s.mu.fetches = map[uint64]*fetch{}
	s.mu.gone = map[raftnode.ServerID]bool{}
	for range cfg.Workers {
		s.wg.Go(s.work)
	}
	return s
}

// Close ends the workers; fetches under way fail with ErrClosed.
func (s *Service) Close() {
	s.once.Do(func() { close(s.quit) })
	s.wg.Wait()
}

// Register makes src the replica of group g this server serves,
// replacing any other.
func (s *Service) Register(g raftnode.GroupID, src Source) {
	s.mu.Lock()
	s.mu.sources[g] = src
	s.mu.Unlock()
}

// Unregister stops serving group g's replica src (a replica that stops);
// a newer registration is left alone.
func (s *Service) Unregister(g raftnode.GroupID, src Source) {
	s.mu.Lock()
	if s.mu.sources[g] == src {
		delete(s.mu.sources, g)
	}
	s.mu.Unlock()
}

// errPeerGone is a source whose server PeerGone reported gone.
var errPeerGone = errors.New("its server is gone (its connection ended, or no beat from it)")

// PeerGone tells the service that server from can no longer answer what
// it was asked: a transport connection to or from it ended (what was in
// flight on it may be lost), or raftnode found it dead (no beat for an
// election timeout). Every fetch asking it fails over to its next source
// at once, rather than after RequestTimeout, and no fetch asks it until
// a frame from it arrives (Heard). nats-server v2.15.2 learns the same
// from its route's closing; docs/cluster.md, "Stream snapshots". It
// never blocks.
func (s *Service) PeerGone(from raftnode.ServerID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.gone[from] {
		s.mu.gone[from] = true
		s.gones.Add(1)
	}
	for _, f := range s.mu.fetches {
		if f.source == from && !f.failed {
			f.failed = true
			close(f.lost)
		}
	}
}

// Heard tells the service that a frame came from server from, alive
// again if PeerGone marked it. It is called for every frame the
// transport receives, and takes no lock while no server is marked.
func (s *Service) Heard(from raftnode.ServerID) {
	if s.gones.Load() == 0 {
		return
	}
	s.mu.Lock()
	if s.mu.gone[from] {
		delete(s.mu.gone, from)
		s.gones.Add(-1)
	}
	s.mu.Unlock()
}

// Receive takes a catch-up frame (its first byte is Magic) from server
// from: a request is queued for a worker (or refused as busy), an answer
// is handed to its fetch. It never blocks. Errors: ErrBadFrame (wrapped).
func (s *Service) Receive(from raftnode.ServerID, frame []byte) error {
	v, err := decode(frame)
	if err != nil {
		return err
	}
	switch x := v.(type) {
	case *request:
		select {
		case s.queue <- job{from: from, r: x}:
		default:
			s.refuse(from, x, refuseBusy, 0, "busy")
		}
	case *chunk:
		s.answer(from, x.fetch, x)
	case *refusal:
		s.answer(from, x.fetch, x)
	}
	return nil
}

func (s *Service) answer(from raftnode.ServerID, id uint64, v any) {
	s.mu.Lock()
	f := s.mu.fetches[id]
	s.mu.Unlock()
	if f == nil || f.source != from {
		return // a fetch that ended, or a frame from elsewhere
	}
	select {
	case f.ch <- v:
	default: // more answers than requests: a duplicate; the request times out if it mattered
	}
}

func (s *Service) refuse(to raftnode.ServerID, r *request, code byte, seq uint64, text string) {
	f := &refusal{header: header{kind: kindRefusal, group: r.group, fetch: r.fetch, request: r.request}, code: code, seq: seq, text: text}
	_ = s.cfg.Send(to, f.encode())
}

// work serves queued requests until Close.
func (s *Service) work() {
	for {
		select {
		case <-s.quit:
			return
		case j := <-s.queue:
			s.serve(j.from, j.r)
		}
	}
}

// serve answers one request with a chunk or a refusal.
func (s *Service) serve(from raftnode.ServerID, r *request) {
	s.mu.Lock()
	src := s.mu.sources[r.group]
	s.mu.Unlock()
	if src == nil {
		s.refuse(from, r, refuseUnknownGroup, 0, "no replica of the group here")
		return
	}
	limit := int(min(max(r.max, 1), maxChunkBytes))
	c := &chunk{header: header{kind: kindChunk, group: r.group, fetch: r.fetch, request: r.request}, first: r.first, through: r.first - 1}
	size, gi := 0, 0
	for seq := r.first; seq <= r.last; {
		if gi < len(r.gaps) && r.gaps[gi].From <= seq {
			c.through, seq = r.gaps[gi].To, r.gaps[gi].To+1
			gi++
			continue
		}
		if len(c.msgs) > 0 && size >= limit {
			break
		}
		m, err := src.Message(seq)
		switch {
		case errors.Is(err, store.ErrNotFound):
			s.refuse(from, r, refuseMissing, seq, "not available")
			return
		case err != nil:
			s.refuse(from, r, refuseDamaged, seq, err.Error())
			return
		case m.Seq != seq:
			s.refuse(from, r, refuseDamaged, seq, fmt.Sprintf("loaded sequence %d", m.Seq))
			return
		}
		n := recordSize(m)
		if len(c.msgs) > 0 && size+n > limit {
			break
		}
		if headerSize+20+4+n+4 > maxFrame {
			s.refuse(from, r, refuseTooLarge, seq, fmt.Sprintf("a message of %d bytes", n))
			return
		}
		c.msgs = append(c.msgs, m)
		size += n
		c.through = seq
		seq++
	}
	if err := s.cfg.Send(from, c.encode()); err != nil {
		s.cfg.Logf("catchup: group %d: chunk %d-%d to %s not sent: %v", r.group, c.first, c.through, from, err)
	}
}

// Want is what a fetch must bring: the sequences First..Last, but those
// in Gaps (ascending, disjoint, within First..Last).
type Want struct {
	First, Last uint64
	Gaps        []Range
}

// fetch is one Fetch's registration: the source it asks now and its
// answers.
type fetch struct {
	source raftnode.ServerID
	ch     chan any
	// lost is closed by PeerGone (failed set, under Service.mu) when
	// source is gone.
	lost   chan struct{}
	failed bool
}

// piece is a range a fetch asked for, in flight or answered.
type piece struct {
	first, last uint64
	gaps        []Range
	req         uint64
	deadline    time.Time
	got         *chunk
	busy        int
}

// Fetch brings the wanted sequences of w, asking sources in turn (the
// first that fails, the next, from where the sink stopped), and hands
// each message to sink in sequence order, verified (frame and record
// CRCs, every wanted sequence, none other). It returns nil once sink
// took the last wanted sequence. Errors: sink's error, ctx's, ErrClosed,
// and ErrUnavailable wrapping each source's failure when none could
// serve the rest.
func (s *Service) Fetch(ctx context.Context, g raftnode.GroupID, sources []raftnode.ServerID, w Want, sink func(*store.StoredMsg) error) error {
	next := w.First
	var fails []error
	for _, src := range sources {
		err := s.fetchFrom(ctx, g, src, w, &next, sink)
		var sf sourceFailure
		switch {
		case err == nil:
			return nil
		case errors.As(err, &sf):
			s.cfg.Logf("catchup: group %d: %s could not serve from %d: %v", g, src, next, sf.err)
			fails = append(fails, fmt.Errorf("%s: %w", src, sf.err))
		default:
			return err
		}
	}
	return fmt.Errorf("%w (group %d, from %d): %w", ErrUnavailable, g, next, errors.Join(fails...))
}

// sourceFailure is a source that could not serve: Fetch tries the next.
type sourceFailure struct{ err error }

func (e sourceFailure) Error() string { return e.err.Error() }

// fetchFrom fetches from src from *next on, advancing *next as sink takes
// messages.
func (s *Service) fetchFrom(ctx context.Context, g raftnode.GroupID, src raftnode.ServerID, w Want, next *uint64, sink func(*store.StoredMsg) error) error {
	if *next > w.Last {
		return nil
	}
	f := &fetch{source: src, ch: make(chan any, 4*Window), lost: make(chan struct{})}
	id := rand.Uint64()
	s.mu.Lock()
	if s.mu.gone[src] {
		s.mu.Unlock()
		return sourceFailure{errPeerGone}
	}
	for s.mu.fetches[id] != nil || id == 0 {
		id = rand.Uint64()
	}
	s.mu.fetches[id] = f
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.mu.fetches, id)
		s.mu.Unlock()
	}()
	var (
		reqs    uint64
		pieces  []*piece // in order of first, covering *next .. planned
		planned = *next - 1
	)
	send := func(p *piece) error {
		reqs++
		p.req, p.got = reqs, nil
		p.deadline = time.Now().Add(s.cfg.RequestTimeout)
		r := &request{header: header{kind: kindRequest, group: g, fetch: id, request: p.req}, first: p.first, last: p.last, max: ChunkBytes, gaps: p.gaps}
		if err := s.cfg.Send(src, r.encode()); err != nil {
			return sourceFailure{err}
		}
		return nil
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// Hand the answered pieces at the head to the sink.
		for len(pieces) > 0 && pieces[0].got != nil {
			p := pieces[0]
			for _, m := range p.got.msgs {
				if err := sink(m); err != nil {
					return err
				}
			}
			*next = p.got.through + 1
			if p.got.through < p.last { // the rest of the range, asked for next
				p.first, p.gaps = *next, gapsWithin(p.gaps, *next, p.last)
				if err := send(p); err != nil {
					return err
				}
				break
			}
			pieces = pieces[1:]
		}
		if *next > w.Last {
			return nil
		}
		for len(pieces) < Window && planned < w.Last {
			p := plan(w, planned+1)
			planned = p.last
			pieces = append(pieces, p)
			if err := send(p); err != nil {
				return err
			}
		}
		var due time.Time
		for _, p := range pieces {
			if p.got == nil && (due.IsZero() || p.deadline.Before(due)) {
				due = p.deadline
			}
		}
		timer.Reset(time.Until(due))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.quit:
			return ErrClosed
		case <-f.lost:
			return sourceFailure{errPeerGone}
		case <-timer.C:
			for _, p := range pieces {
				if p.got == nil && !time.Now().Before(p.deadline) {
					return sourceFailure{fmt.Errorf("no answer for %d-%d within %v", p.first, p.last, s.cfg.RequestTimeout)}
				}
			}
		case v := <-f.ch:
			if err := s.take(v, pieces, send); err != nil {
				return err
			}
		}
	}
}

// take records an answer in its piece (answers to requests no longer in
// flight are ignored); a refusal fails the source, but for busy, which
// asks again after a while.
func (s *Service) take(v any, pieces []*piece, send func(*piece) error) error {
	find := func(req uint64) *piece {
		for _, p := range pieces {
			if p.req == req && p.got == nil {
				return p
			}
		}
		return nil
	}
	switch x := v.(type) {
	case *chunk:
		p := find(x.request)
		if p == nil {
			return nil
		}
		if err := check(x, p); err != nil {
			return sourceFailure{err}
		}
		p.got = x
	case *refusal:
		p := find(x.request)
		if p == nil {
			return nil
		}
		if x.code != refuseBusy || p.busy >= maxBusy {
			return sourceFailure{fmt.Errorf("refused (code %d) at sequence %d: %s", x.code, x.seq, x.text)}
		}
		p.busy++
		return s.resendLater(p, send)
	}
	return nil
}

// resendLater asks for a piece again after busyWait (the fetch's loop
// is the only user of its pieces, so it waits here: a busy source slows
// the fetch down, as intended).
func (s *Service) resendLater(p *piece, send func(*piece) error) error {
	t := time.NewTimer(busyWait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.quit:
		return ErrClosed
	}
	busy := p.busy
	err := send(p)
	p.busy = busy
	return err
}

// check verifies that c answers p: it starts at p.first, accounts for no
// more than p.last, holds exactly the wanted sequences of first..through
// in order, and at least one message unless the whole range is gaps.
func check(c *chunk, p *piece) error {
	if c.first != p.first || c.through > p.last || c.through+1 < c.first || (c.through < c.first && len(p.gaps) == 0) {
		return fmt.Errorf("chunk %d-%d for the request %d-%d", c.first, c.through, p.first, p.last)
	}
	seq, gi := c.first, 0
	wanted := func() uint64 { // the first wanted sequence at or after seq
		for gi < len(p.gaps) && p.gaps[gi].To < seq {
			gi++
		}
		if gi < len(p.gaps) && p.gaps[gi].From <= seq {
			seq = p.gaps[gi].To + 1
			gi++
		}
		return seq
	}
	for _, m := range c.msgs {
		if want := wanted(); m.Seq != want || want > c.through {
			return fmt.Errorf("chunk %d-%d: sequence %d where %d was wanted", c.first, c.through, m.Seq, want)
		}
		seq++
	}
	if want := wanted(); want <= c.through {
		return fmt.Errorf("chunk %d-%d lacks sequence %d", c.first, c.through, want)
	}
	if len(c.msgs) == 0 && c.through != p.last {
		return fmt.Errorf("an empty chunk %d-%d short of %d", c.first, c.through, p.last)
	}
	return nil
}

// plan returns the next piece of w from first: at most Span sequences
// and MaxGaps gaps.
func plan(w Want, first uint64) *piece {
	last := w.Last
	if last-first >= Span {
		last = first + Span - 1
	}
	gaps := gapsWithin(w.Gaps, first, last)
	if len(gaps) > MaxGaps {
		last = gaps[MaxGaps].From - 1
		gaps = gaps[:MaxGaps]
	}
	return &piece{first: first, last: last, gaps: gaps}
}

// gapsWithin returns the parts of gaps (ascending, disjoint) within
// first..last.
func gapsWithin(gaps []Range, first, last uint64) []Range {
	i, _ := slices.BinarySearchFunc(gaps, first, func(g Range, seq uint64) int { return cmp.Compare(g.To, seq) })
	var out []Range
	for ; i < len(gaps) && gaps[i].From <= last; i++ {
		out = append(out, Range{From: max(gaps[i].From, first), To: min(gaps[i].To, last)})
	}
	return out
}

// Mux returns the receiver of a server's transport: catch-up frames
// (first byte Magic) go to svc, every other frame to node (raftnode's
// start with their version, 1). A damaged catch-up frame is refused with
// raftnode.ErrBadFrame, so that the transport closes the connection as
// it does for a damaged raftnode frame.
func Mux(node raftnode.Receiver, svc *Service) raftnode.Receiver { return mux{node, svc} }

type mux struct {
	node raftnode.Receiver
	svc  *Service
}

func (m mux) Receive(from raftnode.ServerID, frame []byte) error {
	m.svc.Heard(from)
	if len(frame) > 0 && frame[0] == Magic {
		if err := m.svc.Receive(from, frame); err != nil {
			return fmt.Errorf("%w: %w", raftnode.ErrBadFrame, err)
		}
		return nil
	}
	return m.node.Receive(from, frame)
}
