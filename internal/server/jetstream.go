package server

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/jscluster"
	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jsapi"
)

// jsTransport lets an account's JetStream subscribe and publish inside
// this server, in that account. With shared set (JetStream clustered),
// its subscriptions are the cluster's: announced to the peers and
// delivered what they route, so that the API, a stream's leader and a
// consumer are reached from every server (docs/cluster.md decision
// 14); without, they stay local to this server.
type jsTransport struct {
	s      *Server
	acc    *account
	shared bool
}

func (t jsTransport) Subscribe(subj, queue string, h jetstream.MsgHandler) (jetstream.Subscription, error) {
	if t.shared {
		return t.subscribe(&subscription{acc: t.acc, subject: subj, queue: queue, handler: MsgHandler(h)})
	}
	return t.s.subscribeIn(t.acc, subj, queue, MsgHandler(h), subKindInternal)
}

// subscribe inserts sub, marked shared with the cluster when t is.
func (t jsTransport) subscribe(sub *subscription) (jetstream.Subscription, error) {
	sub.cluster = t.shared
	if err := t.acc.sl.Insert(sub.subject, sub.queue, sub); err != nil {
		return nil, err
	}
	if sub.cluster {
		t.s.interestAdded(sub)
	}
	return &InternalSub{srv: t.s, sub: sub}, nil
}

// SubscribeTraced is Subscribe for a stream's subjects: a traced
// publish reaches h with its trace (msgtrace.go, jetstream.TracedSubscriber).
func (t jsTransport) SubscribeTraced(subj, queue string, h jetstream.TracedHandler) (jetstream.Subscription, error) {
	return t.subscribe(&subscription{acc: t.acc, subject: subj, queue: queue, traced: h,
		handler: func(subj, reply string, hdr, data []byte) { h(subj, reply, hdr, data, nil) }})
}

func (t jsTransport) Publish(subj, reply string, hdr, data []byte) bool {
	return t.s.publishIn(t.acc, subj, subj, reply, hdr, data, pubNormal)
}

func (t jsTransport) PublishAs(match, subj, reply string, hdr, data []byte) bool {
	return t.s.publishIn(t.acc, match, subj, reply, hdr, data, pubNormal)
}

func (t jsTransport) HasInterest(subj string) bool { return t.s.hasInterestIn(t.acc, subj) }

func (t jsTransport) HasExactInterest(subj string) bool { return t.s.hasExactInterestIn(t.acc, subj) }

// defaultStoreDir is where JetStream keeps its data without -sd, as
// nats-server v2.15.2 does (the system temporary directory).
func defaultStoreDir() string { return filepath.Join(os.TempDir(), "nats") }

// startJetStream starts JetStream for every account that has it
// (accounts.go jetStreamFor): it restores the account's streams under
// <store_dir>/jetstream/<account>/streams and serves its $JS.API. An
// account without it gets the API's 10039 answers. The engines share the
// server's storage limits (jetstream.Usage).
func (s *Server) startJetStream() error {
	started := time.Now()
	dir := s.opts.StoreDir
	if dir == "" {
		dir = defaultStoreDir()
		s.log.Warnf("JetStream store directory not set (-sd); using %s", dir)
	}
	usage := jetstream.NewUsage()
	if err := s.startJetStreamCluster(dir); err != nil {
		return err
	}
	var first *jetstream.JetStream
	for _, acc := range s.accountsSorted() {
		on, limits := s.jetStreamFor(acc)
		if !on {
			off, err := jsapi.NewDisabled(jsTransport{s: s, acc: acc}, s.opts.ServerName, s.opts.JetStreamDomain)
			if err != nil {
				return fmt.Errorf("server: JetStream API of account %s: %w", acc.name, err)
			}
			acc.jsOff.Store(off)
			continue
		}
		if err := s.startAccountJetStream(acc, dir, limits, usage, first); err != nil {
			return err
		}
		if first == nil {
			first = acc.js.Load()
		}
	}
	if err := s.startJetStreamSystem(); err != nil {
		return err
	}
	s.js.mu.Lock()
	s.js.dir, s.js.usage, s.js.first = dir, usage, first
	s.js.mu.Unlock()
	if first == nil {
		return nil
	}
	mem, file := first.StorageLimits()
	// nats-server v2.15.2's lines (jetstream.go enableJetStream), but its
	// ASCII art and Strict (printed only when true; cairn's is false).
	s.log.Noticef("Starting JetStream")
	s.log.Noticef("---------------- JETSTREAM ----------------")
	s.log.Noticef("  Max Memory:      %s", friendlyBytes(mem))
	s.log.Noticef("  Max Storage:     %s", friendlyBytes(file))
	s.log.Noticef("  Store Directory: %q", filepath.Join(dir, "jetstream"))
	s.log.Noticef("  API Level:       %d", jsapi.APILevel)
	s.log.Noticef("-------------------------------------------")
	s.log.Noticef("Took %s to start JetStream", time.Since(started))
	return nil
}

