package raftnode

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/cryptotest"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairnmq/cairn/internal/vfs"
)

// Scripted tests of the raft glue, in the manner of etcd raft's
// datadriven interaction tests: each file in testdata/ is a list of
//
//	command key=value ...
//	----
//	expected output
//
// separated by blank lines (# starts a comment). The output is the trace
// of what the nodes did, in order: WAL records written (decoded), fsyncs,
// frames sent (decoded), entries applied. go test -run TestScripts
// -rewrite rewrites the expected outputs; review the diff.

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the scripts in testdata/")

func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			cryptotest.SetGlobalRandom(t, 1) // raft's randomised timeouts, incarnations
			runScript(t, file)
		})
	}
}

type scriptCmd struct {
	line     int
	cmd      string
	args     map[string]string
	text     string // the command line as written
	expected string
}

func parseScript(t *testing.T, file string) (cmds []scriptCmd) {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		c := scriptCmd{line: i + 1, text: l, args: map[string]string{}}
		f := strings.Fields(l)
		c.cmd = f[0]
		for _, a := range f[1:] {
			k, v, _ := strings.Cut(a, "=")
			c.args[k] = v
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command without ----", file, i+1)
		}
		i += 2
		var out []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			out = append(out, lines[i])
		}
		c.expected = strings.Join(out, "\n")
		cmds = append(cmds, c)
	}
	return cmds
}

func runScript(t *testing.T, file string) {
	cmds := parseScript(t, file)
	h := &scriptHarness{t: t}
	var out strings.Builder
	for _, c := range cmds {
		h.trace = nil
		h.run(c)
		got := strings.Join(h.trace, "\n")
		if got == "" {
			got = "ok"
		}
		if *rewrite {
			fmt.Fprintf(&out, "%s\n----\n%s\n\n", c.text, got)
			continue
		}
		if got != c.expected {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, c.line, c.text, got, c.expected)
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(strings.TrimRight(headerOf(t, file), "\n")+"\n\n"+strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// headerOf returns the leading comment block of a script, kept by -rewrite.
func headerOf(t *testing.T, file string) string {
	b, _ := os.ReadFile(file)
	var h []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "#") {
			break
		}
		h = append(h, l)
	}
	return strings.Join(h, "\n")
}

// scriptHarness holds the nodes of a script and the trace of a command.
type scriptHarness struct {
	t     *testing.T
	c     *testCluster
	trace []string
	props []scriptProp // proposals not yet shown by the proposals command
	// failSync holds the servers whose next WAL fsync fails (fail-sync).
	failSync map[ServerID]bool
}

// crashPoints names the crash points of a round for round crash=NAME.
var crashPoints = map[string]crashPoint{"write": afterWrite, "appends": afterAppends, "sync": afterSync, "send": afterSend}

func (h *scriptHarness) tracef(format string, args ...any) {
	h.trace = append(h.trace, fmt.Sprintf(format, args...))
}

func (h *scriptHarness) arg(c scriptCmd, k string, def int) int {
	v, ok := c.args[k]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		h.t.Fatalf("line %d: %s=%q: %v", c.line, k, v, err)
	}
	return n
}

// node returns the index of node=N (1-based in scripts).
func (h *scriptHarness) node(c scriptCmd) int { return h.arg(c, "node", 1) - 1 }

