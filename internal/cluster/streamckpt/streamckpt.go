// Package streamckpt checkpoints the replica of a replicated file stream
// and restarts it from its checkpoint (docs/cluster.md,
// "Checkpoints"). A replica applies the entries its raft group commits to
// its file store without waiting for the store's fsync (the raftnode WAL
// holds them); a checkpoint ties the store to a raft index, so that after
// a crash the store is returned to exactly that index and raftnode applies
// the entries after it once more, and only then lets the WAL drop the
// entries up to it.
//
// # Checkpoint file
//
// <Config.Dir>/replica.ckpt, replaced by write-new (replica.ckpt.new),
// fsync, rename, fsync of the directory. Integers are little endian; the
// CRC is CRC-32C (Castagnoli).
//
//	offset size field
//	 0      8   magic "CAIRNRPL"
//	 8      4   version, u32 = 1
//	12      4   N, u32: body length
//	16      N   body:
//	             +0   8  raft group, u64
//	             +8   8  raft replica ID, u64
//	             +16  8  index I, u64: the raft index the state reflects
//	             +24 25  the store's position at I (filestore.AppendPosition)
//	             +49  …  the stream's state at I (stream.AppendCheckpoint,
//	                     with its own version and CRC)
//	16+N    4   CRC-32C of bytes 0 .. 15+N
//
// A file that fails any check, or names another group or replica, fails
// Open with ErrDamaged: the replica is fenced, never started from a guess.
//
// # Taking a checkpoint
//
// Every Config.Every entries applied, every Config.EveryBytes of
// operations applied, every Config.Interval while entries were applied,
// and at Stop (so that a clean restart applies nothing again, and a crash
// applies again at most about that much of the log:
// docs/cluster.md, "Restarts"):
//
//  1. with the stream's apply goroutine held (streamrun.Stream.Held): the
//     applied index I (streamrun.Stream.AppliedIndex; the log's latest
//     entry when only entries the engine never sees followed it:
//     streamlog.Log.Seen), the store's
//     Position P (which fsyncs the store), a copy of the stream's own
//     state (streamrun.Stream.Checkpoint);
//  2. released, the state is encoded (S) and the file {I, P, S} written
//     as above;
//  3. the store is told P is saved (filestore.Store.PositionSaved: the
//     segments emptied before P may go);
//  4. streamlog.Log.Checkpoint(I): the WAL may drop the group's entries
//     up to I, keeping Config.Retain entries for a replica that lags (one
//     further behind is caught up by a snapshot, below).
//
// A crash before step 2 completes leaves the previous file, whose
// position the store can still return to (segments emptied since are
// kept until step 3) and whose entries the WAL still holds (step 4 comes
// later). A crash between 2 and 4 leaves the new file with the WAL not
// yet compacted: the entries after I are applied again, those up to I
// skipped.
//
// # Restart
//
// Open reads the file. Without one the replica is new: a store that
// holds anything is refused (ErrNoCheckpoint: it was written by something
// this replica cannot account for); an empty one gets its first
// checkpoint, {0, its position, the given config's state}, at once, before
// anything is applied. With one: the store is opened rolled back to P
// with the limits of the config in S (stream.CheckpointConfig), the
// runtime is made with that config and Restore(S, I) in place of Open,
// and the log reports I as Applied, so raftnode applies I+1.. exactly
// once. A position that does not match the store fails Open
// (filestore.ErrBadPosition): fenced.
//
// # Memory streams
//
// Memory streams have no checkpoint: their store is gone after a restart,
// so their log reports Applied 0 and must replay the group's whole log;
// they never call Log.Checkpoint, and the WAL keeps every entry of their
// group (raftnode's WALStats names it among the groups that block
// truncation). Open refuses them (ErrMemoryStream); OpenMemory makes
// their replica over an empty memory store, and AdoptMemory over the
// memory store of a stream of one replica scaled up (at index 1, the
// group's base). Such a replica captures and installs snapshots as below,
// but for three things: Message serves only what the store still holds
// (a memory store keeps no record of a removed message: a fetch asks the
// next source, and fails over to a newer capture when none has it), the
// install writes no checkpoint file, and nothing is pinned. A replica
// that installed a snapshot (or adopted a store) cannot rebuild it from
// its log after a restart: raftnode fences it (raftnode.ErrStateLost) and
// the cluster layer has it replaced (docs/cluster.md, "Memory
// streams").
//
// # Snapshots
//
// A replica whose group's WAL no longer holds what it lacks (it was down
// while the others compacted past it, or it is new: a learner replacing
// a wiped one) is sent a snapshot (docs/cluster.md decision 8,
// "Stream snapshots"). Its Raft data is a manifest, the state of the
// stream at a raft index I without its messages; the messages come out
// of band, from a replica that has them, over internal/cluster/catchup.
//
// Manifest (the Raft snapshot's data; integers little endian but where
// said, CRC-32C):
//
//	offset size field
//	 0      8   magic "CAIRNMAN"
//	 8      1   version = 1
//	 9      8   index I, u64
//	17      2   S, u16: length of the source's name
//	19      S   source: the server that captured it (asked first)
//	19+S   32   first, last, msgs, bytes (u64 each): the store's FirstSeq,
//	            LastSeq, message count and bytes at I
//	 ...    …   gaps: n (uvarint), then n x (from - previous end,
//	            to - from) as uvarints, the previous end starting at
//	            first and then each gap's to + 1: the sequences of
//	            first..last the store did not hold at I
//	 ...    4   L, u32, then L bytes: the stream's state at I
//	            (stream.AppendCheckpoint, with its own version and CRC)
//	end-4   4   CRC-32C of every byte before it
//
// msgs plus the gaps' sequences must make last-first+1; a manifest that
// fails any check fences the replica installing it (ErrBadManifest).
//
// Capture. raftnode asks the leader's state machine for a snapshot at or
// above an index (streamlog.Snapshotter.SnapshotAt: the log's compaction
// point, and its last membership change, so the manifest's configuration
// names the replica it goes to). The replica answers with its latest
// capture if it is recent enough, else pokes its goroutine and answers
// raftnode.ErrSnapshotPending (raft asks again at the follower's next
// heartbeat response). The goroutine captures with the stream's apply
// goroutine held: the index the stream's state reflects (the runtime's
// AppliedIndex, or the log's later index when only entries the engine
// never sees followed, streamlog.Log.Seen), the store's state with its
// deleted sequences, and the stream's own state. A store reporting lost
// (damaged) messages is not captured. The capture pins the store: while
// a capture was handed out or served from within PinFor, checkpoints do
// not tell the store their position is saved, so the segments emptied
// since stay on disk with the records of what was removed after I, which
// Message (filestore.Store.LoadRemoved) still serves to a fetch; the
// newest position is given to the store once the pin ends.
//
// Install (Restore, run by raftnode in the background while the group
// is parked: it sends nothing, votes for nobody):
//
//  1. The messages past the store's LastSeq that the manifest names are
//     fetched (catchup.Service.Fetch: the manifest's source first, then
//     the group's other servers) into the staging file; no stream state
//     changes. If no source can serve them, the staging file is removed
//     and Restore fails with raftnode.ErrRestoreRetry: the replica goes
//     on from its log as it was, and the leader sends a newer snapshot.
//  2. With the stream's apply goroutine held: the store's limits are
//     relaxed; what it holds below first or in the manifest's gaps is
//     removed; the staged messages are appended at their sequences (SkipTo
//     over gaps), up to last; the stream's limits are restored; the store
//     is fsynced (Position) and must now hold exactly first, last, msgs
//     and bytes; the stream takes the manifest's state
//     (streamrun.Stream.RestoreHeld); the checkpoint {I, position, state}
//     replaces the previous one.
//  3. Restore returns: raftnode writes the snapshot item and only then
//     sends the leader its acknowledgement.
//
// A crash before the checkpoint of step 2 is replaced leaves the old
// checkpoint: the restart rolls the store back to its position (what
// step 2 wrote set aside as *.rolledback, as any rollback), raftnode
// ignores the snapbegin of an install its state machine has not reached,
// and the install starts again. A crash after it is an install complete
// but for raftnode's snapshot item, which recovery completes from the
// snapbegin item. A store that does not end as the manifest says after
// step 2 fences the replica (the store was changed; a restart rolls it
// back).
//
// Staging file: <Config.Dir>/catchup.stage, written without fsync (a
// crash discards the install; the file is created afresh by the next),
// removed when the install ends. Records back to back, integers little
// endian: seq u64, time i64 (unix ns), subject length u16, header length
// u32, data length u32, subject, header, data, CRC-32C u32 of the
// record's bytes before it (the catch-up chunk's record, checked again
// when read back).
package streamckpt

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/catchup"
	"github.com/cairnmq/cairn/internal/cluster/streamlog"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/filestore"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// Defaults of Config. They bound what a replica applies again after a