// startAccountJetStream starts one account's engine and API. The engines
// after the first share its group-commit statistics, which /metrics
// reports for the server.
func (s *Server) startAccountJetStream(acc *account, dir string, limits *config.AccountJetStream, usage *jetstream.Usage, first *jetstream.JetStream) error {
	tr := jsTransport{s: s, acc: acc, shared: s.jsc != nil}
	cfg := jetstream.Config{
		StoreDir:   dir,
		FS:         s.opts.JetStreamFS,
		ServerName: s.opts.ServerName,
		Version:    NATSVersion,
		APILevel:   jsapi.APILevel,
		MaxPayload: int64(s.opts.MaxPayload),
		MaxPending: s.opts.MaxPending,
		Domain:     s.opts.JetStreamDomain,
		Logf:       s.log.Warnf,
		Infof:      s.log.Noticef,
		Account:    acc.name,
		Usage:      usage,
	}
	if first != nil {
		cfg.SyncStats = first.SyncStats()
	}
	cfg.Limits = engineLimits(limits)
	cfg.DefaultMaxConsumers = s.opts.DefaultMaxConsumers
	cfg.MaxBufferedMsgs, cfg.MaxBufferedBytes = s.opts.StreamMaxBufferedMsgs, s.opts.StreamMaxBufferedSize
	if d := s.opts.AckBeforeSyncInterval; d > 0 {
		cfg.AckBeforeSyncInterval = d
		s.log.Warnf("JetStream acknowledges file stream messages before they are synced (ack_before_sync_interval %v): a power loss can lose up to %v of acknowledged messages", d, d)
	}
	s.storageLimits(&cfg)
	if s.jsc != nil {
		s.jsc.EngineConfig(acc.name, &cfg)
	}
	js, err := jetstream.New(cfg, tr)
	if err != nil {
		return fmt.Errorf("server: start JetStream for account %s: %w", acc.name, err)
	}
	apiOpts := jsapi.Options{Logf: s.log.Warnf}
	if s.jsc != nil {
		apiOpts.Cluster = s.jsc.AddAccount(acc.name, js)
	}
	api, err := jsapi.New(js, tr, apiOpts)
	if err != nil {
		js.Shutdown()
		return fmt.Errorf("server: start the JetStream API of account %s: %w", acc.name, err)
	}
	acc.js.Store(js)
	acc.jsAPI.Store(api)
	return nil
}

// storageLimits sets the JetStream storage limits from the options: bytes
// and NoStorage are used as they are, 0 is sized from the machine
// (Options.MaxMemoryStore).
func (s *Server) storageLimits(cfg *jetstream.Config) {
	switch mem := s.opts.MaxMemoryStore; {
	case mem > 0:
		cfg.MaxMemory = mem
	case mem < 0:
		cfg.MaxMemory = jetstream.NoStorage
	default:
		cfg.MaxMemory = defaultMaxMemory()
	}
	switch file := s.opts.MaxFileStore; {
	case file > 0:
		cfg.MaxStore = file
	case file < 0:
		cfg.MaxStore = jetstream.NoStorage
	default:
		cfg.MaxStoreFromDisk = true
	}
}

// maxMemoryFallback is the memory limit when the machine's memory is
// unknown: nats-server v2.15.2 JetStreamMaxMemDefault (256 MiB).
const maxMemoryFallback = 256 << 20

// defaultMaxMemory returns the memory storage limit nats-server v2.15.2
// sets when max_memory_store is unset (dynJetStreamConfig): three
// quarters of the machine's memory, or of GOMEMLIMIT when that is lower;
// 256 MiB when the memory is unknown.
func defaultMaxMemory() int64 {
	mem := systemMemory()
	if mem <= 0 {
		return maxMemoryFallback
	}
	if gml := debug.SetMemoryLimit(-1); gml != math.MaxInt64 && gml < mem {
		mem = gml
	}
	return mem / 4 * 3
}

