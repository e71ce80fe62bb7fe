package server

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/route"
)

// This file holds the cluster side of the server: the cluster listener,
// the first line that tells a route from other connection kinds, and the
// cluster's shared state. routeconn.go handles one route connection,
// route_dial.go dials peers, interest.go and forward.go move interest and
// messages across routes, connect_urls.go keeps clients' INFO current.
// docs/routes.md describes the behaviour; CONCURRENCY.md the goroutines
// and locks.

// ClusterConnHandler takes over a connection accepted on the cluster port
// whose first line starts with the operation it was registered for (see
// HandleClusterConns). buffered holds every byte read from nc so far, the
// first line included. It runs on a goroutine the server tracks, owns nc,
// and must return once nc is closed: Shutdown closes nc. It is an alias, so
// that a package the server does not import (the Raft transport) can name
// the same method in an interface.
type ClusterConnHandler = func(nc net.Conn, buffered []byte)

// cluster is the state of the cluster side, nil when clustering is off.
type cluster struct {
	ln   net.Listener
	port int           // the bound cluster port
	quit chan struct{} // closed when Shutdown begins; dialers stop on it
	tls  *routeTLS     // the cluster block's tls (route_tls.go); nil without; set by New

	// kinds maps an upper-case first operation to the handler of that
	// connection kind; written before Start only.
	kinds map[string]ClusterConnHandler

	// infoMu serializes async INFO updates to clients with the INFO a
	// client gets after its first PONG, so that a client never receives
	// an older connect_urls list after a newer one. Taken before mu.
	infoMu sync.Mutex

	mu       sync.Mutex
	name     string                     // cluster name; guarded by mu
	dynamic  bool                       // the name was generated; guarded by mu
	routes   map[string]*client         // registered routes by peer server_id; guarded by mu
	conns    map[uint64]*client         // every route connection, registered or not; guarded by mu
	pending  map[string]bool            // implicit dials in progress, by peer server_id; guarded by mu
	shakes   map[net.Conn]struct{}      // accepted connections still in their first line or handed off; guarded by mu
	interest map[string]*route.Interest // local interest advertised to every route, by account; guarded by mu
	direct   map[string]directSubs      // each account's announced subscriptions and their shadows (shadow.go); guarded by mu
	imports  map[string][]*streamImport // each account's stream imports, which its subscriptions are shadowed for; guarded by mu
	lineBuf  []byte                     // scratch for interest lines; guarded by mu
	urls     map[string]int             // peers' client URLs, counted by the routes announcing them; guarded by mu
	urlsSet  bool                       // a peer announced URLs once: INFO carries connect_urls from then on
	ownURLs  []string                   // this server's client URLs (host:port), set at Start
	closing  bool                       // Shutdown began; guarded by mu
	selfURLs map[string]bool            // explicit route hosts found to lead to this server; guarded by mu
	hooks    []func()                   // NotifyClusterPeers callbacks; guarded by mu
	dialers  map[string]chan struct{}   // explicit routes' dialers by URL, closed to stop one; guarded by mu

	// set holds the settings a reload may change (cluster_reload.go),
	// replaced whole under mu.
	set atomic.Pointer[clusterSettings]
}

// newCluster returns the cluster state for opts, or nil when clustering is
// off.
func newCluster(opts *ClusterOptions) *cluster {
	if !opts.enabled() {
		return nil
	}
	cl := &cluster{
		quit:     make(chan struct{}),
		kinds:    make(map[string]ClusterConnHandler),
		name:     opts.Name,
		routes:   make(map[string]*client),
		conns:    make(map[uint64]*client),
		pending:  make(map[string]bool),
		shakes:   make(map[net.Conn]struct{}),
		interest: make(map[string]*route.Interest),
		direct:   make(map[string]directSubs),
		imports:  make(map[string][]*streamImport),
		urls:     make(map[string]int),
		dialers:  make(map[string]chan struct{}),
	}
	cl.set.Store(settingsOf(opts))
	if cl.name == "" {
		cl.name, cl.dynamic = dynamicClusterName(), true
	}
	return cl
}

// dynamicClusterName returns a random 22-character name, shaped like the
// nuid nats-server generates for a cluster without a name.
func dynamicClusterName() string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var b [22]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

