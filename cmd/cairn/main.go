// Command cairn runs the cairn messaging server. It accepts nats-server's
// common command-line flags with the same meaning (docs/compatibility.md)
// and nats-server's configuration files (-c, internal/config), so a
// harness or a deployment that starts one can start the other.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/memrelease"
	"github.com/cairnmq/cairn/internal/monitor"
	"github.com/cairnmq/cairn/internal/server"
)

func main() {
	// The signals are caught from the start: a SIGHUP sent as soon as the
	// log says "Server is ready" would otherwise find Go's default
	// action (exit) before the signal loop runs. Those received before the
	// loop wait in the channel.
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, handledSignals...)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, func(ctl controls) { waitForSignal(ch, ctl) }))
}

// handledSignals are the signals the signal loop acts on.
var handledSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2}

// controls is what the signal loop may ask of a running server: its log,
// reopening the log file (SIGUSR1), reloading the configuration (SIGHUP)
// and entering lame duck mode (SIGUSR2); done is closed once the server
// has shut down by itself (at the end of lame duck mode).
type controls struct {
	log      *logger.Logger
	reopen   func()
	reload   func()
	lameDuck func()
	done     <-chan struct{}
}

// waitFunc blocks until the server should stop.
type waitFunc func(controls)

// waitForSignal blocks until SIGINT or SIGTERM arrive on ch (signal.Notify
// of handledSignals), or until the server shut
// down by itself (lame duck mode ended), logging each signal as
// nats-server does (server/signal.go): SIGHUP reloads the configuration
// file, SIGUSR1 reopens the log file, SIGUSR2 enters lame duck mode.
func waitForSignal(ch <-chan os.Signal, ctl controls) {
	for {
		var sig os.Signal
		select {
		case sig = <-ch:
		case <-ctl.done:
			return
		}
		switch sig {
		case syscall.SIGHUP:
			ctl.log.Noticef("Trapped %q signal", sig)
			ctl.reload()
		case syscall.SIGUSR1:
			ctl.reopen()
			ctl.log.Noticef("Trapped %q signal: log file reopened", sig)
		case syscall.SIGUSR2:
			ctl.log.Noticef("Trapped %q signal", sig)
			ctl.lameDuck()
		default:
			ctl.log.Noticef("Trapped %q signal", sig)
			return
		}
	}
}

// run parses args, loads the configuration, starts the server, waits for
// wait to return, then shuts down. It returns the process exit code: 0
// after a clean shutdown (or a valid -t, --help, --version, a sent
// --signal), 1 when the configuration is bad or the server cannot start,
// 2 for bad flags.
func run(args []string, stdout, stderr io.Writer, wait waitFunc) int {
	cl, err := parseArgs(args, stdout, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	case cl.showVersion:
		fmt.Fprintf(stdout, "cairn v%s (NATS protocol compatible with nats-server %s)\n", server.Version, server.NATSVersion)
		return 0
	case cl.check && cl.configFile == "":
		fmt.Fprintln(stderr, "cairn: must specify [-c, --config] option to check configuration file syntax")
		return 2
	}
	cfg, warns, err := cl.settings()
	switch {
	case cl.check:
		return checkConfig(cfg, warns, err, stderr)
	case cl.signal != "":
		return sendSignal(cl.signal, cfg, stderr)
	case err != nil:
		printProblems(stderr, warns)
		printConfigError(stderr, err)
		return 1
	}
	lf, err := openLog(cfg.Log, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "cairn: %v\n", err)
		return 1
	}
	defer lf.close()
	return serve(&instance{cl: cl, cfg: cfg, lf: lf, log: lf.log}, warns, wait)
}

// checkConfig reports the outcome of -t as nats-server does: the problems
// and exit 1, or "configuration file <file> is valid (<digest>)" and exit
// 0. A file with warnings only is valid: cairn starts with it.
func checkConfig(cfg *config.Config, warns []config.Problem, err error, stderr io.Writer) int {
	printProblems(stderr, warns)
	if err != nil {
		printConfigError(stderr, err)
		return 1
	}
	fmt.Fprintf(stderr, "cairn: configuration file %s is valid (%s)\n", cfg.File, cfg.Digest)
	return 0
}

// printConfigError prints why the configuration cannot be used. A list
// of problems (*config.Error) ends with an empty line, as nats-server
// v2.15.2 prints its processConfigErr, whose every line ends in a newline,
// with Fprintln.
func printConfigError(w io.Writer, err error) {
	fmt.Fprintf(w, "cairn: %v\n", err)
	if _, ok := errors.AsType[*config.Error](err); ok {
		fmt.Fprintln(w)
	}
}