func (h *scriptHarness) run(c scriptCmd) {
	switch c.cmd {
	case "nodes":
		h.nodes(h.arg(c, "n", 3))
	case "add-group": // on the first voters=N nodes (all by default), bootstrapping with them as voters
		g, n := GroupID(h.arg(c, "g", 1)), h.arg(c, "voters", len(h.c.nodes))
		peers := h.c.peers(0)[:n]
		for i := range n {
			tn := h.c.nodes[i]
			sm := newHashSM(tn.fs, "sm", g)
			tn.sms[g] = sm
			h.watch(i, g)
			h.check(tn.n.AddGroup(GroupConfig{ID: g, Replica: ReplicaID(i + 1), Incarnation: tn.n.Incarnation(), Peers: peers}, sm))
		}
	case "campaign":
		h.check(h.c.nodes[h.node(c)].n.Campaign(GroupID(h.arg(c, "g", 1))))
	case "propose":
		p, err := h.c.nodes[h.node(c)].n.Propose(GroupID(h.arg(c, "g", 1)), []byte(c.args["data"]))
		h.check(err)
		h.props = append(h.props, scriptProp{data: c.args["data"], p: p})
	case "round": // crash=NAME: power loss (unsynced writes dropped) at that point of the round
		h.round(c)
	case "fail-sync": // the node's next WAL fsync fails (EIO)
		if h.failSync == nil {
			h.failSync = map[ServerID]bool{}
		}
		h.failSync[h.c.nodes[h.node(c)].id] = true
	case "deliver":
		h.c.net.DeliverAll()
	case "stabilize":
		h.c.stabilize()
	case "tick":
		for range h.arg(c, "n", 1) {
			h.c.nodes[h.node(c)].n.Tick()
		}
	case "tick-all":
		h.c.tick(h.arg(c, "n", 1))
	case "proposals":
		h.showProposals()
	case "status":
		h.status(c)
	case "partition":
		h.c.net.Partition(serverName(h.arg(c, "a", 1)-1), serverName(h.arg(c, "b", 2)-1))
	case "cut":
		h.c.net.Cut(serverName(h.arg(c, "from", 1)-1), serverName(h.arg(c, "to", 2)-1))
	case "heal":
		h.c.net.HealAll()
	case "crash":
		h.crash(c)
	case "restart":
		h.restart(c)
	case "checkpoint":
		i, g := h.node(c), GroupID(h.arg(c, "g", 1))
		sm := h.c.nodes[i].sms[g]
		h.check(sm.checkpoint())
		h.check(h.c.nodes[i].n.Compact(g, sm.applied))
	case "join":
		h.join(c)
	case "set-peers":
		for _, tn := range h.c.nodes {
			if tn.n != nil {
				h.check(tn.n.SetPeers(GroupID(h.arg(c, "g", 1)), h.c.peers(0)))
			}
		}
	case "change":
		h.change(c)
	case "read":
		p, err := h.c.nodes[h.node(c)].n.ReadIndex(GroupID(h.arg(c, "g", 1)))
		h.check(err)
		if p != nil {
			h.props = append(h.props, scriptProp{data: "read", p: p})
		}
	case "transfer":
		h.check(h.c.nodes[h.node(c)].n.TransferLeader(GroupID(h.arg(c, "g", 1)), ReplicaID(h.arg(c, "to", 2))))
	default:
		h.t.Fatalf("line %d: unknown command %q", c.line, c.cmd)
	}
}

type scriptProp struct {
	data string
	p    *Proposal
}

func (h *scriptHarness) check(err error) {
	if err != nil {
		h.tracef("error: %v", err)
	}
}

func (h *scriptHarness) nodes(n int) {
	h.c = newTestCluster(h.t, 0, nil)
	h.c.cfg = func(cfg *Config) {
		cfg.FS = &traceFS{FS: cfg.FS, h: h, server: cfg.Server}
		cfg.Transport = traceTransport{inner: cfg.Transport, h: h, from: cfg.Server}
	}
	for i := range n {
		h.c.nodes = append(h.c.nodes, &testNode{id: serverName(i), fs: vfs.NewCrashFS()})
	}
	for i := range n {
		h.c.open(i)
	}
}

func (h *scriptHarness) watch(i int, g GroupID) {
	id := h.c.nodes[i].id
	h.c.nodes[i].sms[g].onApply = func(e Entry, _ [32]byte) {
		h.tracef("%s: apply g%d %d/%d %q", id, g, e.Index, e.Term, e.Data)
	}
}

func (h *scriptHarness) showProposals() {
	for _, sp := range h.props {
		select {
		case <-sp.p.Done():
			_, err := sp.p.Result()
			term, index := sp.p.Position()
			switch {
			case err != nil:
				h.tracef("%q: %v", sp.data, err)
			case sp.data == "read":
				h.tracef("read: served at index %d", index)
			default:
				h.tracef("%q: applied at %d/%d", sp.data, index, term)
			}
		default:
			h.tracef("%q: waiting", sp.data)
		}
	}
	h.props = nil
}

func (h *scriptHarness) status(c scriptCmd) {
	for i, tn := range h.c.nodes {
		if n := h.arg(c, "node", 0); (n != 0 && n-1 != i) || tn.n == nil {
			continue
		}
		st, err := tn.n.Status(GroupID(h.arg(c, "g", 1)))
		if err != nil {
			h.tracef("%s: %v", tn.id, err)
			continue
		}
		line := fmt.Sprintf("%s: %s term=%d leader=%d commit=%d applied=%d log=%d..%d", tn.id, st.Role, st.Term, st.Leader, st.Commit, st.Applied, st.FirstIndex, st.LastIndex)
		if st.Quiesced {
			line += " quiet"
		}
		if st.Fenced != nil {
			line += " fenced: " + st.Fenced.Error()
		}
		h.tracef("%s", line)
	}
}

// join adds node=N's replica N of group g as a new, empty replica (to be
// added to the group by a membership change).
func (h *scriptHarness) join(c scriptCmd) {
	i, g := h.node(c), GroupID(h.arg(c, "g", 1))
	tn := h.c.nodes[i]
	sm := newHashSM(tn.fs, "sm", g)
	tn.sms[g] = sm
	h.watch(i, g)
	h.check(tn.n.AddGroup(GroupConfig{ID: g, Replica: ReplicaID(i + 1), Incarnation: tn.n.Incarnation(), Peers: h.c.peers(0), Join: true}, sm))
}

