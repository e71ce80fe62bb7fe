package jscluster

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// A replica that lost its state (docs/clustering.md, "Memory streams"):
// a memory stream's replica keeps its messages in memory and replays its
// group's log from the server's WAL after a restart; one that was caught
// up by a stream snapshot (a replacement, a scale-up, a peer removal)
// has a log that starts at the snapshot, and raftnode fences it
// (raftnode.ErrStateLost). Its server asks the meta leader, through the
// system account, to replace it:
//
//	$SYS.JSC.STREAM.REPLICA.LOST   no reply: replicaLostMsg; the meta leader
//	                               proposes a meta.MoveReplica of that
//	                               replica to the same server (a new
//	                               replica ID, caught up by a snapshot as
//	                               any replacement)
//
// The server asks again every staleRetry while its replica stays fenced
// so (a meta leader elected meanwhile, a request lost); a repeated
// proposal changes nothing (10040: the replica ID is gone).
const replicaLost = "$SYS.JSC.STREAM.REPLICA.LOST"

// replicaLostMsg is the body of $SYS.JSC.STREAM.REPLICA.LOST.
type replicaLostMsg struct {
	Account string             `json:"account"`
	Stream  string             `json:"stream"`
	Replica raftnode.ReplicaID `json:"replica"`
	Server  raftnode.ServerID  `json:"server"`
}

// askReplaceLost, on the run goroutine, asks the meta leader to replace
// each replica of this server whose group raftnode fenced with
// raftnode.ErrStateLost, at most every staleRetry per replica.
func (c *Cluster) askReplaceLost() {
	c.mu.Lock()
	var lost []*replica
	for _, r := range c.replicas {
		if r.log != nil {
			lost = append(lost, r)
		}
	}
	c.mu.Unlock()
	now := time.Now()
	for _, r := range lost {
		st, err := c.node.Status(r.sa.Group)
		if err != nil || st.Fenced == nil || !errors.Is(st.Fenced, raftnode.ErrStateLost) {
			continue
		}
		key := staleKey{k: streamKey{r.sa.Account, r.sa.Name}, id: r.mine()}
		if t, ok := c.lostAsked[key]; ok && now.Sub(t) < staleRetry {
			continue
		}
		if c.lostAsked == nil {
			c.lostAsked = map[staleKey]time.Time{}
		}
		c.lostAsked[key] = now
		body, _ := json.Marshal(replicaLostMsg{Account: r.sa.Account, Stream: r.sa.Name, Replica: key.id, Server: c.name})
		if c.publishSystem(replicaLost, "", body) {
			c.cfg.Infof("JetStream cluster: replica %d of stream '%s > %s' lost its state at the restart (caught up by a snapshot before): asking for its replacement", key.id, r.sa.Account, r.sa.Name)
		}
	}
}

// onReplicaLost, on the meta leader, proposes the replacement of the
// replica a $SYS.JSC.STREAM.REPLICA.LOST request names, if the meta group
// still assigns that replica to that server (apart from the publisher's
// goroutine).
func (c *Cluster) onReplicaLost(_, _ string, _, data []byte) {
	var m replicaLostMsg
	if err := json.Unmarshal(data, &m); err != nil || m.Stream == "" || m.Replica == 0 || !c.metaLeader() {
		return
	}
	sa, _, assigned, _ := c.assignment(streamKey{m.Account, m.Stream})
	if r, on := meta.On(sa.Replicas, m.Server); !assigned || !on || r.ID != m.Replica || len(sa.Replicas) < 2 {
		return
	}
	go func() {
		if _, jerr := c.propose(&meta.MoveReplica{Account: m.Account, Stream: m.Stream, Replica: m.Replica, To: m.Server}); jerr != nil {
			c.cfg.Logf("jscluster: replacing replica %d of stream %s > %s on %s: %v", m.Replica, m.Account, m.Stream, m.Server, jerr)
			return
		}
		c.cfg.Infof("JetStream cluster: replacing replica %d of stream '%s > %s' on %s (it lost its state)", m.Replica, m.Account, m.Stream, m.Server)
	}()
}
