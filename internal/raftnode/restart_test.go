package raftnode

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairnmq/cairn/internal/vfs"
)

// A replica whose state machine checkpointed at the last entry it applied
// before a clean stop applies none of them again after a restart; one
// whose checkpoint is older applies exactly the entries after it again,
// and says so (GroupStatus.ReplayTo, Reapplied).
func TestRestartReappliedCount(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ckptAt  int // entries proposed before the checkpoint
		entries int
	}{
		{"checkpoint at the end", 5, 5},
		{"checkpoint three entries behind", 2, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, 3, nil)
			c.addGroup(1, 0)
			c.elect(0, 1)
			for i := range tc.entries {
				c.propose(0, 1, fmt.Sprint(i))
				if i+1 == tc.ckptAt {
					c.tick(1)
					if err := c.nodes[1].sms[1].checkpoint(); err != nil {
						t.Fatal(err)
					}
				}
			}
			c.tick(2)
			want := *c.nodes[1].sms[1]
			if err := c.nodes[1].n.Close(); err != nil { // a clean stop: nothing unsynced is lost
				t.Fatal(err)
			}
			c.open(1)
			c.addReplica(1, 1, 0)
			c.tick(2)
			st := c.status(1, 1)
			if got := c.nodes[1].sms[1]; got.applied != want.applied || got.hash != want.hash {
				t.Fatalf("after the restart at %d, want %d", got.applied, want.applied)
			}
			if st.ReplayTo != want.applied {
				t.Fatalf("ReplayTo %d, want %d", st.ReplayTo, want.applied)
			}
			if wantRe := uint64(tc.entries - tc.ckptAt); st.Reapplied != wantRe {
				t.Fatalf("reapplied %d entries, want %d", st.Reapplied, wantRe)
			}
		})
	}
}

// A replica that comes to lead while it still has committed entries of
// earlier terms to apply (every server restarted, a state machine far
// behind its log) is told it leads, and says LeaderReady, only once it
// has applied them all: it never serves from a state behind its log.
func TestLeaderReadyAfterReplay(t *testing.T) {
	// One entry per Apply, so that replaying the log takes many rounds.
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.MaxSizePerMsg = 1 })
	c.addGroup(1, 0)
	c.elect(0, 1)
	const n = 30
	for i := range n {
		c.propose(0, 1, fmt.Sprint(i))
	}
	c.tick(2)
	last := c.status(0, 1).Commit
	for i := range c.nodes {
		c.crash(i, vfs.CrashOptions{Tail: vfs.TailDrop})
	}
	for i := range c.nodes {
		c.open(i)
		c.addReplica(i, 1, 0)
	}
	sm := c.nodes[2].sms[1]
	var appliedAtLead []uint64
	sm.onLead = func() { appliedAtLead = append(appliedAtLead, sm.applied) }
	if err := c.nodes[2].n.Campaign(1); err != nil {
		t.Fatal(err)
	}
	sawEarly := false
	for range 1000 {
		if !c.step() {
			break
		}
		st := c.status(2, 1)
		if st.Role == Leader && sm.applied < last {
			sawEarly = true // the case under test: leading, log not applied yet
			if st.LeaderReady {
				t.Fatalf("LeaderReady with the state machine at %d of %d", sm.applied, last)
			}
		}
	}
	if !sawEarly {
		t.Fatalf("node 3 never led before it had applied its log (the test's premise)")
	}
	if st := c.status(2, 1); st.Role != Leader || !st.LeaderReady {
		t.Fatalf("node 3: %v, ready %v", st.Role, st.LeaderReady)
	}
	if len(appliedAtLead) != 1 || appliedAtLead[0] <= last {
		t.Fatalf("told it leads with the state machine at %v, want once, past %d", appliedAtLead, last)
	}
}

// failingTransport fails every Send while fail is set (to server only,
// when only is set), as the real transport does for a server it has no
// route to yet, or that is down.
type failingTransport struct {
	Transport
	fail *atomic.Bool
	only ServerID
}

func (f failingTransport) Send(to ServerID, frame []byte) error {
	if f.fail.Load() && (f.only == "" || to == f.only) {
		return errors.New("no route")
	}
	return f.Transport.Send(to, frame)
}

// A replica that restarts before it can reach its peers (a server whose
// routes are not up yet) wakes them once it can: it learns its quiet
// leader within a tick or two, not after an election timeout.
func TestRestartWakesQuietLeaderOnceReachable(t *testing.T) {
	var fail atomic.Bool
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.Server == serverName(2) {
			cfg.Transport = failingTransport{Transport: cfg.Transport, fail: &fail}
		}
	})
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.tick(3)
	if !c.status(0, 1).Quiesced {
		t.Fatal("the leader did not go quiet (the test's premise)")
	}
	c.crash(2, vfs.CrashOptions{Tail: vfs.TailDrop})
	fail.Store(true)
	c.open(2)
	c.addReplica(2, 1, 0)
	c.tick(1) // its wake envelopes cannot leave
	if st := c.status(2, 1); st.Leader != 0 {
		t.Fatalf("knows leader %d while it cannot send", st.Leader)
	}
	fail.Store(false)
	c.tick(2)
	if st := c.status(2, 1); st.Leader != 1 {
		t.Fatalf("two ticks after its peers became reachable the replica knows leader %d, want 1", st.Leader)
	}
}