// crash (docs/cluster.md, "Restarts"): at most about DefaultEvery
// entries, DefaultEveryBytes of operations, or DefaultInterval of the
// stream's traffic, whichever comes first. A checkpoint costs an fsync
// of the store (which consumers wait for anyway), and a file of the
// stream's own state (its duplicate window), replaced atomically.
const (
	// DefaultEvery is the number of applied entries after which a
	// checkpoint is taken.
	DefaultEvery = 4096
	// DefaultEveryBytes is the size of the applied operations after which
	// a checkpoint is taken: a round's publishes are one entry, so
	// entries alone do not bound the work.
	DefaultEveryBytes = 16 << 20
	// DefaultInterval is the longest time entries stay applied without a
	// checkpoint.
	DefaultInterval = 10 * time.Second
)

// Errors of Open, besides ErrDamaged and filestore.ErrBadPosition.
var (
	// ErrNoCheckpoint: the store holds messages or sequences but there is
	// no checkpoint file; the replica is fenced.
	ErrNoCheckpoint = errors.New("streamckpt: the store holds data but there is no checkpoint file")
	// ErrStoreDamaged: the store, rolled back to the checkpoint's
	// position, lost sequences the checkpoint holds (records damaged on
	// disk: filestore's lost spans). The group's log was compacted
	// through the checkpoint, so nothing here can apply them again; the
	// replica is fenced rather than started current with messages
	// missing, which as the leader it would answer as not found.
	ErrStoreDamaged = errors.New("streamckpt: the store lost messages the checkpoint holds")
	// ErrMemoryStream: a memory stream has no checkpoint (package comment).
	ErrMemoryStream = errors.New("streamckpt: a memory stream has no checkpoint")
	// ErrStopped: the stream's runtime stopped before the checkpoint
	// could hold it, or the replica was stopped.
	ErrStopped = errors.New("streamckpt: stopped")
)