func printProblems(w io.Writer, ps []config.Problem) {
	for _, p := range ps {
		fmt.Fprintln(w, p.Error())
	}
}

// instance is a running server and what it was started with; reload
// (reload.go) changes it.
type instance struct {
	cl *commandLine
	// reloadMu is held by a reload and by what reads cfg while the
	// server runs: reloads come from the signal loop and from the system
	// account's RELOAD request.
	reloadMu sync.Mutex
	cfg      *config.Config // the settings in force
	lf       *logFile
	log      *logger.Logger
	srv      *server.Server
	mon      *monitor.Monitor // answers the $SYS requests; serves HTTP with http_port (-m)
	// tlsFiles is the digest of the tls block's files in force
	// (reload.go), so that a reload sees certificates rotated in place.
	tlsFiles string
	// monTLS is the HTTPS monitoring's TLS (https_port), replaced by a
	// reload of the tls block; nil without https_port. Read by the
	// monitoring listener's handshakes.
	monTLS atomic.Pointer[tls.Config]
}

// monitorTLS is the HTTPS monitoring's TLS: the tls block's, without
// client certificates, as nats-server's getMonitoringTLSConfig.
func monitorTLS(t *config.TLS) (*tls.Config, error) {
	tc, err := t.ServerConfig()
	if err != nil {
		return nil, err
	}
	tc.ClientAuth = tls.NoClientCert
	return tc, nil
}

// lameDuck starts lame duck mode with the configured timings (nats-server
// lame_duck_duration and lame_duck_grace_period) and returns; the server
// then shuts down by itself. It runs on the signal loop, as reload does.
func (in *instance) lameDuck() {
	in.reloadMu.Lock()
	p := in.cfg.Process
	in.reloadMu.Unlock()
	go in.srv.LameDuck(p.LameDuckDuration, p.LameDuckGracePeriod)
}

// reopenLog reopens the log file (SIGUSR1) under reloadMu: a reload,
// which may come from the system account's RELOAD request on another
// goroutine, may switch the file.
func (in *instance) reopenLog() {
	in.reloadMu.Lock()
	defer in.reloadMu.Unlock()
	in.lf.reopen()
}

// startMonitor makes the monitor, which answers the system account's
// $SYS requests (when there is a system account), and starts its HTTP
// listener when http_port (-m) is set; it listens on http's host, else
// the client listen host, as in nats-server.
func (in *instance) startMonitor() error {
	c := in.cfg
	host := c.Monitor.Host
	if host == "" {
		host = c.Host
	}
	port := c.Monitor.Port
	var tc *tls.Config
	if c.Monitor.HTTPSPort != 0 { // config.Validate: no http_port, a tls block
		port = c.Monitor.HTTPSPort
		cur, err := monitorTLS(&c.TLS)
		if err != nil {
			return err
		}
		in.monTLS.Store(cur)
		// Each handshake takes the configuration in force, which a reload
		// replaces (nats-server getMonitoringTLSConfig).
		tc = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return in.monTLS.Load(), nil }}
	}
	opts := monitor.Options{
		Host: host, Port: port, BasePath: c.Monitor.BasePath, TLS: tc,
		Server: in.srv, ConfigDigest: c.Digest, MetricsPrefix: c.Monitor.MetricsPrefix, Logger: in.log,
		Auth: c.Monitor.Auth,
	}
	if in.cl.configFile != "" {
		opts.Reload = in.requestReload
	}
	mon, err := monitor.New(opts)
	if err != nil {
		return err
	}
	if err := mon.ServeSystemRequests(); err != nil && !errors.Is(err, server.ErrNoSystemAccount) {
		return err
	}
	if port != 0 {
		if err := mon.Start(); err != nil {
			return err
		}
	}
	in.mon = mon
	return nil
}

