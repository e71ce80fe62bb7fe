package jscluster

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/catchup"
	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/cluster/transport"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/vfs"
)

// Host is what the cluster layer needs of its server: what the Raft
// transport needs, and the servers the routes name (ClusterMembers).
type Host interface {
	transport.Host
	// ClusterMembers returns the servers the explicit routes name, this
	// one included, sorted, and whether every route resolved
	// (server.Server.ClusterMembers).
	ClusterMembers() (names []string, complete bool)
	// ClusterRoutes returns the explicit routes' addresses, how many
	// of them led to this server itself and the names of the servers
	// the others reached (server.Server.ClusterRoutes): what a server
	// waiting to enter the meta group logs (waitingLine).
	ClusterRoutes() (configured []string, self int, connected []string)
	// FlushRoutes returns once every peer with a route has processed
	// what this server sent it and what it routed here before has been
	// delivered, or after timeout (server.Server.FlushRoutes); HandOver
	// flushes between withdrawing a stream's interest and dropping it.
	FlushRoutes(timeout time.Duration) bool
}

// Config configures a Cluster.
type Config struct {
	// FS and Dir hold the Raft WAL (Dir/raft) and the meta group's
	// checkpoint (Dir/meta): the server's <store_dir>/jetstream/_cluster.
	FS  vfs.FS
	Dir string
	// Tags are the server's server_tags, lowercased (placement: the
	// meta group's catalogue holds every server's, docs/cluster.md,
	// "Placement").
	Tags []string
	// UniqueTag is jetstream { unique_tag }, lowercased: the prefix of
	// the tag no two replicas of a stream placed by this server, as meta
	// leader, may share ("" none; meta.PlaceRequest.UniqueTag).
	UniqueTag string
	// SystemAccount is the server's system account ("" none): the
	// account the cluster parts of replicated streams' and consumers'
	// infos name as their Raft traffic's (ClusterInfo.TrafficAcc).
	SystemAccount string
	// Logf logs problems, Infof notable events; Now is the clock of the
	// proposer's decisions (created times).
	Logf, Infof func(format string, args ...any)
	// Debugf logs routine events (a Raft replica's change of role), only
	// with debug logging on; nil drops them.
	Debugf func(format string, args ...any)
	Now    func() time.Time
	// TickInterval is raftnode's tick (0: its default, 100 ms); tests
	// shorten it.
	TickInterval time.Duration
	// Retain is how many entries a replicated file stream's WAL keeps
	// behind its checkpoint for a replica that lags (0: streamlog's
	// DefaultRetain); one further behind is caught up by a snapshot.
	// Tests shorten it.
	Retain uint64
	// WALSegmentBytes is the size past which the Raft WAL starts a new
	// segment (0: raftnode's default, 64 MiB). Tests shorten it.
	WALSegmentBytes int64
	// MaxFrameBytes is the largest frame of the Raft transport (0 and
	// above: transport.MaxFrameBytes, 64 MiB), given to the transport and
	// to raftnode, which splits its frames at it and derives from it the
	// largest entry a follower can receive (raftnode.Node.MaxEntryBytes):
	// a replicated stream refuses a message or an atomic batch that
	// would pass it (docs/cluster.md, "Entries larger than a frame").
	// Tests shrink it; the catch-up service keeps its own 64 MiB bound,
	// so it should stay above its 1 MiB chunks.
	MaxFrameBytes int
	// ForceNew forces a new cluster from this server's Raft WAL: its
	// replicas of the meta group and of the replicated streams and
	// consumers it holds become their groups' only voters (force.go;
	// docs/cluster.md, "Forcing a new cluster"). Refused (logged; the
	// server starts as without it) when the WAL was damaged, holds no
	// meta replica or was forced before, or while another member is up
	// with the store the meta group knows it by (decideForce).
	ForceNew bool
	// Hooks, for tests only (nil otherwise), stop the cluster layer at
	// chosen points.
	Hooks *Hooks
}

// Hooks are points where a test stops the cluster layer to interrupt
// it there. Each may block; none is called with a lock held.
type Hooks struct {
	// SingleMoveStep1 is called by the meta leader's mover of a
	// consumer of one replica once step 1 (its two servers) applied,
	// before step 2 (docs/cluster.md, "Moving consumers of one
	// replica"); quit is closed when this server's cluster layer stops,
	// and the mover stops if it returns after that.
	SingleMoveStep1 func(account, stream, consumer string, quit <-chan struct{})
	// SingleStreamStep1 is called by the meta leader's mover of a stream
	// of one replica once step 1 (its server and the destination)
	// applied, before it waits for the destination's replica
	// (docs/cluster.md, "Moving a stream of one replica"); quit as for
	// SingleMoveStep1.
	SingleStreamStep1 func(account, stream string, quit <-chan struct{})
	// HoldMembership, while it returns true, keeps this server, leading
	// the group of a stream, from changing the group's membership
	// (reconcileMembership): a replica the meta group placed on another
	// server is not added to the group, so it runs the config its group's
	// log starts from and does not catch up. It must not block (the run
	// goroutine calls it each housekeeping tick).
	HoldMembership func(account, stream string) bool
	// FailConsumerStart, when it returns an error, fails this server's
	// attempt to start its replica of a consumer with it, as a failure
	// that may pass (tried again: cretry.go). It must not block.
	FailConsumerStart func(account, stream, consumer string) error
	// FailGrowConsumer, when it returns an error, fails the meta
	// leader's proposal growing a replicated consumer back to its
	// replicas (heal.go growConsumer) with it, before anything is
	// proposed. It must not block.
	FailGrowConsumer func(account, stream, consumer string) error
}

