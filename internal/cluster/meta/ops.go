package meta

import "github.com/cairnmq/cairn/internal/raftnode"

// Kind numbers an operation in its encoding (package comment). The enum
// is append-only: a number never changes meaning.
type Kind byte

// The kinds of operations.
const (
	KindAssignStream   Kind = 1
	KindUpdateStream   Kind = 2
	KindRemoveStream   Kind = 3
	KindAssignConsumer Kind = 4
	KindRemoveConsumer Kind = 5
	KindAddServer      Kind = 6
	KindRemoveServer   Kind = 7
	KindMoveReplica    Kind = 8
	KindSettleStream   Kind = 9
	KindResetStream    Kind = 10
	KindSettleConsumer Kind = 11
	KindMoveConsumer   Kind = 12
	KindMoveStream     Kind = 13
	KindCancelMove     Kind = 14
	KindEndMove        Kind = 15
	KindRenameReplicas Kind = 16
	KindExcludeServer  Kind = 17
	KindScaleStream    Kind = 18
)

// Op is one operation of the meta log: one of the pointer types below.
// Operations carry no reply subject or client information: the reply is
// the proposer's business (Log.Propose returns its waiter).
type Op interface {
	Kind() Kind
}

// AssignStream creates a stream (nats-server's assignStreamOp). Apply
// gives it a new group and one replica per server, in the order given.
// An existing stream with the same config bytes is left as it is
// (Result.Existed: nats-server's idempotent create); with other bytes the
// outcome is 10058.
type AssignStream struct {
	Account string
	Name    string
	// Config is the stream's config as the API's StreamConfig JSON
	// (meta.json), validated and defaulted by the proposer, with the
	// versioning metadata copied from an existing assignment as
	// nats-server does before comparing; its "name" is Name.
	Config []byte
	// Created is the creation time chosen by the proposer (unix ns).
	Created int64
	// Servers hold the replicas (Place's choice), 1 to 16, distinct.
	Servers []raftnode.ServerID
}

// UpdateStream replaces a stream's config and its servers
// (nats-server's updateStreamOp: config updates, scaling between 1, 3
// and 5 replicas, peer removal). A server already holding a replica keeps
// it; a new one gets a new replica ID. The group is unchanged.
type UpdateStream struct {
	Account string
	Name    string
	Config  []byte
	Servers []raftnode.ServerID
}

// RemoveStream deletes a stream and its consumers (removeStreamOp).
type RemoveStream struct {
	Account string
	Name    string
}

// ConsumerAction is what a consumer create request allows, with
// nats-server v2.15.2's numbers (ConsumerAction: ActionCreateOrUpdate,
// ActionUpdate, ActionCreate).
type ConsumerAction byte

// The consumer actions.
const (
	CreateOrUpdate ConsumerAction = 0
	Update         ConsumerAction = 1
	Create         ConsumerAction = 2
)

// AssignConsumer creates or updates a consumer of a stream
// (assignConsumerOp). A new consumer gets a new group; its servers must
// be servers of its stream (nats-server: a consumer's peers are its
// stream's; 10023 otherwise). On an existing consumer, Create with the
// same config bytes leaves it as it is (Result.Existed, whatever the
// servers) and with other bytes is 10148; Update on a missing consumer
// is 10149; CreateOrUpdate and Update with the same config and as many
// servers leave it as it is (Existed); otherwise the config is replaced
// and, when the count of servers changes (a scale), the servers too, as
// UpdateStream does (its created time stays). Other servers in the same
// count are ignored: the proposer placed the consumer before an earlier
// create of it applied, and moving it would leave its state behind.
type AssignConsumer struct {
	Account string
	Stream  string
	// Name is the consumer's name: its durable or given name, or the one
	// the proposer generated for an ephemeral consumer.
	Name    string
	Action  ConsumerAction
	Config  []byte // the API's ConsumerConfig JSON, validated and defaulted
	Created int64  // unix ns, chosen by the proposer
	Servers []raftnode.ServerID
}

// RemoveConsumer deletes a consumer (removeConsumerOp).
type RemoveConsumer struct {
	Account string
	Stream  string
	Name    string
}

