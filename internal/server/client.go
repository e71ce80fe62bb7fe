package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/protocol"
	"github.com/cairnmq/cairn/internal/route"
)

// Read buffer sizes: a client's read buffer starts small and grows while
// reads fill it, as nats-server's does, so idle connections stay cheap and
// busy ones read in large batches.
const (
	minReadBuffer = 512
	maxReadBuffer = 64 << 10
	shrinkAfter   = 16
)

// client is one client connection. See the package comment for which
// goroutine owns which field.
type client struct {
	// routedBy is the subject the message being delivered was routed by
	// (deliverAllAs), which a stream import maps (imports.go).
	routedBy []byte
	srv      *Server
	cid      uint64
	tag      string // "cid" for a client, "rid" for a route, in log lines
	nc       net.Conn
	ip       string // the client's IP, for INFO client_ip
	addr     string // host:port, for log lines
	log      *logger.Logger
	out      *outbound
	parser   *protocol.Parser // nil for a route
	route    *routeConn       // set for a route connection (routeconn.go)
	// acc is the account the client publishes in and subscribes to: $G
	// until it authenticates as a user of another (accounts.go). A
	// route's is the account of the message it is delivering. Owned by
	// the read loop.
	acc *account
	pre []byte // bytes read before the read loop started (a route's first line)

	// Owned by the read loop.
	lim         *limits // the server's limits the parser was last given
	opts        connectOpts
	connectSeen bool
	firstPong   bool
	flushList   []*client            // receivers to wake at the end of this read batch
	flushSet    map[*client]struct{} // used once flushList grows large
	nrHdr       []byte               // scratch for the no-responders header
	stallOn     *client              // a receiver this batch backed up (see stall.go)
	slowWrite   bool                 // owned by the write loop: a route's last write passed the deadline
	internal    bool                 // a connectionless publisher used by Server.Publish
	importing   bool                 // an internal publisher delivering for an import: import subscriptions are skipped
	localOnly   bool                 // an internal publisher that must not forward to routes
	scratch     []byte               // Server.Publish: header and payload joined
	rts         []routeTarget        // routes receiving the message being dispatched (forward.go)
	fwdReply    []byte               // scratch for a forwarded JetStream reply
	queueFilter [][]byte             // a route's message: the queue groups it names
	trace       *msgTrace            // the message being dispatched is traced (msgtrace.go); owned by the read goroutine
	viaImport   *streamImport        // an internal publisher delivering, traced, what this stream import carries (imports.go)
	apiClient   []byte               // a route's: the ClientInfo a peer attached to the API request being delivered (apiclient.go)

	// Authentication (auth.go): the user and its session are set by the
	// read loop when the client authenticates; the nonce, timer and TLS
	// when it is created.
	user      *auth.User
	session   *auth.Session // nil until it authenticates (with authentication required or not)
	tls       *tlsState     // the listener's TLS when the client was accepted; nil without
	nonce     []byte
	authTimer *time.Timer
	// expiryTimer closes the client when its JWT expires (auth.go); set
	// by the read loop, stopped by teardown (on the read loop too).
	expiryTimer *time.Timer
	authPhase   atomic.Int32      // authOpen, authAwaiting or authTimedOut
	cert        *x509.Certificate // the client's verified TLS certificate; set before the read loop starts
	// Permissions (perms.go): the publish cache is the read loop's; the
	// allow_responses state is set by the read loop and used by the
	// goroutines delivering to this client.
	pubCache map[string]bool
	replies  atomic.Pointer[replyPerms]
	// Limits of its user and account (acclimits.go): accPay and msubs
	// (noLimit for none) and counted are the read loop's; mpay, the
	// payload limit in force, is read by the goroutines sending async
	// INFOs.
	accPay  int32
	msubs   int32
	counted *account // the account whose connections count this client
	mpay    atomic.Int32

	// A reload asks the read loop to check the client again (reload.go):
	// recheck is set by the reload, reading by the read loop once it
	// reads, so that the reload knows it may interrupt its Read.
	recheck atomic.Bool
	reading atomic.Bool

	headers   atomic.Bool  // opts.Headers, read by other connections' readers
	asyncInfo atomic.Bool  // got its connect_info INFO (protocol 1): async INFO updates go to it
	closed    atomic.Bool  // set once by teardown or closeNow
	lastIn    atomic.Int64 // unix nanoseconds of the last read with data
	pings     pingState

	// Statistics for the monitoring endpoints (stats.go). nIn and bIn are
	// owned by the read loop and added to inMsgs and inBytes once per
	// read batch.
	started time.Time    // when the connection was accepted or dialed
	nIn     int64        // messages received in this read batch
	bIn     int64        // their header and payload bytes
	inMsgs  atomic.Int64 // messages received
	inBytes atomic.Int64 // their header and payload bytes
	stalls  atomic.Int64 // times this connection's publishes were slowed
	rtt     atomic.Int64 // nanoseconds between the last answered PING and its PONG
	reason  atomic.Int32 // CloseReason, the first recorded

	mu   sync.Mutex
	subs map[string]*subscription // by sid; guarded by mu
	meta connMeta                 // CONNECT's name, lang and version; guarded by mu
}

