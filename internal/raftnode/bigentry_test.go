package raftnode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The largest entry a follower can receive (DefaultMaxEntryBytes) is the
// transport's largest frame less what the frame, the envelope and the
// append message around the entry add (EntryOverhead): an append of one
// entry of that size, every field of the message at its widest, makes a
// frame within the limit, and one byte more would not fit were the
// fields as wide as the bound allows.
func TestEntryLimitDerivation(t *testing.T) {
	if DefaultMaxEntryBytes != 64<<20-150 || EntryOverhead != 150 {
		t.Fatalf("DefaultMaxEntryBytes %d, EntryOverhead %d; want 67108714 and 150", DefaultMaxEntryBytes, EntryOverhead)
	}
	for _, frame := range []int{DefaultMaxFrameBytes, 1 << 20, minFrameBytes} {
		limit := frame - EntryOverhead
		m := widestAppend(make([]byte, limit)) // not written: proto.Size does not read it
		got := frameOverhead + envelopeOverhead + proto.Size(m)
		if got > frame {
			t.Fatalf("frame %d: an append of an entry of %d bytes makes a frame of %d", frame, limit, got)
		}
		// The bound counts 5 bytes for each of the two lengths (the
		// data's, the entry's), which take fewer here: exactly that
		// is to spare.
		entry := proto.Size(m.GetEntries()[0])
		if spare := 5 - uvarintLen(limit) + 5 - uvarintLen(entry); frame-got != spare {
			t.Fatalf("frame %d: %d bytes to spare, want %d", frame, frame-got, spare)
		}
	}
	// The frame the node builds (encodeMessages, frameBuilder) is the size
	// counted, and decodes.
	data := bytes.Repeat([]byte{'x'}, minFrameBytes-EntryOverhead)
	msg, err := proto.Marshal(widestAppend(data))
	if err != nil {
		t.Fatal(err)
	}
	var fb frameBuilder
	fb.add(appendEnvelope(nil, math.MaxUint64, flagQuiesce|flagInSync, msg), nil)
	f := fb.frame()
	if len(f) > minFrameBytes {
		t.Fatalf("built frame of %d bytes, over %d", len(f), minFrameBytes)
	}
	var back pb.Message
	if err := decodeFrame(f, func(_ GroupID, _ byte, b []byte) {
		if err := proto.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.GetEntries()[0].GetData(), data) {
		t.Fatal("entry data changed on the way")
	}
}

func uvarintLen(n int) int { return len(binary.AppendUvarint(nil, uint64(n))) }

// widestAppend returns a MsgApp carrying one entry of data, with every
// scalar field set to its widest value.
func widestAppend(data []byte) *pb.Message {
	w := uint64(math.MaxUint64)
	return &pb.Message{
		Type: pb.MsgForgetLeader.Enum(), To: &w, From: &w, Term: &w, LogTerm: &w, Index: &w, Commit: &w, Vote: &w,
		Reject: new(true), RejectHint: &w,
		Entries: []*pb.Entry{{Term: &w, Index: &w, Type: pb.EntryConfChangeV2.Enum(), Data: data}},
	}
}

// limitTransport refuses frames over max, as the cluster transport does
// (transport.ErrFrameTooLarge), and counts them.
type limitTransport struct {
	inner Transport
	max   int
	mu    *sync.Mutex
	over  *int
}

var errFrameTooLarge = errors.New("test transport: frame too large")

func (l limitTransport) Send(to ServerID, frame []byte) error {
	if len(frame) > l.max {
		l.mu.Lock()
		*l.over++
		l.mu.Unlock()
		return errFrameTooLarge
	}
	return l.inner.Send(to, frame)
}

// An entry of MaxEntryBytes reaches every follower even when the round
// that sends it has other messages for the same servers: a leader's
// messages to one server are split into frames the transport carries.
// Before, they went in one frame, which the transport refused: the
// large entry, and the other group's entry beside it, never reached a
// follower (each retry again came in a round with the other group's).
func TestEntryAtLimitReachesFollowers(t *testing.T) {
	const frame = 64 << 10
	var mu sync.Mutex
	over := 0
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.MaxFrameBytes = frame
		cfg.DisableQuiescence = true
		cfg.Transport = limitTransport{inner: cfg.Transport, max: frame, mu: &mu, over: &over}
	})
	c.addGroup(1, 0)
	c.addGroup(2, 10)
	c.elect(0, 1)
	c.elect(0, 2)
	n := c.nodes[0].n
	if got := n.MaxEntryBytes(); got != frame-EntryOverhead {
		t.Fatalf("MaxEntryBytes %d, want %d", got, frame-EntryOverhead)
	}
	big, err := n.Propose(1, bytes.Repeat([]byte{'b'}, n.MaxEntryBytes()))
	if err != nil {
		t.Fatal(err)
	}
	small, err := n.Propose(2, bytes.Repeat([]byte{'s'}, 100))
	if err != nil {
		t.Fatal(err)
	}
	c.stabilize()
	for range 20 {
		if allDone([]*Proposal{big, small}) && c.applied(1) == c.status(0, 1).Applied && c.applied(2) == c.status(0, 2).Applied {
			break
		}
		c.tick(1)
	}
	for _, p := range []*Proposal{big, small} {
		if !allDone([]*Proposal{p}) {
			t.Fatal("a proposal is still waiting: its entry never reached a follower")
		}
		if _, err := p.Result(); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []GroupID{1, 2} {
		if got, want := c.applied(g), c.status(0, g).Applied; got != want {
			t.Fatalf("group %d: every replica applied through %d, the leader %d", g, got, want)
		}
		c.checkSame(g)
	}
	mu.Lock()
	defer mu.Unlock()
	if over != 0 {
		t.Fatalf("%d frames over %d bytes were sent", over, frame)
	}
}