// gateFS lets a test hold reads of WAL segments past their header: while
// closed, such a read fails (errGated).
type gateFS struct {
	vfs.FS
	closed *atomic.Bool
}

var errGated = errors.New("gated read")

func (g gateFS) Open(name string) (vfs.File, error) {
	f, err := g.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return gateFile{f, g.closed}, nil
}

type gateFile struct {
	vfs.File
	closed *atomic.Bool
}

func (f gateFile) ReadAt(p []byte, off int64) (int, error) {
	if f.closed.Load() && off+int64(len(p)) > segmentHeaderSize {
		return 0, errGated
	}
	return f.File.ReadAt(p, off)
}

// With DeferReplay, Open reads only the first segment's header (the
// store's incarnation, which the transport's hello needs at once); the
// replay of the log waits for Replay, and the node runs no round before
// it. AddGroup replays first when Replay was not called.
func TestDeferReplay(t *testing.T) {
	fs := vfs.NewCrashFS()
	n, err := Open(Config{FS: fs, Dir: "wal", Server: "s1", Transport: NewMemNetwork(1, nil).Transport("s1")})
	if err != nil {
		t.Fatal(err)
	}
	inc := n.Incarnation()
	sm := &hashSM{fs: fs, file: "sm-1"}
	if err := n.AddGroup(GroupConfig{ID: 1, Replica: 1, Incarnation: inc, Peers: []Peer{{Replica: 1, Server: "s1"}}}, sm); err != nil {
		t.Fatal(err)
	}
	// Tick until the replica leads (raft draws its election timeout at
	// random: a fixed count of ticks was too few in 1 of about 40 runs),
	// then until its proposal applied.
	for k := 0; ; k++ {
		if st, _ := n.Status(1); st.LeaderReady {
			break
		}
		if k > 1000 {
			t.Fatal("the single replica never led")
		}
		n.Tick()
		n.RunRound()
	}
	if _, err := n.Propose(1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for k := 0; sm.applied < 3; k++ {
		if k > 1000 {
			t.Fatalf("the proposal never applied: applied %d", sm.applied)
		}
		n.Tick()
		n.RunRound()
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	var closed atomic.Bool
	closed.Store(true)
	n, err = Open(Config{FS: gateFS{fs, &closed}, Dir: "wal", Server: "s1", Transport: NewMemNetwork(1, nil).Transport("s1"), DeferReplay: true})
	if err != nil {
		t.Fatalf("open with the segments unreadable: %v", err)
	}
	if n.Incarnation() != inc {
		t.Fatalf("incarnation %s, want %s", n.Incarnation(), inc)
	}
	n.Tick()
	if n.RunRound() {
		t.Fatal("a round ran before the replay")
	}
	closed.Store(false)
	sm = &hashSM{fs: fs, file: "sm-1"}
	if err := n.AddGroup(GroupConfig{ID: 1, Replica: 1, Incarnation: inc, Peers: []Peer{{Replica: 1, Server: "s1"}}}, sm); err != nil {
		t.Fatal(err)
	}
	for n.RunRound() {
	}
	if st, err := n.Status(1); err != nil || st.Fenced != nil || sm.applied < 3 {
		t.Fatalf("after the replay: %+v %v, applied %d", st, err, sm.applied)
	}
	n.Close()
}

// A restarted replica that cannot reach one peer (its server is down)
// wakes it again only while it knows no leader, and only that peer: once
// it has learnt its leader, the group goes quiet again, rather than have
// every round's wake envelopes keep its leader awake while the other
// server stays down.
func TestReannounceLetsLeaderQuiesce(t *testing.T) {
	var fail atomic.Bool
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.Server == serverName(2) {
			cfg.Transport = failingTransport{Transport: cfg.Transport, fail: &fail, only: serverName(1)}
		}
	})
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.tick(3)
	c.crash(1, vfs.CrashOptions{Tail: vfs.TailDrop}) // s2 is down for good
	c.crash(2, vfs.CrashOptions{Tail: vfs.TailDrop})
	fail.Store(true)
	c.open(2)
	c.addReplica(2, 1, 0)
	c.tick(40)
	if st := c.status(2, 1); st.Leader != 1 {
		t.Fatalf("the restarted replica knows leader %d, want 1", st.Leader)
	}
	if !c.status(0, 1).Quiesced {
		t.Fatal("the leader never went quiet again: the restarted replica keeps waking it")
	}
}

