package transport

import (
	"context"
	"errors"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/route"
)

// Op is the first operation of a transport connection on the cluster port
// (package comment, "Wire format").
const Op = "RAFT"

// Version is the transport version a hello carries (package comment).
const Version = 1

// Defaults of Config (package comment, "Sending").
const (
	// MaxFrameBytes is the largest frame the transport carries, the hard
	// cap of Config.MaxFrameBytes: a longer length on the wire closes the
	// connection.
	MaxFrameBytes = 64 << 20
	// DefaultQueueBytes bounds the bytes queued for one peer.
	DefaultQueueBytes = 64 << 20
	// DefaultWriteTimeout bounds one flush to a peer; a peer that reads
	// nothing for that long is disconnected and dialed again.
	DefaultWriteTimeout = 10 * time.Second
)

// Timing of connections (package comment).
const (
	dialTimeout      = time.Second     // one TCP dial, as a route's (nats-server DEFAULT_ROUTE_DIAL)
	handshakeTimeout = 2 * time.Second // the cluster port's first-line deadline
	keepAlive        = 15 * time.Second
	minBackoff       = 50 * time.Millisecond
	maxBackoff       = 2 * time.Second
	maxLine          = 64 << 10 // the INFO and hello lines (a route's control-line limit)
	errorReportEvery = 60       // log every 60th failed dial in a row (as routes do)
)

// Errors of Send. raftnode treats any of them as the peer being
// unreachable for the groups whose messages the frame held; none reaches
// a client.
var (
	// ErrUnknownPeer: no registered route names the peer and no connection
	// to it is up, so the transport does not know where it listens.
	ErrUnknownPeer = errors.New("transport: unknown peer")
	// ErrUnreachable: the last dial of the peer (or its handshake) failed;
	// the writer dials again with a backoff.
	ErrUnreachable = errors.New("transport: peer unreachable")
	// ErrQueueFull: the peer's queue holds Config.MaxQueueBytes; the frame
	// is dropped.
	ErrQueueFull = errors.New("transport: peer queue full")
	// ErrFrameTooLarge: the frame is empty or longer than
	// Config.MaxFrameBytes.
	ErrFrameTooLarge = errors.New("transport: frame too large")
	// ErrClosed: the transport is closed.
	ErrClosed = errors.New("transport: closed")
)

// Host is the server whose cluster port carries the transport and whose
// routes say who the peers are: *server.Server implements it
// (internal/server cluster.go; docs/routes.md, "The cluster port").
type Host interface {
	// Name returns this server's name: its raftnode.ServerID.
	Name() string
	// ClusterName returns the cluster name (it may change while a
	// generated name converges).
	ClusterName() string
	// ClusterPeers returns the servers with a registered route.
	ClusterPeers() []route.Peer
	// NotifyClusterPeers registers f, called after ClusterPeers changes.
	NotifyClusterPeers(f func())
	// ClusterAuthOK checks a connection's credentials as a route's.
	ClusterAuthOK(user, password string) bool
	// ClusterCredentials returns the credentials to present to peers that
	// require them.
	ClusterCredentials() (user, password string)
	// HandleClusterConns hands accepted connections whose first line
	// starts with op to h; it must be called before the server starts.
	// With TLS on the cluster port, h gets the connection past its TLS
	// handshake.
	HandleClusterConns(op string, h func(nc net.Conn, buffered []byte))
	// SecureClusterConn runs the dialer's side of the cluster port's TLS
	// handshake on nc, dialed to addr, and returns the connection to
	// speak on (nc itself when the cluster has no TLS); on error, nc is
	// closed.
	SecureClusterConn(nc net.Conn, addr string) (net.Conn, error)
}

