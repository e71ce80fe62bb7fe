package monitor

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/server"
)

// Paths of the endpoints, as nats-server v2.15.2 names them (server.go
// startMonitoring), relative to the base path.
const (
	RootPath           = "/"
	VarzPath           = "/varz"
	ConnzPath          = "/connz"
	RoutezPath         = "/routez"
	GatewayzPath       = "/gatewayz"
	LeafzPath          = "/leafz"
	SubszPath          = "/subsz"
	SubscriptionszPath = "/subscriptionsz"
	StackszPath        = "/stacksz"
	AccountzPath       = "/accountz"
	AccountStatzPath   = "/accstatz"
	JszPath            = "/jsz"
	HealthzPath        = "/healthz"
	RaftzPath          = "/raftz"
	MetricsPath        = "/metrics"
)

// maxInFlight bounds the requests served at once; more get 503 with a
// message instead of piling up goroutines and memory (a scrape of a busy
// server builds a snapshot of every connection).
const maxInFlight = 16

// Options configures the monitoring listener. Zero values mean the
// defaults next to each field.
type Options struct {
	Host     string // listen address; "" = 0.0.0.0
	Port     int    // the port; server.RandomPort (-1) picks a free one; 0: no HTTP listener (Start refuses), the $SYS requests only
	BasePath string // prefix of every path (http_base_path); "" = none
	// Server is the server whose state is reported; required.
	Server *server.Server
	// ConfigDigest and ConfigLoadTime are /varz config_digest and
	// config_load_time: the digest of the configuration file ("" without
	// one) and when it was last loaded; SetConfig updates them on a
	// reload.
	ConfigDigest   string
	ConfigLoadTime time.Time
	// MetricsPrefix names the prometheus-nats-exporter families of
	// /metrics (metrics.go): "" gives gnatsd_* and jetstream_*, the
	// exporter's defaults; "nats" gives nats_* for both, as its
	// -prefix=nats (the Helm chart).
	MetricsPrefix string
	// StatszInterval is how often $SYS.SERVER.<id>.STATSZ is published;
	// 0 = server.StatszInterval (10s, nats-server's default).
	StatszInterval time.Duration
	Logger         *logger.Logger
	// TLS, when not nil, makes Start serve HTTPS with it (https_port:
	// the server's tls block, no client certificate asked, as nats-server
	// v2.15.2's startMonitoring); the log says "Starting https monitor".
	TLS *tls.Config
	// Auth, when enabled, requires credentials on every endpoint
	// (httpauth.go; the http_auth block); SetAuth replaces it.
	Auth config.MonitorAuth
	// Reload, when not nil, reloads the configuration file as SIGHUP
	// does, for $SYS.REQ.SERVER.<id>.RELOAD (sysctl.go); its error is
	// the reply's. Nil answers nats-server's "can only reload config
	// when a file is provided using -c or --config".
	Reload func() error
}

// Monitor serves the HTTP monitoring endpoints of one server. Create it
// with New, then Start; Close stops it.
type Monitor struct {
	opts Options
	srv  *server.Server
	log  *logger.Logger

	ln   net.Listener
	http *http.Server
	done chan struct{} // closed when Serve returns

	inflight chan struct{}            // a slot per request being served
	auth     atomic.Pointer[httpAuth] // nil: no credentials required (httpauth.go)
	reqs     sync.Map                 // path -> *atomic.Uint64 (http_req_stats)
	cpu      cpuSampler
	metrics  http.Handler // /metrics (metrics.go)

	cfgMu     sync.Mutex // guards digest and loadTime
	digest    string
	loadTime  time.Time
	startedAt time.Time
}

// ErrInvalidOptions is wrapped by the errors New returns for bad options.
var ErrInvalidOptions = errors.New("monitor: invalid options")