// connMeta is what a client said about itself in CONNECT, and who it
// authenticated as, copied for the monitoring endpoints.
type connMeta struct {
	name, lang, version string
	user                string     // the user's name or nkey; "" for none
	account             string     // the account's name; "" until it authenticates ($G)
	authUser            *auth.User // the authenticated user; nil until then
}

// subscription is one SUB of one client. It is stored in the server's
// sublist and in its client's subs map.
type subscription struct {
	client  *client    // nil for an internal subscription
	handler MsgHandler // set for an internal subscription
	// svc, set for an import's subscription, is called instead of
	// handler with the publishing client (imports.go); it reports whether
	// anything received the message (a service import: anything in the
	// exporting account; a stream import: anything in the importing
	// account), as a delivery does.
	svc func(c *client, subj, reply []byte, hdrLen int, msg []byte) bool
	// interest, set for a stream import's subscription (imports.go),
	// reports whether the importing account has interest in subj, a
	// subject the import carries, at import depth depth: the import
	// counts as interest in the exporter only then (nats-server's shadow
	// subscriptions exist only for the importer's subscriptions).
	interest func(subj string, depth int) bool
	// traced, set for a stream's subscription, is called instead of
	// handler when the message is traced (msgtrace.go).
	traced jetstream.TracedHandler
	// crossing, set for an import's subscription (imports.go), is
	// called instead of handler or svc when the message is traced: it
	// carries the message, and its trace as the import allows, into the
	// other account, and reports whether anything received it.
	crossing func(c *client, t *msgTrace, subj, reply []byte, hdrLen int, msg []byte) bool
	// imported marks an import's internal subscription (imports.go).
	imported bool
	// system marks a system request subscription (sysreq.go): announced
	// to the peers, and delivered what they route.
	system bool
	// cluster marks a clustered JetStream's internal subscription
	// (jetstream.go jsTransport.shared): announced to the peers, and
	// delivered what they route (docs/cluster.md decision 14).
	cluster bool
	removed atomic.Bool
	acc     *account // whose subject index holds it
	subject string
	queue   string
	sid     []byte
	qw      atomic.Int32 // a peer's interest in a queue group: its member count (RS+ weight)
	// deny, when set, is the subscriber's permissions: a delivery whose
	// subject they deny is dropped (perms.go). Set at creation, replaced
	// by a reload that changes the subscriber's permissions.
	deny      atomic.Pointer[auth.Perms]
	max       atomic.Int64 // auto-unsubscribe limit, 0 = none (UNSUB <sid> <max>)
	delivered atomic.Int64 // messages delivered, counted for max

	// withdrawn marks a shared subscription no longer announced to the
	// peers, which still delivers what they routed before they learned it
	// (InternalSub.Withdraw); set under cluster.mu.
	withdrawn atomic.Bool
}