// Config tunes a Transport. Zero values mean the defaults named.
type Config struct {
	// MaxQueueBytes bounds the bytes queued for one peer (default
	// DefaultQueueBytes). A frame larger than it is queued only into an
	// empty queue.
	MaxQueueBytes int
	// MaxFrameBytes bounds a frame, sent or received (default and cap
	// MaxFrameBytes).
	MaxFrameBytes int
	// WriteTimeout bounds one flush to a peer (default DefaultWriteTimeout).
	WriteTimeout time.Duration
	// Logf, if set, receives the transport's problems (a connection
	// refused, a peer unreachable for errorReportEvery dials and more, a
	// connection closed on a bad frame); Infof its routine events
	// (connections made and lost, a first failed dial: a peer restarting),
	// as nats-server logs its routes' at [INF] (nil: Logf). Neither may
	// block.
	Logf, Infof func(format string, args ...any)
	// Debugf receives what is routine enough to hide: a peer's
	// connection closed and dialed again within redialQuiet (a peer
	// dials again to send a newer hello: Rehello), both lines (nil:
	// discarded).
	Debugf func(format string, args ...any)
	// Incarnation and Tags are this server's store incarnation (its
	// raftnode WAL's) and server_tags, sent in every hello so that the
	// peers learn them (PeerIncarnation, PeerTags).
	Incarnation raftnode.Incarnation
	Tags        []string
	// Known, if set, returns the store incarnation this server's catalogue
	// knows each server by, sent in every hello (PeerKnown).
	Known func() map[raftnode.ServerID]raftnode.Incarnation
	// Meta, if set, reports whether this server runs the meta group, and
	// Members the servers its routes name, itself included, once every
	// route resolved (nil before); both are sent in every hello (PeerMeta).
	Meta    func() bool
	Members func() []string
	// Gone, if set, is told once per lost connection that the peer's
	// process is evidently gone: its connection ended and then its
	// cluster port refused the redial, or no route names it any more
	// (raftnode.Node.PeerUnreachable). It must not block.
	Gone func(raftnode.ServerID)
	// Lost, if set, is told each time a connection to or from the peer
	// ends while the transport is open (a broken connection, a peer that
	// dialed again, a Rehello): frames in flight on it may be lost, and
	// an answer awaited over it may never come (the catch-up service
	// fails its fetches from the peer: catchup.Service.PeerGone). It
	// must not block.
	Lost func(raftnode.ServerID)
}