// HandleClusterConns makes connections accepted on the cluster port whose
// first line starts with op (case-insensitive, for example "RAFT") go to
// h instead of being routes: the cluster port carries the Raft transport
// too (docs/routes.md, "The cluster port"). A route's first line is always
// CONNECT, so op may not be "CONNECT". It must be called before Start; it
// does nothing when clustering is off.
func (s *Server) HandleClusterConns(op string, h ClusterConnHandler) {
	if s.cl == nil || bytes.EqualFold([]byte(op), []byte("CONNECT")) {
		return
	}
	s.cl.kinds[string(bytes.ToUpper([]byte(op)))] = h
}

// startCluster opens the cluster listener and starts accepting and
// dialing routes. It returns the listen error.
func (s *Server) startCluster() error {
	cl, o := s.cl, &s.opts.Cluster
	port := o.Port
	if port == RandomPort {
		port = 0
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("server: listen for routes on %s:%d: %w", o.Host, o.Port, err)
	}
	cl.ln = ln
	cl.port = ln.Addr().(*net.TCPAddr).Port
	cl.ownURLs = s.clientConnectURLs()
	cl.mu.Lock()
	name, dynamic := cl.name, cl.dynamic
	cl.mu.Unlock()
	s.log.Noticef("Cluster name is %s", name)
	if dynamic {
		s.log.Warnf("Cluster name was dynamically generated, consider setting one")
	}
	s.log.Noticef("Listening for route connections on %s", net.JoinHostPort(o.Host, strconv.Itoa(cl.port)))
	if cl.tls != nil && cl.tls.conf.InsecureSkipVerify {
		s.log.Warnf(clusterTLSInsecureWarning)
	}
	s.goroutine(s.clusterAcceptLoop)
	for _, u := range o.Routes {
		s.startExplicit(u)
	}
	return nil
}

// stopCluster closes the listener, stops the dialers and asks every route
// to flush and close. It runs once, from Shutdown.
func (s *Server) stopCluster() {
	cl := s.cl
	if cl == nil {
		return
	}
	if cl.ln != nil {
		_ = cl.ln.Close()
	}
	close(cl.quit)
	cl.mu.Lock()
	cl.closing = true
	for _, c := range cl.conns {
		c.setReason(ReasonServerShutdown)
		c.out.markClosing()
	}
	for nc := range cl.shakes {
		_ = nc.Close()
	}
	cl.mu.Unlock()
}

// routeConns returns every route connection, registered or not.
func (s *Server) routeConns() []*client {
	if s.cl == nil {
		return nil
	}
	s.cl.mu.Lock()
	defer s.cl.mu.Unlock()
	out := make([]*client, 0, len(s.cl.conns))
	for _, c := range s.cl.conns {
		out = append(out, c)
	}
	return out
}

// closeRoutesNow closes every route socket at once (Shutdown's last resort).
func (s *Server) closeRoutesNow() {
	if s.cl == nil {
		return
	}
	s.cl.mu.Lock()
	for _, c := range s.cl.conns {
		c.closeNow()
	}
	s.cl.mu.Unlock()
}

