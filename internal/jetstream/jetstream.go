package jetstream

import (
	"errors"
	"fmt"
	"github.com/cairnmq/cairn/internal/jetstream/consumerrun"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/jetstream/sourcing"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"path"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/filestore"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/subject"
	"github.com/cairnmq/cairn/internal/vfs"
)

// Config configures JetStream. Zero values mean the default next to each
// field.
type Config struct {
	StoreDir   string                           // root of the store directory (-sd); required
	FS         vfs.FS                           // nil = the real file system
	MaxMemory  int64                            // bytes of memory storage for the streams; 0 = unlimited; NoStorage = none (limits.go)
	MaxStore   int64                            // bytes of file storage for the streams; 0 = unlimited; NoStorage = none; ignored with MaxStoreFromDisk
	ServerName string                           // reported as the stream leader in StreamInfo.cluster
	Domain     string                           // the JetStream domain (jetstream { domain }), reported in PubAcks, stream infos, account info and advisories; "" for none
	Version    string                           // the nats-server version advertised (metadata _nats.ver)
	APILevel   int                              // the JetStream API level advertised (metadata _nats.level)
	Now        func() time.Time                 // the clock for message timestamps and expiry; nil = time.Now
	Logf       func(format string, args ...any) // problems (the server logs them as warnings)
	Infof      func(format string, args ...any) // information, e.g. a healthy store's recovery summary; nil = Logf
	// Batch holds the limits of batch publishing; zero fields take
	// nats-server's defaults (stream.BatchLimits), its APILevel is set
	// from APILevel.
	Batch stream.BatchLimits
	// AckBeforeSyncInterval chooses the file store's sync policy: 0 is
	// filestore.SyncAlways (a PubAck after the fsync); a positive interval
	// is filestore.SyncEveryInterval with that interval (a PubAck before
	// the fsync: the opt-in ack_before_sync_interval of docs/engine.md,
	// "Durability").
	AckBeforeSyncInterval time.Duration
	// DefaultMaxConsumers caps the consumers of a stream when neither
	// the stream's max_consumers nor the account's sets a cap (nats-server
	// v2.15.2 jetstream { limits { default_max_consumers } }, reported in
	// /varz and /jsz limits; docs/configuration.md): 0 is
	// DefaultMaxConsumersPerStream, negative is no cap. A create beyond
	// it gets 10026.
	DefaultMaxConsumers int
	// MaxBufferedMsgs and MaxBufferedBytes bound every stream's ingest
	// queue (streamrun.Env.MaxBufferedMsgs; jetstream max_buffered_msgs
	// and max_buffered_size): past either a publish is answered 429 /
	// 10167. 0 is nats-server v2.15.2's default, 100,000 and 128 MiB;
	// negative no bound.
	MaxBufferedMsgs  int
	MaxBufferedBytes int64
	// MaxPayload is the server's max_payload: a restored snapshot holding
	// a larger message is refused, as nats-server refuses it, and a
	// counter stream's new value must fit (ADR-49). 0 = no such check.
	MaxPayload int64
	// MaxPending is the server's max_pending: a batched direct get
	// without max_bytes sends at most this much (ADR-31). 0 = 64 MiB,
	// nats-server's default.
	MaxPending int64
	// SyncStats, when not nil, records every file stream's group commits
	// (fsync latency, messages and bytes per fsync); New makes one when
	// nil, returned by JetStream.SyncStats.
	SyncStats *store.SyncStats
	// MaxStoreFromDisk sizes the file storage limit from the store's file
	// system, as nats-server v2.15.2 sizes an unset max_file_store
	// (limits.go).
	MaxStoreFromDisk bool
	// Account is the name of the account whose streams this engine
	// keeps: they live in <StoreDir>/jetstream/<Account>/streams. "" is
	// the global account, $G.
	Account string
	// Limits are the account's limits (nats-server's account jetstream
	// block); nil is no limit but the server's.
	Limits *AccountLimits
	// Usage is the server's storage accounting, shared by the engines of
	// every account so that MaxMemory and MaxStore bound them together;
	// nil gives the engine its own.
	Usage *Usage
	// NewLog makes each stream's operation log (log.go, docs/engine.md);
	// nil is NewLocalLog, the log of a stream on one server. A test's
	// recording log goes here.
	NewLog NewLogFunc
	// NewReplicatedLog, when set, is asked first for each stream's log:
	// the log of a replicated stream (internal/cluster/streamlog), which
	// commits later, or nil for a stream with one replica
	// (streamrun.Env.NewReplicatedLog). A replicated stream subscribes to
	// its subjects only while SetStreamLeader says it leads.
	NewReplicatedLog NewLogFunc
	// ClusterInfo, when set (a clustered JetStream), gives the cluster
	// part of a stream's info; nil reports this server as the leader.
	ClusterInfo func(stream string) *ClusterInfo
	// ConsumerClusterInfo, when set, gives the cluster part of a
	// consumer's info (nil: none, as for a consumer the meta group does
	// not hold).
	ConsumerClusterInfo func(stream, consumer string) *ClusterInfo
	// DeferRestore leaves the streams found in the store directory alone
	// at New: a clustered JetStream starts the streams its meta group
	// assigns to the server (internal/cluster/jscluster), and a create
	// finds a directory it did not restore and sets it aside.
	DeferRestore bool
	// NewConsumerLog makes each consumer's operation log; nil is
	// NewLocalConsumerLog.
	NewConsumerLog NewConsumerLogFunc
	// ConsumerCount, when set (a clustered JetStream), gives the number
	// of a stream's consumers a stream info reports: the cluster's (its
	// meta group's), where this server runs only some of them, as
	// nats-server v2.15.2 reports its cluster-wide count; false leaves
	// the count of those running here.
	ConsumerCount func(stream string) (int, bool)
	// ClusterAdvises: the consumer created and deleted advisories of the
	// consumers this engine creates (CreateConsumer, CreateConsumerAt)
	// and deletes (DeleteConsumer) are the cluster layer's to send, once
	// per consumer (AdviseConsumer), not each replica's.
	ClusterAdvises bool
	// RestoreConsumer, when set (a clustered JetStream), says which of a
	// file stream's persisted consumers (each named with the created time
	// its files record) its start restores: those the meta group assigns
	// to this server, created then. The others are left on disk, not
	// started and not held (nil restores every one).
	RestoreConsumer func(stream, consumer string, created time.Time) bool
	// RemoveInactive, when set (a clustered JetStream), is told when a
	// consumer this server delivers for (a consumer with one replica, or
	// the leader of a replicated one) passed its inactive_threshold, and
	// asks its meta group to remove it, as nats-server v2.15.2's leader
	// does (consumer.go deleteNotActive); the consumer runs on until the
	// removal applies, and is reported again after
	// consumerrun.InactiveRetry (doubling up to InactiveRetryMax) while
	// it stays inactive. created identifies the consumer (a consumer
	// created again under the same name is another one). It must not
	// block. nil deletes an inactive consumer here at once, as one
	// server does.
	RemoveInactive func(stream, consumer string, created time.Time)
}