func (c *Config) fill() {
	if c.MaxQueueBytes <= 0 {
		c.MaxQueueBytes = DefaultQueueBytes
	}
	if c.MaxFrameBytes <= 0 || c.MaxFrameBytes > MaxFrameBytes {
		c.MaxFrameBytes = MaxFrameBytes
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Infof == nil {
		c.Infof = c.Logf
	}
	if c.Debugf == nil {
		c.Debugf = func(string, ...any) {}
	}
}

// Transport is the Raft transport of one server (package comment). It
// implements raftnode.Transport. Its methods are safe for concurrent use.
type Transport struct {
	host Host
	self raftnode.ServerID
	cfg  Config
	recv atomic.Pointer[receiver]
	inc  atomic.Pointer[raftnode.Incarnation] // what hellos say: cfg.Incarnation, or SetIncarnation's

	quit   chan struct{}      // closed by Close
	ctx    context.Context    // canceled by Close: ends dials
	cancel context.CancelFunc // of ctx
	wg     sync.WaitGroup     // writers and readers

	refreshMu sync.Mutex // serializes refresh: the last to run applies the newest peers

	mu struct {
		sync.RWMutex
		closed  bool
		peers   map[raftnode.ServerID]*peer    // one per peer name ever known, with its writer
		inbound map[raftnode.ServerID]net.Conn // the accepted connection of each peer
		// closedAt is when each peer's last accepted connection
		// closed as the peer ended it (closedLine).
		closedAt map[raftnode.ServerID]time.Time
		idents   map[raftnode.ServerID]ident // what each admitted peer's hello said of it
	}
}

// receiver boxes the raftnode.Receiver for an atomic pointer.
type receiver struct{ r raftnode.Receiver }

var _ raftnode.Transport = (*Transport)(nil)

// New returns the transport of host's server and registers it for the
// connections of its cluster port whose first line is RAFT; it must be
// called before the server starts (Host.HandleClusterConns). Frames
// received before Attach are dropped. host must run a cluster listener
// (a server without one never calls the transport).
func New(host Host, cfg Config) *Transport {
	cfg.fill()
	t := &Transport{host: host, self: raftnode.ServerID(host.Name()), cfg: cfg, quit: make(chan struct{})}
	inc := cfg.Incarnation
	t.inc.Store(&inc)
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.mu.peers = map[raftnode.ServerID]*peer{}
	t.mu.inbound = map[raftnode.ServerID]net.Conn{}
	t.mu.closedAt = map[raftnode.ServerID]time.Time{}
	t.mu.idents = map[raftnode.ServerID]ident{}
	host.HandleClusterConns(Op, t.accept)
	host.NotifyClusterPeers(t.refresh)
	t.refresh()
	return t
}

// SetIncarnation makes the hellos sent from now on carry inc as this
// server's store incarnation (Config.Incarnation until then): the
// store's Raft WAL was replaced while the server ran
// (raftnode.Node.QuarantineWAL). Call Rehello after it so that the peers
// learn it.
func (t *Transport) SetIncarnation(inc raftnode.Incarnation) { t.inc.Store(&inc) }

// ident is what a peer's hello said of it.
type ident struct {
	inc   raftnode.Incarnation
	tags  []string
	known map[raftnode.ServerID]raftnode.Incarnation
	meta  bool
	// members: the hello's Members (nil: none sent).
	members []string
	// level: the hello's Level.
	level int
}

// PeerKnown returns, from the last admitted hello of peer name, the store
// incarnation the peer's catalogue knew each server by (hello Known:
// entries that do not decode are left out); nil when none.
func (t *Transport) PeerKnown(name raftnode.ServerID) map[raftnode.ServerID]raftnode.Incarnation {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return maps.Clone(t.mu.idents[name].known)
}

// PeerMeta returns what the last admitted hello of peer name said of its
// meta group: whether it ran one (inMeta) and the servers its routes
// name (members, nil when it sent none: its routes had not all
// resolved); ok is false when no hello was admitted.
func (t *Transport) PeerMeta(name raftnode.ServerID) (inMeta bool, members []string, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	id, ok := t.mu.idents[name]
	return id.meta, slices.Clone(id.members), ok
}

// PeerIncarnation returns the store incarnation the last admitted hello
// of peer name carried; false when none was admitted or it carried none.
func (t *Transport) PeerIncarnation(name raftnode.ServerID) (raftnode.Incarnation, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	id, ok := t.mu.idents[name]
	return id.inc, ok
}

// FeatureLevel is the feature level this build announces in its hello:
// what a peer's state machines may be given that a build of a lower
// level would refuse (docs/cluster.md, "Feature levels"). 1: a
// replicated consumer's log may hold PullRequest operations (consumer
// kind 14, 2026-12-07). Builds from before levels announce none (0).
const FeatureLevel = 1

// PeerLevel returns the feature level (FeatureLevel) the last admitted
// hello of peer name announced; 0 when none was admitted since this
// server started, or the peer's build announces none.
func (t *Transport) PeerLevel(name raftnode.ServerID) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.mu.idents[name].level
}

// PeerTags returns the server_tags the last admitted hello of peer name
// carried.
func (t *Transport) PeerTags(name raftnode.ServerID) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.Clone(t.mu.idents[name].tags)
}

// Attach makes r (the server's raftnode.Node) the receiver of every frame
// that arrives, replacing any earlier one; nil drops them again.
func (t *Transport) Attach(r raftnode.Receiver) {
	if r == nil {
		t.recv.Store(nil)
		return
	}
	t.recv.Store(&receiver{r: r})
}