// A replica whose state machine lost everything at a restart (Applied 0,
// a memory stream's) is handed the log from index 2 again when the
// group's base is the empty state, but fenced with ErrStateLost when
// GroupConfig.BaseHoldsState says the base stands for a state the log
// does not hold (docs/cluster.md, "Memory streams").
func TestBaseHoldsStateFencesEmptyRestart(t *testing.T) {
	for _, holds := range []bool{false, true} {
		t.Run(fmt.Sprint("BaseHoldsState=", holds), func(t *testing.T) {
			c := newTestCluster(t, 3, nil)
			c.addGroup(1, 0)
			c.elect(0, 1)
			for i := range 3 {
				c.propose(0, 1, fmt.Sprint(i))
			}
			c.tick(2)
			if err := c.nodes[1].n.Close(); err != nil {
				t.Fatal(err)
			}
			c.open(1)
			tn := c.nodes[1]
			sm := newHashSM(vfs.NewCrashFS(), "sm", 1) // its state is gone
			tn.sms[1] = sm
			if err := tn.n.AddGroup(GroupConfig{ID: 1, Replica: 2, Incarnation: tn.n.Incarnation(), Peers: c.peers(0), BaseHoldsState: holds}, sm); err != nil {
				t.Fatal(err)
			}
			c.tick(2)
			st := c.status(1, 1)
			if holds != errors.Is(st.Fenced, ErrStateLost) {
				t.Fatalf("fenced: %v", st.Fenced)
			}
			if !holds && (st.Fenced != nil || sm.applied != c.nodes[0].sms[1].applied) {
				t.Fatalf("fenced %v, applied %d, want %d", st.Fenced, sm.applied, c.nodes[0].sms[1].applied)
			}
		})
	}
}

// A new WAL is normal on a first start: Open reports it to Infof, not to
// Logf (which the cluster layer logs as warnings), and to Debugf when
// Infof is unset; reopening it reports nothing.
func TestNewWALIsInfo(t *testing.T) {
	fs := vfs.NewCrashFS()
	var warns, infos, debugs []string
	logTo := func(to *[]string) func(string, ...any) {
		return func(f string, a ...any) { *to = append(*to, fmt.Sprintf(f, a...)) }
	}
	cfg := Config{FS: fs, Dir: "wal", Server: "s1", Transport: NewMemNetwork(1, nil).Transport("s1"),
		Logf: logTo(&warns), Infof: logTo(&infos), Debugf: logTo(&debugs)}
	open := func(cfg Config) {
		t.Helper()
		n, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	open(cfg)
	if len(warns) != 0 || len(infos) != 1 || !strings.HasPrefix(infos[0], "raftnode: new WAL in wal, store incarnation ") {
		t.Fatalf("first open: warnings %q, infos %q", warns, infos)
	}
	open(cfg)
	if len(warns) != 0 || len(infos) != 1 {
		t.Fatalf("reopen: warnings %q, infos %q", warns, infos)
	}
	cfg.FS, cfg.Infof = vfs.NewCrashFS(), nil
	debugs = nil
	open(cfg)
	if len(warns) != 0 || len(infos) != 1 || !slices.ContainsFunc(debugs, func(s string) bool { return strings.HasPrefix(s, "raftnode: new WAL") }) {
		t.Fatalf("without Infof: warnings %q, debugs %q", warns, debugs)
	}
}

// A replica whose peer list no longer places a member of its group's
// configuration (the kept replica of a scale-down to one replica,
// restarted before it removed the other: the assignment names it alone)
// wakes that member on every server it knows. Its quiet follower,
// still in the lease of the leader that restarted too fast to be found
// dead, campaigns, and the group has a leader again. Before, the
// restarted replica could send that member nothing, the member never
// ticked, and the group stayed leaderless for good (a consumer's info
// answered 10008 until the test gave up).
func TestRestartWakesUnplacedMember(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(2, 0) // every server knows the others through it, as through the meta group
	two := []Peer{{Replica: 1, Server: serverName(0)}, {Replica: 2, Server: serverName(1)}}
	add := func(i int, peers []Peer) {
		tn := c.nodes[i]
		sm := newHashSM(tn.fs, "sm1", 1)
		tn.sms[1] = sm
		if err := tn.n.AddGroup(GroupConfig{ID: 1, Replica: ReplicaID(i) + 1, Incarnation: tn.n.Incarnation(), Peers: peers}, sm); err != nil {
			t.Fatal(err)
		}
	}
	add(0, two)
	add(1, two)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.tick(3)
	if !c.status(1, 1).Quiesced {
		t.Fatal("the follower did not go quiet (the test's premise)")
	}
	c.crash(0, vfs.CrashOptions{Tail: vfs.TailDrop})
	c.open(0)
	c.addReplica(0, 2, 0)
	add(0, two[:1]) // its peer list names itself alone
	c.tickUntilLeader(1, 200, 0, 1)
}
