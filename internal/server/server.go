package server

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"github.com/cairnmq/cairn/internal/cluster/jscluster"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jsapi"
	mrand "math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/logger"
)

// Server accepts client connections and delivers messages between them.
// Build one with New, then Start it; Shutdown stops it.
type Server struct {
	opts Options
	id   string
	log  *logger.Logger

	// jsc is the clustered JetStream's cluster layer, nil unless
	// JetStream runs in a cluster (jetstream.go startJetStreamCluster).
	jsc *jscluster.Cluster
	// jsSys answers the system account's JetStream requests of a
	// clustered JetStream (META.LEADER.STEPDOWN, SERVER.REMOVE); nil
	// without JetStream clustering or a system account (jetstream.go).
	jsSys *jsapi.System

	// accounts are the subject namespaces (accounts.go), $G among them:
	// made by New, replaced whole by a reload (accountsreload.go).
	accounts atomic.Pointer[accountTable]
	gacc     *account
	sysacc   *account        // the system account; nil with none (accounts.go)
	sysReqs  chan sysRequest // the $SYS requests to answer (sysreq.go); nil until ServeSystemRequests
	sysEv    *sysEvents      // the $SYS events (events.go); nil until ServeSystemEvents and once Shutdown began; guarded by mu

	ln   net.Listener
	port int // the bound port, known after Start

	cl *cluster // the cluster listener and routes; nil unless Options.Cluster is enabled

	// sec is who may connect and how (reload.go): the authentication
	// directory and the client listener's TLS, immutable, replaced whole
	// by a reload.
	sec atomic.Pointer[security]
	// secMu serializes the changes of sec and the account table: a
	// configuration reload (held from PrepareSecurity to Apply or
	// Release) and the changes of a nats-based resolver's account JWTs
	// (resolver.go). Never held with mu.
	secMu sync.Mutex
	// res is the nats-based account resolver (resolver.go); nil without
	// one.
	res      *resolver
	jsDomain []byte // "$JS.<domain>.API.", whose subjects client publishes are mapped from (jsdomain.go); nil without a domain

	lim        atomic.Pointer[limits] // the limits in force (limits.go)
	publishers sync.Pool              // connectionless *client values for Publish
	// traceIntN draws the number that decides whether a traceparent is
	// sampled (msgtrace.go sampled): rand.Int32N, set by New; tests
	// replace it before Start.
	traceIntN     func(int32) int32
	nextCID       atomic.Uint64
	slowConsumers atomic.Int64
	ctr           counters   // totals for the monitoring endpoints (stats.go)
	closed        closedRing // the last closed client connections (closed.go)
	start         time.Time  // when Start was called

	mu           sync.Mutex
	clients      map[uint64]*client // guarded by mu
	shuttingDown bool               // guarded by mu
	ldm          bool               // in lame duck mode (ldm.go); guarded by mu
	wg           sync.WaitGroup     // every goroutine started by goroutine()
	done         chan struct{}      // closed when Shutdown completes
	quit         chan struct{}      // closed when Shutdown begins
	jsStop       sync.Once          // stops JetStream once (lame duck mode, then Shutdown)
	jsHandOver   sync.Once          // hands the Raft groups' leadership over once, before jsStop
	// js is what starting an account's JetStream while the server runs
	// needs (jetstream.go startAccountJetStreamLive); guarded by its mu.
	js struct {
		mu      sync.Mutex
		stopped bool                 // stopJetStream began
		dir     string               // the store directory
		usage   *jetstream.Usage     // the engines' shared storage usage
		first   *jetstream.JetStream // the engine whose sync statistics the others share
		live    []*account           // accounts whose JetStream started while running
	}
}

// New validates opts (filling defaults) and returns a Server that is not
// yet listening. It returns an error wrapping ErrInvalidOptions.
func New(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var res *resolver
	secOp := opts.Operator
	if opts.Operator.Enabled() {
		r, err := newResolver(opts.Logger, &opts.Operator)
		if err != nil {
			return nil, err
		}
		res, secOp = r, r.withJWTs(opts.Operator)
	}
	sec, err := newSecurity(&opts.Auth, &secOp, &opts.TLS, nil)
	if err != nil {
		return nil, err
	}
	id := newServerID()
	opts.Tags = config.AddTags(nil, opts.Tags...)
	opts.JetStreamUniqueTag = strings.ToLower(strings.TrimSpace(opts.JetStreamUniqueTag))
	if opts.ServerName == "" {
		opts.ServerName = id
	}
	cl := newCluster(&opts.Cluster)
	if cl != nil {
		if cl.tls, err = newRouteTLS(&opts.Cluster); err != nil {
			return nil, fmt.Errorf("%w: cluster tls: %v", ErrInvalidOptions, err)
		}
	}
	s := &Server{
		opts:    opts,
		id:      id,
		log:     opts.Logger,
		cl:      cl,
		clients: make(map[uint64]*client),
		done:    make(chan struct{}),
		quit:    make(chan struct{}),
		res:     res,
		// traceIntN: see the field.
		traceIntN: mrand.Int32N,
	}
	if res != nil {
		res.s = s
	}
	s.sec.Store(sec)
	if opts.JetStream {
		s.jsDomain = jsDomainPrefix(opts.JetStreamDomain)
	}
	s.lim.Store(limitsOf(&opts))
	if err := s.initAccounts(); err != nil {
		return nil, err
	}
	s.closed.max = opts.MaxClosedClients
	return s, nil
}