// change proposes a membership change on node=N: add-learner=R,
// add-voter=R, remove=R (several at once: joint consensus).
func (h *scriptHarness) change(c scriptCmd) {
	var cs []Change
	for k, kind := range map[string]ChangeKind{"add-learner": AddLearner, "add-voter": AddVoter, "remove": RemoveReplica} {
		if _, ok := c.args[k]; ok {
			cs = append(cs, Change{Kind: kind, Replica: ReplicaID(h.arg(c, k, 0))})
		}
	}
	slices.SortFunc(cs, func(a, b Change) int { return int(a.Kind) - int(b.Kind) })
	p, err := h.c.nodes[h.node(c)].n.ChangeMembership(GroupID(h.arg(c, "g", 1)), cs)
	h.check(err)
	if p != nil {
		h.props = append(h.props, scriptProp{data: c.text, p: p})
	}
}

// round runs a round on node=N; with crash=NAME the node loses power at
// that point of the round (crashPoints), its unsynced writes dropped.
func (h *scriptHarness) round(c scriptCmd) {
	i := h.node(c)
	n := h.c.nodes[i].n
	name, crash := c.args["crash"]
	if !crash {
		n.RunRound()
		return
	}
	point, ok := crashPoints[name]
	if !ok {
		h.t.Fatalf("line %d: unknown crash point %q", c.line, name)
	}
	hit := false
	n.testHook = func(p crashPoint) bool {
		hit = hit || p == point
		return p == point
	}
	n.RunRound()
	if !hit {
		h.t.Fatalf("line %d: the round did not reach %s", c.line, name)
	}
	h.tracef("%s: power loss after %s", h.c.nodes[i].id, name)
	h.c.crash(i, vfs.CrashOptions{Tail: vfs.TailDrop})
}

func (h *scriptHarness) crash(c scriptCmd) {
	i := h.node(c)
	tail := map[string]vfs.TailMode{"drop": vfs.TailDrop, "keep": vfs.TailKeep}[c.args["tail"]]
	h.c.crash(i, vfs.CrashOptions{Tail: tail})
	if c.args["wipe"] == "true" {
		h.c.nodes[i].fs = vfs.NewCrashFS()
	}
}

// restart reopens a node and adds its groups (g=1 by default), bound to
// the incarnation its replicas were created on (inc=old after a wipe).
func (h *scriptHarness) restart(c scriptCmd) {
	i := h.node(c)
	tn := h.c.nodes[i]
	h.c.open(i)
	g := GroupID(h.arg(c, "g", 1))
	sm := newHashSM(tn.fs, "sm", g)
	tn.sms[g] = sm
	h.watch(i, g)
	inc := tn.n.Incarnation()
	if c.args["inc"] == "old" {
		inc = Incarnation{1} // not this store's
	}
	err := tn.n.AddGroup(GroupConfig{ID: g, Replica: ReplicaID(i + 1), Incarnation: inc, Peers: h.c.peers(0)}, sm)
	h.check(err)
}

// traceFS traces the WAL's writes (decoded) and fsyncs.
type traceFS struct {
	vfs.FS
	h      *scriptHarness
	server ServerID
}

func (fs *traceFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	return fs.wrap(name, f), err
}

func (fs *traceFS) OpenAppend(name string) (vfs.File, error) {
	f, err := fs.FS.OpenAppend(name)
	return fs.wrap(name, f), err
}

func (fs *traceFS) wrap(name string, f vfs.File) vfs.File {
	if f == nil || !strings.HasPrefix(name, "wal/") {
		return f
	}
	return &traceFile{File: f, fs: fs, name: strings.TrimPrefix(name, "wal/")}
}

type traceFile struct {
	vfs.File
	fs   *traceFS
	name string
}

func (f *traceFile) Write(p []byte) (int, error) {
	off, _ := f.File.Size()
	if off == 0 && len(p) >= segmentHeaderSize {
		f.fs.h.tracef("%s: wal %s: segment header", f.fs.server, f.name)
		p2 := p[segmentHeaderSize:]
		defer func() { f.traceRecords(p2, segmentHeaderSize) }()
	} else {
		f.traceRecords(p, off)
	}
	return f.File.Write(p)
}

func (f *traceFile) traceRecords(p []byte, off int64) {
	for len(p) >= recordHeaderSize {
		n := int(binary.LittleEndian.Uint32(p[4:]))
		body := p[recordHeaderSize : recordHeaderSize+n]
		var items []string
		d := decoder{b: body[1:]}
		for it, ok := d.next(); ok; it, ok = d.next() {
			items = append(items, describeItem(it))
		}
		f.fs.h.tracef("%s: wal %s@%d: %s", f.fs.server, f.name, off, strings.Join(items, "; "))
		p = p[recordHeaderSize+n:]
		off += int64(recordHeaderSize + n)
	}
}