// Cluster is one server's part of a clustered JetStream. Make it with
// Start, register the accounts' engines with AddAccount, end it with
// Close.
type Cluster struct {
	cfg  Config
	host Host
	name raftnode.ServerID
	node *raftnode.Node
	tr   *transport.Transport
	meta *meta.Log
	// svc serves this server's stream replicas to replicas catching up,
	// and fetches for its own (stream snapshots).
	svc *catchup.Service

	evMu     sync.Mutex
	events   []meta.Event
	wake     chan struct{}
	quit     chan struct{}
	quitOnce sync.Once
	done     sync.WaitGroup

	// fresh holds the new groups (of streams and consumers) whose
	// replica here made the first campaign (firstleader.go), with when
	// it campaigns again while its group has no leader
	// (recampaignFresh); freshTick fires when the first is due (nil
	// while fresh is empty). The run goroutine's.
	fresh     map[raftnode.GroupID]freshGroup
	freshTick <-chan time.Time

	// forcing is set, before the meta group is added, when this start
	// forces a new cluster (force.go); read where groups are added.
	forcing atomic.Bool

	// replayed is set once the run goroutine has replayed the Raft WAL
	// (Start returns before: docs/cluster.md, "Restarts").
	replayed atomic.Bool

	// membersLogged: the meta group's members were logged
	// (logMetaMembers); membersSince: when that replica was first seen
	// a member. Owned by the run goroutine.
	membersLogged bool
	membersSince  time.Time

	// leaderless is since when (unix ns) this server knows no meta
	// leader, 0 while it knows one (noteLeaderless, metaAnswers).
	leaderless atomic.Int64
	// metaFenced is set while this server's meta replica is fenced
	// (noteLeaderless): it then answers none of the meta group's
	// requests (metaAnswers).
	metaFenced atomic.Bool
	// removedAnswered is set once another server answered that its
	// catalogue marks this server's store removed (SERVER.REMOVE while
	// this server was down: removedown.go); never cleared.
	removedAnswered atomic.Bool
	// removalRecorded is the store incarnation whose removal this server
	// recorded (recordRemoval, rejoin.go); firstCommit the first commit
	// index of the meta group its replica learned from a leader since
	// this start (noteLeaderless); removedIndex the meta index at which
	// its replica applied its removal (noteRemovedAt); rejoinNow: the
	// removal came before this start, so the server rejoins without
	// waiting for the next (rejoinRemoved); removedAtStart: the state it
	// started with (its meta checkpoint) held its removal. The run
	// goroutine's.
	removalRecorded string
	removedAtStart  bool
	firstCommit     uint64
	removedIndex    uint64
	rejoinNow       bool

	cfgPush configPush // streams whose config to compare (update.go)

	// sys is the cluster layer's part of the system account
	// (internal.go, AttachSystem).
	sys system
	// aru is the exchange of what each account's streams hold on each
	// server (accountusage.go).
	aru usageExchange
	// lags sample how far each replicated stream's runtime is behind its
	// log (applylag.go).
	lags applyLags

	// metaLeaderSeen: the meta leader as logMetaLeader last saw it; the
	// run goroutine's.
	metaLeaderSeen raftnode.ServerID

	// staleAsked: when the meta leader last proposed the replacement of
	// a replica (membership.go); metaChanging: the meta group's
	// membership change in flight; the run goroutine's.
	staleAsked retryMemo
	// elsewhere: whether leaving replicas' streams and consumers are led
	// elsewhere (elsewhere.go); its own lock.
	elsewhere elsewhere
	// lostAsked: when this server last reported its replica that lost
	// its state (askReplaceLost); the run goroutine's.
	lostAsked retryMemo
	// cretry: this server's consumer replicas whose start (or update)
	// failed, to try again (cretry.go); the run goroutine's.
	cretry map[consumerKey]*startRetry
	// shortSince: on the meta leader, since when each replicated
	// consumer growShortConsumers found short of its replicas has been
	// so (heal.go); the run goroutine's, rebuilt each round.
	shortSince map[staleKey]time.Time
	// singleAsked: when the meta leader last took up an interrupted
	// move of a stream of one replica; destDown: since when the
	// destination of each such move has been seen offline
	// (singlestream.go); the run goroutine's.
	singleAsked retryMemo
	destDown    map[streamKey]time.Time
	// movesAsked: when this server last reported a stream's move done
	// (reportMoves); the run goroutine's.
	movesAsked retryMemo
	// lost: the meta leader's record of the replicas reported lost
	// (lost.go), under its own mutex.
	lost         lostState
	metaChanging *raftnode.Proposal
	// pins: the groups keeping sealed Raft WAL segments (walpin.go); the
	// run goroutine's.
	pins walPins

	mu       sync.Mutex
	accounts map[string]*account // by account name
	replicas map[streamKey]*replica
	// damaged are this server's replicas fenced for damage at their
	// start (damaged.go).
	damaged map[streamKey]damagedReplica
	// creplicas are this server's replicas of replicated consumers
	// (consumer.go).
	creplicas map[consumerKey]*creplica
	// converting holds, for each stream this server's run goroutine is
	// turning into a stream of one replica (scaledown.go convert), a
	// channel closed when that ends: the API's Answers waits on it.
	converting map[streamKey]chan struct{}
	// handed holds the states of the consumers of a memory stream of one
	// replica that this server scaled up, detached before the stream
	// stopped, until the consumer's first replica takes its state
	// (memscale.go).
	handed  map[consumerKey]handedState
	started bool // the meta group was added
	closed  bool
	// metaPeers are the meta group's replicas as this server added it;
	// metaByInc: their IDs derive from incarnations (metaReplica), so the
	// meta leader replaces a member whose store changed (membership.go).
	metaPeers []raftnode.Peer
	metaByInc bool
	// strangers are the routed servers outside this server's meta group:
	// since when each was seen so, and whether it was reported
	// (warnStrangers; the run goroutine's own).
	strangers map[string]stranger
	// seed is how the seed rule saw the cluster last (joinOrBootstrap;
	// the run goroutine's own).
	seed seedView
	// restored are the streams a restore installed in this server's
	// engine whose assignment is being proposed: startReplica adopts
	// the running stream (restore.go).
	restored map[streamKey]bool
	// singleMoves are the movers of consumers of one replica running on
	// this server as the meta leader (singles.go); singleAgain the keys
	// of those asked meanwhile to move a stream of one replica off the
	// same server (startSingleStreamMove: the mover takes the request
	// up again when it ends, retakeSingle); moverAfter what was asked
	// of a key while its mover ran (moveSinglesThen: a replicated
	// stream's replica to move off the same server after its consumers),
	// run in order when it ends.
	singleMoves map[singleMoveKey]bool
	singleAgain map[singleMoveKey]bool
	moverAfter  map[singleMoveKey][]func()
}