// Config says where a replica's checkpoint and store live and how often
// it checkpoints.
type Config struct {
	// Dir is the directory of the checkpoint file (the stream's
	// directory). Required.
	Dir string
	// Store configures the stream's file store (its Dir, FS, sync policy,
	// block size, logs); RollbackMode and RollbackTo are set by Open. Its
	// FS holds the checkpoint file too. Store.Dir is required.
	Store filestore.Config
	// Node and Group are the raftnode node and the stream's group on it;
	// Replica is this replica's ID in the group. Required.
	Node    *raftnode.Node
	Group   raftnode.GroupID
	Replica raftnode.ReplicaID
	// Every, EveryBytes and Interval: a checkpoint is taken once Every
	// entries, or EveryBytes bytes of operations, were applied since the
	// last one, and Interval after the last one when entries were applied
	// since (DefaultEvery, DefaultEveryBytes, DefaultInterval when 0).
	Every      uint64
	EveryBytes uint64
	Interval   time.Duration
	// Logf receives failed checkpoints and what Open could not use;
	// Infof the checkpoint a replica restarts from and the snapshots it
	// captures and installs (a scale-up or a replica caught up: routine,
	// as nats-server logs a stream's catch-up at [INF]). nil discards.
	Logf, Infof func(format string, args ...any)

	// Snapshots (package comment, "Snapshots"). Catchup is this
	// server's catch-up service, which fetches the messages of a snapshot
	// being installed (nil: a snapshot cannot be installed, and the
	// replica waits to be caught up from the log). Server is this server's
	// name, the source a capture's manifest names. Peers, if set, returns
	// the servers of the group's other replicas, asked when the manifest's
	// source cannot serve. Retain is streamlog.Config.Retain.
	Catchup *catchup.Service
	Server  raftnode.ServerID
	Peers   func() []raftnode.ServerID
	Retain  uint64
}

