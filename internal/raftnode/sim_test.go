package raftnode

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/cryptotest"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairnmq/cairn/internal/vfs"
)

// The simulator: N nodes (3 or 5) holding two groups, each node on its
// own crash file system, over a MemNetwork, all driven by one goroutine
// from one seeded random source (raft's own randomness included, through
// cryptotest.SetGlobalRandom), so a seed replays exactly. Each step picks
// one event: deliver, drop or duplicate a frame in flight, run a round on
// a node, tick, propose, checkpoint and compact, step down, cut or heal a
// link, power-loss a node (unsynced writes kept, dropped or torn at
// random), crash a node inside a round (after the write, after the
// leaders' appends went out ahead of the fsync, after the fsync, after the
// sends), sometimes followed by a power loss of a majority of the other
// nodes, restart it. After every step it checks:
//
//   - nothing a node sends in a round before its fsync (the leaders'
//     appends) promises what its disk does not hold: an append response
//     for entries beyond its durable log, or a vote not durably cast
//     (checked at that point of every round);
//   - every replica's commit index names an entry that a majority of the
//     group's replicas hold durably, in what a power loss of every node
//     would leave of their WALs (a leader that counted its own copy
//     before its fsync breaks this at once);
//   - at most one leader per term, per group;
//   - every replica applies, at each index, the same entry, and reaches
//     the same state hash (replicas byte-identical at equal index);
//   - an acknowledged proposal is the entry applied at its index, and the
//     proposer's result is the state hash there;
//   - a snapshot installed at an index holds the state hash there;
//   - no replica is fenced (nothing in this fault model damages fsynced
//     data).
//
// At the end it heals everything, restarts every node and requires all
// replicas to converge on the same state, holding every acknowledged
// entry.
//
// Short by default (a few seconds). Longer runs:
//
//	RAFTSIM_SEEDS=500 RAFTSIM_STEPS=20000 go test -run TestSimulation ./internal/raftnode/
//
// and a failing seed replays with RAFTSIM_SEED=<seed> (plus the same
// RAFTSIM_STEPS).
func TestSimulation(t *testing.T) {
	seeds := envInt(t, "RAFTSIM_SEEDS", 6)
	steps := envInt(t, "RAFTSIM_STEPS", 2500)
	first := uint64(1)
	if v := os.Getenv("RAFTSIM_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		first, seeds = seed, 1
	}
	for seed := first; seed < first+uint64(seeds); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			s := newSim(t, seed)
			s.run(steps)
		})
	}
}

// TestSimulationReplays checks that a seed replays exactly: two runs of
// one seed log the same events.
func TestSimulationReplays(t *testing.T) {
	var traces [2]string
	for i := range traces {
		s := newSim(t, 42)
		s.run(600)
		traces[i] = strings.Join(s.log, "\n")
	}
	if traces[0] != traces[1] {
		t.Fatal("one seed, two different runs")
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

type entryID struct {
	term uint64
	data [32]byte
}

// simTag is who proposed under a tag, and what.
type simTag struct {
	node ServerID
	data string
}

type simProposal struct {
	node int
	g    GroupID
	p    *Proposal
	data string
}

type sim struct {
	t     *testing.T
	seed  uint64
	r     *rand.Rand
	net   *MemNetwork
	nodes []*testNode
	down  []bool
	next  int // proposals made

	groups  []GroupID
	entries map[GroupID]map[uint64]entryID  // the entry applied at each index
	hashes  map[GroupID]map[uint64][32]byte // the state hash after each index
	acked   map[GroupID]map[uint64]entryID
	leaders map[GroupID]map[uint64]ReplicaID // term -> leader
	pending []simProposal
	durable map[GroupID]uint64 // the highest commit index found durable on a majority
	sent    [][][]byte         // the frames each node sent in its current round
	crashIn struct {           // the round crashInRound crashes
		node int
		at   crashPoint
		hit  bool
	}
	incs   []Incarnation // each node's store, as its replicas are bound to it
	quiet  int           // replica-steps spent quiesced
	tags   map[uint64]simTag
	log    []string
	failed bool
}

func newSim(t *testing.T, seed uint64) *sim {
	cryptotest.SetGlobalRandom(t, seed)
	s := &sim{
		t: t, seed: seed, r: rand.New(rand.NewPCG(seed, 0x5eed)),
		net:     NewMemNetwork(seed, nil),
		groups:  []GroupID{1, 2},
		entries: map[GroupID]map[uint64]entryID{}, hashes: map[GroupID]map[uint64][32]byte{},
		acked: map[GroupID]map[uint64]entryID{}, leaders: map[GroupID]map[uint64]ReplicaID{},
		tags: map[uint64]simTag{}, durable: map[GroupID]uint64{},
	}
	for _, g := range s.groups {
		s.entries[g], s.hashes[g], s.acked[g], s.leaders[g] = map[uint64]entryID{}, map[uint64][32]byte{}, map[uint64]entryID{}, map[uint64]ReplicaID{}
		s.durable[g] = initialIndex // the synthetic base every replica starts from
	}
	n := 3 + 2*int(seed%2)
	for i := range n {
		s.nodes = append(s.nodes, &testNode{id: serverName(i), fs: vfs.NewCrashFS()})
		s.down = append(s.down, false)
	}
	s.incs = make([]Incarnation, n)
	s.sent = make([][][]byte, n)
	for i := range n {
		s.start(i)
	}
	t.Cleanup(func() {
		if t.Failed() && !s.failed {
			s.dump()
		}
	})
	return s
}

func (s *sim) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf(format, args...))
}

