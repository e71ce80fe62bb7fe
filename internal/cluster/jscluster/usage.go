package jscluster

import (
	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jsapi"
	"github.com/cairnmq/cairn/internal/stream"
)

var _ jsapi.ClusterUsage = (*account)(nil)

// An account's storage in a cluster counts every replica, as nats-server
// v2.15.2 counts it (jetstream.go storageTotals: the usage of every
// server of the cluster): a stream of three replicas holding 951 bytes
// uses 2,853. cairn counts, for each stream the meta group assigns in
// the account, its number of replicas times the bytes of this server's
// replica, or of another server's replica when this server holds none
// (asked as the lists ask, gather.go, but of any replica, which answers
// at once whether or not its group has a leader: the account info never
// waits for a leaderless stream; only where asking is allowed). A
// replica that does not hold what its group committed (joined empty, not
// promoted yet: raftnode GroupStatus.HoldsCommitted) neither answers nor
// is counted while one that does answers.

// AccountUsage implements jsapi.ClusterUsage for $JS.API.INFO on the
// meta leader: the account's memory and file storage over every replica,
// the streams this server holds no replica of asked of their replicas.
func (a *account) AccountUsage() (memory, store uint64) {
	return a.c.usage(a, true)
}

// AccountUsage returns the storage of account name over every replica
// (as $JS.API.INFO counts it), from what this server holds alone: a
// stream it holds no replica of is not counted. ok is false when the
// account's JetStream does not run here.
func (c *Cluster) AccountUsage(name string) (memory, store uint64, ok bool) {
	acc := c.engineOf(name)
	if acc == nil {
		return 0, 0, false
	}
	memory, store = c.usage(acc, false)
	return memory, store, true
}

// usage sums the account's streams' bytes times their replicas; with
// ask, the streams this server holds no replica of are asked of their
// replicas (the first to answer counts).
func (c *Cluster) usage(a *account, ask bool) (memory, store uint64) {
	var sas []meta.StreamAssignment
	c.meta.View(func(st *meta.State) { sas = st.Streams(a.name) })
	var remote []streamKey
	var replicas []int
	add := func(si *jetstream.StreamInfo, replicas int) {
		b := si.State.Bytes * uint64(replicas)
		if si.Config.Storage == stream.MemoryStorage {
			memory += b
		} else {
			store += b
		}
	}
	local := func(name string, replicas int) {
		if si, err := a.js.StreamInfo(name, jetstream.InfoOptions{}); err == nil {
			add(si, replicas)
		}
	}
	var fallback []bool // a replica here, counted if nobody answers
	for _, sa := range sas {
		r := c.replicaOf(streamKey{a.name, sa.Name})
		if r != nil && (!ask || r.leads.Load() || len(sa.Replicas) == 1 || c.holdsCommitted(sa.Group)) {
			local(sa.Name, len(sa.Replicas))
			continue
		}
		// No replica here, or one that does not hold what its group
		// committed (not promoted yet): a replica that does answers.
		if ask && c.worthAsking(sa.Group, false, meta.Servers(sa.Replicas)) {
			remote = append(remote, streamKey{a.name, sa.Name})
			replicas = append(replicas, len(sa.Replicas))
			fallback = append(fallback, r != nil)
			continue
		}
		if r != nil {
			local(sa.Name, len(sa.Replicas))
		}
	}
	for i, si := range c.askStreamInfos(remote, streamInfoAsk{Replica: true}) {
		switch {
		case si != nil:
			add(si, replicas[i])
		case fallback[i]:
			local(remote[i].name, replicas[i])
		}
	}
	return memory, store
}
