// Package jscluster runs JetStream across the servers of a cluster
// (docs/cluster.md, "The cluster layer"): it owns the server's
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
//	account info, STREAM.CREATE/UPDATE/DELETE/NAMES/LIST/PEER.REMOVE/
//	PEER.EVACUATE/CANCEL_MOVE, unknown subjects                              the meta leader
//	CONSUMER.CREATE/NAMES/LIST/DELETE/PEER.EVACUATE of a stream it knows     the meta leader
//	CONSUMER.INFO/PAUSE/UNPIN/LEADER.STEPDOWN of a consumer it knows         the server running the consumer's leader
//	anything naming a stream the meta group knows                            the server running its leader
//	                                                                          (for one replica: its server)
//	anything naming a stream the meta group does not know                   the meta leader (10059 and the like)
//
// While a group has no leader nobody answers and the client times out
// and retries, as with nats-server during an election; but a server that
// has known no leader of the meta group for 2 s answers its requests
// with 10008 (metaAnswers), a replica of a group without a leader for
// 2 s answers STREAM.INFO and CONSUMER.INFO (leaderless.go), a read
// request that arrives in those 2 s is held until then (later.go), and
// the info of a stream or consumer none of whose servers is in reach
// is the meta leader's 10118 or 10119 (later.go).
//
// # Replicas
//
// An applied AssignStream naming this server makes it start its replica
// in the account's engine. A replicated file stream's replica starts from
// its checkpoint (internal/cluster/streamckpt: the store rolled back to
// the checkpoint's position, the stream's state restored;
// JetStream.StartReplica) or empty, a replicated memory stream's empty
// over a memory store (streamckpt.OpenMemory, also through StartReplica:
// it replays its group's whole log; docs/cluster.md, "Memory
// streams"), and a stream with one replica from its files after a restart
// (JetStream.RestoreStream) or through StreamCreate. For more than one
// replica the stream's log is a streamlog.Log over its group, added to
// the Node once the stream runs; the replica that leads subscribes to the
// stream's subjects (JetStream.SetStreamLeader). A RemoveStream deletes
// the local stream and removes the group. The servers' engines restore
// nothing at their start (jetstream.Config.DeferRestore): the meta group
// says which streams a server runs.
//
// # Consumers
//
// The meta group holds every consumer on its own replica count of its
// stream's servers (consumer.go): one replica runs on its server with
// the engine's local log, more over a consumerlog.Log of the consumer's
// group. The meta leader creates, lists and deletes them, checking a
// create against its meta state; the servers reach each other's
// consumer leaders through the system account (internal.go: consumer
// infos, the removal of an inactive consumer).
//
// # Updates and step-downs
//
// A stream update goes through the meta group (the assignment's config)
// and then through the stream's own log: the replica that leads the
// stream proposes the assigned config as an UpdateConfig operation, so
// every replica applies it in log order (update.go; docs/cluster.md,
// "Stream updates"). A replica that starts with an empty store starts
// from the config its group's log starts with
// (meta.StreamAssignment.LogConfig). The step-down requests hand a
// group's leadership over by raft's leadership transfer, the successor
// chosen by the request's placement (stepdown.go; "Step-down"); the
// system account's requests reach the Cluster as a jsapi.SystemCluster.
// A server leaving on purpose (lame duck mode, shutdown) hands the
// leadership of every group it leads over before its JetStream stops
// (HandOver, handover.go; "Lame duck mode and shutdown").
//
// # Membership
//
// The assignment is the replica set a group must have; the group's
// leader carries changes out one at a time, learners first
// (membership.go; docs/cluster.md, "Replacing a replica", "Scaling"):
// a replica whose store changed is replaced by a new replica ID on its
// server (the meta leader's meta.MoveReplica), STREAM.PEER.REMOVE (and
// STREAM.PEER.EVACUATE, SERVER.EVACUATE: evacuate.go) moves a replica to
// another server, a num_replicas update scales the stream.
// A replicated consumer's group follows its assignment the same way
// (consumerscale.go, consumerdown.go; "Scaling consumers"): its replica
// on a wiped server is replaced (meta.MoveConsumer), it moves with its
// stream's replica, and it scales with its stream or by its own update,
// its state handed over at the scale up from one replica and the scale
// down to it. A consumer of one replica on a server its stream's replica
// leaves moves first, with its state, to a server of the stream that
// stays, by a scale up to two replicas and down to one there (singles.go;
// "Moving consumers of one replica"); a file stream of one replica
// evacuated moves the same way, its consumers between the two steps
// (singlestream.go; "Moving a stream of one replica").
// New replicas are caught up by stream snapshots (internal/cluster/
// streamckpt, internal/cluster/catchup, whose service this layer runs on
// the Raft transport). The meta group's own members are replaced the
// same way: their replica IDs derive from their store incarnations.
package jscluster