func serve(in *instance, warns []config.Problem, wait waitFunc) int {
	log, cfg := in.log, in.cfg
	opts := serverOptions(cfg, log)
	opts.ForceNewCluster = in.cl.forceNew
	srv, err := server.New(opts)
	if err != nil {
		log.Fatalf("%v", err)
		return 1
	}
	in.srv = srv
	in.tlsFiles = tlsFiles(&cfg.TLS)
	log.Noticef("Starting cairn v%s (nats-server %s protocol)", server.Version, server.NATSVersion)
	startBanner(log, srv, cfg.JetStream.Enabled)
	if cfg.File != "" {
		log.Noticef("Using configuration file: %s (%s)", cfg.File, cfg.Digest)
	}
	for _, w := range warns {
		log.Warnf("%v", w)
	}
	if cfg.Limits.MaxPayload > config.MaxPayloadWarn {
		// Logged at start, not a problem of the file (-t does not print
		// it), as nats-server v2.15.2 Start logs it.
		log.Warnf("Maximum payloads over 8.00 MB are generally discouraged and could lead to poor performance")
	}
	if err := writePidFile(cfg.Process.PidFile); err != nil {
		log.Fatalf("Could not write pidfile: %v", err)
		return 1
	}
	if port := cfg.Process.ProfPort; port != 0 {
		stop, err := startProfiler(max(port, 0), log)
		if err != nil {
			log.Fatalf("profiling port: %v", err)
			return 1
		}
		defer stop()
	}
	if err := srv.Start(); err != nil {
		log.Fatalf("%v", err)
		return 1
	}
	defer startMemRelease(log)()
	if err := in.startMonitor(); err != nil {
		log.Fatalf("%v", err)
		srv.Shutdown()
		return 1
	}
	if dir := cfg.Process.PortsFileDir; dir != "" {
		path, err := writePortsFile(dir, srv, in.mon)
		if err != nil {
			log.Errorf("Error writing ports file: %v", err)
		} else {
			defer os.Remove(path)
		}
	}
	wait(controls{log: log, reopen: in.reopenLog, reload: in.reload, lameDuck: in.lameDuck, done: srv.Done()})
	if in.mon != nil {
		in.mon.Close()
	}
	if !finishWithin(srv.Shutdown, shutdownDeadline) {
		log.Errorf("Shutdown did not finish within %v; exiting without waiting (every acknowledged message is on disk)", shutdownDeadline)
		return 1
	}
	return 0
}

// startMemRelease starts the goroutine that returns the heap a burst
// left behind once the server is quiet (internal/memrelease, one per
// process, sampling every second); the function it returns stops it and
// waits for it.
func startMemRelease(log *logger.Logger) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		memrelease.Run(quit, time.Second, memrelease.Policy{}, log.Debugf)
	}()
	return func() {
		close(quit)
		<-done
	}
}

// shutdownDeadline bounds a shutdown (issue 12: it finishes within its
// deadline whatever a request is doing). Publishes are acknowledged only
// once on disk, so exiting then loses nothing acknowledged.
const shutdownDeadline = 30 * time.Second

// finishWithin runs f and reports whether it returned within d; when it
// did not, f goes on running while the caller exits.
func finishWithin(f func(), d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// serverOptions turns the settings into the server's options.
func serverOptions(c *config.Config, log *logger.Logger) server.Options {
	l := serverLimits(c)
	return server.Options{
		Host:                  c.Host,
		Port:                  c.Port,
		ServerName:            c.ServerName,
		ClientAdvertise:       c.ClientAdvertise,
		MaxPayload:            l.MaxPayload,
		MaxControlLine:        l.MaxControlLine,
		MaxPending:            l.MaxPending,
		MaxConnections:        l.MaxConnections,
		MaxSubs:               c.Limits.MaxSubs,
		PingInterval:          l.PingInterval,
		MaxPingsOut:           l.MaxPingsOut,
		WriteDeadline:         l.WriteDeadline,
		JetStream:             c.JetStream.Enabled,
		StoreDir:              c.JetStream.StoreDir,
		MaxMemoryStore:        storageLimit(c.JetStream.MaxMemoryStore),
		MaxFileStore:          storageLimit(c.JetStream.MaxFileStore),
		AckBeforeSyncInterval: c.JetStream.AckBeforeSyncInterval,
		DefaultMaxConsumers:   c.JetStream.DefaultMaxConsumers,
		StreamMaxBufferedMsgs: int(c.JetStream.MaxBufferedMsgs),
		StreamMaxBufferedSize: c.JetStream.MaxBufferedSize,
		JetStreamDomain:       c.JetStream.Domain,
		JetStreamUniqueTag:    c.JetStream.UniqueTag,
		Tags:                  c.Tags,
		Cluster:               clusterOptions(c.Cluster),
		Auth:                  c.Auth,
		TLS:                   c.TLS,
		Operator:              c.Operator,
		MaxClosedClients:      c.Monitor.MaxClosedClients,
		Logger:                log,
	}
}

// serverLimits are the settings a running server can change.
func serverLimits(c *config.Config) server.Limits {
	return server.Limits{
		MaxPayload:      c.Limits.MaxPayload,
		MaxControlLine:  c.Limits.MaxControlLine,
		MaxPending:      c.Limits.MaxPending,
		MaxConnections:  c.Limits.MaxConnections,
		PingInterval:    c.Limits.PingInterval,
		MaxPingsOut:     c.Limits.MaxPingsOut,
		WriteDeadline:   c.Limits.WriteDeadline,
		ClientAdvertise: c.ClientAdvertise,
	}
}

// storageLimit maps a configured storage limit to the server's: unset is
// 0 (sized from the machine, as nats-server sizes it), and 0 is no
// storage.
func storageLimit(n int64) int64 {
	switch {
	case n < 0:
		return 0
	case n == 0:
		return server.NoStorage
	}
	return n
}

// writePidFile writes the process ID to path, as nats-server does (mode
// 0600, no newline); "" writes nothing.
func writePidFile(path string) error {
	if path == "" {
		return nil
	}
	return os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())), 0o600)
}