func newClient(s *Server, nc net.Conn, cid uint64) *client {
	lim := s.limits()
	c := &client{
		srv:     s,
		tls:     s.security().tls,
		cid:     cid,
		tag:     "cid",
		nc:      nc,
		log:     s.log,
		started: time.Now().UTC(),
		lim:     lim,
		out:     newOutbound(lim.MaxPending),
		opts:    connectOpts{Verbose: true, Pedantic: true, Echo: true},
		subs:    make(map[string]*subscription),
		acc:     s.gacc,
		accPay:  noLimit,
		msubs:   noLimit,
	}
	if s.opts.MaxSubs != 0 { // a client that sends SUB before CONNECT (no authentication)
		c.msubs = clamp32(int64(s.opts.MaxSubs))
	}
	c.mpay.Store(int32(lim.MaxPayload))
	if addr, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		c.ip = addr.IP.String()
		c.addr = addr.String()
	}
	c.parser = protocol.NewParser(lim.parserConfig(), c)
	c.parser.SetHeaders(false) // HPUB needs headers: true in CONNECT (docs/protocol.md 1.3)
	return c
}

// start sends INFO and starts the client's goroutines.
func (c *client) start() {
	c.out.appendBytes(appendInfo(nil, c.clientInfo()))
	c.run()
}

// clientInfo is the INFO a new client gets: the server's, with the
// client's id and address and the authentication fields (auth.go).
func (c *client) clientInfo() info {
	in := c.srv.baseInfo()
	in.TLSRequired, in.TLSVerify, in.TLSAvailable = false, false, false
	c.tls.infoFields(&in)
	in.CID = c.cid
	in.ClientIP = c.ip
	c.startAuth(&in)
	return in
}

// run arms the authentication timer and starts the client's goroutines;
// the INFO is sent or queued already.
func (c *client) run() {
	c.armAuthTimer()
	c.out.signal()
	c.lastIn.Store(time.Now().UnixNano())
	c.pings.start(c, c.srv.limits().PingInterval)
	c.srv.goroutine(c.writeLoop)
	c.srv.goroutine(c.readLoop)
}

// readLoop reads, parses and dispatches until the connection fails or a
// protocol error closes it.
func (c *client) readLoop() {
	defer c.teardown()
	if pre := c.pre; len(pre) > 0 {
		c.pre = nil
		if err := c.parse(pre); err != nil {
			c.countIn()
			c.flushReceivers()
			c.protocolError(err)
			return
		}
		c.countIn()
		c.flushReceivers()
	}
	buf := make([]byte, minReadBuffer)
	short := 0
	c.reading.Store(true)
	for {
		if err := c.maybeRecheck(); err != nil {
			c.flushReceivers()
			c.protocolError(err)
			return
		}
		n, err := c.nc.Read(buf)
		if n > 0 {
			c.lastIn.Store(time.Now().UnixNano())
			c.refreshLimits()
			perr := c.parse(buf[:n])
			c.countIn()
			c.flushReceivers()
			c.waitStalled()
			if perr != nil {
				c.protocolError(perr)
				return
			}
			buf, short = resizeReadBuffer(buf, n, short)
		}
		if err != nil {
			if woken(err) {
				// A reload interrupted the Read (reload.go wake): the
				// connection is fine, and the loop checks the client.
				_ = c.nc.SetReadDeadline(time.Time{})
				continue
			}
			if errors.Is(err, io.EOF) {
				c.setReason(ReasonClientClosed)
			} else {
				c.setReason(ReasonReadError)
			}
			return
		}
	}
}

// resizeReadBuffer doubles the buffer after a read that filled it and
// halves it after shrinkAfter consecutive reads that used under a quarter
// of it, so a steady stream does not reallocate. short counts those reads.
func resizeReadBuffer(buf []byte, n, short int) ([]byte, int) {
	switch {
	case n == len(buf) && len(buf) < maxReadBuffer:
		return make([]byte, len(buf)*2), 0
	case n >= len(buf)/4 || len(buf) == minReadBuffer:
		return buf, 0
	case short+1 < shrinkAfter:
		return buf, short + 1
	}
	return make([]byte, len(buf)/2), 0
}

