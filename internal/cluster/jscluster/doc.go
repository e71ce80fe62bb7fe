// Package jscluster runs JetStream across the servers of a cluster
// (docs/clustering.md, "The cluster layer"): it owns the server's
// raftnode Node and Raft transport, bootstraps and follows the meta group
// (internal/cluster/meta), starts and stops this server's replicas of the
// streams the meta group assigns to it (each replicated stream's log is an
// internal/cluster/streamlog Log over its own Raft group), and decides,
// for every JetStream API request, which server answers it (jsapi.Cluster).
// It knows the server only through Host and the account engines the server
// registers (AddAccount).
//
// # Bootstrap
//
// The meta group's voters are the servers the explicit routes name, this
// one included, known once every route resolved (Host.ClusterMembers).
// Each server derives the same voter set, sorted by name; a server's meta
// replica ID is its position in that order plus one. So every server of a
// cluster must name the same servers in its routes, and a new cluster's
// JetStream starts once all of them are up; afterwards a majority runs it
// and a restarted server recovers its meta replica from its WAL.
//
// # Who answers an API request
//
// Every server receives every request: the account's JetStream API
// subscriptions are the cluster's (the server's jsTransport.shared). One
// server answers, by this rule (Cluster.Answers, per account):
//
//	account info, STREAM.CREATE/UPDATE/DELETE/NAMES/LIST, unknown subjects   the meta leader
//	anything naming a stream the meta group knows                            the server running its leader
//	                                                                          (for one replica: its server)
//	anything naming a stream the meta group does not know                   the meta leader (10059 and the like)
//
// While a group has no leader nobody answers and the client times out
// and retries, as with nats-server during an election.
//
// # Replicas
//
// An applied AssignStream naming this server makes it create the stream
// in the account's engine (JetStream.StreamCreate with the assignment's
// config and created time). For more than one replica, the engine asks
// NewReplicatedLog for the stream's log, which is a streamlog.Log over
// the stream's group; once the stream runs, the group is added to the
// Node, and the replica that leads subscribes to the stream's subjects
// (JetStream.SetStreamLeader). A RemoveStream deletes the local stream
// and removes the group. Until stream checkpoints exist (issue 15), a
// replica's group never compacts its WAL entries, and a restarted server
// rebuilds each replica from its group's whole log: the stream's old
// directory is set aside (JetStream's rule for a directory it did not
// restore) and the replica starts empty.
package jscluster
