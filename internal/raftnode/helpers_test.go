package raftnode

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"slices"
	"testing"

	"github.com/cairnmq/cairn/internal/vfs"
)

// hashSM is a state machine whose state is the running hash of every
// entry it applied (nats-server's "chain of blocks" idea): two replicas
// that ever applied different entries disagree from then on. Its
// checkpoint is a file (write-new, fsync, rename, fsync-directory).
type hashSM struct {
	fs      vfs.FS
	file    string
	applied uint64
	hash    [32]byte
	// onApply, if set, sees each entry applied and the hash after it.
	onApply func(e Entry, hash [32]byte)
	// onRestore, if set, sees each snapshot installed.
	onRestore func(index uint64, hash [32]byte)
	// leads records each LeaderChanged: +term when the replica became
	// leader of term, -term when it stopped leading.
	leads []int64
	// onLead, if set, is called when the replica is told it leads.
	onLead func()
	// successions records each Succeeded: +term when the predecessor
	// handed the leadership over, -term when this replica was elected.
	successions []int64
}

// Succeeded records how the replica came to lead (SuccessionObserver).
func (sm *hashSM) Succeeded(term uint64, handedOver bool) {
	if handedOver {
		sm.successions = append(sm.successions, int64(term))
	} else {
		sm.successions = append(sm.successions, -int64(term))
	}
}

// LeaderChanged records the change (LeaderObserver).
func (sm *hashSM) LeaderChanged(leader bool, term uint64) {
	if leader {
		sm.leads = append(sm.leads, int64(term))
		if sm.onLead != nil {
			sm.onLead()
		}
	} else {
		sm.leads = append(sm.leads, -int64(term))
	}
}

func newHashSM(fs vfs.FS, dir string, g GroupID) *hashSM {
	sm := &hashSM{fs: fs, file: path.Join(dir, fmt.Sprintf("sm-%d", g))}
	if err := fs.MkdirAll(dir); err != nil {
		panic(err)
	}
	if err := fs.SyncDir("."); err != nil {
		panic(err)
	}
	if b, err := readFile(fs, sm.file); err == nil && len(b) == 40 {
		sm.applied = binary.LittleEndian.Uint64(b)
		copy(sm.hash[:], b[8:])
	}
	return sm
}

func (sm *hashSM) Apply(ents []Entry) error {
	for i := range ents {
		e := &ents[i]
		if e.Index != sm.applied+1 {
			return fmt.Errorf("hashSM: entry %d applied after %d", e.Index, sm.applied)
		}
		sm.hash = chainHash(sm.hash, e)
		sm.applied = e.Index
		e.Result = sm.hash
		if sm.onApply != nil {
			sm.onApply(*e, sm.hash)
		}
	}
	return nil
}

func chainHash(prev [32]byte, e *Entry) [32]byte {
	h := sha256.New()
	h.Write(prev[:])
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], e.Index)
	binary.LittleEndian.PutUint64(b[8:], e.Term)
	h.Write(b[:])
	h.Write(e.Data)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

func (sm *hashSM) Applied() uint64 { return sm.applied }

func (sm *hashSM) state() []byte {
	b := binary.LittleEndian.AppendUint64(nil, sm.applied)
	return append(b, sm.hash[:]...)
}

func (sm *hashSM) Snapshot() ([]byte, error) { return sm.state(), nil }

func (sm *hashSM) Restore(index uint64, data []byte) error {
	if len(data) != 40 || binary.LittleEndian.Uint64(data) != index {
		return errors.New("hashSM: bad snapshot")
	}
	sm.applied = index
	copy(sm.hash[:], data[8:])
	if sm.onRestore != nil {
		sm.onRestore(index, sm.hash)
	}
	return sm.checkpoint()
}

// checkpoint makes the state durable.
func (sm *hashSM) checkpoint() error {
	tmp := sm.file + ".new"
	f, err := sm.fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(sm.state()); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := sm.fs.Rename(tmp, sm.file); err != nil {
		return err
	}
	return sm.fs.SyncDir(path.Dir(sm.file))
}

// testCluster is N nodes, each on its own CrashFS, over a MemNetwork,
// driven by hand on the test goroutine.
type testCluster struct {
	t     testing.TB
	net   *MemNetwork
	nodes []*testNode
	cfg   func(*Config)
	// labels are the groups' GroupConfig.Label (nil: none).
	labels map[GroupID]string
}

type testNode struct {
	id  ServerID
	fs  *vfs.CrashFS
	n   *Node
	sms map[GroupID]*hashSM
}

func serverName(i int) ServerID { return ServerID(fmt.Sprintf("s%d", i+1)) }

func newTestCluster(t testing.TB, n int, cfg func(*Config)) *testCluster {
	c := &testCluster{t: t, net: NewMemNetwork(1, nil), cfg: cfg}
	for i := range n {
		tn := &testNode{id: serverName(i), fs: vfs.NewCrashFS()}
		c.nodes = append(c.nodes, tn)
		c.open(i)
	}
	return c
}