// AddServer adds a server to the catalogue placement chooses from, or
// updates it (cluster, tags, store incarnation) and clears its removed
// mark. In nats-server the catalogue comes from server-status gossip;
// here membership is in the log so apply can check that the servers an
// operation names are members, and bind replicas to their incarnation.
type AddServer struct {
	Name    raftnode.ServerID
	Cluster string
	// Tags are the server's server_tags, lowercased and trimmed as
	// nats-server stores them.
	Tags        []string
	Incarnation raftnode.Incarnation
}

// RemoveServer marks a server removed ($JS.API.SERVER.REMOVE): placement
// skips it and apply refuses new replicas on it. Its existing replicas
// stay until the leader moves them. Unknown or removed: 10044.
type RemoveServer struct {
	Name raftnode.ServerID
}

// MoveReplica replaces one replica of a stream by a new replica on
// server To (the same server or another), in the same place of the
// assignment's list: the replica of ID Replica goes, a new one gets the
// stream's next replica ID, bound to To's incarnation in the catalogue.
// The stream's leader then carries the change out in the stream's group
// (the new replica added as a learner, caught up by a snapshot, promoted
// while the old one is removed: docs/cluster.md, "Replacing a
// replica"). It replaces a replica whose server's store was wiped or
// replaced (To = its server: the replica is bound to an incarnation the
// server no longer has, and raftnode fences it) and moves one away from
// a server ($JS.API.STREAM.PEER.REMOVE). Apply: the stream missing,
// 10059; no replica of that ID, 10040 (so a repeated proposal changes
// nothing); To holding another replica of the stream, or not a member,
// 10005.
type MoveReplica struct {
	Account string
	Stream  string
	Replica raftnode.ReplicaID
	To      raftnode.ServerID
}

// SettleStream records that a stream scaled down to one replica runs
// without a group on its server (docs/cluster.md, "Scaling down to
// one replica"): that server turned its replica Replica of group Group
// into the stream of one replica, and raftnode will never accept that
// replica ID in that group again. Apply gives the stream a new group
// (unused: one replica has no Raft group, decision 2) whose only replica,
// ID 1 on the same server, can bootstrap it alone on a later scale-up;
// the log config becomes the config. Apply: the stream missing, 10059;
// the stream not of one replica, of another group, its replica not
// Replica, or already settled (its group never had more than one
// replica ID), 10040, so a repeated proposal changes nothing.
type SettleStream struct {
	Account string
	Stream  string
	Group   raftnode.GroupID
	Replica raftnode.ReplicaID
}

// ResetStream starts a replicated memory stream over, empty, in a new
// group, when its group can never elect a leader again: a majority of
// its replicas lost their state at a restart (raftnode.ErrStateLost:
// they were caught up by a stream snapshot, their memory is gone, and a
// fenced replica neither votes nor campaigns), so no replacement can be
// carried out (docs/cluster.md, "Memory streams"). nats-server
// v2.15.2 brings such a stream back empty after a restart of every
// server, its consumers with it; so does this operation. Apply gives the
// stream a new group whose replicas, on the same servers in the same
// order, take IDs 1 to n (bound to their servers' incarnations in the
// catalogue) and bootstrap it empty from the stream's config (the log
// config becomes the config); each consumer of the stream keeps its
// name, config, servers and created time and gets a new group in the
// same way, so it starts with no delivered or acknowledged message. The
// stream's config and created time are kept. Apply: the stream missing,
// 10059; of another group (already reset, settled), of one replica, not a
// memory stream, or whose num_replicas is not its count of replicas,
// 10040, so a repeated or stale proposal changes
// nothing.
type ResetStream struct {
	Account string
	Stream  string
	Group   raftnode.GroupID
}

// Kind implements Op.
func (*AssignStream) Kind() Kind { return KindAssignStream }

// Kind implements Op.
func (*UpdateStream) Kind() Kind { return KindUpdateStream }

// Kind implements Op.
func (*RemoveStream) Kind() Kind { return KindRemoveStream }

// Kind implements Op.
func (*AssignConsumer) Kind() Kind { return KindAssignConsumer }

// Kind implements Op.
func (*RemoveConsumer) Kind() Kind { return KindRemoveConsumer }

// Kind implements Op.
func (*AddServer) Kind() Kind { return KindAddServer }