// friendlyBytes formats a byte count as nats-server v2.15.2 logs its
// JetStream limits (friendlyBytes: powers of 1024, two decimals);
// "unlimited" for -1.
func friendlyBytes(n int64) string {
	if n < 0 {
		return "unlimited"
	}
	f := float64(n)
	if f < 1024 {
		return fmt.Sprintf("%v B", f)
	}
	exp := int(math.Log(f) / math.Log(1024))
	return fmt.Sprintf("%.2f %sB", f/math.Pow(1024, float64(exp)), "KMGTPE"[exp-1:exp])
}

// jsHandOverTimeout bounds how long lame duck mode and Shutdown wait
// for the leadership of this server's Raft groups to move
// (jscluster.Cluster.HandOver; docs/cluster.md, "Lame duck mode and
// shutdown"). A transfer takes a few Raft rounds; one that cannot take
// is abandoned after two election timeouts (2 s with the default tick).
const jsHandOverTimeout = 5 * time.Second

// handOverJetStream hands the leadership of every Raft group this
// server leads (meta group, replicated streams and consumers) to other
// servers and waits until the transfers took or failed, at most
// jsHandOverTimeout, once, before JetStream stops: nats-server v2.15.2
// transfers them in lameDuckMode and Shutdown too (transferRaftLeaders,
// stepdownRaftNodes). A second caller waits for the first.
func (s *Server) handOverJetStream() {
	s.jsHandOver.Do(func() {
		if s.jsc != nil {
			s.jsc.HandOver(jsHandOverTimeout)
		}
	})
}

// stopJetStream stops the APIs, then the streams, of every account:
// publishes already queued are still stored and acknowledged while
// clients are connected.
func (s *Server) stopJetStream() {
	s.jsStop.Do(func() {
		s.js.mu.Lock()
		s.js.stopped = true
		accs := map[*account]bool{}
		for _, acc := range s.js.live {
			accs[acc] = true
		}
		s.js.mu.Unlock()
		for _, acc := range s.accountTable() {
			accs[acc] = true
		}
		for acc := range accs {
			if off := acc.jsOff.Load(); off != nil {
				off.Close()
			}
			if api := acc.jsAPI.Load(); api != nil {
				api.Close()
			}
		}
		if s.jsSys != nil {
			s.jsSys.Close()
		}
		if s.jsc != nil {
			s.jsc.StopCheckpoints()
		}
		for acc := range accs {
			if js := acc.js.Load(); js != nil {
				js.Shutdown()
			}
		}
		if s.jsc != nil {
			s.jsc.Close()
		}
	})
}

// startJetStreamCluster starts the clustered JetStream's cluster layer
// (internal/cluster/jscluster) when the server runs in a cluster: its
// Raft WAL and meta state live under <store_dir>/jetstream/$SYS/_js_, as
// nats-server keeps its meta group there. It must run before the cluster
// listener starts (the Raft transport registers its connections there).
func (s *Server) startJetStreamCluster(dir string) error {
	if s.cl == nil {
		return nil
	}
	if s.opts.ServerName == "" {
		return fmt.Errorf("%w: JetStream in a cluster requires a server name (-n, server_name)", ErrInvalidOptions)
	}
	c, err := jscluster.Start(jscluster.Config{
		FS: s.opts.JetStreamFS, Dir: filepath.Join(dir, "jetstream", "$SYS", "_js_"), Tags: s.opts.Tags, UniqueTag: s.opts.JetStreamUniqueTag,
		Logf: s.log.Warnf, Infof: s.log.Noticef, Debugf: s.log.Debugf, TickInterval: s.opts.RaftTick, Retain: s.opts.RaftRetain,
		Hooks: s.opts.JetStreamClusterHooks, ForceNew: s.opts.ForceNewCluster, SystemAccount: s.SystemAccount(),
		WALSegmentBytes: s.opts.RaftWALSegmentBytes, MaxFrameBytes: s.opts.RaftMaxFrameBytes,
	}, s)
	if err != nil {
		return fmt.Errorf("server: start the JetStream cluster: %w", err)
	}
	s.jsc = c
	return nil
}

// startJetStreamSystem serves, in the system account, the JetStream
// requests only its users may send (jsapi.System: META.LEADER.STEPDOWN
// and SERVER.REMOVE, answered by the meta leader), and the requests the
// cluster's servers send each other (jscluster.Cluster.AttachSystem),
// when JetStream runs in a cluster and there is a system account. The subscriptions are shared
// with the cluster, so a request reaches the meta leader from any server.
func (s *Server) startJetStreamSystem() error {
	if s.jsc == nil || s.sysacc == nil {
		return nil
	}
	if err := s.jsc.AttachSystem(jsTransport{s: s, acc: s.sysacc, shared: true}); err != nil {
		return fmt.Errorf("server: the JetStream cluster's system account subjects: %w", err)
	}
	sys, err := jsapi.NewSystem(s.jsc, jsTransport{s: s, acc: s.sysacc, shared: true}, s.opts.ServerName, s.opts.JetStreamDomain, s.log.Warnf)
	if err != nil {
		return fmt.Errorf("server: JetStream requests of the system account: %w", err)
	}
	s.jsSys = sys
	return nil
}

