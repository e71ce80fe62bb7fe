package server

import (
	"github.com/cairnmq/cairn/internal/cluster/jscluster"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// PeerID returns this server's 8-character peer ID in Raft groups (/jsz
// meta_cluster.peer, /raftz id; jscluster.PeerID of the server name),
// which the start banner's Node line shows as nats-server's does.
func (s *Server) PeerID() string { return jscluster.PeerID(raftnode.ServerID(s.opts.ServerName)) }

// JetStreamClusterHealth returns what keeps this server's part of a
// clustered JetStream from being healthy (jscluster.Cluster.Health): the
// meta group's problem, then the replicas that are fenced or not
// current; none without JetStream clustering.
func (s *Server) JetStreamClusterHealth() []jscluster.Problem {
	if s.jsc == nil {
		return nil
	}
	return s.jsc.Health()
}

// JetStreamHAAssets returns the number of Raft groups this server runs
// a replica of (jscluster.Cluster.HAAssets: the meta group and the
// replicated streams' and consumers' groups), nats-server's ha_assets;
// 0 without JetStream clustering.
func (s *Server) JetStreamHAAssets() int {
	if s.jsc == nil {
		return 0
	}
	return s.jsc.HAAssets()
}

// JetStreamMetaLeader reports whether this server answers as the
// JetStream meta leader: always on a server whose JetStream is not
// clustered (nats-server: js.cluster == nil counts as leader), and in a
// cluster when it leads the meta group.
func (s *Server) JetStreamMetaLeader() bool {
	if s.jsc == nil {
		return true
	}
	return s.jsc.MetaLeader()
}

// JetStreamAccountUsage returns the storage of account name over every
// replica of its streams, as nats-server counts an account's usage in a
// cluster (jscluster.Cluster.AccountUsage: the streams this server holds
// a replica of); ok is false without JetStream clustering.
func (s *Server) JetStreamAccountUsage(name string) (memory, store uint64, ok bool) {
	if s.jsc == nil {
		return 0, 0, false
	}
	return s.jsc.AccountUsage(name)
}

// JetStreamRaftGroups returns this server's Raft groups of account (""
// for the system account, whose group is the meta group), or the one
// named group (jscluster.Cluster.RaftGroups), for /raftz; false without
// JetStream clustering (nats-server v2.15.2: no Raft nodes registered).
func (s *Server) JetStreamRaftGroups(account, group string) ([]jscluster.RaftGroup, bool) {
	if s.jsc == nil {
		return nil, false
	}
	sys := s.SystemAccount()
	if account == "" {
		account = sys
	}
	if account == "" {
		return nil, true // no system account: nats-server's Raftz returns nil
	}
	return s.jsc.RaftGroups(sys, account, group), true
}