// Replica is the checkpointing of one replica of a replicated file
// stream. Open it (which opens the store), give the runtime its log
// (NewLog), Start it with the runtime, Stop it before the runtime.
type Replica struct {
	cfg Config
	fs  vfs.FS
	// store is a file stream's store (nil for a memory stream's); ms is
	// the stream's store either way (package comment, "Memory streams").
	store *filestore.Store
	ms    store.Store
	// deferred: the store's fsync waits for the checkpoints
	// (replicaStore, filestore.Config.DeferSync).
	deferred bool
	scfg     stream.Config
	state    []byte // the state bytes to Restore from
	index    uint64 // the checkpoint's index

	log     *streamlog.Log
	rt      *streamrun.Stream
	counted atomic.Uint64 // entries handed to the log's applier
	// ckptBytes is the log's AppliedBytes when the last checkpoint held
	// the stream (EveryBytes counts from there).
	ckptBytes atomic.Uint64
	poke      chan struct{} // capacity 1: Every entries or EveryBytes were applied
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once

	// mu serializes checkpoints (the goroutine's, Checkpoint's, Stop's),
	// captures and installs, and guards lastIndex and lastPos, the index
	// and store position of the last checkpoint written (or read), and
	// unsaved, the newest position written but not yet given to
	// PositionSaved (a capture was pinned).
	mu        sync.Mutex
	lastIndex uint64
	lastPos   filestore.Position
	unsaved   *filestore.Position

	// Snapshots (snapshot.go): capture is the latest capture and capWant
	// the lowest index one was asked for (under capMu); capPoke asks the
	// goroutine for one; pinnedUntil (unix ns) keeps the records of what
	// was removed since the capture; ctx ends with Stop (a fetch).
	capMu       sync.Mutex
	capture     *capture
	capWant     uint64
	capPoke     chan struct{}
	pinnedUntil atomic.Int64
	ctx         context.Context
	cancel      context.CancelFunc
}

// Open reads the replica's checkpoint file and opens its store: rolled
// back to the checkpoint's position, with the limits of the config the
// checkpoint holds; or, for a new replica (no file), a store that must
// be empty, whose first checkpoint (index 0, config def) Open writes
// before returning. def is the stream's config for a new replica
// (defaults applied, validated). Errors: ErrDamaged, ErrNoCheckpoint,
// ErrMemoryStream, filestore.ErrBadPosition (wrapped), a bad state
// (stream.ErrBadCheckpoint), and the file system's. On any error the
// replica must be fenced: nothing was started.
func Open(cfg Config, def stream.Config) (*Replica, error) {
	if cfg.Dir == "" || cfg.Store.Dir == "" || cfg.Node == nil || cfg.Group == 0 || cfg.Replica == 0 {
		return nil, errors.New("streamckpt: Config needs Dir, Store.Dir, Node, Group and Replica")
	}
	if def.Storage == stream.MemoryStorage {
		return nil, ErrMemoryStream
	}
	r := newReplica(cfg)
	cfg = r.cfg
	ck, err := readFile(r.fs, cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("streamckpt: group %d: %w", cfg.Group, err)
	}
	if ck == nil {
		err = r.openNew(def)
	} else {
		err = r.openFrom(ck)
	}
	if err != nil {
		return nil, fmt.Errorf("streamckpt: group %d: %w", cfg.Group, err)
	}
	r.lastIndex = r.index
	if ck != nil {
		r.lastPos = ck.pos
	}
	return r, nil
}

