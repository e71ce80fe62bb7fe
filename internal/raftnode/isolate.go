package raftnode

// A clean stop's checkpoints (docs/cluster.md, "Restarts") cover what
// every state machine applied; a group goes on receiving and committing
// entries until the node closes, though: a new leader's empty entry after
// the stop handed its leadership over, another leader's proposals. Those
// that commit after the checkpoints would be applied again by the
// restart. Isolate ends the node's exchanges first, and Settled says when
// the groups have applied everything they know committed: from then on no
// entry commits here (unless this server alone is a quorum of a group)
// and the checkpoints taken cover every committed entry the WAL holds.

// Isolate ends the node's exchanges with its peers for good, as if the
// server had stopped: from its return on, Receive drops every frame
// (returning nil) and rounds send none (liveness beats included), while
// the groups go on stepping the messages they had already taken and
// applying what they know committed (Settled says when they are done).
// Call it before the last checkpoints of a clean stop, just before Close:
// the peers see the server as gone; an isolated node cannot be joined
// again.
func (n *Node) Isolate() {
	n.isoMu.Lock()
	n.isolated.Store(true)
	n.isoMu.Unlock()
}

// Settled reports whether every group of an isolated node (Isolate) has
// stepped every message it had taken and applied every entry it knows
// committed (GroupStatus.Applied at GroupStatus.Commit), so that no
// entry will commit or apply here any more unless this server is a
// quorum of the group alone. Fenced and removed groups, and a group
// installing a snapshot (which its catch-up may still be fetching), are
// not waited for. False for a node not isolated, true once it is closed
// (nothing more applies). It waits for the loop's round under way, if
// any; a group whose round runs beside the loop is not settled.
func (n *Node) Settled() bool {
	if !n.isolated.Load() {
		return false
	}
	n.mu.RLock()
	list, closed := n.mu.list, n.mu.closed
	n.mu.RUnlock()
	if closed {
		return true
	}
	// With no round running, and no frame taken any more, a group's
	// status is as of after the messages it stepped; those still in its
	// inbox wait for a round.
	n.roundMu.Lock()
	defer n.roundMu.Unlock()
	for _, g := range list {
		if g.aside.Load() {
			return false // its round runs beside the loop (runAside)
		}
		if g.restoring != nil {
			continue
		}
		g.mu.Lock()
		queued, st, skip := len(g.mu.inbox) > 0, g.mu.status, g.mu.fenced != nil || g.mu.removed
		g.mu.Unlock()
		if !skip && (queued || st.Applied < st.Commit) {
			return false
		}
	}
	return true
}