// logFile is the server's log destination: stderr, or a file that
// SIGUSR1 reopens (for log rotation) and a reload may change.
type logFile struct {
	log    *logger.Logger
	stderr io.Writer
	rot    *rotator // nil: stderr
	limit  int64    // logfile_size_limit
	maxNum int      // logfile_max_num
}

func openLog(c config.Log, stderr io.Writer) (*logFile, error) {
	lf := &logFile{stderr: stderr, limit: c.SizeLimit, maxNum: c.MaxNum}
	var w io.Writer = stderr
	if c.File != "" {
		f, err := openLogFile(c.File)
		if err != nil {
			return nil, err
		}
		lf.rot = newRotator(c.File, f, lf.limit, lf.maxNum)
		w = lf.rot
	}
	lf.log = logger.New(w, c.Debug, c.Trace)
	lf.log.SetTime(c.Time, c.TimeUTC)
	lf.log.SetJSON(c.JSON)
	return lf, nil
}

func openLogFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open log file: %w", err)
	}
	return f, nil
}

// reopen switches to a freshly opened file at the same path; on error it
// keeps the old one and says so.
func (l *logFile) reopen() {
	if l.rot == nil {
		return
	}
	path := l.rot.name()
	f, err := openLogFile(path)
	if err != nil {
		l.log.Errorf("%v", err)
		return
	}
	l.use(path, f)
}

// use makes the log write to f (nil: stderr) at path and closes the file
// it wrote to before.
func (l *logFile) use(path string, f *os.File) {
	old := l.rot
	if f == nil {
		l.rot = nil
		l.log.SetOutput(l.stderr)
	} else {
		l.rot = newRotator(path, f, l.limit, l.maxNum)
		l.log.SetOutput(l.rot)
	}
	if old != nil {
		old.close()
	}
}

// setRotation applies new logfile_size_limit and logfile_max_num.
func (l *logFile) setRotation(limit int64, maxNum int) {
	l.limit, l.maxNum = limit, maxNum
	if l.rot != nil {
		l.rot.setLimits(limit, maxNum)
	}
}

func (l *logFile) close() {
	if l.rot != nil {
		l.rot.close()
	}
}

// startBanner logs the lines nats-server v2.15.2 logs after its first
// (server.go Start): Version (cairn's), Git (the commit the binary was
// built from, "[not set]" without one), Cluster (with a cluster), Name,
// Node (with JetStream: the 8-character peer ID of /jsz) and ID.
func startBanner(log *logger.Logger, srv *server.Server, js bool) {
	log.Noticef("  Version:  %s", server.Version)
	log.Noticef("  Git:      [%s]", gitCommit())
	if name := srv.ClusterName(); name != "" {
		log.Noticef("  Cluster:  %s", name)
	}
	name := srv.Name()
	log.Noticef("  Name:     %s", name)
	if js {
		log.Noticef("  Node:     %s", srv.PeerID())
	}
	log.Noticef("  ID:       %s", srv.ID())
}

// gitCommit is the VCS revision the binary was built from (its first 7
// characters, as nats-server's Git line), "not set" when unknown.
func gitCommit() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value[:min(7, len(s.Value))]
			}
		}
	}
	return "not set"
}