func (s *Server) clusterAcceptLoop() {
	var delay time.Duration
	for {
		nc, err := s.cl.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			delay = acceptBackoff(delay)
			s.log.Errorf("Temporary route accept error: %v, sleeping %v", err, delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		if !s.trackShake(nc) || !s.goroutine(func() { s.handshakeClusterConn(nc) }) {
			s.untrackShake(nc)
			_ = nc.Close()
		}
	}
}

// trackShake records an accepted connection that is not a route yet, so
// that Shutdown can close it; it reports false once shutdown began.
func (s *Server) trackShake(nc net.Conn) bool {
	s.cl.mu.Lock()
	defer s.cl.mu.Unlock()
	if s.cl.closing {
		return false
	}
	s.cl.shakes[nc] = struct{}{}
	return true
}

func (s *Server) untrackShake(nc net.Conn) {
	s.cl.mu.Lock()
	delete(s.cl.shakes, nc)
	s.cl.mu.Unlock()
}

// handshakeClusterConn runs the TLS handshake on an accepted cluster-port
// connection when the cluster has TLS (a connection that fails it is
// logged and closed), sends the route INFO, as nats-server does first,
// then reads the peer's first line: CONNECT makes it a route; an
// operation registered with HandleClusterConns hands it over; anything
// else gets -ERR 'Authorization Violation' (nats-server's answer to a
// route whose first operation is not CONNECT) and is closed.
func (s *Server) handshakeClusterConn(raw net.Conn) {
	defer s.untrackShake(raw)
	nc := raw
	if rt := s.cl.tls; rt != nil {
		tc, err := rt.accept(raw)
		if err != nil {
			// At error level, as nats-server logs it: these ports are
			// not probed by load balancers.
			s.log.Errorf("%s - %v", raw.RemoteAddr(), &RouteTLSError{Err: err})
			return
		}
		nc = tc
	}
	_ = nc.SetDeadline(time.Now().Add(s.cl.firstLineTimeout()))
	if _, err := nc.Write(route.AppendInfo(nil, s.routeInfo(true))); err != nil {
		_ = raw.Close()
		return
	}
	buf, err := readFirstLine(nc, s.routeParserConfig().MaxControlLine)
	if err != nil {
		s.log.Debugf("%s - Cluster connection closed before its first line: %v", nc.RemoteAddr(), err)
		_ = raw.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	op := string(bytes.ToUpper(firstToken(buf)))
	switch h := s.cl.kinds[op]; {
	case op == "CONNECT":
		s.startRoute(nc, nil, false, buf)
	case h != nil:
		h(nc, buf)
	default:
		_, _ = nc.Write(route.AppendErr(nil, "Authorization Violation"))
		s.log.Errorf("%s - Cluster connection closed: first operation %q is not CONNECT", nc.RemoteAddr(), op)
		_ = nc.Close()
	}
}

// readFirstLine reads from nc until a LF arrives and returns every byte
// read; it fails once more than max+64 bytes arrived without a LF.
func readFirstLine(nc net.Conn, max int) ([]byte, error) {
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := nc.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if bytes.IndexByte(buf, '\n') >= 0 {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if len(buf) > max+64 {
			return nil, errors.New("first line too long")
		}
	}
}

// firstToken returns the operation name at the start of line: the bytes
// before the first space, tab, CR, LF or '{'.
func firstToken(line []byte) []byte {
	end := bytes.IndexAny(line, " \t\r\n{")
	if end < 0 {
		return line
	}
	return line[:end]
}

// routeParserConfig returns the limits of a route's parser: 16 times the
// client control-line limit (nats-server v2.15.2) and max_pending for a
// payload (docs/routes.md).
func (s *Server) routeParserConfig() route.Config {
	return route.Config{MaxControlLine: 16 * s.opts.MaxControlLine, MaxPayload: int(s.opts.MaxPending)}
}

// routeInfo returns this server's route INFO. A fresh one carries a nonce,
// as nats-server's first INFO on a route does; peers do not sign it.
func (s *Server) routeInfo(withNonce bool) *route.Info {
	o := s.clusterSet()
	s.cl.mu.Lock()
	name, dynamic := s.cl.name, s.cl.dynamic
	s.cl.mu.Unlock()
	in := &route.Info{
		ID:           s.id,
		Name:         s.opts.ServerName,
		Version:      NATSVersion,
		Proto:        route.Proto,
		GoVersion:    runtime.Version(),
		Host:         s.opts.Cluster.Host,
		Port:         s.cl.port,
		Headers:      true,
		AuthRequired: o.username != "",
		TLSRequired:  s.cl.tls != nil,
		TLSVerify:    s.cl.tls != nil,
		MaxPayload:   s.limits().MaxPayload,
		JetStream:    s.opts.JetStream,
		Cluster:      name,
		Dynamic:      dynamic,
	}
	if o.advertise != "" {
		host, port, _ := advertiseHostPort(o.advertise, s.cl.port) // validated by Options.Validate and ReloadCluster
		in.Host, in.Port = host, port
		in.IP = (&url.URL{Scheme: "nats-route", Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: "/"}).String()
	}
	if !o.noAdvertise {
		in.ConnectURLs = s.cl.ownURLs
	}
	if withNonce {
		in.Nonce = newNonce()
	}
	return in
}

// newNonce returns 11 random base64url characters, the shape of
// nats-server's INFO nonce.
func newNonce() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	var b [11]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = alphabet[b[i]&63]
	}
	return string(b[:])
}