// Kind implements Op.
func (*RemoveServer) Kind() Kind { return KindRemoveServer }

// Kind implements Op.
func (*MoveReplica) Kind() Kind { return KindMoveReplica }

// Kind implements Op.
func (*SettleStream) Kind() Kind { return KindSettleStream }

// Kind implements Op.
func (*ResetStream) Kind() Kind { return KindResetStream }

// SettleConsumer records that a replicated consumer scaled down to one
// replica runs without its group on its server (docs/cluster.md,
// "Scaling consumers"): that server handed the committed state of its
// replica Replica of group Group to a consumer of one replica, and
// removed the group, which will never accept that replica ID again.
// Apply gives the consumer a new group (unused: one replica has no Raft
// group) whose only replica, ID 1 on the same server, can bootstrap it
// alone on a later scale-up (Initial 1). Apply: the stream missing,
// 10059; the consumer missing, 10014; the consumer not of one replica,
// of another group, its replica not Replica, or already settled
// (ConsumerAssignment.Unsettled false), 10040, so a repeated proposal
// changes nothing.
type SettleConsumer struct {
	Account string
	Stream  string
	Name    string
	Group   raftnode.GroupID
	Replica raftnode.ReplicaID
}

// Kind implements Op.
func (*SettleConsumer) Kind() Kind { return KindSettleConsumer }

// MoveConsumer replaces one replica of a replicated consumer by a new
// replica on server To (the same server or another holding the
// consumer's stream), in the same place of the assignment's list: the
// replica of ID Replica goes, a new one gets the consumer's next replica
// ID (above Initial: it joins the group empty), bound to To's
// incarnation in the catalogue. The consumer's leader then adds it as a
// learner, catches it up by a snapshot of the committed state and
// promotes it while the old one is removed (docs/cluster.md,
// "Scaling consumers"), as MoveReplica does for a stream: the replica on
// a server whose store was wiped or replaced, or on a server a stream's
// replica moves away from (STREAM.PEER.REMOVE). Apply: the stream
// missing, 10059; the consumer missing, 10014; no replica of that ID,
// 10040 (a repeated proposal changes nothing); To holding another
// replica of the consumer, not a member or not holding the stream,
// 10005.
type MoveConsumer struct {
	Account string
	Stream  string
	Name    string
	Replica raftnode.ReplicaID
	To      raftnode.ServerID
}

// Kind implements Op.
func (*MoveConsumer) Kind() Kind { return KindMoveConsumer }

// MoveStream is an UpdateStream that changes the stream's placement
// (docs/cluster.md, "Moving a stream"): it replaces the config and
// the servers as UpdateStream does, and records where the move began
// (StreamAssignment.Move: the servers the stream had, OriginPlacement,
// Created), as nats-server v2.15.2 records a desired group's origin
// (jetstream_cluster.go desiredRaftGroupOrigin). Servers may be the
// stream's own (a move waiting for its consumers of one replica, which
// an UpdateStream carries on later). Apply: the stream missing, 10059;
// a move already recorded, 10124 "stream move already in progress"
// (nats-server's answer to a second move); a scale recorded, 10226
// "stream reconfiguration already in progress" (nats-server's answer to
// a move during a scale); subjects overlapping, 10065;
// a new server not a member, 10005.
type MoveStream struct {
	Account string
	Name    string
	Config  []byte
	Servers []raftnode.ServerID
	// Created is the move's start (unix ns, the proposer's clock): it
	// names the move for CancelMove and EndMove, and stream info shows
	// it as nats-server's desired.created.
	Created int64
	// OriginPlacement is the JSON of the placement the stream's config
	// had before the move, empty when it had none.
	OriginPlacement []byte
}

// CancelMove turns the stream's move back ($JS.API.STREAM.CANCEL_MOVE,
// nats-server v2.15.2 jsClusteredStreamCancelMoveLocked): the config
// becomes Config (the proposer's: the assigned config with the origin's
// placement) and the replicas the move's origin's, each on its server:
// the stream's replica there if the assignment still has one, else the
// origin replica itself when Members holds it (it never left the group:
// it stays, with its data), else a new replica ID (it left: its server
// keeps a tombstone of that ID and starts a new one, caught up as any
// new replica). The record stays, marked cancelled, until the stream is
// back (EndMove): the rollback still counts as a move in flight. Apply:
// the stream missing, 10059; no move recorded, or one that began at
// another Created, 10129 "stream reconfiguration not in progress"; a
// new replica's server no longer a member, 10005.
type CancelMove struct {
	Account string
	Name    string
	Config  []byte
	Created int64
	// Members are the replica IDs the stream's group holds (voters and
	// learners), as its leader reported them to the proposer.
	Members []raftnode.ReplicaID
}