func (s *sim) dump() {
	s.failed = true
	from := max(0, len(s.log)-envInt(s.t, "RAFTSIM_LOG", 300))
	s.t.Logf("last events of seed %d:\n%s", s.seed, strings.Join(s.log[from:], "\n"))
	s.t.Logf("replay: RAFTSIM_SEED=%d go test -run 'TestSimulation$' ./internal/raftnode/", s.seed)
}

func (s *sim) fatalf(format string, args ...any) {
	s.t.Helper()
	s.dump()
	s.t.Fatalf("seed %d: %s", s.seed, fmt.Sprintf(format, args...))
}

// start opens node i on its file system and adds both groups, with state
// machines loaded from their checkpoints.
func (s *sim) start(i int) {
	tn := s.nodes[i]
	cfg := Config{
		FS: tn.fs, Dir: "wal", Server: tn.id, Transport: simTransport{inner: s.net.Transport(tn.id), s: s, i: i},
		SegmentBytes: 8 << 10, MaxSizePerMsg: 2 << 10, MaxInflightMsgs: 8,
		Logf: func(f string, a ...any) { s.logf("  %s: %s", tn.id, fmt.Sprintf(f, a...)) },
	}
	n, err := Open(cfg)
	if err != nil {
		s.fatalf("open %s: %v", tn.id, err)
	}
	tn.n, tn.sms = n, map[GroupID]*hashSM{}
	n.testHook = s.hook(i)
	if s.incs[i] == (Incarnation{}) {
		s.incs[i] = n.Incarnation()
	}
	for gi, g := range s.groups {
		sm := newHashSM(tn.fs, "sm", g)
		s.watch(tn, g, sm)
		tn.sms[g] = sm
		var peers []Peer
		for j, o := range s.nodes {
			peers = append(peers, Peer{Replica: ReplicaID(10*gi + j + 1), Server: o.id})
		}
		if err := n.AddGroup(GroupConfig{ID: g, Replica: ReplicaID(10*gi + i + 1), Incarnation: s.incs[i], Peers: peers}, sm); err != nil {
			s.fatalf("add group %d on %s: %v", g, tn.id, err)
		}
	}
	s.net.Attach(tn.id, n)
	s.down[i] = false
	for _, g := range s.groups {
		st, _ := n.Status(g)
		s.logf("  %s: group %d starts with log %d..%d, applied %d, commit %d, term %d", tn.id, g, st.FirstIndex, st.LastIndex, st.Applied, st.Commit, st.Term)
	}
}