// streamKey names a stream in an account.
type streamKey struct{ account, name string }

// Start opens the server's Raft node (its WAL under Dir/raft) with the
// transport on the cluster port, opens the meta group's state (Dir/meta),
// and starts the goroutine that replays the WAL, bootstraps the meta
// group once the cluster's members are known and then follows it. Start
// does not wait for the replay, which takes time in proportion to the
// WAL (docs/cluster.md, "Restarts"): the server accepts clients
// meanwhile, and this server answers no API request until its meta
// replica runs (Answers). Errors: the WAL's directory or first segment
// header, or the meta checkpoint's (a damaged checkpoint keeps the
// server out of the meta group: docs/cluster.md decision 12).
func Start(cfg Config, host Host) (*Cluster, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FS == nil {
		cfg.FS = vfs.OS()
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Infof == nil {
		cfg.Infof = cfg.Logf
	}
	c := &Cluster{
		cfg: cfg, host: host, name: raftnode.ServerID(host.Name()),
		wake: make(chan struct{}, 1), quit: make(chan struct{}),
		accounts: map[string]*account{}, replicas: map[streamKey]*replica{}, creplicas: map[consumerKey]*creplica{},
		converting: map[streamKey]chan struct{}{},
		handed:     map[consumerKey]handedState{},
		aru:        newUsageExchange(),
	}
	// The node is opened first (the transport's hello carries its WAL's
	// incarnation); it sends nothing before Start.
	late := &lateTransport{}
	// The catch-up service fails a fetch over as soon as its source's
	// server is known gone: a transport connection with it ended, or
	// raftnode found it dead (docs/cluster.md, "Stream snapshots").
	c.svc = catchup.New(catchup.Config{Send: late.Send, Logf: cfg.Logf})
	frame := transport.MaxFrameBytes
	if cfg.MaxFrameBytes > 0 {
		frame = min(cfg.MaxFrameBytes, frame)
	}
	node, err := raftnode.Open(raftnode.Config{
		FS: cfg.FS, Dir: path.Join(cfg.Dir, "raft"), Server: c.name, Transport: late,
		TickInterval: cfg.TickInterval, Logf: cfg.Logf, Infof: cfg.Infof, Debugf: cfg.Debugf, DeferReplay: true,
		PeerDead: c.svc.PeerGone, SegmentBytes: cfg.WALSegmentBytes, MaxFrameBytes: frame,
	})
	if err != nil {
		c.svc.Close()
		return nil, fmt.Errorf("jscluster: open the Raft WAL: %w", err)
	}
	c.node = node
	c.tr = transport.New(host, transport.Config{MaxFrameBytes: frame, Logf: cfg.Logf, Infof: cfg.Infof, Debugf: cfg.Debugf, Incarnation: node.Incarnation(), Tags: cfg.Tags, Known: c.known, Gone: node.PeerUnreachable,
		Lost: c.svc.PeerGone, Meta: c.inMeta, Members: c.routeMembers})
	late.tr.Store(c.tr)
	c.tr.Attach(catchup.Mux(node, c.svc))
	if err := cfg.FS.MkdirAll(path.Join(cfg.Dir, "meta")); err != nil {
		c.closeNode()
		return nil, err
	}
	c.meta, err = meta.Open(meta.Config{Node: node, FS: cfg.FS, Dir: path.Join(cfg.Dir, "meta"), OnApply: c.enqueue, Now: cfg.Now})
	if err != nil {
		c.closeNode()
		return nil, fmt.Errorf("jscluster: open the meta group's state: %w", err)
	}
	node.Start()
	c.done.Add(2)
	go c.run()
	go c.reportUsage() // accountusage.go
	return c, nil
}

// lateTransport is the node's transport until the real one exists.
type lateTransport struct {
	tr atomic.Pointer[transport.Transport]
}

// Send passes frame to the transport (raftnode.Transport).
func (l *lateTransport) Send(to raftnode.ServerID, frame []byte) error {
	t := l.tr.Load()
	if t == nil {
		return transport.ErrClosed
	}
	return t.Send(to, frame)
}

// closeNode closes the node, the catch-up service and the transport.
func (c *Cluster) closeNode() {
	_ = c.node.Close()
	c.svc.Close()
	_ = c.tr.Close()
}

// Close stops following the meta group, closes the Raft node and the
// transport. The accounts' engines are the server's to shut down (first:
// their streams stop proposing).
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	c.stopRun()
	c.detachSystem()
	c.mu.Lock()
	for _, r := range c.replicas {
		if r.log != nil {
			r.log.Close()
		}
	}
	c.mu.Unlock()
	c.closeNode()
}

