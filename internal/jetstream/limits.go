package jetstream

import (
	"math"
	"path"
	"strconv"

	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// The server's storage limits, max_memory_store and max_file_store
// (nats-server's, jetstream.go checkBytesLimits and limitsExceeded in
// v2.15.2; NoStorage is nats-server's explicit 0, a limit of zero bytes):
//
//   - a stream create or update reserves its max_bytes (1 byte when
//     unlimited) against the limit of its storage type; beyond the limit it
//     is refused with 10028 (memory) or 10047 (file);
//   - a publish to a stream whose storage type already uses more than
//     the limit is refused with 10023 insufficient resources.
//
// Usage is the sum of the streams' stored bytes, refreshed by each
// stream's apply goroutine after every batch it applies.
//
// Unset, they are sized from the machine as nats-server v2.15.2 sizes
// them (dynJetStreamConfig, finalizeDynamicMaxStore): memory by the
// caller, from the machine's memory; file here, when
// Config.MaxStoreFromDisk is set: three quarters of the space free on
// the store's file system at the start, plus three quarters of what the
// restored file streams hold (so that the limit does not shrink as the
// streams fill the disk across restarts), or 1 TiB when the free space
// cannot be read. While streams are restored that file limit is not
// enforced, as in nats-server.

// maxStoreFallback is the file limit when the free space cannot be read:
// nats-server v2.15.2 JetStreamMaxStoreDefault (1 TiB).
const maxStoreFallback = 1 << 40

// initLimits sets the limits before the streams are restored: a file
// limit from disk stays unenforced until finishLimits. The account's
// own limits (Config.Limits) hold from the start.
func (js *JetStream) initLimits() {
	js.storage.SetLimit(stream.MemoryStorage, js.cfg.MaxMemory)
	if !js.cfg.MaxStoreFromDisk {
		js.storage.SetLimit(stream.FileStorage, js.cfg.MaxStore)
	}
	js.setAccountStorage(js.acctLimits())
}

// setAccountStorage makes the account's storage limits those of l (none
// when l is nil).
func (js *JetStream) setAccountStorage(l *AccountLimits) {
	mem, store := int64(-1), int64(-1)
	if l != nil {
		mem, store = l.MaxMemory, l.MaxStore
	}
	js.storage.SetAccountLimit(stream.MemoryStorage, mem)
	js.storage.SetAccountLimit(stream.FileStorage, store)
}

// acctLimits returns the account's limits in force, nil for none
// (Config.Limits, or SetLimits'). The value is not to be modified.
func (js *JetStream) acctLimits() *AccountLimits { return js.lim.Load() }

// SetLimits replaces the account's limits (nil: none), as a
// configuration reload changes an account's jetstream block and
// nats-server v2.15.2 applies it (jetstream.go UpdateJetStreamLimits):
// later requests meet them (stream and consumer counts, max_bytes
// reservations and required, per-stream maximums, 10002 on publishes
// over max_memory or max_store); streams and consumers beyond the new
// limits stay. In a cluster each server applies its own configuration's,
// as nats-server does.
func (js *JetStream) SetLimits(l *AccountLimits) {
	var cp *AccountLimits
	if l != nil {
		c := *l
		cp = &c
	}
	js.mu.Lock()
	js.lim.Store(cp)
	js.setAccountStorage(cp)
	js.mu.Unlock()
}

// finishLimits sizes the file limit from disk once the streams are
// restored: free (freeForStore, read before restoring) plus three
// quarters of what they hold.
func (js *JetStream) finishLimits(free int64) {
	if !js.cfg.MaxStoreFromDisk {
		return
	}
	limit := free
	if restored := js.storage.Used(stream.FileStorage); restored > 0 {
		limit = addSaturate(limit, restored/4*3)
	}
	js.storage.SetLimit(stream.FileStorage, max(limit, 1)) // 0 would mean unlimited
}

// regrowFileLimit raises a file limit sized from the disk
// (finishLimits) when the disk has more room now than at the start: a
// server started on a full disk would otherwise refuse every file
// publish (10023) until a restart, after the space was freed. It never
// lowers the limit: nats-server v2.15.2 sizes it once, at the start, and
// a limit that shrank under running streams would refuse what the start
// allowed. It rises only by an eighth or more at once: the free space
// of a busy disk moves all the time, and a limit (and a log line) that
// followed every small change would make /varz max_storage flicker, where
// nats-server's stays fixed. The healer calls it every healEvery.
func (js *JetStream) regrowFileLimit() {
	if !js.cfg.MaxStoreFromDisk {
		return
	}
	limit := addSaturate(js.freeForStore(), js.storage.Used(stream.FileStorage)/4*3)
	if cur, limited := js.storage.Limit(stream.FileStorage); limited && limit >= addSaturate(cur, max(cur/8, 1)) {
		js.storage.SetLimit(stream.FileStorage, limit)
		js.cfg.Infof("jetstream: the store's disk has more room than at the start: file storage limit raised to %s bytes", strconv.FormatInt(limit, 10))
	}
}

// freeForStore returns three quarters of the space free on the store's
// file system (nats-server v2.15.2 diskAvailable), or maxStoreFallback
// when it cannot be read.
func (js *JetStream) freeForStore() int64 {
	sp, ok := js.cfg.FS.(vfs.Space)
	if !ok {
		return maxStoreFallback
	}
	free, _, err := sp.Space(path.Join(js.cfg.StoreDir, "jetstream"))
	if err != nil {
		return maxStoreFallback
	}
	return int64(min(free/4*3, math.MaxInt64))
}

// addSaturate returns a+b for non-negative a and b, or math.MaxInt64 when
// that overflows.
func addSaturate(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// StorageLimits returns the server's storage limits in bytes, memory and
// file, as they are enforced now: -1 for unlimited, 0 for none
// (NoStorage). The server logs them at start, as nats-server v2.15.2
// logs "Max Memory" and "Max Storage".
func (js *JetStream) StorageLimits() (memory, file int64) {
	show := func(st stream.StorageType) int64 {
		if limit, limited := js.storageLimit(st); limited {
			return limit
		}
		return -1
	}
	return show(stream.MemoryStorage), show(stream.FileStorage)
}

// storageLimit returns the limit in bytes for storage type st and
// whether there is one (NoStorage is a limit of 0 bytes).
func (js *JetStream) storageLimit(st stream.StorageType) (int64, bool) {
	return js.storage.Limit(st)
}

// checkReservationLocked checks cfg's max_bytes against the account's
// limit of its storage type, counting this account's other streams'
// reservations, then against the server's, counting every account's
// (nats-server v2.15.2 checkBytesLimits). The caller holds js.mu.
func (js *JetStream) checkReservationLocked(cfg *stream.Config) *jserr.Error {
	var mine int64 // this account's reservations but cfg's stream's
	for name, r := range js.streams {
		if name == cfg.Name {
			continue
		}
		if oc := r.Config(); oc.Storage == cfg.Storage && oc.MaxBytes > 0 {
			mine += oc.MaxBytes
		}
	}
	add := max(cfg.MaxBytes, 1)
	over := func(limit, reserved int64) bool { return reserved > limit || add > limit-reserved }
	exceeded := false
	if l := js.acctLimits(); l != nil {
		acct := l.MaxStore
		if cfg.Storage == stream.MemoryStorage {
			acct = l.MaxMemory
		}
		exceeded = acct >= 0 && over(acct, mine)
	}
	if limit, limited := js.storageLimit(cfg.Storage); limited && !exceeded {
		others := js.storage.Server().Reserved(cfg.Storage) - js.reserved[cfg.Storage]
		exceeded = over(limit, others+mine)
	}
	if !exceeded {
		return nil
	}
	if cfg.Storage == stream.MemoryStorage {
		return jserr.New(jserr.MemoryResourcesExceeded)
	}
	return jserr.New(jserr.StorageResourcesExceeded)
}

// updateReservationsLocked recounts this account's reservations (the
// max_bytes of its streams) into the server's shared total
// (streamrun.Usage). It runs whenever the stream table or a stream's
// config changes. The caller holds js.mu.
func (js *JetStream) updateReservationsLocked() {
	var now [2]int64
	for _, r := range js.streams {
		if c := r.Config(); c.MaxBytes > 0 {
			now[c.Storage] += c.MaxBytes
		}
	}
	srv := js.storage.Server()
	for st := range now {
		srv.AddReserved(stream.StorageType(st), now[st]-js.reserved[st])
		js.reserved[st] = now[st]
	}
}

// Usage is the server's JetStream storage accounting, shared by the
// engines of all its accounts (Config.Usage): bytes stored, the limits
// (max_memory_store, max_file_store) and the bytes reserved (max_bytes),
// by storage type (streamrun.Usage). Make one with NewUsage.
type Usage = streamrun.Usage

// NewUsage returns an empty Usage.
func NewUsage() *Usage { return streamrun.NewUsage() }

// AssignedStream is what CheckClusteredLimits counts of a stream the
// meta group assigns to the account: its name, storage, max_bytes and
// num_replicas.
type AssignedStream struct {
	Name     string
	Storage  stream.StorageType
	MaxBytes int64
	Replicas int
}

// CheckClusteredLimits applies the account's limits to stream cfg, new
// or scaled up, against every stream the meta group assigns to the
// account (assigned; cfg's own is not counted), as nats-server
// v2.15.2's meta leader does before it proposes the assignment
// (jetstream_cluster.go jsClusteredStreamLimitsCheck, checkLimits,
// checkBytesLimits): max_bytes required (10113) and the per-stream
// maximum (10122) as on one server; max_streams counted over the
// cluster (10027); a config's max_consumers above the account's
// (10026); then the stream's reservation, max_bytes times its replicas
// (1 byte when it has none), against the account's max_memory (10028)
// or max_storage (10047) less the others' reservations of the same
// storage (each max_bytes times its replicas). On one server the count
// and the reservations are the server's own (checkAccountLimitsLocked,
// checkReservationLocked); in a cluster each server holds only its
// replicas, so those checks alone let an account's streams past its
// limits (a trial: 5 streams of an account of 3, and streams left
// assigned that no server could start).
func (js *JetStream) CheckClusteredLimits(cfg *stream.Config, assigned []AssignedStream) *jserr.Error {
	l := js.acctLimits()
	if l == nil {
		return nil
	}
	if err := js.checkPerStreamLimits(l, cfg); err != nil {
		return err
	}
	n := 0
	var reserved int64
	for _, a := range assigned {
		if a.Name == cfg.Name {
			continue
		}
		n++
		if a.Storage == cfg.Storage {
			reserved = addSaturate(reserved, replicatedBytes(a.Replicas, a.MaxBytes))
		}
	}
	if l.MaxStreams > 0 && n >= l.MaxStreams {
		return jserr.New(jserr.MaximumStreamsLimit)
	}
	if cfg.MaxConsumers > 0 && l.MaxConsumers > 0 && cfg.MaxConsumers > l.MaxConsumers {
		return jserr.New(jserr.MaximumConsumersLimit)
	}
	add := cfg.MaxBytes
	if add < 0 {
		add = 1
	}
	add = replicatedBytes(cfg.Replicas, add)
	limit, code := l.MaxStore, jserr.StorageResourcesExceeded
	if cfg.Storage == stream.MemoryStorage {
		limit, code = l.MaxMemory, jserr.MemoryResourcesExceeded
	}
	if limit >= 0 && (reserved > limit || add > limit-reserved) {
		return jserr.New(code)
	}
	return nil
}

// replicatedBytes is what a stream of replicas replicas reserving bytes
// (max_bytes; none when 0 or less) counts against its account's limit
// (nats-server v2.15.2 accountReservation, un-tiered: every replica).
func replicatedBytes(replicas int, bytes int64) int64 {
	if bytes <= 0 {
		return 0
	}
	if replicas > 1 && bytes > math.MaxInt64/int64(replicas) {
		return math.MaxInt64
	}
	return bytes * int64(max(replicas, 1))
}

// StoredBytes returns the bytes this account's streams hold on this
// server, memory and file (as the stores count them, refreshed after
// every batch a stream applies): what this server reports of the
// account to the cluster's others (internal/cluster/usage).
func (js *JetStream) StoredBytes() (memory, store int64) {
	return js.storage.AccountUsed(stream.MemoryStorage), js.storage.AccountUsed(stream.FileStorage)
}

// SetOthersUsage sets what this account's streams hold on the cluster's
// other servers, memory and file, by their last reports: a publish is
// refused with 10002 once this server's bytes and theirs (or, when
// larger, what this server's replicas imply the other replicas hold)
// are over the account's max_memory or max_file
// (streamrun.Storage.AccountClusterUsed), as nats-server v2.15.2 counts
// every server's usage of the account.
func (js *JetStream) SetOthersUsage(memory, store int64) {
	js.storage.SetOthers(stream.MemoryStorage, memory)
	js.storage.SetOthers(stream.FileStorage, store)
}