// NoStorage as Config.MaxMemory or MaxStore allows no stream of that
// storage type, as nats-server's explicit max_memory_store: 0 (or
// max_file_store: 0) does: every create is refused with 10028 (10047).
const NoStorage int64 = -1

// JetStream is the JetStream engine of one account of a server (one
// engine per account with JetStream; they share the server's Usage).
type JetStream struct {
	cfg Config
	tr  Transport
	// lim holds the account's limits in force (nil: none): cfg.Limits at
	// start, replaced by SetLimits; read by any goroutine.
	lim atomic.Pointer[AccountLimits]

	mu      sync.Mutex
	streams map[string]*streamEntry // guarded by mu
	closed  bool                    // guarded by mu
	// deleting holds the names of streams being deleted, each with a
	// channel closed once its files are gone: a create of the name waits
	// for it (guarded by mu).
	deleting map[string]chan struct{}
	// restoring holds the names of streams being restored (restore.go):
	// a second restore of the name is refused (guarded by mu).
	restoring map[string]bool
	// unrestored holds the streams found at start that could not be
	// restored, with the reason (guarded by mu; health.go).
	unrestored map[string]string

	// storage is the account's view of the server's storage limits and
	// usage (shared by the accounts' engines) and the disk guard, shared
	// by every stream's runtime (limits.go). reserved is this account's
	// part of the server's reservations (guarded by mu).
	storage  *streamrun.Storage
	reserved [2]int64

	// batches counts the open batches and staged bytes of every stream
	// against the server-wide limits (batch.go).
	batches stream.BatchInflight

	// captures is the subjects of every stream, rebuilt under mu
	// whenever they change and read without a lock (captureOf).
	captures atomic.Pointer[[]capture]
	// ready is set once New has restored every stream: until then a
	// dead-letter move cannot tell whether a stream captures its subject.
	ready   atomic.Bool
	dlqAcks *consumerrun.DeadLetterAcks // routes the PubAcks of dead-letter copies (consumerrun)

	// quit is closed by Shutdown; bg counts the goroutines of snapshots
	// and restores (background), which end on it, and bgClosed (under
	// bgMu) refuses new ones once Shutdown began.
	quit     chan struct{}
	bg       sync.WaitGroup
	bgMu     sync.Mutex
	bgClosed bool

	// retired holds the consumers retired for a successor on this
	// server, by stream and name (retired.go; guarded by retiredMu).
	retiredMu sync.Mutex
	retired   map[retiredKey]*consumerrun.Consumer
}