// parse feeds the connection's parser: the client protocol's, or the
// route protocol's for a route.
func (c *client) parse(b []byte) error {
	if c.route != nil {
		return c.route.parser.Parse(b)
	}
	return c.parser.Parse(b)
}

// protocolError sends the -ERR an error carries, if any; the connection
// then closes after flushing (every error that reaches here closes).
func (c *client) protocolError(err error) {
	c.setReason(protocolReason(err))
	var pe *protocol.Error
	var re *route.Error
	switch {
	case errors.As(err, &pe) && pe.Text != "":
		c.sendErr(pe.Text)
	case errors.As(err, &re) && re.Text != "":
		c.sendErr(re.Text)
	}
	switch {
	case c.route == nil && quietClose(err):
	case c.route == nil:
		c.log.Errorf("%s - cid:%d - Client connection closed: %v", c.addr, c.cid, err) // [ERR], as nats-server logs parser errors
	case !routeCloseErr(err):
		c.log.Errorf("%s - rid:%d - Router connection closing: %v", c.addr, c.cid, err)
	}
}

// writeLoop writes whatever is pending each time it is woken, until the
// connection is closed or a flush-and-close completes.
func (c *client) writeLoop() {
	var batch [][]byte
	var iov net.Buffers
	for range c.out.wake {
		for more := true; more; {
			var closing, closed bool
			batch, more, closing, closed = c.out.take(batch)
			if closed {
				return
			}
			ok, requeued := c.write(batch, &iov)
			if !ok {
				return
			}
			if requeued {
				more = true
				continue
			}
			if closing {
				_ = c.nc.Close()
				return
			}
		}
	}
}

// write writes a batch with the write deadline. A failure closes the
// connection, and so does a timeout (a slow consumer) but for a route
// that wrote part of the batch: its rest is requeued (requeued true) and
// the route stays, as nats-server v2.15.2 keeps a route that makes any
// progress (client.go handleWriteTimeout, WriteTimeoutPolicyRetry).
func (c *client) write(batch [][]byte, iov *net.Buffers) (ok, requeued bool) {
	if len(batch) == 0 {
		return true, false
	}
	deadline := c.srv.limits().WriteDeadline
	_ = c.nc.SetWriteDeadline(time.Now().Add(deadline))
	n, err := writeBatch(c.nc, batch, iov)
	var ne net.Error
	timeout := err != nil && errors.As(err, &ne) && ne.Timeout()
	if timeout && c.route != nil && n > 0 {
		c.out.requeue(batch, n)
		c.slowRouteWrite(deadline)
		return true, true
	}
	c.out.written(batch, n)
	if err != nil {
		if timeout {
			c.setReason(ReasonSlowConsumerWriteDeadline)
			if !c.slowWrite { // counted when detected
				c.countSlow()
			}
			c.log.Noticef("%s - %s:%d - Slow Consumer Detected: WriteDeadline of %v exceeded", c.addr, c.tag, c.cid, deadline)
		}
		c.setReason(ReasonWriteError)
		c.closeNow()
		return false, false
	}
	c.slowWrite = false
	return true, false
}

// slowRouteWrite logs a route whose write took longer than the write
// deadline but made progress, and counts it once until a write completes
// in time (nats-server v2.15.2 "Slow Consumer Detected", then "State").
// It runs on the write loop.
func (c *client) slowRouteWrite(deadline time.Duration) {
	state := "State"
	if !c.slowWrite {
		state = "Detected"
		c.slowWrite = true
		c.countSlow()
	}
	c.log.Noticef("%s - %s:%d - Slow Consumer %s: WriteDeadline of %v exceeded, the route stays open", c.addr, c.tag, c.cid, state, deadline)
}

// enqueue queues protocol bytes on this client's own connection and marks
// it for a flush at the end of the read batch. It runs on the read loop.
// Replies count against max_pending like deliveries do.
func (c *client) enqueue(b []byte) {
	if !c.out.appendBytes(b) {
		c.closeSlowConsumer()
		return
	}
	c.markFlush(c)
}

