package raftnode

import (
	"sync"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestStalledRoundsKeepLeader: when every server's round loop stalls for
// three election timeouts (a starved CPU, long fsyncs), the ticks they
// missed are not all stepped at once: the leader keeps its group. With
// every missed tick caught up after the round's messages, the leader ran
// CheckQuorum twice in one round, the second time with no response since
// the first, and stepped down (trial 34: meta leaders lost 8 to 10 times a
// minute under write bursts on a loaded machine).
func TestStalledRoundsKeepLeader(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.DisableQuiescence = true })
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.tick(25) // heartbeats and their responses flow
	term := c.status(0, 1).Term
	for range 30 { // every loop stalls: ticks pass, no round runs
		for _, tn := range c.nodes {
			tn.n.Tick()
		}
	}
	c.tick(30)
	if l, s := c.leader(1), c.status(0, 1); l != 0 || s.Term != term {
		t.Fatalf("after a stall of 30 ticks: leader node %d in term %d, want node 0 in term %d", l, s.Term, term)
	}
}

// sentMsg is a raft message a node handed to its transport.
type sentMsg struct {
	group GroupID
	typ   pb.MessageType
}

// recordingTransport records the messages of the frames it sends.
type recordingTransport struct {
	Transport
	mu   *sync.Mutex
	sent *[]sentMsg
}

func (r recordingTransport) Send(to ServerID, frame []byte) error {
	r.mu.Lock()
	_ = decodeFrame(frame, func(g GroupID, _ byte, msg []byte) {
		var m pb.Message
		if len(msg) > 0 && proto.Unmarshal(msg, &m) == nil {
			*r.sent = append(*r.sent, sentMsg{g, m.GetType()})
		}
	})
	r.mu.Unlock()
	return r.Transport.Send(to, frame)
}

// TestAnswersWithoutSyncLeaveBeforeFsync: in a round where one group
// appends entries (an fsync), another group's heartbeat response leaves
// before the fsync, while the append response waits for it. Before, every
// response waited, so one group's large write held up the heartbeats of
// every group on the server past the fsync.
func TestAnswersWithoutSyncLeaveBeforeFsync(t *testing.T) {
	var mu sync.Mutex
	var sent []sentMsg
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.DisableQuiescence = true
		if cfg.Server == serverName(1) {
			cfg.Transport = recordingTransport{Transport: cfg.Transport, mu: &mu, sent: &sent}
		}
	})
	c.addGroup(1, 0)
	c.addGroup(2, 10)
	c.elect(0, 1)
	c.elect(0, 2)
	c.tick(3)
	// Node 0 appends in group 1 and heartbeats in group 2 in one round.
	if _, err := c.nodes[0].n.Propose(1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	c.nodes[0].n.Tick()
	c.nodes[0].n.RunRound()
	c.net.DeliverAll()
	mu.Lock()
	sent = nil
	mu.Unlock()
	// Node 1's round stops where its fsync would start.
	c.nodes[1].n.testHook = func(p crashPoint) bool { return p == afterAppends }
	c.nodes[1].n.RunRound()
	mu.Lock()
	defer mu.Unlock()
	var hbResp, appResp bool
	for _, m := range sent {
		hbResp = hbResp || (m.group == 2 && m.typ == pb.MsgHeartbeatResp)
		appResp = appResp || (m.group == 1 && m.typ == pb.MsgAppResp)
	}
	if !hbResp || appResp {
		t.Fatalf("sent before the fsync: %v; want group 2's MsgHeartbeatResp and not group 1's MsgAppResp", sent)
	}
}

// TestSharedStallKeepsLeader: every server's loop stalls for 11 ticks at
// once (a disk they share took 1.1 s to fsync, trial 37), and the
// leader's loop resumes 4 ticks after its followers'. The followers step
// their missed ticks stretched by their own pause, so the leader's next
// heartbeat reaches them within their election timeout. Before, they
// stepped 9 of the 11 ticks at once, campaigned 1 to 11 ticks later, and
// elected one of them (in term+1, or later after a split vote).
func TestSharedStallKeepsLeader(t *testing.T) {
	for seed := range 5 {
		c := newTestCluster(t, 3, func(cfg *Config) { cfg.DisableQuiescence = true })
		c.addGroup(1, 0)
		c.elect(0, 1)
		c.tick(25 + seed) // heartbeats and their responses flow
		term := c.status(0, 1).Term
		for range 11 { // every loop stalls: ticks pass, no round runs
			for _, tn := range c.nodes {
				tn.n.Tick()
			}
		}
		for range 4 { // the followers' loops resume; the leader's does not
			for _, tn := range c.nodes {
				tn.n.Tick()
			}
			for range 20 {
				c.nodes[1].n.RunRound()
				c.nodes[2].n.RunRound()
				c.net.DeliverAll()
			}
		}
		c.tick(30)
		if l, s := c.leader(1), c.status(0, 1); l != 0 || s.Term != term {
			t.Fatalf("seed %d: after a shared stall of 11 ticks: leader node %d in term %d, want node 0 in term %d", seed, l, s.Term, term)
		}
		if s := c.nodes[1].n.Stretch(); s != 2400 { // 12 ticks between two rounds' starts
			t.Fatalf("follower's stretch after a pause of 12 ticks: %d, want 2400", s)
		}
	}
}