// background runs f on a goroutine that Shutdown waits for, and reports
// false (without running f) once Shutdown has begun.
func (js *JetStream) background(f func()) bool {
	js.bgMu.Lock()
	defer js.bgMu.Unlock()
	if js.bgClosed {
		return false
	}
	js.bg.Add(1)
	go func() {
		defer js.bg.Done()
		f()
	}()
	return true
}

// GlobalAccount is the account of an engine whose Config.Account is "",
// as nats-server names its default account.
const GlobalAccount = "$G"

// New starts JetStream: it creates the store directory if needed and
// restores every stream found there. A stream whose metadata or store
// cannot be opened is logged and left on disk untouched.
func New(cfg Config, tr Transport) (*JetStream, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("jetstream: Config.StoreDir is empty")
	}
	if cfg.FS == nil {
		cfg.FS = vfs.OS()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Infof == nil {
		cfg.Infof = cfg.Logf
	}
	if cfg.SyncStats == nil {
		cfg.SyncStats = store.NewSyncStats()
	}
	if cfg.Account == "" {
		cfg.Account = GlobalAccount
	}
	if !validAccountDir(cfg.Account) {
		return nil, fmt.Errorf("jetstream: account name %q cannot name a directory", cfg.Account)
	}
	if cfg.Usage == nil {
		cfg.Usage = NewUsage()
	}
	js := &JetStream{cfg: cfg, tr: tr, streams: map[string]*streamEntry{}, quit: make(chan struct{}), unrestored: map[string]string{}}
	js.storage = streamrun.NewStorage(cfg.FS, cfg.StoreDir, cfg.Usage, cfg.Now, cfg.Logf, cfg.Infof)
	if cfg.Limits != nil {
		l := *cfg.Limits
		js.lim.Store(&l)
	}
	if err := cfg.FS.MkdirAll(js.streamsDir()); err != nil {
		return nil, fmt.Errorf("jetstream: create %s: %w", js.streamsDir(), err)
	}
	if err := syncChain(cfg.FS, js.streamsDir()); err != nil {
		return nil, fmt.Errorf("jetstream: sync %s: %w", js.streamsDir(), err)
	}
	if err := checkWritable(cfg.FS, path.Join(cfg.StoreDir, "jetstream")); err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	js.initLimits()
	var free int64
	if cfg.MaxStoreFromDisk {
		free = js.freeForStore()
	}
	js.dlqAcks = consumerrun.NewDeadLetterAcks(tr, cfg.Logf)
	var err error
	if !cfg.DeferRestore {
		err = js.restore()
	}
	js.finishLimits(free)
	js.ready.Store(true)
	js.background(js.healLoop)
	return js, err
}

func (js *JetStream) now() time.Time { return js.cfg.Now() }

// clustered reports whether the engine is a clustered JetStream's, whose
// streams may have replicas (Config.NewReplicatedLog).
func (js *JetStream) clustered() bool { return js.cfg.NewReplicatedLog != nil }

// batchLimits returns the batch limits with the server's API level.
func (js *JetStream) batchLimits() stream.BatchLimits {
	l := js.cfg.Batch
	l.APILevel = js.cfg.APILevel
	return l
}
func (js *JetStream) logf(format string, args ...any) { js.cfg.Logf(format, args...) }
func (js *JetStream) streamsDir() string {
	return path.Join(js.cfg.StoreDir, "jetstream", js.cfg.Account, "streams")
}