// EndMove closes the stream's move once its group runs on its assigned
// servers alone (the stream's leader reports it): the record goes, and
// the stream may move again. Apply: the stream missing, 10059; no move
// recorded, one that began at another Created, or Servers not the
// assignment's servers (a report of a group that converged on servers
// the stream no longer has), 10129, so a stale or repeated proposal
// changes nothing.
type EndMove struct {
	Account string
	Name    string
	Created int64
	Servers []raftnode.ServerID
}

// ScaleStream is an UpdateStream that changes the stream's num_replicas
// between replicated counts (docs/cluster.md, "Scaling"): it replaces
// the config and the servers as UpdateStream does, and records the scale
// as a move is recorded (StreamAssignment.Move, with MoveOrigin.Scale),
// as nats-server v2.15.2 records a scale as desired state with an origin
// (jetstream_cluster.go jsClusteredStreamUpdateRequestLocked,
// populateOrigin): while it is recorded a move is refused, CancelMove
// returns the stream to the origin's replicas, and EndMove closes it. A
// scale onto a recorded scale keeps that record's origin and Created
// (nats-server's withDesired keeps the first origin and created), and
// clears its cancelled mark. Apply: the stream missing, 10059; a move
// recorded (not a scale), 10124 "stream move already in progress";
// subjects overlapping, 10065; a new server not a member, 10005.
// Its fields are MoveStream's (Created: the scale's start, kept when a
// scale is already recorded; OriginPlacement: the config's placement
// before the scale), and so is its encoding.
type ScaleStream MoveStream

// Kind implements Op.
func (*ScaleStream) Kind() Kind { return KindScaleStream }

// Kind implements Op.
func (*MoveStream) Kind() Kind { return KindMoveStream }

// Kind implements Op.
func (*CancelMove) Kind() Kind { return KindCancelMove }

// Kind implements Op.
func (*EndMove) Kind() Kind { return KindEndMove }

// RenameReplicas hands the replicas of a removed server From that its
// store still runs to To, the name that store now goes by: a server
// restarted under another server_name over its store directory, its old
// name then removed with $JS.API.SERVER.REMOVE (docs/cluster.md, "A
// server renamed over its store"). Every replica of a stream or a
// consumer (and of a move's origin) on From bound to To's store
// incarnation in the catalogue is named on To instead, with its replica
// ID kept: the same store, the same Raft replica (its WAL, its hard
// state, its files), so its group keeps its voters and its quorum, as
// nats-server v2.15.2 keeps a renamed server's stream data under its new
// name. A stream or consumer that already has a replica on To keeps the
// one on From (a move handles it). Apply: From not catalogued or not
// removed, To not catalogued or removed, or the two not of one
// incarnation, 10044 (server not a member); nothing to rename changes
// nothing, so a repeated proposal is harmless.
type RenameReplicas struct {
	From raftnode.ServerID
	To   raftnode.ServerID
}

// Kind implements Op.
func (*RenameReplicas) Kind() Kind { return KindRenameReplicas }

// ExcludeServer keeps Server out of the placement of the stream's
// replicas (StreamAssignment.Excluded) until the stream is back at its
// num_replicas with no replica on an excluded server, as nats-server
// v2.15.2 records an evacuated peer it could not replace in the group's
// Excluded list ($JS.API.SERVER.EVACUATE, removePeerFromStreamLocked
// with exclude set; docs/cluster.md, "Evacuating a server"). The
// proposer then drops the server's replica (an UpdateStream). Apply:
// the stream missing, 10059; the server not catalogued, 10044; a server
// already excluded changes nothing.
type ExcludeServer struct {
	Account string
	Stream  string
	Server  raftnode.ServerID
}

// Kind implements Op.
func (*ExcludeServer) Kind() Kind { return KindExcludeServer }