// OpenMemory makes the replica of a replicated memory stream of config
// def (defaults applied, validated): an empty memory store and the
// stream's state at index 0, without a checkpoint file (package comment,
// "Memory streams"). Its log reports Applied 0, so raftnode applies the
// group's whole log again after a restart; it never compacts the group's
// log; it captures and installs snapshots as a file stream's replica
// does, Config.Dir holding the staging file of an install. Config.Store
// is not used but for its FS. Errors: a Config without Dir, Node, Group
// or Replica, and def's state (stream.AppendCheckpoint).
func OpenMemory(cfg Config, def stream.Config) (*Replica, error) {
	if cfg.Dir == "" || cfg.Node == nil || cfg.Group == 0 || cfg.Replica == 0 {
		return nil, errors.New("streamckpt: Config needs Dir, Node, Group and Replica")
	}
	if def.Storage != stream.MemoryStorage {
		return nil, errors.New("streamckpt: OpenMemory of a file stream")
	}
	r := newReplica(cfg)
	ms := memstore.New(def.StoreConfig())
	state, err := stream.New(def, ms).AppendCheckpoint(nil)
	if err != nil {
		return nil, err
	}
	r.ms, r.scfg, r.state = ms, def.Clone(), state
	return r, nil
}

// AdoptMemory makes the memory store st of a stream that ran with one
// replica, holding its messages, the store of this replica of its new
// group (a scale-up from one replica; docs/cluster.md, "Memory
// streams"), as Adopt does for a file stream's: the replica starts at
// index 1, the group's synthetic base, with state (the stream's own
// state when it stopped: jetstream.JetStream.DetachStream), so the
// group's log goes on from index 2. A restart of its server empties it
// like any memory replica's, and the log replays from index 2 over an
// empty store: Config.Node must be told the group's base is 1 as for any
// bootstrapped group (GroupConfig.Voters). Errors: OpenMemory's and a
// bad state (stream.ErrBadCheckpoint).
func AdoptMemory(cfg Config, st store.Store, state []byte) (*Replica, error) {
	if cfg.Dir == "" || cfg.Node == nil || cfg.Group == 0 || cfg.Replica == 0 {
		return nil, errors.New("streamckpt: Config needs Dir, Node, Group and Replica")
	}
	scfg, err := stream.CheckpointConfig(state)
	if err != nil {
		return nil, err
	}
	if scfg.Storage != stream.MemoryStorage {
		return nil, errors.New("streamckpt: AdoptMemory of a file stream")
	}
	r := newReplica(cfg)
	r.ms, r.scfg, r.state, r.index = st, scfg, state, 1
	return r, nil
}