// ClusterAddr returns the bound cluster address, or nil when clustering is
// off or before Start.
func (s *Server) ClusterAddr() *net.TCPAddr {
	if s.cl == nil || s.cl.ln == nil {
		return nil
	}
	return s.cl.ln.Addr().(*net.TCPAddr)
}

// ClusterURL returns "nats://<host>:<port>" for the bound cluster port,
// with 127.0.0.1 for a listener on all interfaces, or "" when clustering
// is off: what a peer's --routes names.
func (s *Server) ClusterURL() string {
	a := s.ClusterAddr()
	if a == nil {
		return ""
	}
	host := s.opts.Cluster.Host
	if host == "0.0.0.0" || host == "::" || host == "" {
		host = "127.0.0.1"
	}
	return "nats://" + net.JoinHostPort(host, strconv.Itoa(a.Port))
}

// ClusterName returns the cluster name (possibly generated, and possibly
// adopted from a peer since), or "" when clustering is off.
func (s *Server) ClusterName() string {
	if s.cl == nil {
		return ""
	}
	s.cl.mu.Lock()
	defer s.cl.mu.Unlock()
	return s.cl.name
}

// NumRoutes returns the number of registered routes: the peers this server
// exchanges interest and messages with.
func (s *Server) NumRoutes() int {
	if s.cl == nil {
		return 0
	}
	s.cl.mu.Lock()
	defer s.cl.mu.Unlock()
	return len(s.cl.routes)
}

// Name returns the server name (INFO server_name).
func (s *Server) Name() string { return s.opts.ServerName }

// ClusterPeers returns the servers this server has a registered route to,
// sorted by name then server_id: where the Raft transport dials a server
// it knows by name (docs/routes.md, "The cluster port"). nil when
// clustering is off.
func (s *Server) ClusterPeers() []route.Peer {
	if s.cl == nil {
		return nil
	}
	s.cl.mu.Lock()
	out := make([]route.Peer, 0, len(s.cl.routes))
	for id, r := range s.cl.routes {
		in := r.route.info
		p := route.Peer{Name: in.Name, ID: id, LameDuck: r.route.ldm}
		if u, err := url.Parse(in.IP); err == nil && u.Port() != "" {
			p.Addr = u.Host
		}
		out = append(out, p)
	}
	s.cl.mu.Unlock()
	slices.SortFunc(out, func(a, b route.Peer) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// NotifyClusterPeers makes f be called after every change of ClusterPeers:
// a route registered or unregistered. f runs on the goroutine of the route
// that changed, with no lock of the server held; it must not block (it may
// call ClusterPeers). It does nothing when clustering is off.
func (s *Server) NotifyClusterPeers(f func()) {
	if s.cl == nil {
		return
	}
	s.cl.mu.Lock()
	s.cl.hooks = append(s.cl.hooks, f)
	s.cl.mu.Unlock()
}

// peersChanged calls the NotifyClusterPeers callbacks; cl.mu must not be
// held.
func (s *Server) peersChanged() {
	s.cl.mu.Lock()
	hooks := slices.Clone(s.cl.hooks)
	s.cl.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// ClusterAuthOK reports whether user and password are the credentials the
// cluster port requires (the cluster block's authorization, or --cluster
// nats://user:pass@...), the check a route's CONNECT passes; true when the
// cluster requires none. Other connections of the cluster port (the Raft
// transport) use it so they are held to the same rule.
func (s *Server) ClusterAuthOK(user, password string) bool {
	return s.routeAuthOK(&route.Connect{User: user, Pass: password})
}

// ClusterCredentials returns the credentials this server's cluster port
// requires ("" when none): what it presents on connections it dials to
// peers that require credentials, as it does for routes learned from
// gossip (nats-server v2.15.2 processImplicitRoute).
func (s *Server) ClusterCredentials() (user, password string) {
	if s.cl == nil {
		return "", ""
	}
	set := s.clusterSet()
	return set.username, set.password
}