// validAccountDir reports whether an account name is safe as a directory
// name: not empty, ".", "..", and without a path separator or a control
// character (an account name must never lead a write outside the store
// directory: nats-server's CVE-2022-28357 built file names from input).
func validAccountDir(name string) bool {
	if name == "" || name == "." || name == ".." {
		return false
	}
	for _, r := range name {
		if r == '/' || r == '\\' || r < ' ' || r == 0x7f {
			return false
		}
	}
	return true
}
func (js *JetStream) streamDir(name string) string { return path.Join(js.streamsDir(), name) }

// restore opens every stream directory under the store directory, then
// starts the restored streams' sourcers.
func (js *JetStream) restore() error {
	names, err := js.cfg.FS.ReadDir(js.streamsDir())
	if err != nil {
		return err
	}
	var restored []*streamEntry
	for _, name := range names {
		if !js.restorable(name) {
			continue
		}
		r, err := js.restoreOne(name)
		if err != nil {
			js.logf("jetstream: stream %q not restored (left on disk): %v", name, err)
			if !errors.Is(err, errMemoryStreamMeta) {
				js.mu.Lock()
				js.unrestored[name] = err.Error()
				js.mu.Unlock()
			}
			continue
		}
		restored = append(restored, r)
	}
	sets := make([]*sourcing.Set, len(restored))
	for i, r := range restored {
		sets[i] = r.srcs
	}
	sourcing.StartRestored(sets)
	return nil
}

// errMemoryStreamMeta is the metadata of a memory stream written by an
// earlier build: memory streams end with the process, so it is not an
// unrestored stream.
var errMemoryStreamMeta = errors.New("a memory stream does not outlive its server")

func (js *JetStream) restoreOne(name string) (*streamEntry, error) {
	dir := js.streamDir(name)
	var m metaFile
	if err := metafile.Read(js.cfg.FS, dir, &m); err != nil {
		return nil, err
	}
	if m.Config.Name != name {
		return nil, fmt.Errorf("its metadata names the stream %q", m.Config.Name)
	}
	if m.Config.Storage == stream.MemoryStorage {
		// Memory streams end with the process, as in nats-server; an
		// earlier build wrote their metadata.
		return nil, errMemoryStreamMeta
	}
	r, err := js.openRunner(m.Config, m.Created, dir)
	if err != nil {
		return nil, err
	}
	js.mu.Lock() // held for every write of the table
	js.streams[m.Config.Name] = r
	js.refreshCapturesLocked()
	js.mu.Unlock()
	return r, nil
}

// openRunner opens the stream's store and starts its runtime
// (startEntry).
func (js *JetStream) openRunner(cfg stream.Config, created time.Time, dir string) (*streamEntry, error) {
	st, err := js.openStore(cfg, dir)
	if err != nil {
		return nil, err
	}
	return js.startEntry(cfg, created, dir, st)
}

// startEntry starts the runtime of a stream over its opened store st:
// Open, the consumers restored from dir, then Serve. On an error st is
// closed.
func (js *JetStream) startEntry(cfg stream.Config, created time.Time, dir string, st store.Store) (*streamEntry, error) {
	r := js.newEntry(cfg, created, dir, st)
	if err := r.Open(); err != nil {
		_ = st.Close()
		return nil, err
	}
	r.restoreConsumers()
	if err := r.Serve(); err != nil {
		_ = st.Close()
		return nil, err
	}
	return r, nil
}

// accountName is the name of the engine's account, "$G" for the global
// one.
func (js *JetStream) accountName() string {
	if js.cfg.Account == "" {
		return "$G"
	}
	return js.cfg.Account
}

// consumerEnv is what every consumer's runtime takes from the engine.
func (js *JetStream) consumerEnv() consumerrun.Env {
	newLog := js.cfg.NewConsumerLog
	if newLog == nil {
		newLog = defaultNewConsumerLog
	}
	return consumerrun.Env{
		Transport: js.tr, Now: js.cfg.Now, Logf: js.cfg.Logf, FS: js.cfg.FS,
		APILevel: js.cfg.APILevel, Version: js.cfg.Version, Domain: js.cfg.Domain, Account: js.accountName(),
		MaxPayload: js.cfg.MaxPayload, NewLog: newLog,
		DeadLetterAcks: js.dlqAcks, CaptureOf: js.captureStream, Ready: js.ready.Load,
		Expire: js.expireConsumer, RemoveInactive: js.cfg.RemoveInactive,
	}
}

// newEntry makes the table entry of a stream: its runtime over store st,
// its consumer table and its sourcers, wired together (not started).
func (js *JetStream) newEntry(cfg stream.Config, created time.Time, dir string, st store.Store) *streamEntry {
	return js.newEntryEnv(js.streamEnv(), cfg, created, dir, st)
}