// newReplica applies cfg's defaults and makes the Replica.
func newReplica(cfg Config) *Replica {
	if cfg.Store.FS == nil {
		cfg.Store.FS = vfs.OS()
	}
	if cfg.Every == 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.EveryBytes == 0 {
		cfg.EveryBytes = DefaultEveryBytes
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Infof == nil {
		cfg.Infof = func(string, ...any) {}
	}
	r := &Replica{cfg: cfg, fs: cfg.Store.FS, poke: make(chan struct{}, 1), capPoke: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// openFrom opens the store rolled back to the checkpoint ck.
func (r *Replica) openFrom(ck *checkpoint) error {
	if ck.group != r.cfg.Group || ck.replica != r.cfg.Replica {
		return fmt.Errorf("%w: it is replica %d of group %d", ErrDamaged, ck.replica, ck.group)
	}
	scfg, err := stream.CheckpointConfig(ck.state)
	if err != nil {
		return err
	}
	fcfg := replicaStore(r.cfg.Store)
	fcfg.RollbackTo = &ck.pos
	st, err := filestore.Open(fcfg, scfg.StoreConfig())
	if err != nil {
		return err
	}
	if s := st.State(false); s.Lost != nil {
		st.Close()
		return fmt.Errorf("%w (%s: sequences %v, %d bytes)", ErrStoreDamaged, r.cfg.Store.Dir, s.Lost.Msgs, s.Lost.Bytes)
	}
	r.store, r.ms, r.scfg, r.state, r.index = st, st, scfg, ck.state, ck.index
	r.deferred = fcfg.DeferSync
	r.cfg.Infof("streamckpt: group %d: restarting from the checkpoint at index %d (store at %v)", r.cfg.Group, ck.index, ck.pos)
	return nil
}

// replicaStore returns the configuration of a replica's store made from
// the engine's (fcfg): in rollback mode, and, under the engine's default
// sync policy (a PubAck after the fsync), with the store's fsync
// deferred to the checkpoints (filestore.Config.DeferSync): an entry
// applies only once a majority of the group's WALs fsynced it, and after
// a crash the store returns to its checkpoint's position and the WAL's
// entries after it apply again (package comment), so an fsync of the
// store per applied entry bought nothing but a second fsync per publish
// on each server (docs/benchmarks.md, "Where a synchronous publish's
// time goes").
func replicaStore(fcfg filestore.Config) filestore.Config {
	fcfg.RollbackMode = true
	fcfg.DeferSync = fcfg.Sync == filestore.SyncAlways
	return fcfg
}

// openNew opens the store of a new replica, which must hold nothing, and
// writes its first checkpoint.
func (r *Replica) openNew(def stream.Config) error {
	fcfg := replicaStore(r.cfg.Store)
	limits := def.StoreConfig()
	st, err := filestore.Open(fcfg, limits)
	if err != nil {
		return err
	}
	s := st.State(false)
	if s.Msgs > 0 || s.Lost != nil || s.LastSeq != max(limits.FirstSeq, 1)-1 {
		st.Close()
		return fmt.Errorf("%w (%s: %d messages, last sequence %d)", ErrNoCheckpoint, r.cfg.Store.Dir, s.Msgs, s.LastSeq)
	}
	state, err := stream.New(def, st).AppendCheckpoint(nil)
	if err == nil {
		err = r.write(0, st, state)
	}
	if err != nil {
		st.Close()
		return err
	}
	r.store, r.ms, r.scfg, r.state = st, st, def.Clone(), state
	r.deferred = fcfg.DeferSync
	return nil
}

// write takes the store's position (nothing else may change the store
// meanwhile) and writes the checkpoint file of index and state.
func (r *Replica) write(index uint64, st *filestore.Store, state []byte) error {
	pos, err := st.Position()
	if err != nil {
		return err
	}
	if err := r.ensureDir(); err != nil {
		return err
	}
	if err := writeFile(r.fs, r.cfg.Dir, &checkpoint{group: r.cfg.Group, replica: r.cfg.Replica, index: index, pos: pos, state: state}); err != nil {
		return err
	}
	st.PositionSaved(pos)
	r.lastPos = pos
	return nil
}

// ensureDir makes Config.Dir if it is missing, durably (its entry in its
// parent fsynced). The store's Open made it already when the store lives
// under it.
func (r *Replica) ensureDir() error {
	if _, _, err := r.fs.Stat(r.cfg.Dir); err == nil || !vfs.IsNotExist(err) {
		return err
	}
	if err := r.fs.MkdirAll(r.cfg.Dir); err != nil {
		return err
	}
	return r.fs.SyncDir(path.Dir(path.Clean(r.cfg.Dir)))
}

// Store returns a file stream replica's store (nil for a memory
// stream's: StreamStore).
func (r *Replica) Store() *filestore.Store { return r.store }

// StreamStore returns the replica's store, file or memory, to make the
// runtime over.
func (r *Replica) StreamStore() store.Store { return r.ms }

// StreamConfig returns the stream's config as of the checkpoint: the
// config to make the runtime with (streamrun.New). A later update in the
// log is applied again after it.
func (r *Replica) StreamConfig() stream.Config { return r.scfg.Clone() }

// Applied returns the raft index of the checkpoint the replica restarted
// from (0 for a new replica): streamlog.Config.Applied.
func (r *Replica) Applied() uint64 { return r.index }

// NewLog returns the function to give the runtime as
// streamrun.Env.NewReplicatedLog: it makes the stream's streamlog.Log on
// the replica's node and group, reporting Applied, with onLeader as its
// OnLeader (nil: none), and counts the entries it applies for
// Config.Every. The runtime calls it once, from streamrun.New.
func (r *Replica) NewLog(onLeader func(leader bool)) streamrun.NewLogFunc {
	return func(_ string, a streamrun.Applier[stream.Op]) streamrun.Log[stream.Op] {
		r.log = streamlog.New(streamlog.Config{Node: r.cfg.Node, Group: r.cfg.Group, Applied: r.Applied, OnLeader: onLeader,
			Snapshots: r, Retain: r.cfg.Retain}, counter{r, a})
		return r.log
	}
}

// Log returns the log NewLog made (nil before).
func (r *Replica) Log() *streamlog.Log { return r.log }

// counter is the Applier the log is given: it counts the entries, pokes
// the checkpoint goroutine every Config.Every of them, and hands each on.
type counter struct {
	r *Replica
	a streamrun.Applier[stream.Op]
}

// Apply counts op and hands it to the runtime's applier.
func (c counter) Apply(index uint64, op stream.Op, key uint64) {
	c.a.Apply(index, op, key)
	r := c.r
	due := r.counted.Add(1)%r.cfg.Every == 0
	if !due && r.log != nil {
		due = r.log.AppliedBytes()-r.ckptBytes.Load() >= r.cfg.EveryBytes
	}
	if due {
		select {
		case r.poke <- struct{}{}:
		default:
		}
	}
}

// Forget hands the forgotten key to the runtime's applier
// (streamrun.Forgetter) when it takes them.
func (c counter) Forget(key uint64, err error) {
	if f, ok := c.a.(streamrun.Forgetter); ok {
		f.Forget(key, err)
	}
}

// Start readies the runtime rt, made over Store with StreamConfig and
// NewLog, from the checkpoint (streamrun.Stream.Restore, in place of
// Open), and starts the checkpoint goroutine, which Stop ends. Call Serve
// on rt next, then add the log's state machine to the node. The error
// wraps stream.ErrBadCheckpoint.
func (r *Replica) Start(rt *streamrun.Stream) error {
	if err := rt.Restore(r.state, r.index); err != nil {
		return err
	}
	r.rt, r.state = rt, nil
	go r.run()
	return nil
}

// run takes a checkpoint whenever Every entries were applied, and every
// Interval when some were, until Stop.
func (r *Replica) run() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-r.capPoke:
			if err := r.captureNow(); err != nil && !errors.Is(err, ErrStopped) {
				r.cfg.Logf("streamckpt: group %d: capture for a snapshot failed: %v", r.cfg.Group, err)
			}
			continue
		case <-r.poke:
		case <-t.C:
			r.mu.Lock()
			r.savePosition(nil) // a pin that ended
			r.mu.Unlock()
		}
		if err := r.Checkpoint(); err != nil && !errors.Is(err, ErrStopped) {
			r.cfg.Logf("streamckpt: group %d: checkpoint failed (the WAL keeps the entries; retried): %v", r.cfg.Group, err)
		}
	}
}

