package transport

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/route"
)

// Refusals of a hello (package comment, "Admission"), sent as -ERR.
const (
	refuseVersion = "Unsupported Raft Transport Version"
	refuseCluster = "Cluster Name Mismatch"
	refuseAuth    = "Authorization Violation"
	refusePeer    = "Unknown Raft Peer"
	refuseHello   = "Malformed Raft Hello"
)

// accept takes a connection of the cluster port whose first line is RAFT
// (Host.HandleClusterConns; it runs on the server's goroutine for the
// connection): it admits or refuses the hello, then reads frames until
// the connection ends, handing each to the attached receiver.
func (t *Transport) accept(nc net.Conn, buffered []byte) {
	end := bytes.IndexByte(buffered, '\n') // the server hands over a whole first line
	h, err := parseHello(buffered[:end+1])
	rest := buffered[end+1:]
	why, early := refuseHello, false
	if err == nil {
		why, early = t.admit(h)
	}
	if why != "" {
		switch {
		case early: // its route is not registered yet: it dials again (a start)
			t.cfg.Infof("transport: %s - refused the Raft connection of %s for now: no route from %s is registered here yet (it dials again once there is one; hello %v)", nc.RemoteAddr(), h.Name, h.Name, helloSummary(h))
		default:
			t.cfg.Logf("transport: %s - refused a Raft connection: %s (hello %v)", nc.RemoteAddr(), why, helloSummary(h))
		}
		_ = nc.SetWriteDeadline(time.Now().Add(handshakeTimeout))
		_, _ = nc.Write(route.AppendErr(nil, why))
		_ = nc.Close()
		return
	}
	from := raftnode.ServerID(h.Name)
	t.noteIdent(from, h)
	if !t.addInbound(from, nc) {
		_ = nc.Close()
		return
	}
	defer t.dropInbound(from, nc)
	_ = nc.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	if _, err := nc.Write([]byte("+OK\r\n")); err != nil {
		return
	}
	_ = nc.SetWriteDeadline(time.Time{})
	if t.redialed(from) {
		t.cfg.Debugf("transport: accepted the Raft connection of %s from %s", from, nc.RemoteAddr())
	} else {
		t.cfg.Infof("transport: accepted the Raft connection of %s from %s", from, nc.RemoteAddr())
	}
	err = t.readFrames(from, io.MultiReader(bytes.NewReader(rest), nc))
	t.lost(from)
	switch {
	case t.closing():
	case errors.Is(err, errBadLength) || errors.Is(err, raftnode.ErrBadFrame):
		t.cfg.Logf("transport: Raft connection of %s closed: %v", from, err)
	default: // the peer closed it or went away
		t.closedLine(from, fmt.Sprintf("transport: Raft connection of %s closed: %v", from, err))
	}
}

// redialQuiet is how soon after a peer closed its connection a new one
// from it makes both routine (Config.Debugf): a peer closes its
// connections to dial again with a newer hello (Rehello) when its
// routes have all resolved and when it enters the meta group, and a new
// cluster's servers logged two or three pairs of "closed: EOF" and
// "accepted" lines each at [INF] at every first start (a new user's
// trial took them for a fault).
const redialQuiet = 2 * time.Second

// closedLine logs line, that the peer from closed its connection, at
// [INF] unless the peer connects again within redialQuiet ([DBG] then).
func (t *Transport) closedLine(from raftnode.ServerID, line string) {
	now := time.Now()
	t.mu.Lock()
	t.mu.closedAt[from] = now
	t.mu.Unlock()
	time.AfterFunc(redialQuiet, func() {
		t.mu.Lock()
		again := !t.mu.closedAt[from].Equal(now) || t.mu.inbound[from] != nil
		closed := t.mu.closed
		t.mu.Unlock()
		switch {
		case closed:
		case again:
			t.cfg.Debugf("%s", line)
		default:
			t.cfg.Infof("%s", line)
		}
	})
}

// redialed reports whether the peer from closed its last connection
// less than redialQuiet ago (closedLine).
func (t *Transport) redialed(from raftnode.ServerID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.mu.closedAt[from]
	return ok && time.Since(at) < redialQuiet
}

// noteIdent records the incarnation and tags an admitted hello carried
// (an incarnation that does not decode is not recorded).
func (t *Transport) noteIdent(from raftnode.ServerID, h *hello) {
	var id ident
	b, err := hex.DecodeString(h.Inc)
	if err != nil || len(b) != len(id.inc) {
		return
	}
	copy(id.inc[:], b)
	id.tags = slices.Clone(h.Tags)
	id.meta, id.members, id.level = h.Meta, slices.Clone(h.Members), h.Level
	for n, v := range h.Known {
		var inc raftnode.Incarnation
		if b, err := hex.DecodeString(v); err == nil && len(b) == len(inc) {
			copy(inc[:], b)
			if id.known == nil {
				id.known = map[raftnode.ServerID]raftnode.Incarnation{}
			}
			id.known[raftnode.ServerID(n)] = inc
		}
	}
	t.mu.Lock()
	t.mu.idents[from] = id
	t.mu.Unlock()
}

// admit checks a hello; it returns the refusal text, or "" to admit,
// and whether the refusal is routine (early): a server of the cluster
// whose route is not registered yet, as when servers start together.
func (t *Transport) admit(h *hello) (why string, early bool) {
	switch {
	case h.V != Version:
		return refuseVersion, false
	case h.Cluster != t.host.ClusterName():
		return refuseCluster, false
	case !t.host.ClusterAuthOK(h.User, h.Pass):
		return refuseAuth, false
	case h.Name == "" || raftnode.ServerID(h.Name) == t.self:
		return refusePeer, false
	}
	if !slices.ContainsFunc(t.host.ClusterPeers(), func(p route.Peer) bool { return p.Name == h.Name }) {
		return refusePeer, true
	}
	return "", false
}

// helloSummary describes a hello for the log, without its password.
func helloSummary(h *hello) any {
	if h == nil {
		return nil
	}
	return struct {
		V             int
		Name, Cluster string
		User          string
	}{h.V, h.Name, h.Cluster, h.User}
}

// addInbound records nc as from's accepted connection, closing the one
// it replaces (the peer dialed again: its side of the old one broke). It
// reports false once the transport is closed.
func (t *Transport) addInbound(from raftnode.ServerID, nc net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return false
	}
	if old := t.mu.inbound[from]; old != nil {
		_ = old.Close()
	}
	t.mu.inbound[from] = nc
	t.wg.Add(1)
	return true
}

// dropInbound closes nc and forgets it, unless a newer connection of the
// same peer replaced it.
func (t *Transport) dropInbound(from raftnode.ServerID, nc net.Conn) {
	_ = nc.Close()
	t.mu.Lock()
	if t.mu.inbound[from] == nc {
		delete(t.mu.inbound, from)
	}
	t.mu.Unlock()
	t.wg.Done()
}

// readFrames hands every frame read from r to the receiver until r fails,
// a length is bad, or the receiver finds a frame damaged (the stream can no
// longer be trusted to be aligned). It returns why it stopped.
func (t *Transport) readFrames(from raftnode.ServerID, r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		frame, err := readFrame(br, t.cfg.MaxFrameBytes)
		if err != nil {
			return err
		}
		rc := t.recv.Load()
		if rc == nil {
			continue
		}
		if err := rc.r.Receive(from, frame); errors.Is(err, raftnode.ErrBadFrame) {
			return err
		}
	}
}