func (c *client) enqueueString(s string) {
	o := c.out
	o.mu.Lock()
	ok := true
	if o.acceptingLocked() {
		ok = o.commitLocked(append(o.tailLocked(len(s)), s...))
	}
	o.mu.Unlock()
	if !ok {
		c.closeSlowConsumer()
		return
	}
	c.markFlush(c)
}

func (c *client) sendErr(text string) {
	c.enqueue(protocol.AppendErr(nil, text))
}

func (c *client) sendOK() {
	if c.opts.Verbose {
		c.enqueueString(protocol.OKLine)
	}
}

// markFlush records that rc's writer must be woken when this read batch
// ends. It runs on c's read loop only.
func (c *client) markFlush(rc *client) {
	if c.flushSet != nil {
		c.flushSet[rc] = struct{}{}
		return
	}
	for _, p := range c.flushList {
		if p == rc {
			return
		}
	}
	c.flushList = append(c.flushList, rc)
	if len(c.flushList) > 32 {
		c.flushSet = make(map[*client]struct{}, 64)
		for _, p := range c.flushList {
			c.flushSet[p] = struct{}{}
		}
		c.flushList = c.flushList[:0]
	}
}

// flushReceivers wakes every writer this read batch gave work to.
func (c *client) flushReceivers() {
	for i, rc := range c.flushList {
		rc.out.signal()
		c.flushList[i] = nil
	}
	c.flushList = c.flushList[:0]
	if c.flushSet != nil {
		for rc := range c.flushSet {
			rc.out.signal()
		}
		c.flushSet = nil
	}
}

// closeNow closes the connection at once, dropping pending output (slow
// consumers, failed writes). The read loop then tears the client down.
func (c *client) closeNow() {
	c.out.markClosed()
	nc := c.nc
	if tc, ok := nc.(*tls.Conn); ok {
		// Close the TCP connection under TLS: tls.Conn.Close would first
		// try to send a close_notify alert, which may wait up to 5 s for
		// a peer that does not read, and closeNow is called under locks.
		nc = tc.NetConn()
	}
	_ = nc.Close()
}

// closeSlowConsumer closes a receiver whose pending bytes exceeded
// MaxPending (docs/protocol.md 1.10: no -ERR is sent).
func (c *client) closeSlowConsumer() {
	if c.closed.Load() {
		return
	}
	c.setReason(ReasonSlowConsumerPendingBytes)
	c.countSlow()
	c.log.Noticef("%s - %s:%d - Slow Consumer Detected: MaxPending of %d exceeded", c.addr, c.tag, c.cid, c.out.maxPending())
	c.closeNow()
}

// teardown runs once when the read loop ends: it removes the client's
// subscriptions (withdrawing them from the peers, or for a route the
// peer's interest), unregisters it and asks the writer to flush and close.
func (c *client) teardown() {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	c.pings.stop()
	c.stopTimers()
	c.mu.Lock()
	subs := c.subs
	c.subs = map[string]*subscription{}
	c.mu.Unlock()
	list := make([]*subscription, 0, len(subs))
	for _, sub := range subs {
		_ = sub.acc.sl.Remove(sub.subject, sub.queue, sub)
		list = append(list, sub)
	}
	if c.route != nil {
		c.srv.removeRoute(c)
	} else {
		c.srv.interestRemoved(list...)
		c.uncount()
		c.srv.removeClient(c)
		ci := c.srv.recordClosed(c, list)
		// Every client, authenticated or not ($G then), as nats-server's
		// saveClosedClient sends accountDisconnectEvent.
		ci.Subs = nil
		c.srv.clientEvent(ClientEvent{Conn: ci, AccountConns: int(c.acc.nconns.Load())})
		// As nats-server v2.15.2 logs it (client.go closeConnection).
		c.log.Debugf("%s - cid:%d - Client connection closed: %s", c.addr, c.cid, CloseReason(c.reason.Load()))
	}
	c.out.markClosing()
}