// open (re)opens node i on its file system.
func (c *testCluster) open(i int) {
	tn := c.nodes[i]
	cfg := Config{FS: tn.fs, Dir: "wal", Server: tn.id, Transport: c.net.Transport(tn.id)}
	if c.cfg != nil {
		c.cfg(&cfg)
	}
	n, err := Open(cfg)
	if err != nil {
		c.t.Fatalf("open %s: %v", tn.id, err)
	}
	tn.n, tn.sms = n, map[GroupID]*hashSM{}
	c.net.Attach(tn.id, n)
}

// peers returns the peers of a group with one replica per node, replica
// IDs base+1 .. base+N.
func (c *testCluster) peers(base ReplicaID) []Peer {
	var ps []Peer
	for i, tn := range c.nodes {
		ps = append(ps, Peer{Replica: base + ReplicaID(i) + 1, Server: tn.id})
	}
	return ps
}

// addGroup adds group g on every node (replica base+i+1 on node i).
func (c *testCluster) addGroup(g GroupID, base ReplicaID) {
	for i := range c.nodes {
		c.addReplica(i, g, base)
	}
}

func (c *testCluster) addReplica(i int, g GroupID, base ReplicaID) {
	tn := c.nodes[i]
	sm := newHashSM(tn.fs, "sm", g)
	tn.sms[g] = sm
	err := tn.n.AddGroup(GroupConfig{ID: g, Replica: base + ReplicaID(i) + 1, Incarnation: tn.n.Incarnation(), Peers: c.peers(base), Label: c.labels[g]}, sm)
	if err != nil {
		c.t.Fatalf("add group %d on %s: %v", g, tn.id, err)
	}
}

// step runs one round on every node and delivers what is in flight; it
// reports whether anything happened.
func (c *testCluster) step() bool {
	busy := false
	for _, tn := range c.nodes {
		if tn.n != nil && tn.n.RunRound() {
			busy = true
		}
	}
	if c.net.DeliverAll() > 0 {
		busy = true
	}
	return busy
}

// stabilize steps until nothing happens (bounded).
func (c *testCluster) stabilize() {
	for i := 0; c.step(); i++ {
		if i > 10000 {
			c.t.Fatal("cluster does not stabilize")
		}
	}
}

// tick ticks every node k times, stabilizing after each.
func (c *testCluster) tick(k int) {
	for range k {
		for _, tn := range c.nodes {
			if tn.n != nil {
				tn.n.Tick()
			}
		}
		c.stabilize()
	}
}

// tickUntilLeader ticks every node until one of the given nodes leads
// group g, at most max ticks (raft randomises election timeouts, and two
// candidates can split their votes several times in a row), and returns
// that node's index.
func (c *testCluster) tickUntilLeader(g GroupID, max int, among ...int) int {
	for range max {
		if l := c.leader(g); slices.Contains(among, l) {
			return l
		}
		c.tick(1)
	}
	c.t.Fatalf("no leader of %d among nodes %v after %d ticks (leader %d)", g, among, max, c.leader(g))
	return -1
}

func (c *testCluster) status(i int, g GroupID) GroupStatus {
	s, err := c.nodes[i].n.Status(g)
	if err != nil {
		c.t.Fatalf("status of %d on %s: %v", g, c.nodes[i].id, err)
	}
	return s
}

// leader returns the node index of the group's leader (-1: none).
func (c *testCluster) leader(g GroupID) int {
	for i, tn := range c.nodes {
		if tn.n == nil {
			continue
		}
		if s, err := tn.n.Status(g); err == nil && s.Role == Leader {
			return i
		}
	}
	return -1
}

// elect campaigns node i for group g and stabilizes.
func (c *testCluster) elect(i int, g GroupID) {
	if err := c.nodes[i].n.Campaign(g); err != nil {
		c.t.Fatal(err)
	}
	c.stabilize()
	if l := c.leader(g); l != i {
		c.t.Fatalf("leader of %d is node %d, want %d", g, l, i)
	}
}

// propose proposes data on node i and stabilizes; it returns the proposal.
func (c *testCluster) propose(i int, g GroupID, data string) *Proposal {
	p, err := c.nodes[i].n.Propose(g, []byte(data))
	if err != nil {
		c.t.Fatal(err)
	}
	c.stabilize()
	return p
}

// crash simulates a power loss of node i (unsynced writes per opts).
func (c *testCluster) crash(i int, opts vfs.CrashOptions) {
	tn := c.nodes[i]
	c.net.Detach(tn.id)
	tn.fs = tn.fs.Crash(opts)
	tn.n = nil
}

// checkSame fails unless every live replica of g has applied the same
// index with the same hash.
func (c *testCluster) checkSame(g GroupID) {
	c.t.Helper()
	var ref *hashSM
	for _, tn := range c.nodes {
		sm := tn.sms[g]
		if tn.n == nil || sm == nil {
			continue
		}
		if ref == nil {
			ref = sm
			continue
		}
		if sm.applied != ref.applied || sm.hash != ref.hash {
			c.t.Fatalf("replicas differ: %s at %d, another at %d (or same index, other hash)", tn.id, sm.applied, ref.applied)
		}
	}
}