func describeItem(it item) string {
	switch it.kind {
	case itemReplica:
		if it.flags&replicaRemoved != 0 {
			return fmt.Sprintf("g%d removed replica %d", it.group, it.replica)
		}
		return fmt.Sprintf("g%d replica %d", it.group, it.replica)
	case itemHardState:
		return fmt.Sprintf("g%d hardstate term=%d vote=%d commit=%d", it.group, it.hs.GetTerm(), it.hs.GetVote(), it.hs.GetCommit())
	case itemEntries:
		var es []string
		for _, e := range it.ents {
			es = append(es, fmt.Sprintf("%d/%d%s", e.GetIndex(), e.GetTerm(), dataOf(e.GetData())))
		}
		return fmt.Sprintf("g%d entries %s", it.group, strings.Join(es, " "))
	case itemSnapshot, itemCompact, itemSnapBegin:
		name := map[byte]string{itemSnapshot: "snapshot", itemCompact: "compact", itemSnapBegin: "snapbegin"}[it.kind]
		d := fmt.Sprintf("g%d %s %d/%d voters=%v", it.group, name, it.meta.index, it.meta.term, it.meta.conf.GetVoters())
		if l := it.meta.conf.GetLearners(); len(l) > 0 {
			d += fmt.Sprintf(" learners=%v", l)
		}
		return d
	}
	return "?"
}

func dataOf(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return fmt.Sprintf("%q", b)
}

func (f *traceFile) Sync() error {
	if h := f.fs.h; h.failSync[f.fs.server] {
		delete(h.failSync, f.fs.server)
		h.tracef("%s: fsync %s fails", f.fs.server, f.name)
		return &os.PathError{Op: "sync", Path: f.name, Err: syscall.EIO}
	}
	f.fs.h.tracef("%s: fsync %s", f.fs.server, f.name)
	return f.File.Sync()
}

// traceTransport traces the frames a node sends (decoded).
type traceTransport struct {
	inner Transport
	h     *scriptHarness
	from  ServerID
}

func (tt traceTransport) Send(to ServerID, frame []byte) error {
	var msgs []string
	alive := false
	_ = decodeFrame(frame, func(g GroupID, flags byte, msg []byte) {
		var m pb.Message
		switch {
		case flags&flagLiveness != 0:
			alive = true
		case flags&flagWake != 0:
			msgs = append(msgs, fmt.Sprintf("g%d wake", g))
		case proto.Unmarshal(msg, &m) == nil:
			d := fmt.Sprintf("g%d %s", g, describeMsg(&m))
			if flags&flagQuiesce != 0 {
				d += " (quiesce)"
			}
			msgs = append(msgs, d)
		}
	})
	if len(msgs) > 0 { // frames holding only a liveness beat are not traced
		if alive {
			msgs = append(msgs, "alive")
		}
		tt.h.tracef("%s->%s: %s", tt.from, to, strings.Join(msgs, ", "))
	}
	return tt.inner.Send(to, frame)
}

func describeMsg(m *pb.Message) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %d->%d term=%d", strings.TrimPrefix(m.GetType().String(), "Msg"), m.GetFrom(), m.GetTo(), m.GetTerm())
	switch m.GetType() {
	case pb.MsgApp:
		var es []string
		for _, e := range m.GetEntries() {
			es = append(es, fmt.Sprintf("%d/%d", e.GetIndex(), e.GetTerm()))
		}
		fmt.Fprintf(&b, " prev=%d/%d commit=%d entries=[%s]", m.GetIndex(), m.GetLogTerm(), m.GetCommit(), strings.Join(es, " "))
	case pb.MsgAppResp:
		fmt.Fprintf(&b, " index=%d", m.GetIndex())
		if m.GetReject() {
			fmt.Fprintf(&b, " reject hint=%d", m.GetRejectHint())
		}
	case pb.MsgHeartbeat:
		fmt.Fprintf(&b, " commit=%d", m.GetCommit())
	case pb.MsgVote, pb.MsgPreVote:
		fmt.Fprintf(&b, " last=%d/%d", m.GetIndex(), m.GetLogTerm())
	case pb.MsgVoteResp, pb.MsgPreVoteResp:
		if m.GetReject() {
			b.WriteString(" rejected")
		}
	case pb.MsgSnap:
		md := m.GetSnapshot().GetMetadata()
		fmt.Fprintf(&b, " snapshot=%d/%d voters=%v", md.GetIndex(), md.GetTerm(), md.GetConfState().GetVoters())
	}
	return b.String()
}
