package monitor

import (
	"errors"
	"fmt"

	"github.com/cairnmq/cairn/internal/cluster/jscluster"
	"github.com/cairnmq/cairn/internal/jetstream"
)

// What /jsz, /varz and statsz report of a JetStream cluster
// (docs/monitoring.md, "Replicas and the meta group").

// errSkip marks an answer a server leaves out: nats-server v2.15.2's
// errSkipZreq ("filtered response"), which its $SYS requests answer with
// silence and /jsz with 400 and the error's text.
var errSkip = errors.New("filtered response")

// errNotLeader is /jsz's leader-only refusal on a server that does not
// lead the meta group (nats-server v2.15.2 monitor.go Jsz).
var errNotLeader = fmt.Errorf("%w: not leader", errSkip)

// jszChecked is jsz with leader-only enforced: errNotLeader unless this
// server runs JetStream and answers as the meta leader (always on a
// server whose JetStream is not clustered).
func (m *Monitor) jszChecked(o jszOptions) (*JSInfo, error) {
	if o.leaderOnly && (len(m.jsAccounts()) == 0 || !m.srv.JetStreamMetaLeader()) {
		return nil, errNotLeader
	}
	return m.jsz(o), nil
}

// metaClusterInfo is the meta group as this server sees it (/jsz
// meta_cluster, /varz jetstream.meta); nil without JetStream clustering
// or before the meta group started.
func (m *Monitor) metaClusterInfo() *MetaClusterInfo {
	mi := m.srv.JetStreamMeta()
	if mi == nil {
		return nil
	}
	return &MetaClusterInfo{Name: mi.Name, Leader: mi.Leader, Peer: mi.Peer, Replicas: mi.Replicas, Size: mi.Size, QuorumNeeded: mi.QuorumNeeded, Snapshot: snapshotStats(mi)}
}

// snapshotStats is the meta group's checkpoint as nats-server reports
// its meta snapshots (MetaSnapshotStats).
func snapshotStats(mi *jscluster.MetaInfo) *MetaSnapshotStats {
	ck := mi.Checkpoint
	ss := &MetaSnapshotStats{PendingEntries: ck.PendingEntries, PendingSize: ck.PendingBytes, LastDuration: ck.LastDuration}
	if !ck.LastTime.IsZero() {
		ss.LastTime = ck.LastTime.UTC()
	}
	return ss
}

// statszMeta is the meta group in statsz (nats-server v2.15.2 events.go
// sendStatsz): the whole of it on the meta leader; elsewhere without
// the replicas, named after the meta group ("_meta_") rather than the
// cluster, as nats-server's followers send it.
func (m *Monitor) statszMeta() *MetaClusterInfo {
	mi := m.srv.JetStreamMeta()
	if mi == nil {
		return nil
	}
	if mi.IsLeader {
		return m.metaClusterInfo()
	}
	return &MetaClusterInfo{Name: "_meta_", Leader: mi.Leader, Peer: mi.Peer, Size: mi.Size, QuorumNeeded: mi.QuorumNeeded, Snapshot: snapshotStats(mi)}
}

// leads reports whether this server leads the asset whose cluster part
// ci is: nats-server counts an asset without one, or whose leader it is.
func (m *Monitor) leads(ci *jetstream.ClusterInfo) bool {
	return ci == nil || ci.Leader == m.srv.Options().ServerName
}

// leaderCounts counts the streams and consumers of details this server
// leads (/jsz?raft=true streams_leader and consumers_leader).
func (m *Monitor) leaderCounts(details []jetstream.StreamDetail) (streams, consumers int) {
	for _, d := range details {
		if m.leads(d.Info.Cluster) {
			streams++
		}
		for _, ci := range d.Consumers {
			if m.leads(ci.Cluster) {
				consumers++
			}
		}
	}
	return streams, consumers
}

// accountUsage is an account's usage as /jsz's account details and the
// exporter's account series report it: in a JetStream cluster the
// storage of every replica of its streams, as nats-server counts an
// account's (server.Server.JetStreamAccountUsage); otherwise, and for
// what it reserves, its streams here (details).
func (m *Monitor) accountUsage(name string, details []jetstream.StreamDetail) JetStreamStats {
	st := usage(details)
	if mem, store, ok := m.srv.JetStreamAccountUsage(name); ok {
		st.Memory, st.Store = mem, store
	}
	return st
}