// stopRun ends the run goroutine (once) and waits for it: no meta event
// is acted on and no checkpoint is started by it afterwards.
func (c *Cluster) stopRun() {
	c.quitOnce.Do(func() { close(c.quit) })
	c.done.Wait()
}

// StopCheckpoints stops following the meta group, cuts the Raft node
// off its peers once its groups applied what they know committed
// (isolate), and takes the last checkpoint of every replica that has
// one: each replicated file stream's (streamckpt.Replica.Stop, which
// also ends its checkpointing), each replicated consumer's, and the
// meta group's, so that a clean restart applies none of the log again
// (raftnode GroupStatus.Reapplied; docs/cluster.md, "Restarts"). The
// server calls it after the hand-over (HandOver) and before it shuts its
// engines down, while the streams still run; from then on the server
// takes no part in its Raft groups, as once it stopped. A checkpoint
// that fails is logged: the WAL keeps the entries.
func (c *Cluster) StopCheckpoints() {
	c.stopRun()
	c.isolate()
	c.checkpointAll(true)
}

// isolateTimeout bounds how long a stop waits for the Raft groups to
// apply what they know committed once the node is cut off (isolate): a
// round or two, unless a state machine is slow.
const isolateTimeout = 5 * time.Second

// isolate cuts the Raft node off its peers (raftnode Node.Isolate) and
// waits, at most isolateTimeout, until every group stepped the messages
// it had taken and applied what they committed (Node.Settled). Without
// it, entries the others commit after the stop's checkpoints (a new
// leader's empty entry after the hand-over, another leader's proposals)
// are still written and applied here, and the restart applies them
// again. At the deadline the checkpoints are taken anyway (the WAL keeps
// what they miss).
func (c *Cluster) isolate() {
	c.node.Isolate()
	deadline := time.Now().Add(isolateTimeout)
	t := time.NewTicker(handOverPoll)
	defer t.Stop()
	for !c.node.Settled() {
		if time.Now().After(deadline) {
			c.cfg.Logf("jscluster: the Raft groups did not apply what they committed within %v of the stop: the restart applies it again", isolateTimeout)
			return
		}
		<-t.C
	}
}

// checkpointAll checkpoints every replica of this server: the streams'
// (and, when stopping, ends their checkpointing), the consumers' and the
// meta group's. It runs on the run goroutine, or after it ended.
func (c *Cluster) checkpointAll(stopping bool) {
	c.mu.Lock()
	var cks []*replica
	for _, r := range c.replicas {
		if r.ckpt != nil {
			cks = append(cks, r)
		}
	}
	crs := make([]*creplica, 0, len(c.creplicas))
	for _, cr := range c.creplicas {
		if cr.log != nil { // a consumer with one replica has no group
			crs = append(crs, cr)
		}
	}
	started := c.started
	c.mu.Unlock()
	for _, r := range cks {
		var err error
		if stopping {
			err = r.ckpt.Stop()
		} else {
			err = r.ckpt.Checkpoint()
		}
		if err != nil {
			c.cfg.Logf("jscluster: stream group %d: checkpoint failed (the WAL keeps the entries): %v", r.sa.Group, err)
		}
	}
	now := c.cfg.Now()
	for _, cr := range crs {
		applied := cr.log.LastApplied()
		if _, err := cr.log.Checkpoint(); err != nil {
			c.cfg.Logf("jscluster: consumer %s > %s > %s: checkpoint failed (the WAL keeps the entries): %v", cr.ca.Account, cr.ca.Stream, cr.ca.Name, err)
		}
		cr.ckptIndex, cr.ckptAt = applied, now
	}
	if started {
		if err := c.meta.Checkpoint(); err != nil {
			c.cfg.Logf("jscluster: the meta group's checkpoint failed (the WAL keeps the entries): %v", err)
		}
	}
}