// implicitNoAuthUser is the user of clients that send no credentials to
// a server whose only account is the system account (nats-server v2.15.2
// configureAccounts names it "nats-" and 8 random characters). Its
// password is a truncated bcrypt hash, which no password matches (and
// which is rejected before any hashing): nobody logs in as it, and it
// does not count as a plaintext password.
func implicitNoAuthUser() config.User {
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	enc := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])
	return config.User{Name: "nats-" + enc, Password: "$2a$04$"}
}

// newDirectory builds the authentication of the options: operator mode
// (JWTs, decoded through cache) or the configured users.
func newDirectory(a *config.Auth, op *config.Operator, tlsMap bool, cache *auth.ClaimsCache) *auth.Directory {
	if op.Enabled() {
		return auth.NewOperatorDirectory(op, a.Timeout, cache)
	}
	return auth.NewDirectory(a, tlsMap)
}

// newServerID returns a 56-character id starting with 'N', shaped like
// nats-server's server nkey (clients treat it as opaque).
func newServerID() string {
	var b [35]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	enc := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])
	return "N" + enc[:55]
}

// Start listens on Options.Host:Port and accepts clients in the
// background. It returns the listen error (for example, the port is in
// use) or nil.
func (s *Server) Start() error {
	s.start = time.Now().UTC()
	port := s.opts.Port
	if port == RandomPort {
		port = 0
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(s.opts.Host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("server: listen on %s:%d: %w", s.opts.Host, s.opts.Port, err)
	}
	s.ln = ln
	s.port = ln.Addr().(*net.TCPAddr).Port
	// The accounts' imports first, as nats-server has them from its
	// configuration: a restored external source's first consumer create
	// goes through them (docs/external-sourcing.md).
	if err := s.startImports(); err != nil {
		_ = ln.Close()
		return err
	}
	if s.opts.JetStream {
		if err := s.startJetStream(); err != nil {
			_ = ln.Close()
			return err
		}
	}
	if err := s.startSystemImports(); err != nil {
		_ = ln.Close()
		s.stopJetStream()
		return err
	}
	if s.res != nil && s.sysacc != nil {
		if err := s.res.startClaimsAPI(); err != nil {
			_ = ln.Close()
			s.stopJetStream()
			return err
		}
	}
	s.log.Noticef("Listening for client connections on %s", net.JoinHostPort(s.opts.Host, strconv.Itoa(s.port)))
	s.warnIfOpen()
	if s.cl != nil {
		if err := s.startCluster(); err != nil {
			_ = ln.Close()
			s.stopJetStream()
			return err
		}
	}
	s.log.Noticef("Server is ready")
	s.goroutine(s.acceptLoop)
	return nil
}

// warnIfOpen logs the authentication in force at start (nats-server
// advisory CVE-2023-47090: never let an operator guess it). Without any,
// it warns when the client port is reachable from other machines, since
// any client that reaches it may use every subject and stream. With
// plain-text passwords it gives nats-server's warning.
func (s *Server) warnIfOpen() {
	addr := net.JoinHostPort(s.opts.Host, strconv.Itoa(s.port))
	sec := s.security()
	if sec.dir.Required() {
		if sec.dir.PlaintextPasswords() {
			s.log.Warnf("Plaintext passwords detected, use nkeys or bcrypt")
		}
		if sec.implicitNoAuth {
			s.log.Warnf("Clients that send no credentials are let into the global account %s: the system account is the only account and there is no authorization block (as nats-server does); add an authorization block to require credentials", auth.GlobalAccount)
		} else if u := sec.dir.NoAuthUser(); u != "" {
			s.log.Noticef("Clients must authenticate; a client sending no credentials is user %q (no_auth_user)", u)
		} else {
			s.log.Noticef("Clients must authenticate")
		}
		return
	}
	if s.Addr().IP.IsLoopback() || sec.tlsCfg.Verify || sec.tlsCfg.VerifyAndMap {
		return // (a verified client certificate is required: not open)
	}
	what := "connect, publish and subscribe"
	if s.opts.JetStream {
		what = "connect, publish, subscribe and use JetStream"
	}
	s.log.Warnf("No authentication is configured: any client that can reach %s can %s; configure an authorization block (docs/security.md) or listen on a loopback address (-a 127.0.0.1)", addr, what)
}

// Addr returns the bound client address, or nil before Start.
func (s *Server) Addr() *net.TCPAddr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr().(*net.TCPAddr)
}