// New checks opts and returns a Monitor that is not listening yet.
func New(opts Options) (*Monitor, error) {
	if opts.Server == nil {
		return nil, fmt.Errorf("%w: no server", ErrInvalidOptions)
	}
	if opts.Port < server.RandomPort || opts.Port > 65535 {
		return nil, fmt.Errorf("%w: port %d", ErrInvalidOptions, opts.Port)
	}
	if opts.Host == "" {
		opts.Host = server.DefaultHost
	}
	opts.BasePath = strings.TrimSuffix(opts.BasePath, "/")
	if opts.BasePath != "" && !strings.HasPrefix(opts.BasePath, "/") {
		opts.BasePath = "/" + opts.BasePath
	}
	if opts.Logger == nil {
		opts.Logger = logger.Discard()
	}
	if opts.ConfigLoadTime.IsZero() {
		opts.ConfigLoadTime = time.Now().UTC()
	}
	m := &Monitor{
		opts:      opts,
		srv:       opts.Server,
		log:       opts.Logger,
		done:      make(chan struct{}),
		inflight:  make(chan struct{}, maxInFlight),
		digest:    opts.ConfigDigest,
		loadTime:  opts.ConfigLoadTime.UTC(),
		startedAt: time.Now(),
	}
	m.metrics = m.metricsHandler()
	m.SetAuth(opts.Auth)
	return m, nil
}

// Start listens and serves in the background. It returns the listen
// error (for example, the port is in use), or an error wrapping
// ErrInvalidOptions for a Monitor without a port.
func (m *Monitor) Start() error {
	if m.opts.Port == 0 {
		return fmt.Errorf("%w: no port to listen on", ErrInvalidOptions)
	}
	port := m.opts.Port
	if port == server.RandomPort {
		port = 0
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(m.opts.Host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("monitor: listen on %s:%d: %w", m.opts.Host, m.opts.Port, err)
	}
	scheme := "http"
	if m.opts.TLS != nil {
		ln, scheme = tls.NewListener(ln, m.opts.TLS), "https"
	}
	m.ln = ln
	m.http = &http.Server{
		Handler:           m.mux(),
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 16,
		ErrorLog:          nil,
	}
	m.log.Noticef("Starting %s monitor on %s", scheme, ln.Addr())
	go func() {
		defer close(m.done)
		_ = m.http.Serve(ln)
	}()
	return nil
}

// Addr returns the bound address, or nil before Start.
func (m *Monitor) Addr() *net.TCPAddr {
	if m.ln == nil {
		return nil
	}
	return m.ln.Addr().(*net.TCPAddr)
}

// ListenAddrs returns the listener's addresses, host:port, every address
// of the machine for a listener on all interfaces (for the ports file);
// nil before Start.
func (m *Monitor) ListenAddrs() []string {
	if m.Addr() == nil {
		return nil
	}
	return server.ExpandHostPort(m.opts.Host, m.Addr().Port)
}

// URL returns "http://<host>:<port><base path>", with 127.0.0.1 for a
// listener on every interface.
func (m *Monitor) URL() string {
	host := m.opts.Host
	if host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	scheme := "http://"
	if m.opts.TLS != nil {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, strconv.Itoa(m.Addr().Port)) + m.opts.BasePath
}

// Close stops the listener and waits up to a second for the requests
// being served.
func (m *Monitor) Close() {
	if m.http == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := m.http.Shutdown(ctx); err != nil {
		_ = m.http.Close()
	}
	<-m.done
}

// SetConfig records a reload of the configuration: /varz config_digest
// and config_load_time.
func (m *Monitor) SetConfig(digest string, at time.Time) {
	m.cfgMu.Lock()
	m.digest, m.loadTime = digest, at.UTC()
	m.cfgMu.Unlock()
}

func (m *Monitor) config() (string, time.Time) {
	m.cfgMu.Lock()
	defer m.cfgMu.Unlock()
	return m.digest, m.loadTime
}

// mux routes the endpoints under the base path.
func (m *Monitor) mux() http.Handler {
	mux := http.NewServeMux()
	routes := map[string]http.HandlerFunc{
		VarzPath:           m.handleVarz,
		ConnzPath:          m.handleConnz,
		RoutezPath:         m.handleRoutez,
		GatewayzPath:       m.handleGatewayz,
		LeafzPath:          m.handleLeafz,
		SubszPath:          m.handleSubsz,
		SubscriptionszPath: m.handleSubsz,
		StackszPath:        m.handleStacksz,
		AccountzPath:       m.handleAccountz,
		AccountStatzPath:   m.handleAccountStatz,
		JszPath:            m.handleJsz,
		HealthzPath:        m.handleHealthz,
		RaftzPath:          m.handleRaftz,
		MetricsPath:        m.handleMetrics,
	}
	for path, h := range routes {
		mux.HandleFunc(m.opts.BasePath+path, m.guard(path, h))
	}
	root := m.opts.BasePath + "/"
	mux.HandleFunc(root, m.guard(RootPath, m.handleRoot))
	return mux
}

// guard bounds the requests in flight, checks the credentials
// (httpauth.go) and counts the request in http_req_stats.
func (m *Monitor) guard(path string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case m.inflight <- struct{}{}:
		default:
			writeText(w, http.StatusServiceUnavailable, fmt.Sprintf("too many monitoring requests in flight (%d); try again", maxInFlight))
			return
		}
		defer func() { <-m.inflight }()
		if !m.authorize(path, w, r) {
			return
		}
		m.count(path)
		h(w, r)
	}
}