// applied returns the lowest index every replica of g applied.
func (c *testCluster) applied(g GroupID) uint64 {
	low := uint64(math.MaxUint64)
	for _, tn := range c.nodes {
		low = min(low, tn.sms[g].applied)
	}
	return low
}

// Propose refuses an entry larger than MaxEntryBytes (no frame could
// carry it to a follower) and proposes nothing; one of MaxEntryBytes is
// taken. A frame limit below 4 KiB is refused.
func TestProposeOverEntryLimit(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.MaxFrameBytes = 8 << 10 })
	c.addGroup(1, 0)
	c.elect(0, 1)
	n := c.nodes[0].n
	if _, err := n.Propose(1, make([]byte, n.MaxEntryBytes()+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Propose of %d bytes: %v, want ErrTooLarge", n.MaxEntryBytes()+1, err)
	}
	before := c.status(0, 1).Applied
	c.tick(2)
	if got := c.status(0, 1).Applied; got != before {
		t.Fatalf("applied moved from %d to %d: the refused entry was proposed", before, got)
	}
	p := c.propose(0, 1, string(make([]byte, n.MaxEntryBytes())))
	if _, err := p.Result(); err != nil {
		t.Fatal(err)
	}
	cfg := Config{FS: c.nodes[0].fs, Dir: "other", Server: "x", Transport: c.net.Transport("x"), MaxFrameBytes: minFrameBytes - 1}
	if _, err := Open(cfg); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open with MaxFrameBytes %d: %v, want ErrInvalid", cfg.MaxFrameBytes, err)
	}
}

// MaxSizePerMsg is at most a quarter of MaxFrameBytes, so an append of
// many small entries fits in a frame: 400 proposals of 100 bytes (40 KB
// of entries) reach the followers over frames of 8 KiB.
func TestManySmallEntriesOverSmallFrames(t *testing.T) {
	const frame = 8 << 10
	var mu sync.Mutex
	over := 0
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.MaxFrameBytes = frame
		cfg.Transport = limitTransport{inner: cfg.Transport, max: frame, mu: &mu, over: &over}
	})
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.net.Cut("s1", "s2") // s2 falls behind, then catches up from the log in appends of many entries
	var ps []*Proposal
	for i := range 400 {
		p, err := c.nodes[0].n.Propose(1, []byte(fmt.Sprintf("%0100d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	c.stabilize()
	c.net.Heal("s1", "s2")
	for range 50 {
		if c.applied(1) == c.status(0, 1).Applied {
			break
		}
		c.tick(1)
	}
	if !allDone(ps) {
		t.Fatal("proposals still waiting")
	}
	if got, want := c.applied(1), c.status(0, 1).Applied; got != want {
		t.Fatalf("every replica applied through %d, the leader %d", got, want)
	}
	c.checkSame(1)
	mu.Lock()
	defer mu.Unlock()
	if over != 0 {
		t.Fatalf("%d frames over %d bytes were sent", over, frame)
	}
}