// Poke asks the replica's checkpoint goroutine for a checkpoint now,
// without waiting for it (the cluster layer's answer to a group that
// keeps sealed WAL segments: jscluster walpin.go). A checkpoint already
// asked for and not yet taken counts; nothing is taken when nothing was
// applied since the last one, or after Stop.
func (r *Replica) Poke() {
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// Checkpoint takes a checkpoint now (package comment, "Taking a
// checkpoint"), unless nothing was applied since the last one. Errors:
// ErrStopped (the runtime stopped), the store's (store.ErrFenced), the
// file system's, and raftnode's from Log.Checkpoint (the checkpoint file
// is written then; the WAL compacts at the next one).
func (r *Replica) Checkpoint() error { return r.checkpoint(false) }

// checkpoint is Checkpoint; final (Stop's) also writes one when nothing
// was applied since the last but the store was written past its
// position: a store opened (rolled back to the checkpoint) writes its
// low water's compact record and a sync mark with its first batch, at
// its Close when nothing else comes, and a restart without this
// checkpoint cut those 64 bytes again and logged it as a rollback (trial
// 38: "rollback to segment ... set aside" after each clean stop and
// restart with nothing applied between).
func (r *Replica) checkpoint(final bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rt == nil {
		return ErrStopped
	}
	if r.store == nil {
		return nil // a memory stream: nothing to write, its log kept whole
	}
	var (
		index uint64
		pos   filestore.Position
		ck    *stream.Checkpoint
		err   error
	)
	// A store whose fsync is deferred to the checkpoints (replicaStore)
	// fsyncs what it wrote since the last one before the apply goroutine
	// is held, so that the Position taken held fsyncs only what is
	// applied meanwhile: up to 16 MiB unsynced, whose fsync would hold
	// the stream's publishes.
	if r.deferred {
		if _, err := r.store.Position(); err != nil {
			return err
		}
	}
	held := r.rt.Held(func() {
		index = r.rt.AppliedIndex()
		if r.log != nil {
			r.ckptBytes.Store(r.log.AppliedBytes())
			// Entries the engine never sees (a new term's empty entry, a
			// compaction floor, a membership change) after the last
			// operation it applied are reflected too: a restart need not
			// hand them back (streamlog.Log.Seen, as a capture names).
			if data, latest := r.log.Seen(); data <= index {
				index = max(index, latest)
			}
		}
		if index == r.lastIndex && !final {
			return
		}
		if pos, err = r.store.Position(); err != nil {
			return
		}
		if index == r.lastIndex && samePosition(pos, r.lastPos) {
			return
		}
		ck, _ = r.rt.Checkpoint()
	})
	switch {
	case !held:
		return ErrStopped
	case err != nil:
		return err
	case ck == nil: // nothing applied, nothing written since the last
		return nil
	}
	again := index == r.lastIndex
	state, err := ck.Append(nil)
	if err != nil {
		return err
	}
	if err := writeFile(r.fs, r.cfg.Dir, &checkpoint{group: r.cfg.Group, replica: r.cfg.Replica, index: index, pos: pos, state: state}); err != nil {
		return err
	}
	r.savePosition(&pos)
	r.lastIndex, r.lastPos = index, pos
	if r.log == nil || again {
		return nil
	}
	_, err = r.log.Checkpoint(index)
	return err
}

// samePosition reports whether a and b are the same place in the store
// (a Position also carries which call took it).
func samePosition(a, b filestore.Position) bool {
	return a.Base == b.Base && a.Offset == b.Offset && a.LastSeq == b.LastSeq
}

// Stop ends the checkpoint goroutine and takes a last checkpoint, so
// that a clean restart applies nothing again. Call it before stopping
// the runtime (its apply goroutine must still run). It returns that
// checkpoint's error.
func (r *Replica) Stop() error {
	r.once.Do(func() {
		close(r.stop)
		r.cancel()
	})
	if r.rt == nil {
		return nil
	}
	<-r.done
	return r.checkpoint(true)
}

// Adopt makes the store of a stream that ran with one replica the store
// of this replica of its new group (a scale up from one replica;
// docs/cluster.md, "Scaling"): with no checkpoint file in Config.Dir,
// it opens the store, takes its position and writes the checkpoint of
// index 1, the group's synthetic base, with state (the stream's own state
// when it stopped: jetstream.JetStream.DetachStream), then closes the
// store. Open then restarts the replica from it, and the group's log
// goes on from index 2 (raftnode applies nothing at 1: the checkpoint
// reflects it). Errors: a checkpoint file already there (ErrDamaged:
// nothing is overwritten), the store's and the file system's.
func Adopt(cfg Config, state []byte) error {
	if cfg.Store.FS == nil {
		cfg.Store.FS = vfs.OS()
	}
	ck, err := readFile(cfg.Store.FS, cfg.Dir)
	switch {
	case err != nil:
		return err
	case ck != nil:
		return fmt.Errorf("%w: %s already holds a checkpoint", ErrDamaged, cfg.Dir)
	}
	scfg, err := stream.CheckpointConfig(state)
	if err != nil {
		return err
	}
	fcfg := replicaStore(cfg.Store)
	st, err := filestore.Open(fcfg, scfg.StoreConfig())
	if err != nil {
		return err
	}
	r := &Replica{cfg: cfg, fs: cfg.Store.FS}
	err = r.write(1, st, state)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return err
}