func (m *Monitor) count(path string) {
	v, ok := m.reqs.Load(path)
	if !ok {
		v, _ = m.reqs.LoadOrStore(path, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(1)
}

// reqStats returns http_req_stats: the requests per path since start,
// only paths requested at least once.
func (m *Monitor) reqStats() map[string]uint64 {
	out := map[string]uint64{}
	m.reqs.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Uint64).Load()
		return true
	})
	return out
}

// writeJSON sends v indented, as nats-server does, with its headers
// (Content-Type and the CORS header browser dashboards need).
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		writeText(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeBody(w, code, b)
}

func writeBody(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// writeText sends an error as nats-server does: the status and a plain
// message.
func writeText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}

// query reads the options of a request. Each getter records the first bad
// value; err then holds nats-server's message for it, answered with 400.
type query struct {
	r   *http.Request
	err error
}

func (q *query) str(name string) string { return q.r.URL.Query().Get(name) }

func (q *query) boolean(name string) bool {
	s := q.str(name)
	if s == "" || q.err != nil {
		return false
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		q.err = fmt.Errorf("Error decoding boolean for '%s': %v", name, err)
	}
	return v
}

func (q *query) integer(name string) int {
	s := q.str(name)
	if s == "" || q.err != nil {
		return 0
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		q.err = fmt.Errorf("Error decoding int for '%s': %v", name, err)
	}
	return v
}

func (q *query) uint64(name string) uint64 {
	s := q.str(name)
	if s == "" || q.err != nil {
		return 0
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		q.err = fmt.Errorf("Error decoding uint64 for '%s': %v", name, err)
	}
	return v
}

// subs reads subs=true|false|detail.
func (q *query) subs() (subs, detail bool) {
	if strings.EqualFold(q.str("subs"), "detail") {
		return false, true
	}
	return q.boolean("subs"), false
}

// bad answers 400 with the recorded error; it reports whether it did.
func (q *query) bad(w http.ResponseWriter) bool {
	if q.err == nil {
		return false
	}
	writeText(w, http.StatusBadRequest, q.err.Error())
	return true
}

// page returns the window [offset, offset+limit) of n items, clamped to
// n without overflow: huge offsets and limits give an empty or whole
// window, never an allocation of their size.
func page(n, offset, limit int) (lo, hi int) {
	lo = min(max(offset, 0), n)
	hi = lo + min(max(limit, 0), n-lo)
	return lo, hi
}

// uptime formats a duration as nats-server's monitoring does: whole
// seconds with y, d, h, m, s units, largest first ("3d2h1m5s", "0s").
func uptime(d time.Duration) string {
	secs := int64(d / time.Second)
	mins, hrs := secs/60, secs/3600
	days := hrs / 24
	yrs := days / 365
	switch {
	case yrs > 0:
		return fmt.Sprintf("%dy%dd%dh%dm%ds", yrs, days%365, hrs%24, mins%60, secs%60)
	case days > 0:
		return fmt.Sprintf("%dd%dh%dm%ds", days, hrs%24, mins%60, secs%60)
	case hrs > 0:
		return fmt.Sprintf("%dh%dm%ds", hrs, mins%60, secs%60)
	case mins > 0:
		return fmt.Sprintf("%dm%ds", mins, secs%60)
	}
	return fmt.Sprintf("%ds", secs)
}

// rttString formats a round trip time as nats-server does: microseconds
// under a millisecond, else nanosecond precision; "0s" when unknown.
func rttString(d time.Duration) string {
	if d > time.Microsecond && d < time.Millisecond {
		d = d.Truncate(time.Microsecond)
	}
	return d.String()
}