// ClientURL returns "nats://<host>:<port>" for the bound port, using
// 127.0.0.1 when listening on all interfaces.
func (s *Server) ClientURL() string {
	host := s.opts.Host
	if host == "0.0.0.0" || host == "::" || host == "" {
		host = "127.0.0.1"
	}
	return "nats://" + net.JoinHostPort(host, strconv.Itoa(s.port))
}

// ID returns the server id sent in INFO server_id.
func (s *Server) ID() string { return s.id }

// NumClients returns the number of open client connections.
func (s *Server) NumClients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

// SlowConsumers returns how many clients were closed as slow consumers.
func (s *Server) SlowConsumers() int64 { return s.slowConsumers.Load() }

// NumSubscriptions returns the number of subscriptions in the sublist:
// clients', internal ones and, in a cluster, one per subject and queue
// group each peer announced.
func (s *Server) NumSubscriptions() int {
	n := 0
	for _, a := range s.accountTable() {
		n += a.sl.Count()
	}
	return n
}

// goroutine starts fn tracked by the server's wait group. It reports false
// and starts nothing once shutdown has begun.
func (s *Server) goroutine(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shuttingDown {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return true
}

func (s *Server) acceptLoop() {
	var delay time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			delay = acceptBackoff(delay)
			s.log.Errorf("Temporary accept error: %v, sleeping %v", err, delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		s.addClient(nc)
	}
}

// acceptBackoff doubles the pause after an accept error (for example, out
// of file descriptors), between 10 ms and 1 s.
func acceptBackoff(d time.Duration) time.Duration {
	if d == 0 {
		return 10 * time.Millisecond
	}
	return min(2*d, time.Second)
}

// addClient registers and starts a client, or refuses it with
// 'maximum connections exceeded' (docs/protocol.md 1.9); a negative
// MaxConnections refuses every client, as nats-server's
// max_connections: 0 does.
func (s *Server) addClient(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := newClient(s, nc, s.nextCID.Add(1))
	s.mu.Lock()
	if s.shuttingDown {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	if max := s.limits().MaxConnections; max < 0 || len(s.clients) >= max {
		s.mu.Unlock()
		s.refuse(c)
		return
	}
	s.clients[c.cid] = c
	s.ctr.totalClients.Add(1)
	s.mu.Unlock()
	c.log.Debugf("%s - cid:%d - Client connection created", c.addr, c.cid)
	if c.tls != nil {
		if !s.goroutine(c.tlsStart) {
			c.abort()
		}
		return
	}
	c.start()
}

func (s *Server) refuse(c *client) {
	s.log.Errorf("%s - cid:%d - Maximum connections exceeded", c.addr, c.cid)
	_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	in := s.baseInfo()
	msg := appendInfo(nil, in)
	msg = append(msg, "-ERR 'maximum connections exceeded'\r\n"...)
	_, _ = c.nc.Write(msg)
	_ = c.nc.Close()
}

// removeClient unregisters a client and adds its counters to the totals
// of closed clients, under mu so that Stats counts it exactly once.
func (s *Server) removeClient(c *client) {
	s.mu.Lock()
	delete(s.clients, c.cid)
	s.ctr.clientsClosed.addConn(c)
	c.acc.closed.addConn(c)
	s.mu.Unlock()
}

// Shutdown stops accepting, flushes what each client has buffered, closes
// every connection and waits (up to the write deadline plus a second) for
// the server's goroutines to end. It is safe to call more than once.
func (s *Server) Shutdown() {
	s.mu.Lock()
	if s.shuttingDown {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.shuttingDown = true
	close(s.quit)
	announced := s.ldm // lame duck mode told the peers already
	clients := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		clients = append(clients, c)
	}
	s.mu.Unlock()
	s.log.Noticef("Initiating Shutdown...")
	s.shutdownEvent()
	if s.ln != nil {
		_ = s.ln.Close()
	}
	// The peers learn that this server leaves, as nats-server's do from
	// its $SYS shutdown event (they count it offline): their JetStream
	// hands it no leadership, so servers stopped together do not hand
	// their groups to each other, and each one's handover ends once no
	// peer is left (jscluster HandOver).
	if !announced {
		s.sendLameDuckToRoutes()
	}
	// JetStream stops while the routes and clients are up: the answers
	// of what it stored before it stopped, and of the new leaders, reach
	// the clients of every server.
	s.handOverJetStream()
	s.stopJetStream()
	s.stopCluster()
	for _, c := range clients {
		c.setReason(ReasonServerShutdown)
		c.out.markClosing()
	}
	s.waitGoroutines(s.limits().WriteDeadline + time.Second)
	s.log.Noticef("Server Exiting..")
	close(s.done)
}

// waitGoroutines waits for tracked goroutines; after the timeout it closes
// every remaining socket so blocked reads and writes return.
func (s *Server) waitGoroutines(timeout time.Duration) {
	finished := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return
	case <-time.After(timeout):
	}
	s.mu.Lock()
	for _, c := range s.clients {
		c.closeNow()
	}
	s.mu.Unlock()
	s.closeRoutesNow()
	<-finished
}
