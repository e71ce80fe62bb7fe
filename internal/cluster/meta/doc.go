// Package meta is the meta group of a cairn cluster: the JetStream
// metadata every server of the cluster holds (which streams and consumers
// exist, in which account, with which config, in which Raft group, on
// which servers), the operations that change it, the pure function that
// applies them, the placement of new replicas, and the log that carries
// the operations over one internal/raftnode group (docs/cluster.md,
// "The meta group"). It is nats-server's `_meta_` group (v2.15.2
// jetstream_cluster.go: streamAssignment, consumerAssignment,
// applyMetaEntries, selectPeerGroup) rebuilt on the rules of
// docs/cluster.md: decisions are made in apply (decision 5), apply is
// a pure function of the log (decision 6), and group and replica IDs are
// allocated from counters and never reused (decision 3).
//
// It knows nothing of the server, the API or the engine: the cluster layer
// proposes operations on the meta leader (after validating the request
// and choosing servers with Place), waits for the outcome on the
// proposing server only, and watches every applied operation (Config.OnApply)
// to start and stop the replicas named on its server.
//
// # Who decides what
//
// The proposer (the meta leader's API handler) validates and defaults the
// config, answers the checks that need local knowledge (account limits,
// which servers are online), chooses the servers (Place, PlaceConsumer),
// chooses the created time and, for an ephemeral consumer, its name.
// Apply decides everything that depends on the metadata itself, so two
// racing proposals are decided the same way on every server: whether a
// stream or consumer exists and with which config (10058, 10148, 10149),
// subject overlap between an account's streams (10065), whether the
// chosen servers are still members (10005 for streams, 10023 for
// consumers), and the group and replica IDs. Errors that are outcomes go
// in Result.Err; they are not apply failures.
//
// # Identities
//
// The meta group itself is group 1 (MetaGroup); its replicas are set up
// by the cluster layer at bootstrap and are not part of this state. Apply
// allocates every other group ID from State's counter, starting at 2
// (FirstGroup), one per stream and one per consumer, whatever the replica
// count: a group with one replica has no Raft group (decision 2) but
// keeps its ID for a later scale-up. An operation names servers, never
// replica IDs: apply gives each new replica the group's next replica ID
// (from 1), and binds it to the store incarnation its server has in the
// catalogue at that moment (AddServer). A server kept by an update keeps
// its replica; a server added gets a new ID; an ID is never reused, so a
// replica removed and added back on the same server is a new Raft member.
//
// # Operation encoding
//
// Every operation is one byte of kind, one byte of version (1 for every
// kind today), then its fields. Integers are encoding/binary uvarints
// (times are signed varints, unix nanoseconds); a string is its length
// as a uvarint followed by its bytes; an incarnation is 16 raw bytes. The
// kind enum is append-only: a number never changes meaning.
//
//	op             | kind (1) | version (1) | fields ... |
//	AssignStream   | account | name | config | created (signed) | servers |              kind 1
//	UpdateStream   | account | name | config | servers |                                kind 2
//	RemoveStream   | account | name |                                                   kind 3
//	AssignConsumer | account | stream | name | action (1) | config | created (signed) | servers |   kind 4
//	RemoveConsumer | account | stream | name |                                          kind 5
//	AddServer      | name | cluster | tags | incarnation (16) |                          kind 6
//	RemoveServer   | name |                                                            kind 7
//	MoveReplica    | account | stream | replica ID (uvarint) | to (server name) |     kind 8
//	SettleStream   | account | stream | group (uvarint) | replica ID (uvarint) |      kind 9
//	ResetStream    | account | stream | group (uvarint) |                           kind 10
//	SettleConsumer | account | stream | name | group (uvarint) | replica ID (uvarint) | kind 11
//	MoveConsumer   | account | stream | name | replica ID (uvarint) | to (server name) | kind 12
//	MoveStream     | account | name | config | servers | created (signed) | origin placement | kind 13
//	CancelMove     | account | name | config | created (signed) | members |             kind 14
//	EndMove        | account | name | created (signed) | servers |                        kind 15
//	RenameReplicas | from (server name) | to (server name) |                               kind 16
//	ExcludeServer  | account | stream | server (name) |                                  kind 17
//	ScaleStream    | account | name | config | servers | created (signed) | origin placement | kind 18
//	servers        | count (1..16) | count × name |    distinct, in the order replicas get their IDs
//	tags           | count | count × tag |
//	config         | the JSON of the API's StreamConfig or ConsumerConfig, as meta.json holds it
//	action         | 0 create or update, 1 update, 2 create   (nats-server's ConsumerAction values)
//	origin placement | bytes: the JSON of the placement the stream had before the move; empty when it had none
//	members        | count | count × replica ID (uvarint) |   the replicas the stream's group holds, as its leader told
//
// MoveStream, CancelMove and EndMove record, turn back and close a
// stream's move (StreamAssignment.Move: docs/cluster.md, "Moving a
// stream"); created is the move's start, which names it: a CancelMove or
// EndMove of another move changes nothing. ScaleStream records a scale
// (a changed num_replicas between replicated counts) the same way, with
// the record marked a scale (MoveOrigin.Scale): a scale onto a recorded
// scale keeps its origin and start (docs/cluster.md, "Scaling"), and
// CancelMove and EndMove turn back and close it as a move.
//
// ExcludeServer records that a server evacuated ($JS.API.SERVER.EVACUATE)
// and unable to hand its replica of a stream to another server stays out
// of that stream's placement (StreamAssignment.Excluded,
// docs/cluster.md "Evacuating a server").
//
// A decoder refuses unknown kinds and versions, truncated fields, counts
// larger than the bytes left could hold, empty names, repeated servers, a
// stream config that is not a JSON object naming the operation's stream,
// a consumer config that is not a JSON object, an origin placement that
// is neither empty nor a JSON object, and trailing bytes (ErrBadOp). An entry that does not decode fences the server's meta
// replica (docs/cluster.md decision 12).
//
// # Snapshot encoding
//
// The whole state, sorted, so that two servers holding equal state write
// equal bytes (the Raft snapshot a lagging server is sent, and the
// checkpoint file a server restarts from):
//
//	snapshot  | version=6 (1) | next group | servers | streams | CRC-32C of all before (4, LE) |
//	servers   | count | count × server |                           sorted by name
//	server    | name | cluster | tags | incarnation (16) | removed (1: 0 or 1) |
//	streams   | count | count × stream |                           sorted by (account, name)
//	stream    | account | name | config | created (signed) | group | next replica | replicas | log config | consumers | move | excluded |
//	log config| bytes: the config the group's log starts from (StreamAssignment.LogConfig); empty when it is config
//	consumers | count | count × consumer |                         sorted by name
//	consumer  | name | config | created (signed) | group | next replica | replicas | initial |
//	initial   | uvarint: how many replicas the group started with (ConsumerAssignment.Initial)
//	replicas  | count | count × (replica ID | server | incarnation (16)) |   in assignment order
//	move      | 0 (1): no move in flight | 1 (1) | created (signed) | replicas | origin placement | cancelled (1: 0 or 1) | scale (1: 0 or 1) |
//	            the replicas and placement the stream had when its move or scale began (StreamAssignment.Move)
//	excluded  | count | count × server name |                      sorted, distinct (StreamAssignment.Excluded)
//
// Versions 1 (no log config), 2 (no initial count), 3 (no move), 4
// (no excluded servers) and 5 (no scale flag) are still read: a stream's
// log config is then its config, a consumer's initial count its next
// replica ID less one, no move is in flight, no server is excluded, and
// a recorded move is a move. A snapshot that fails its checksum, is not sorted, repeats a key or a
// group, or names a group or replica ID at or past its counter is
// refused (ErrBadSnapshot): a damaged meta state must never be taken for
// an empty one (Jepsen's NATS 2.12.1 analysis, nats-server issue #7556).
//
// The checkpoint file (Config.Dir/meta.snap) is
//
//	| applied index (8, LE) | snapshot | CRC-32C of all before (4, LE) |
//
// replaced by write-new, fsync, rename, fsync of the directory.
package meta