// watch checks every entry a state machine applies and every snapshot it
// installs against what the other replicas did.
func (s *sim) watch(tn *testNode, g GroupID, sm *hashSM) {
	sm.onApply = func(e Entry, hash [32]byte) {
		id := entryID{term: e.Term, data: sha256.Sum256(e.Data)}
		if prev, ok := s.entries[g][e.Index]; ok && prev != id {
			s.fatalf("group %d: %s applied at %d an entry of term %d, another replica one of term %d", g, tn.id, e.Index, e.Term, prev.term)
		}
		if prev, ok := s.hashes[g][e.Index]; ok && prev != hash {
			s.fatalf("group %d: %s reached another state at %d", g, tn.id, e.Index)
		}
		s.entries[g][e.Index], s.hashes[g][e.Index] = id, hash
		if e.Tag != 0 {
			if tg, ok := s.tags[e.Tag]; !ok || tg.node != tn.id || tg.data != string(e.Data) {
				s.fatalf("group %d: %s applied %d with tag %d, which is not its proposal of that entry", g, tn.id, e.Index, e.Tag)
			}
		}
	}
	sm.onRestore = func(index uint64, hash [32]byte) {
		if prev, ok := s.hashes[g][index]; ok && prev != hash {
			s.fatalf("group %d: %s installed a snapshot at %d that differs from the state there", g, tn.id, index)
		}
		s.logf("  %s: group %d installs a snapshot at %d", tn.id, g, index)
	}
}

func (s *sim) live() []int {
	var l []int
	for i := range s.nodes {
		if !s.down[i] {
			l = append(l, i)
		}
	}
	return l
}

func (s *sim) run(steps int) {
	defer func() {
		if r := recover(); r != nil {
			s.fatalf("panic: %v", r)
		}
	}()
	for step := range steps {
		s.step(step)
		s.check()
	}
	s.converge()
	count := func(prefix string) int {
		n := 0
		for _, l := range s.log {
			if strings.Contains(l, prefix) {
				n++
			}
		}
		return n
	}
	s.t.Logf("seed %d, %d nodes: acknowledged %d+%d entries, terms %d+%d, %d power losses, %d snapshots installed, %d torn tails cut, %d replica-steps quiet",
		s.seed, len(s.nodes), len(s.acked[1]), len(s.acked[2]), len(s.leaders[1]), len(s.leaders[2]),
		count("power loss"), count("installs a snapshot"), count("torn tail"), s.quiet)
}

// step performs one random event.
func (s *sim) step(step int) {
	live := s.live()
	inflight := s.net.InFlight()
	x := s.r.IntN(1000)
	switch {
	case x < 300 && inflight > 0:
		for k := 1 + s.r.IntN(3); k > 0 && inflight > 0; k, inflight = k-1, s.net.InFlight() {
			i := s.r.IntN(inflight)
			s.logf("%d deliver %d/%d", step, i, inflight)
			s.net.Deliver(i)
		}
	case x < 310 && inflight > 0:
		s.logf("%d drop", step)
		s.net.Drop(s.r.IntN(inflight))
	case x < 320 && inflight > 0:
		s.logf("%d duplicate", step)
		s.net.Duplicate(s.r.IntN(inflight))
	case x < 570 && len(live) > 0:
		i := live[s.r.IntN(len(live))]
		s.logf("%d round %s", step, s.nodes[i].id)
		s.round(i)
	case x < 630 && len(live) > 0:
		i := live[s.r.IntN(len(live))]
		s.logf("%d tick %s", step, s.nodes[i].id)
		s.nodes[i].n.Tick()
	case x < 670:
		s.logf("%d tick all", step)
		for _, i := range live {
			s.nodes[i].n.Tick()
		}
	case x < 820 && len(live) > 0:
		if (step/400)%3 == 2 {
			break // an idle stretch: groups may quiesce, faults go on
		}
		s.propose(step, live)
	case x < 840 && len(live) > 0:
		s.checkpoint(step, live[s.r.IntN(len(live))])
	case x < 843 && len(live) > 0:
		i, g := live[s.r.IntN(len(live))], s.groups[s.r.IntN(len(s.groups))]
		s.logf("%d stepdown %s group %d", step, s.nodes[i].id, g)
		_ = s.nodes[i].n.StepDown(g)
	case x < 846:
		a, b := s.r.IntN(len(s.nodes)), s.r.IntN(len(s.nodes))
		if a != b {
			s.logf("%d cut %s->%s", step, s.nodes[a].id, s.nodes[b].id)
			s.net.Cut(s.nodes[a].id, s.nodes[b].id)
		}
	case x < 848: // isolate a node, often the leader of a group
		a := s.r.IntN(len(s.nodes))
		for _, i := range live {
			if st, _ := s.nodes[i].n.Status(s.groups[s.r.IntN(len(s.groups))]); st.Role == Leader && s.r.IntN(2) == 0 {
				a = i
			}
		}
		s.logf("%d isolate %s", step, s.nodes[a].id)
		for b := range s.nodes {
			if b != a {
				s.net.Partition(s.nodes[a].id, s.nodes[b].id)
			}
		}
	case x < 858:
		s.logf("%d heal", step)
		s.net.HealAll()
	case x < 861 && len(live) > 0:
		if s.r.IntN(20) == 0 {
			s.logf("%d power loss everywhere", step)
			for _, i := range live {
				s.crash(step, i)
			}
			break
		}
		s.crash(step, live[s.r.IntN(len(live))])
	case x < 866 && len(live) > 0:
		s.crashInRound(step, live[s.r.IntN(len(live))])
	case x < 894 && len(live) < len(s.nodes):
		for i := range s.nodes {
			if s.down[i] {
				s.logf("%d restart %s", step, s.nodes[i].id)
				s.start(i)
				break
			}
		}
	}
}