// enqueue hands an applied meta operation to the run goroutine (meta's
// OnApply: it must not block).
func (c *Cluster) enqueue(ev meta.Event) {
	c.evMu.Lock()
	c.events = append(c.events, ev)
	c.evMu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// takeEvents returns the queued events.
func (c *Cluster) takeEvents() []meta.Event {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	evs := c.events
	c.events = nil
	return evs
}

// housekeeping is how often run looks at the meta group's leadership
// when nothing else wakes it; metaCheckpointEvery how often it writes
// the meta group's checkpoint (meta.Log.Checkpoint: the state to
// Dir/meta, then the WAL may drop the group's entries up to it).
const (
	housekeeping        = 250 * time.Millisecond
	metaCheckpointEvery = 30 * time.Second
)

// run replays the WAL, bootstraps the meta group, then applies the meta
// group's events to this server's replicas and, while this server leads
// the meta group, keeps the catalogue of servers current.
func (c *Cluster) run() {
	defer c.done.Done()
	start := time.Now()
	quarantined := false
	replayErr := c.node.Replay()
	if replayErr != nil {
		c.cfg.Logf("jscluster: the Raft WAL cannot be replayed (every replica of this server is fenced): %v", replayErr)
	} else {
		segs, _ := c.node.WALStats()
		c.cfg.Infof("JetStream cluster: Raft WAL replayed in %v (%s)", time.Since(start).Round(time.Millisecond), logger.Count(segs, "segment"))
		quarantined = c.quarantineWAL()
		if !quarantined {
			c.retireRemoved() // a removed store started again: rejoin.go
		}
	}
	c.removedAtStart = c.removedSelf() // its meta checkpoint holds its removal: rejoin.go
	c.forcing.Store(c.decideForce(quarantined, replayErr))
	c.replayed.Store(true)
	if !c.bootstrap() {
		return
	}
	t := time.NewTicker(housekeeping)
	defer t.Stop()
	lastCheckpoint := time.Now()
	recovered := false
	forceRecorded := false
	for {
		select {
		case <-c.quit:
			return
		case <-c.wake:
		case <-c.freshTick:
			c.recampaignFresh()
		case <-t.C:
			c.noteLeaderless()
			c.followRenames()
			c.warnStrangers()
			c.sampleApply()
			c.catalogue()
			c.replaceStale()
			c.moveOffRemoved()
			c.healShort()
			c.dropLeftConsumers()
			c.growShortConsumers()
			c.finishSingleMoves()
			c.finishSingleStreamMoves()
			c.askReplaceLost()
			c.handleLost()
			c.forceLostVoters()
			c.learnRemoval()
			c.recordRemoval()
			if c.rejoinRemoved() && !c.bootstrap() {
				return
			}
			c.reconcileMemberships()
			c.reportMoves()
			c.reconcileConsumerMemberships()
			c.retireReplicas()
			c.retireConsumers()
			c.convertConsumers()
			c.convertReplicas()
			c.askSettles()
			c.askConsumerSettles()
			c.checkpointConsumers()
			c.releaseWAL()
			c.retryConsumerStarts()
			if !recovered {
				recovered = c.noteRecovered()
			}
			c.logMetaMembers()
			if c.forcing.Load() && !forceRecorded {
				forceRecorded = c.recordForce()
			}
			if time.Since(lastCheckpoint) >= metaCheckpointEvery {
				lastCheckpoint = time.Now()
				if err := c.meta.Checkpoint(); err != nil {
					c.cfg.Logf("jscluster: checkpoint of the meta group: %v", err)
				}
			}
		}
		for _, ev := range c.takeEvents() {
			c.apply(ev)
		}
		c.pushConfigs()
	}
}

// noteRecovered logs, once the restart's recovery is done (Recovery),
// how many entries it applied again, and reports whether it did. When it
// applied any, every replica checkpoints first: a crash soon after does
// not make the next start apply them again.
func (c *Cluster) noteRecovered() bool {
	rec := c.Recovery()
	if !rec.Done {
		return false
	}
	n := rec.Meta + rec.Streams + rec.Consumers
	if n > 0 {
		c.checkpointAll(false)
	}
	c.cfg.Infof("%s", recoveredLine(rec, c.node.NewWAL()))
	return true
}

// recoveredLine is noteRecovered's line. A server that started on a new
// Raft WAL (its first start, a wiped store) recovered nothing, and says
// so rather than "recovered" (trial 38).
func recoveredLine(rec Recovery, newWAL bool) string {
	n := rec.Meta + rec.Streams + rec.Consumers
	if newWAL && n == 0 {
		return "JetStream cluster: started on a new Raft WAL: nothing to recover"
	}
	return fmt.Sprintf("JetStream cluster: recovered; entries applied again since the checkpoints: %d (meta %d, streams %d, consumers %d)",
		n, rec.Meta, rec.Streams, rec.Consumers)
}

// votersFile is the record of the meta group's voters (Dir/voters,
// a metafile: JSON with a CRC, replaced atomically), written once when a
// new cluster's meta group is bootstrapped, or when this server joins an
// existing one on a new store; a restart adds the meta group with them at
// once, whichever servers are up.
type votersFile struct {
	Voters []string `json:"voters"`
	// Incarnations are the members' store incarnations when the record
	// was written (32 hexadecimal digits each): every meta replica's ID is
	// derived from its server's incarnation (metaReplica). A record
	// without them is of a cluster bootstrapped before (replica IDs by
	// position in Voters).
	Incarnations map[string]string `json:"incarnations,omitempty"`
	// Join: this server joined an existing meta group (its store was
	// wiped or replaced): its replica started empty, to be added by the
	// meta leader as a learner, caught up and promoted.
	Join bool `json:"join,omitempty"`
}

// metaReplica is the meta group replica ID of the server whose store
// incarnation is inc: a store's replica, never its successor's
// (docs/cluster.md decision 3), and one every server derives alike.
func metaReplica(inc raftnode.Incarnation) raftnode.ReplicaID {
	id := binary.LittleEndian.Uint64(inc[:8])
	if id == 0 {
		id = 1
	}
	return raftnode.ReplicaID(id)
}

// bootstrap adds the meta group: with the voters recorded at the first
// start, or, on a server that has none recorded, once the cluster's
// members are known (recorded first); false when the cluster closes
// first or the record cannot be read or written (the server stays out of
// the meta group: docs/cluster.md decision 12).
func (c *Cluster) bootstrap() bool {
	dir := path.Join(c.cfg.Dir, "voters")
	var rec votersFile
	joinOnly := false
	switch err := metafile.Read(c.cfg.FS, dir, &rec); {
	case err == nil && !c.storeChanged(rec):
		return c.startMeta(rec, rec.Join)
	case err == nil:
		joinOnly = true
	case !vfs.IsNotExist(err):
		c.cfg.Logf("jscluster: the meta group's voters cannot be read: %v", err)
		return false
	}
	waitStart, relogged := time.Time{}, false
	var said []string // what this server's hellos said of its routes
	for {
		names, complete := c.host.ClusterMembers()
		if rec, newReplica, ok := c.joinOrBootstrap(names, complete); ok && (rec.Join || !joinOnly) {
			if err := c.cfg.FS.MkdirAll(dir); err != nil {
				c.cfg.Logf("jscluster: record the meta group's voters: %v", err)
				return false
			}
			if err := metafile.Write(c.cfg.FS, dir, rec); err != nil {
				c.cfg.Logf("jscluster: record the meta group's voters: %v", err)
				return false
			}
			ok := c.startMeta(rec, newReplica)
			c.tr.Rehello() // the peers learn this server runs a meta group
			if ok && !rec.Join && len(rec.Voters) > 1 {
				// A new cluster's meta group, bootstrapped here with
				// the other servers named: its first vote request
				// invites them (joinOrBootstrap's rule 1, where they
				// wait by rule 2), so campaigning at once elects the
				// first meta leader within a few round trips rather
				// than after this replica's election timeout and a
				// second one for the votes lost meanwhile (a new
				// cluster of three elected it 3.5 s after its start;
				// nats-server 0.5 s).
				c.campaignFresh(meta.MetaGroup)
			}
			return ok
		}
		// Hellos are sent when a connection is dialed: once this
		// server's routes all resolved, its peers learn so only from
		// new ones (the seed rule waits for them).
		if m := c.routeMembers(); !slices.Equal(m, said) {
			if said == nil && m != nil {
				c.tr.Rehello()
			}
			said = m
		}
		if waited := time.Since(waitStart); waitStart.IsZero() || !relogged && waited >= waitRelog {
			configured, self, connected := c.host.ClusterRoutes()
			if waitStart.IsZero() {
				waitStart, waited = time.Now(), 0
			} else {
				relogged = true
			}
			c.cfg.Infof("%s", waitingLine(configured, self, connected, waited))
		}
		c.noteLeaderless()
		select {
		case <-c.quit:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// quarantineWAL, at the start, moves a Raft WAL its replay found damaged
// to <Dir>/quarantine/raft.<UTC time> (kept for an operator, never read
// again) and starts a new one under a new store incarnation
// (raftnode.Node.QuarantineWAL), which the transport's hellos then
// carry: the server joins the meta group as a new replica (bootstrap,
// storeChanged) and the meta leader replaces its replicas of replicated
// streams and consumers, which the old incarnation's bindings fence
// (docs/cluster.md, "Fencing"). Streams of one replica keep their
// files, which no WAL holds. A move that fails leaves the WAL damaged
// and every replica fenced, as before. It reports whether the replay
// found the WAL damaged.
func (c *Cluster) quarantineWAL() bool {
	dmg := c.node.Damage()
	if dmg == nil {
		return false
	}
	to := path.Join(c.cfg.Dir, "quarantine", "raft."+time.Now().UTC().Format("20060102T150405.000000000Z"))
	inc, err := c.node.QuarantineWAL(to)
	if err != nil {
		c.cfg.Logf("jscluster: the Raft WAL is damaged (%v) and could not be moved aside (every replica of this server stays fenced): %v", dmg, err)
		return true
	}
	c.tr.SetIncarnation(inc)
	c.tr.Rehello()
	c.cfg.Logf("JetStream cluster: the Raft WAL was damaged (%v): moved to %s (kept for inspection; nothing reads it); a new WAL, store %s, replaces it: this server rejoins the meta group as a new replica, and its replicas of replicated streams and consumers are replaced from the other servers", dmg, to, inc)
	return true
}

// storeChanged reports whether the voters record rec names this server
// by a store incarnation other than its Raft WAL's: the WAL was lost or
// replaced while the rest of the store stayed (docs/cluster.md,
// "Fencing"). Its replica of the meta group must not start as the one
// the record names (decision 3: it would vote with an empty log as the
// replica that acknowledged entries); the server joins the meta group
// as a new replica instead, as a wiped server does, and never
// bootstraps a new one (bootstrap's joinOnly). A record without
// incarnations (replica IDs by position) cannot tell: false. A record
// that names neither this server nor its store under another name (a
// server renamed over its store whose WAL was then replaced: the record
// still names the store's first name by its old incarnation; a trial
// left it out of the meta group for good) is of a store changed too.
func (c *Cluster) storeChanged(rec votersFile) bool {
	was, ok := rec.Incarnations[string(c.name)]
	if !ok && rec.Incarnations != nil && !slices.Contains(rec.Voters, string(c.name)) {
		if _, renamed := c.renamedFrom(rec); !renamed {
			c.cfg.Logf("JetStream cluster: the meta group's voters record %v names neither this server nor its store %s (renamed over a store whose Raft WAL was then replaced): joining the meta group as a new replica", rec.Voters, c.node.Incarnation())
			return true
		}
	}
	if !ok || was == c.node.Incarnation().String() {
		return false
	}
	c.cfg.Logf("JetStream cluster: the meta group's voters record names this server by store %s, its Raft WAL is store %s (the WAL was lost or replaced): joining the meta group as a new replica", was, c.node.Incarnation())
	return true
}

// startMeta adds the meta group as rec records it; newReplica: this
// server joins a meta group that ran without it (joinedLine).
func (c *Cluster) startMeta(rec votersFile, newReplica bool) bool {
	if err := c.addMeta(rec); err != nil {
		c.cfg.Logf("jscluster: the meta group cannot start: %v", err)
		return false
	}
	c.syncMetaPeers()
	if !c.logMetaMembers() {
		if line := joinedLine(rec, newReplica); line != "" {
			c.cfg.Infof("%s", line)
		}
	}
	return true
}

// membersNameWait is how long logMetaMembers waits for the server names
// of the meta group's members before it names one by replica ID.
const membersNameWait = 5 * time.Second

// logMetaMembers logs, once, the meta group's members as this server's
// replica applied them (the voters of the last configuration in its
// Raft log, by server name; "replica <id>" for one whose server it does
// not know), once that replica is one of them: not the voters record,
// which names the servers known when this server bootstrapped or joined
// (a joiner's names the meta leader that added it and itself). A member
// whose server is not known yet (a server that entered a forming
// cluster's meta group knows the others' names once it applied their
// catalogue entries) is waited for, membersNameWait at most, before the
// line names it by replica ID (trial 37's first start read "meta group
// of [cn1 cn3 replica 10462958224774676476]"). It reports whether the
// replica is a member (its line logged, now or before, or waiting for
// the names).
func (c *Cluster) logMetaMembers() bool {
	if c.membersLogged {
		return true
	}
	st, err := c.node.Status(meta.MetaGroup)
	if err != nil || !slices.Contains(st.Voters, st.Replica) {
		return false
	}
	if c.membersSince.IsZero() {
		c.membersSince = time.Now()
	}
	names := map[raftnode.ReplicaID]string{st.Replica: string(c.name)}
	for _, p := range st.Peers {
		names[p.Replica] = string(p.Server)
	}
	if line, ok := membersLine(st.Voters, names, time.Since(c.membersSince)); ok {
		c.cfg.Infof("%s", line)
		c.membersLogged = true
	}
	return true
}

// membersLine is the line naming the meta group's voters, sorted, by
// server name (names), or false while one has none and waited is under
// membersNameWait; after it, such a voter is "replica <id>".
func membersLine(voters []raftnode.ReplicaID, names map[raftnode.ReplicaID]string, waited time.Duration) (string, bool) {
	var members []string
	for _, v := range voters {
		n, ok := names[v]
		if !ok {
			if waited < membersNameWait {
				return "", false
			}
			n = fmt.Sprintf("replica %d", v)
		}
		members = append(members, n)
	}
	slices.Sort(members)
	return fmt.Sprintf("JetStream cluster: meta group of %v", members), true
}

// addMeta adds the meta group as rec records it: each member's replica
// ID derived from its incarnation (metaReplica), this server's joining
// empty when rec.Join; for a record without incarnations, replica i+1 on
// rec.Voters[i] (sorted). A server renamed over its store (rec names its
// incarnation under another name) adds the same replica under its new
// name (rename.go).
func (c *Cluster) addMeta(rec votersFile) error {
	if old, ok := c.renamedFrom(rec); ok {
		c.cfg.Logf("JetStream cluster: this server's store ran as server %s: its meta replica continues as %s; %s stays in the meta group, offline, until SERVER.REMOVE removes it, and its stream and consumer replicas are not served under this name", old, c.name, old)
		rec = c.renamedRecord(rec, old)
	}
	names := rec.Voters
	i := slices.Index(names, string(c.name))
	if i < 0 {
		return fmt.Errorf("this server %q is not among the members %v", c.name, names)
	}
	gc := raftnode.GroupConfig{ID: meta.MetaGroup, Replica: raftnode.ReplicaID(i + 1), Incarnation: c.node.Incarnation(), Label: "the meta group"}
	for j, n := range names {
		gc.Peers = append(gc.Peers, raftnode.Peer{Replica: raftnode.ReplicaID(j + 1), Server: raftnode.ServerID(n)})
	}
	if rec.Incarnations != nil {
		var err error
		if gc.Peers, gc.Voters, gc.Replica, err = metaPeersOf(rec, c.name); err != nil {
			return err
		}
		gc.Join = rec.Join
	}
	gc.ForceSole = c.forcing.Load() && !gc.Join // force.go
	err := c.node.AddGroup(gc, c.meta.StateMachine())
	if err != nil && !errors.Is(err, raftnode.ErrGroupExists) {
		return err
	}
	c.mu.Lock()
	c.started = true
	c.metaPeers = gc.Peers
	c.metaByInc = rec.Incarnations != nil
	c.mu.Unlock()
	return nil
}

// metaPeersOf returns the meta group's peers as the voters record rec
// (with incarnations) names them, each replica ID derived from its
// server's incarnation (metaReplica), the voters among them (none for a
// Join record) and this server's (self) replica. Two names of one store
// (a server renamed over its store while the catalogue still holds its
// old name: rename.go) are one peer, named self when self is one of
// them, else the first in the record's order; raftnode refuses a
// repeated replica (a server with a damaged WAL that joined after a
// rename stayed out of the meta group). Errors: an incarnation that
// does not decode.
func metaPeersOf(rec votersFile, self raftnode.ServerID) (peers []raftnode.Peer, voters []raftnode.ReplicaID, replica raftnode.ReplicaID, err error) {
	for _, n := range rec.Voters {
		inc, err := parseIncarnation(rec.Incarnations[n])
		if err != nil {
			return nil, nil, 0, fmt.Errorf("the voters record: %s: %w", n, err)
		}
		id := metaReplica(inc)
		if n == string(self) {
			replica = id
		}
		if k := slices.IndexFunc(peers, func(p raftnode.Peer) bool { return p.Replica == id }); k >= 0 {
			if n == string(self) {
				peers[k].Server = self
			}
			continue
		}
		peers = append(peers, raftnode.Peer{Replica: id, Server: raftnode.ServerID(n)})
		if !rec.Join {
			voters = append(voters, id)
		}
	}
	return peers, voters, replica, nil
}

// parseIncarnation decodes an incarnation's 32 hexadecimal digits.
func parseIncarnation(s string) (raftnode.Incarnation, error) {
	var inc raftnode.Incarnation
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(inc) {
		return inc, fmt.Errorf("incarnation %q", s)
	}
	copy(inc[:], b)
	return inc, nil
}

// metaLeader reports whether this server leads the meta group and has
// applied every entry of earlier terms (raftnode GroupStatus.LeaderReady):
// a meta leader that is still applying its log after a restart does not
// answer from a state behind it.
func (c *Cluster) metaLeader() bool {
	st, err := c.node.Status(meta.MetaGroup)
	return err == nil && st.LeaderReady
}

// known returns the incarnation the meta group's catalogue knows each
// server by (the transport's hello: transport.Config.Known).
// A server removed from the meta group (SERVER.REMOVE) advertises none:
// its catalogue is no longer the cluster's, and a server of a new
// cluster must not join a meta group it names (docs/cluster.md,
// "Removing a server").
func (c *Cluster) known() map[raftnode.ServerID]raftnode.Incarnation {
	out := map[raftnode.ServerID]raftnode.Incarnation{}
	if c.removedSelf() {
		return out
	}
	c.meta.View(func(st *meta.State) {
		for _, sv := range st.Servers() {
			out[sv.Name] = sv.Incarnation
		}
	})
	return out
}

// removedSelf reports whether the catalogue marks this server, with its
// store, removed (SERVER.REMOVE), under this name or, when it has none
// of this name, under another (storeRemoved), or another server
// answered so (removedAnswered: removed while down, removedown.go).
func (c *Cluster) removedSelf() bool {
	if c.removedAnswered.Load() {
		return true
	}
	removed := false
	c.meta.View(func(st *meta.State) {
		self, ok := st.Server(c.name)
		removed = ok && self.Removed && self.Incarnation == c.node.Incarnation() ||
			!ok && storeRemoved(st, c.node.Incarnation()) // renamed after its removal
	})
	return removed
}

// Recovery is what this server's start had to do again (docs/cluster.md,
// "Restarts"): the entries its replicas applied a second time, because
// their checkpoints were behind what had committed before the restart
// (raftnode GroupStatus.Reapplied), by kind of group. A clean stop
// checkpoints every replica (StopCheckpoints), so a clean restart
// applies none again; after a crash, what came after the last
// checkpoints.
type Recovery struct {
	// Done: the WAL is replayed, the meta group runs and has applied what
	// had committed before the restart, and so has every replica of a
	// replicated stream or consumer the meta group assigns to this server
	// (in an account whose engine runs here), or it is fenced.
	Done bool
	// Meta, Streams and Consumers count the entries applied again by
	// the meta group's replica, the streams' and the consumers'.
	Meta, Streams, Consumers uint64
}

// Recovery returns what this server's start has applied again so far.
func (c *Cluster) Recovery() Recovery {
	if !c.replayed.Load() {
		return Recovery{}
	}
	var rec Recovery
	kind := map[raftnode.GroupID]*uint64{meta.MetaGroup: &rec.Meta}
	ready := map[string]bool{}
	c.mu.Lock()
	started := c.started
	for _, r := range c.replicas {
		if r.log != nil {
			kind[r.sa.Group] = &rec.Streams
		}
	}
	for _, cr := range c.creplicas {
		if cr.log != nil {
			kind[cr.ca.Group] = &rec.Consumers
		}
	}
	for name, acc := range c.accounts {
		ready[name] = acc.js != nil
	}
	c.mu.Unlock()
	for _, g := range c.node.Groups() {
		if st, err := c.node.Status(g); err == nil && kind[g] != nil {
			*kind[g] += st.Reapplied
		}
	}
	want := []raftnode.GroupID{meta.MetaGroup}
	if started {
		c.meta.View(func(st *meta.State) {
			ss, cs := st.Assigned(c.name)
			for _, sa := range ss {
				if len(sa.Replicas) > 1 && ready[sa.Account] {
					want = append(want, sa.Group)
				}
			}
			for _, ca := range cs {
				if len(ca.Replicas) > 1 && ready[ca.Account] {
					want = append(want, ca.Group)
				}
			}
		})
	}
	rec.Done = started
	for _, g := range want {
		st, err := c.node.Status(g)
		if err != nil || st.Fenced == nil && st.Applied < st.ReplayTo {
			rec.Done = false
		}
	}
	return rec
}