// newEntryEnv is newEntry with the runtime's environment env.
func (js *JetStream) newEntryEnv(env streamrun.Env, cfg stream.Config, created time.Time, dir string, st store.Store) *streamEntry {
	r := &streamEntry{js: js, Stream: streamrun.New(env, cfg, created, dir, st)}
	r.cons.byName, r.cons.deleting, r.cons.unrestored = map[string]*consumerrun.Consumer{}, map[string]bool{}, map[string]bool{}
	r.SetConsumers(&r.cons)
	r.srcs = sourcing.NewSet(js.sourcingEnv(), r.Stream)
	r.SetSources(r.srcs)
	return r
}

// streamEnv is what every stream's runtime takes from the engine.
func (js *JetStream) streamEnv() streamrun.Env {
	newLog := js.cfg.NewLog
	if newLog == nil {
		newLog = defaultNewLog
	}
	return streamrun.Env{
		Transport: js.tr, Now: js.cfg.Now, Logf: js.cfg.Logf, APILevel: js.cfg.APILevel,
		Domain: js.cfg.Domain, Account: js.accountName(), MaxPending: js.cfg.MaxPending,
		MaxBufferedMsgs: js.cfg.MaxBufferedMsgs, MaxBufferedBytes: js.cfg.MaxBufferedBytes, MaxPayload: js.cfg.MaxPayload, Storage: js.storage, BatchLimits: js.batchLimits(), Batches: &js.batches, NewLog: newLog,
		NewReplicatedLog: js.cfg.NewReplicatedLog,
	}
}

func (js *JetStream) openStore(cfg stream.Config, dir string) (store.Store, error) {
	limits := cfg.StoreConfig()
	if cfg.Storage == stream.MemoryStorage {
		return memstore.New(limits), nil
	}
	return filestore.Open(js.FileStoreConfig(dir), limits)
}

// lookup returns the table entry of a stream or 10059 stream not found.
func (js *JetStream) lookup(name string) (*streamEntry, *jserr.Error) {
	js.mu.Lock()
	defer js.mu.Unlock()
	if r := js.streams[name]; r != nil {
		return r, nil
	}
	return nil, jserr.New(jserr.StreamNotFound)
}

// overlaps reports whether subjects overlap another stream's (10065).
// The caller holds mu.
func (js *JetStream) overlapsLocked(name string, subjects []string) bool {
	var x subject.OverlapIndex // one query per subject, not one per pair
	for _, s := range subjects {
		x.Add(s)
	}
	for other, r := range js.streams {
		if other == name {
			continue
		}
		for _, a := range r.Config().Subjects {
			if x.Overlaps(a) {
				return true
			}
		}
	}
	return false
}

// Names returns the sorted names of the streams, only those with a
// subject overlapping filter when filter is not empty.
func (js *JetStream) Names(filter string) []string {
	js.mu.Lock()
	defer js.mu.Unlock()
	names := make([]string, 0, len(js.streams))
	for name, r := range js.streams {
		if filter == "" || anyOverlap(r.Config().Subjects, filter) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func anyOverlap(subjects []string, filter string) bool {
	for _, s := range subjects {
		if subject.Overlap(s, filter) {
			return true
		}
	}
	return false
}

// Shutdown stops every stream: queued publishes are applied and
// acknowledged, stores are closed.
func (js *JetStream) Shutdown() {
	js.bgMu.Lock()
	if !js.bgClosed {
		js.bgClosed = true
		close(js.quit)
	}
	js.bgMu.Unlock()
	js.bg.Wait() // snapshots and restores end on quit
	js.mu.Lock()
	js.closed = true
	runners := make([]*streamEntry, 0, len(js.streams))
	for _, r := range js.streams {
		runners = append(runners, r)
	}
	js.mu.Unlock()
	// Sourcers stop first and stay registered, so that no origin drops
	// what they have yet to copy while the streams stop.
	for _, r := range runners {
		r.srcs.Close(false)
	}
	js.mu.Lock()
	js.streams = map[string]*streamEntry{}
	js.refreshCapturesLocked()
	js.mu.Unlock()
	for _, r := range runners {
		if err := r.Stop(nil); err != nil {
			js.logf("jetstream: stream %s: close: %v", r.Name(), err)
		}
	}
	js.endAllRetired()
	js.dlqAcks.Close()
}