// JetStreamRecovery returns what this server's start has applied again
// of its Raft log (jscluster.Cluster.Recovery; docs/cluster.md,
// "Restarts"); false without JetStream clustering.
func (s *Server) JetStreamRecovery() (jscluster.Recovery, bool) {
	if s.jsc == nil {
		return jscluster.Recovery{}, false
	}
	return s.jsc.Recovery(), true
}

// JetStreamMeta returns the meta group of a clustered JetStream as this
// server sees it (jscluster.Cluster.MetaInfo), for /jsz's meta_cluster;
// nil without JetStream clustering or before its meta group started.
func (s *Server) JetStreamMeta() *jscluster.MetaInfo {
	if s.jsc == nil {
		return nil
	}
	return s.jsc.MetaInfo()
}

// JSAPIStats returns the counters of the $JS.API of every account: the
// responses sent and the error responses among them (nats-server's
// api.total and api.errors); zeros when JetStream is off.
func (s *Server) JSAPIStats() (total, errors uint64) {
	for _, acc := range s.accountTable() {
		if api := acc.jsAPI.Load(); api != nil {
			t, e := api.Stats()
			total += t
			errors += e
		}
	}
	return total, errors
}

// Options returns the options the server was started with, defaults
// filled in, with the security and cluster settings in force (a reload
// may have changed them: ReloadSecurity, ReloadCluster); the limits a
// reload changed are in Limits.
func (s *Server) Options() Options {
	o := s.opts
	sec := s.security()
	o.Auth, o.Operator, o.TLS = sec.auth, sec.operator, sec.tlsCfg
	if s.cl != nil {
		set := s.clusterSet()
		c := &o.Cluster
		c.Routes, c.Advertise, c.NoAdvertise, c.ConnectRetries = slices.Clone(set.routes), set.advertise, set.noAdvertise, set.connectRetries
		c.Username, c.Password = set.username, set.password
	}
	return o
}

// Limits returns the limits in force.
func (s *Server) Limits() Limits { return Limits(*s.limits()) }

// errJetStreamStopped refuses to start an account's JetStream once the
// server's stopped (or never started).
var errJetStreamStopped = errors.New("server: JetStream is not running")

// startAccountJetStreamLive starts the JetStream of an account while the
// server runs: an account a nats-based resolver's JWT added, or whose new
// JWT enables JetStream (docs/security.md, "The nats-based resolvers"),
// as nats-server enables it at once. The account's 10039 answers stop
// first; on failure they are back. It runs under Server.secMu.
func (s *Server) startAccountJetStreamLive(acc *account, limits *config.AccountJetStream) error {
	s.js.mu.Lock()
	defer s.js.mu.Unlock()
	if s.js.stopped || s.js.usage == nil {
		return errJetStreamStopped
	}
	if off := acc.jsOff.Swap(nil); off != nil {
		off.Close()
	}
	if err := s.startAccountJetStream(acc, s.js.dir, limits, s.js.usage, s.js.first); err != nil {
		if off, oerr := jsapi.NewDisabled(jsTransport{s: s, acc: acc}, s.opts.ServerName, s.opts.JetStreamDomain); oerr == nil {
			acc.jsOff.Store(off)
		}
		return err
	}
	if s.js.first == nil {
		s.js.first = acc.js.Load()
	}
	s.js.live = append(s.js.live, acc)
	s.log.Noticef("Account %s: JetStream enabled by its JWT", acc.name)
	return nil
}

// engineLimits converts an account's JetStream limits to the engine's;
// nil for none.
func engineLimits(limits *config.AccountJetStream) *jetstream.AccountLimits {
	if limits == nil {
		return nil
	}
	return &jetstream.AccountLimits{
		MaxMemory: limits.MaxMemory, MaxStore: limits.MaxStore,
		MaxStreams: limits.MaxStreams, MaxConsumers: limits.MaxConsumers,
		MaxAckPending:        limits.MaxAckPending,
		MemoryMaxStreamBytes: limits.MemoryMaxStreamBytes, StoreMaxStreamBytes: limits.StoreMaxStreamBytes,
		MaxBytesRequired: limits.MaxBytesRequired,
	}
}