func (s *sim) round(i int) {
	defer func() {
		if r := recover(); r != nil {
			s.fatalf("panic on %s: %v", s.nodes[i].id, r)
		}
	}()
	s.nodes[i].n.RunRound()
}

// propose proposes on a random live node, most often the group's leader.
func (s *sim) propose(step int, live []int) {
	g := s.groups[s.r.IntN(len(s.groups))]
	i := live[s.r.IntN(len(live))]
	if s.r.IntN(4) > 0 {
		for _, j := range live {
			if st, _ := s.nodes[j].n.Status(g); st.Role == Leader {
				i = j
			}
		}
	}
	s.next++
	data := fmt.Sprintf("g%d-p%d-%s", g, s.next, strings.Repeat("x", s.r.IntN(300)))
	s.tags[uint64(s.next)] = simTag{node: s.nodes[i].id, data: data}
	p, err := s.nodes[i].n.ProposeTagged(g, []byte(data), uint64(s.next))
	s.logf("%d propose %s group %d #%d: %v", step, s.nodes[i].id, g, s.next, err)
	if err == nil {
		s.pending = append(s.pending, simProposal{node: i, g: g, p: p, data: data})
	}
}

func (s *sim) checkpoint(step, i int) {
	g := s.groups[s.r.IntN(len(s.groups))]
	sm := s.nodes[i].sms[g]
	if err := sm.checkpoint(); err != nil {
		s.fatalf("checkpoint: %v", err)
	}
	s.logf("%d checkpoint %s group %d at %d", step, s.nodes[i].id, g, sm.applied)
	_ = s.nodes[i].n.Compact(g, sm.applied)
}

// crash powers node i off: what it did not fsync is kept, dropped or
// torn at random. Its unresolved proposals are never acknowledged.
func (s *sim) crash(step, i int) {
	tn := s.nodes[i]
	s.logf("%d power loss %s", step, tn.id)
	s.net.Detach(tn.id)
	tn.fs = tn.fs.Crash(vfs.CrashOptions{Rand: s.r, Tail: vfs.TailAny})
	tn.n = nil
	s.down[i] = true
	kept := s.pending[:0]
	for _, p := range s.pending {
		if p.node != i {
			kept = append(kept, p)
		}
	}
	s.pending = kept
}

// crashInRound runs a round on node i that crashes at a random point,
// most often after the appends went out (the leader's copy not yet
// fsynced, the followers' copies on their way); half the time, such a
// crash is followed by a power loss of a majority of the other nodes.
func (s *sim) crashInRound(step, i int) {
	point := afterAppends
	if s.r.IntN(2) == 0 {
		point = crashPoint(1 + s.r.IntN(4))
	}
	s.crashIn.node, s.crashIn.at, s.crashIn.hit = i, point, false
	s.nodes[i].n.RunRound()
	s.crashIn.at = 0
	if !s.crashIn.hit {
		return
	}
	s.logf("%d crash in a round at point %d:", step, point)
	s.crash(step, i)
	if point != afterAppends || s.r.IntN(2) == 0 {
		return
	}
	others := s.live()
	s.r.Shuffle(len(others), func(a, b int) { others[a], others[b] = others[b], others[a] })
	for _, j := range others[:min(len(others), (len(s.nodes)-1)/2+1)] {
		s.crash(step, j)
	}
}

// hook is node i's test hook: it checks what the round sent before its
// fsync, and crashes the round crashInRound asks for.
func (s *sim) hook(i int) func(crashPoint) bool {
	return func(p crashPoint) bool {
		switch p {
		case afterWrite:
			s.sent[i] = nil // the round's sends start here
		case afterAppends:
			s.checkEarly(i)
		}
		if s.crashIn.at == p && s.crashIn.node == i {
			s.crashIn.hit = true
			return true
		}
		return false
	}
}