// Send queues frame for server to and returns at once (raftnode.Transport).
// The transport keeps frame until it is written: the caller must not
// change it afterwards (raftnode builds a new frame for every Send).
// Errors: ErrClosed, ErrUnknownPeer, ErrUnreachable, ErrQueueFull,
// ErrFrameTooLarge (package comment, "Sending").
func (t *Transport) Send(to raftnode.ServerID, frame []byte) error {
	if len(frame) == 0 || len(frame) > t.cfg.MaxFrameBytes {
		return ErrFrameTooLarge
	}
	t.mu.RLock()
	closed, p := t.mu.closed, t.mu.peers[to]
	t.mu.RUnlock()
	switch {
	case closed:
		return ErrClosed
	case p == nil:
		return ErrUnknownPeer
	}
	return p.enqueue(frame)
}

// refresh brings the peers up to date with the host's routes: a writer for
// each new name, the current address for each. It runs on the goroutine of
// a route that registered or unregistered (Host.NotifyClusterPeers).
func (t *Transport) refresh() {
	t.refreshMu.Lock()
	defer t.refreshMu.Unlock()
	known := map[raftnode.ServerID]route.Peer{}
	for _, p := range t.host.ClusterPeers() {
		name := raftnode.ServerID(p.Name)
		if _, dup := known[name]; name == "" || name == t.self || p.Addr == "" || dup {
			continue // names are unique in a cluster; the first (by server_id) wins
		}
		known[name] = p
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return
	}
	for name, rp := range known {
		p := t.mu.peers[name]
		if p == nil {
			p = newPeer(t, name)
			t.mu.peers[name] = p
			t.wg.Add(1)
			go p.run()
		}
		p.setRoute(rp.Addr, rp.ID)
	}
	for name, p := range t.mu.peers {
		if _, ok := known[name]; !ok {
			p.setRoute("", "")
		}
	}
}

// Rehello ends every outbound connection (its writer closes it at once
// if idle, else after the frames it holds), so that each writer dials
// again and sends a hello that says what Config.Meta, Members and
// Known say now: a hello is sent only when a connection is dialed, and a
// server deciding how to enter the meta group reads its peers' hellos
// (docs/cluster.md, "Growing the meta group"). Frames queued or in
// flight may be lost, as on any broken connection (Raft sends again).
func (t *Transport) Rehello() {
	t.mu.RLock()
	peers := make([]*peer, 0, len(t.mu.peers))
	for _, p := range t.mu.peers {
		peers = append(peers, p)
	}
	t.mu.RUnlock()
	for _, p := range peers {
		p.rehello()
	}
}

// Close stops the transport: writers stop and their connections close,
// accepted connections close, and Close returns once every goroutine of the
// transport has ended. Send fails with ErrClosed afterwards. Close the
// raftnode.Node first (it sends until it stops), then the transport; the
// server may shut down before or after.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		t.wg.Wait()
		return nil
	}
	t.mu.closed = true
	close(t.quit)
	t.cancel()
	peers := make([]*peer, 0, len(t.mu.peers))
	for _, p := range t.mu.peers {
		peers = append(peers, p)
	}
	inbound := make([]net.Conn, 0, len(t.mu.inbound))
	for _, nc := range t.mu.inbound {
		inbound = append(inbound, nc)
	}
	t.mu.Unlock()
	for _, p := range peers {
		p.closeConn()
	}
	for _, nc := range inbound {
		_ = nc.Close()
	}
	t.wg.Wait()
	return nil
}

// lost tells Config.Lost that a connection with peer ended, unless the
// transport is closing.
func (t *Transport) lost(peer raftnode.ServerID) {
	if t.cfg.Lost != nil && !t.closing() {
		t.cfg.Lost(peer)
	}
}

// closing reports whether Close began.
func (t *Transport) closing() bool {
	select {
	case <-t.quit:
		return true
	default:
		return false
	}
}