// simTransport records the frames a node sends, for checkEarly.
type simTransport struct {
	inner Transport
	s     *sim
	i     int
}

func (t simTransport) Send(to ServerID, frame []byte) error {
	t.s.sent[t.i] = append(t.s.sent[t.i], slices.Clone(frame))
	return t.inner.Send(to, frame)
}

// checkEarly checks, at the point of node i's round where the leaders'
// appends have left and the fsync has not run, that nothing it sent in
// the round promises what its disk does not hold: an append response
// beyond its durable log, or a vote its durable hard state does not cast.
func (s *sim) checkEarly(i int) {
	tn := s.nodes[i]
	var w *wal
	for _, f := range s.sent[i] {
		_ = decodeFrame(f, func(g GroupID, flags byte, b []byte) {
			var m pb.Message
			if flags&(flagWake|flagLiveness) != 0 || proto.Unmarshal(b, &m) != nil || m.GetReject() {
				return
			}
			t := m.GetType()
			if t != pb.MsgAppResp && t != pb.MsgVoteResp {
				return
			}
			if w == nil {
				w = s.durableWAL(tn)
			}
			rec, hs := w.recovered[g], (*pb.HardState)(nil)
			if rec != nil {
				hs = rec.meta.hs
			}
			switch {
			case t == pb.MsgAppResp && !reaches(rec, m.GetIndex()):
				s.fatalf("group %d: %s acknowledged %d before its fsync", g, tn.id, m.GetIndex())
			case t == pb.MsgVoteResp && !(hs.GetTerm() > m.GetTerm() || hs.GetTerm() == m.GetTerm() && hs.GetVote() == m.GetTo()):
				s.fatalf("group %d: %s granted its vote in term %d before its fsync", g, tn.id, m.GetTerm())
			}
		})
	}
}

// durableWAL replays what a power loss would leave of node tn's WAL.
func (s *sim) durableWAL(tn *testNode) *wal {
	w, err := openWAL(tn.fs.Durable(), "wal", 8<<10, func(string, ...any) {}, func(string, ...any) {})
	if err != nil {
		s.fatalf("replay of the durable WAL of %s: %v", tn.id, err)
	}
	return w
}

// check verifies the invariants that hold at every step.
func (s *sim) check() {
	s.checkAcks()
	s.checkDurableCommits()
	for _, i := range s.live() {
		tn := s.nodes[i]
		for _, g := range s.groups {
			st, err := tn.n.Status(g)
			if err != nil {
				s.fatalf("status: %v", err)
			}
			if st.Fenced != nil {
				s.fatalf("group %d fenced on %s: %v", g, tn.id, st.Fenced)
			}
			if st.Quiesced {
				s.quiet++
			}
			if st.Role != Leader {
				continue
			}
			if prev, ok := s.leaders[g][st.Term]; ok && prev != st.Replica {
				s.fatalf("group %d: two leaders in term %d: %d and %d", g, st.Term, prev, st.Replica)
			}
			s.leaders[g][st.Term] = st.Replica
		}
	}
}

// checkDurableCommits checks that the commit index of every live replica
// names an entry (index and term) that a majority of the group's replicas
// hold durably: in the WAL that a power loss keeping nothing unsynced
// would leave them, as an entry or behind the log's base (a compaction or
// a snapshot, after a durable checkpoint of the state machine). A commit
// index found durable once stays so (fsynced data is not lost, and
// committed entries are never replaced), so only higher ones are checked.
func (s *sim) checkDurableCommits() {
	var wals map[int]*wal // the durable WAL of each node, replayed once per check
	for _, i := range s.live() {
		tn := s.nodes[i]
		for _, g := range s.groups {
			st, err := tn.n.Status(g)
			if err != nil || st.Commit <= s.durable[g] {
				continue
			}
			term, err := tn.n.group(g).st.Term(st.Commit)
			if err != nil {
				s.fatalf("group %d: %s: commit index %d: %v", g, tn.id, st.Commit, err)
			}
			if wals == nil {
				wals = map[int]*wal{}
				for j, o := range s.nodes {
					wals[j] = s.durableWAL(o)
				}
			}
			var held []ServerID
			for j, o := range s.nodes {
				if holdsDurably(wals[j], g, st.Commit, term) {
					held = append(held, o.id)
				}
			}
			if len(held) <= len(s.nodes)/2 {
				s.fatalf("group %d: %s commits %d/%d, which only %v hold durably", g, tn.id, st.Commit, term, held)
			}
			s.durable[g] = st.Commit
		}
	}
}

// holdsDurably reports whether the replayed WAL w holds group g's entry
// at index with term, or has its base at or past index.
func holdsDurably(w *wal, g GroupID, index, term uint64) bool {
	rec := w.recovered[g]
	if w.damage != nil || rec == nil || rec.err != nil {
		return false
	}
	if rec.meta.base.index >= index {
		return true
	}
	for _, e := range rec.ents {
		if e.GetIndex() == index {
			return e.GetTerm() == term
		}
	}
	return false
}

// reaches reports whether the replayed group's log reaches index (as an
// entry, or behind its base).
func reaches(rec *recovered, index uint64) bool {
	if rec == nil || rec.err != nil {
		return false
	}
	last := rec.meta.base.index
	if len(rec.ents) > 0 {
		last = rec.ents[len(rec.ents)-1].GetIndex()
	}
	return last >= index
}

// checkAcks records the proposals that resolved: an acknowledged one must
// be the entry applied at its index, its result the state hash there.
func (s *sim) checkAcks() {
	kept := s.pending[:0]
	for _, p := range s.pending {
		select {
		case <-p.p.Done():
		default:
			kept = append(kept, p)
			continue
		}
		res, err := p.p.Result()
		term, index := p.p.Position()
		s.logf("  resolved group %d %q at %d/%d: %v", p.g, p.data[:min(len(p.data), 12)], term, index, err)
		if err != nil {
			continue
		}
		id := entryID{term: term, data: sha256.Sum256([]byte(p.data))}
		if got := s.entries[p.g][index]; got != id {
			s.fatalf("group %d: acknowledged %q at %d/%d, but the entry applied there is of term %d", p.g, p.data, term, index, got.term)
		}
		if res != s.hashes[p.g][index] {
			s.fatalf("group %d: the result of %d is not the state hash there", p.g, index)
		}
		s.acked[p.g][index] = id
	}
	s.pending = kept
}

// converge heals the network, restarts every node, and runs until every
// replica holds the same state, past every acknowledged entry.
func (s *sim) converge() {
	s.logf("converge")
	s.net.HealAll()
	for i := range s.nodes {
		if s.down[i] {
			s.start(i)
		}
	}
	final := map[GroupID]*Proposal{}
	for round := 0; round < 3000; round++ {
		for _, tn := range s.nodes {
			tn.n.Tick()
		}
		for busy := true; busy; {
			busy = s.net.DeliverAll() > 0
			for _, tn := range s.nodes {
				busy = tn.n.RunRound() || busy
			}
		}
		s.check()
		for _, g := range s.groups {
			if p := final[g]; p != nil {
				select {
				case <-p.Done():
					if _, err := p.Result(); err == nil {
						continue
					}
				default:
					continue
				}
			}
			for i, tn := range s.nodes {
				if st, _ := tn.n.Status(g); st.Role == Leader {
					p, err := tn.n.Propose(g, []byte("final"))
					if err == nil {
						final[g] = p
						s.pending = append(s.pending, simProposal{node: i, g: g, p: p, data: "final"})
					}
				}
			}
		}
		if s.converged(final) {
			return
		}
	}
	for _, tn := range s.nodes {
		for _, g := range s.groups {
			st, _ := tn.n.Status(g)
			s.logf("%s group %d: %+v", tn.id, g, st)
		}
	}
	s.fatalf("replicas did not converge")
}

func (s *sim) converged(final map[GroupID]*Proposal) bool {
	for _, g := range s.groups {
		p := final[g]
		if p == nil {
			return false
		}
		if _, err := p.Result(); err != nil || p.index == 0 {
			return false
		}
		var ref *hashSM
		for _, tn := range s.nodes {
			sm := tn.sms[g]
			if sm.applied < p.index {
				return false
			}
			if ref != nil && (sm.applied != ref.applied || sm.hash != ref.hash) {
				return false
			}
			ref = sm
		}
		for index, id := range s.acked[g] {
			if s.entries[g][index] != id || ref.applied < index {
				s.fatalf("group %d: acknowledged entry at %d lost", g, index)
			}
		}
	}
	return true
}
