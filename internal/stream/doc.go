// Package stream is a JetStream stream without its I/O: the StreamConfig
// (JSON form, defaults, validation, what an update may change) and the
// state machine that decides each publish. It is level 2 of
// docs/design-jetstream.md: it starts no goroutine, reads no clock and
// knows nothing of the network. nats-server v2.15.2 is the reference for
// every byte a client sees; docs/engine.md has the design, and the
// comments name the nats-server functions they follow.
//
// # Configs
//
// The API layer decodes a request body into a Config (unknown keys are
// ignored) and hands it to the engine, which checks it in one place:
//
//   - a create: PrepareCreate (static metadata, the name against the
//     request subject 10056, CheckCreate 10128, pedantic 10157,
//     SetDefaults, Validate); then, with the other streams at hand, an
//     existing stream (CopyVersionMetadata, then Equal decides between
//     success and 10058), the storage limits, the source filters, the
//     overlap with other streams' subjects (10065), and the store.
//   - an update: PrepareUpdate (pedantic, SetDefaults, Validate, the name
//     10056, static metadata); then the lookup (10059), CheckUpdate
//     (which also applies a seal), the consumer limits (10069) and
//     subject overlap (10065), and the UpdateConfig operation.
//
// Every config returned to a client goes through WithServerMetadata.
//
// # Operations
//
// Every change to a stream is an operation (ops.go, docs/engine.md): a
// Publish of entries, a Copy from an origin stream, a BatchCommit, a
// Purge, a DeleteMsg, an UpdateConfig, an Expire up to a time, a
// Remove of messages retention let go or a FireSchedules at a time. ApplyOp is the one function that
// applies them: its outcome depends only on the Stream's state (config,
// store, duplicate window, last Nats-Msg-Id) and the operation, never on
// a clock, a random source, map order or the server's settings, so a
// replicated log can sit in front of it and every replica that applies
// the same operations reaches the same state.
//
// New makes a Stream over a store configured with Config.StoreConfig;
// after opening a store that holds messages, Rebuild and then ExpireDedupe
// restore the duplicate window. The one goroutine that owns the Stream
// then:
//
//  1. turns each publish into an entry stamped with the time it arrived,
//     and proposes operations to the stream's log;
//  2. calls ApplyOp for each operation the log commits, in order; a
//     publish's store.Append does not wait for the disk;
//  3. builds each reply with AppendPubAck, unless the config has NoAck or
//     the publish had no reply subject, and sends it only once
//     store.WaitDurable covered its sequence (a duplicate: the original
//     sequence) (docs/design-jetstream.md, the publish path);
//  4. proposes an Expire when DedupeDeadline, MaxAgeDeadline or a TTL
//     comes.
//
// Apply, ApplyBatch, ApplyMirror, ExpireUpTo, ExpireDedupe and SetConfig
// are the steps ApplyOp is made of; the runtime calls ApplyOp only.
//
// An operation travels as (AppendOp, DecodeOp; varints are
// encoding/binary's, unsigned unless marked signed; a string or byte
// slice is its length, a uvarint, then its bytes):
//
//	+-------------+-------------+--------------------+
//	| kind 1 byte | version = 1 | the kind's fields  |
//	+-------------+-------------+--------------------+
//	entry        | subject | header len + 1 (0: no header) | header | data | time (signed, unix ns) | flags (1 byte) | [max payload] |
//	             flags: bit 0 Sourced, bit 1 FastBatch, bit 2 a max payload (uvarint, > 0) follows; other bits must be 0
//	1 Publish      | count | count × entry |
//	2 Copy         | mirror (1 byte, 0 or 1) | count | count × (entry, then the origin seq when mirror) |
//	3 BatchCommit  | the BatchCommit bytes below (with a version byte of their own) |
//	4 Purge        | subject | seq | keep |
//	5 DeleteMsg    | seq |
//	6 UpdateConfig | the config's JSON, as the API and meta.json carry it |
//	7 Expire       | time T (signed, unix ns) |
//	8 Remove       | reason (1 byte) | count | count × seq, each the signed difference from the previous (the first from 0) |
//	9 FireSchedules | time T (signed, unix ns) |
//
// Kinds are append-only. DecodeOp refuses an unknown kind or version, a
// short buffer, a count the bytes left cannot hold, unknown flag bits and
// trailing bytes (ErrBadOp).
//
// # Checkpoints
//
// A replica of a replicated stream applies its log to its store without
// waiting for the store's fsync and restarts from a checkpoint: its store
// rolled back to a position (filestore.Position) taken together with the
// Stream's own state at the same raft index (docs/cluster.md,
// "Checkpoints"). AppendCheckpoint encodes that state, CheckpointConfig
// reads the config back (the store's limits are the config's at that
// point) and RestoreCheckpoint puts it in place of Rebuild; the restored
// Stream's AppendState is byte for byte the one of a replica that never
// stopped. Varints are encoding/binary's, unsigned unless marked signed;
// a string is its length (a uvarint), then its bytes:
//
//	+-------------+-------------+------------+-------------------+---------+
//	| version = 1 | config JSON | last msgid | max_age deadline  | window  |
//	| 1 byte      | string      | string     | signed, unix ns   |         |
//	+-------------+-------------+------------+-------------------+---------+
//	| schedules | CRC-32C (Castagnoli) of every byte before, u32 little endian |
//	+-----------+---------------------------------------------------------------+
//	window:    count | count × (Nats-Msg-Id string | seq | time signed, unix ns)
//	           every id the window holds, in the order stored, the ids a later
//	           one of the same name superseded included (expiry walks them)
//	schedules: 0 (no allow_msg_schedules) | 1, count, count × (subject string
//	           | seq | due signed, unix ns; math.MaxInt64 parked), ascending seq
//
// RestoreCheckpoint and CheckpointConfig refuse (ErrBadCheckpoint) a
// failed CRC, another version, a truncated body or trailing bytes, a
// config that does not decode, a repeated schedule and a schedules flag
// that contradicts allow_msg_schedules.
//
// # Batches
//
// Batch publishing (ADR-50) keeps two state machines beside the Stream,
// both owned by the same goroutine and given the time with each call:
// AtomicBatches stages the messages of each open atomic batch and turns
// a complete one into a BatchCommit, the operation ApplyBatch applies
// all or nothing; FastBatches decides the replies of fast batch messages
// before and after each one's Apply (with Entry.FastBatch set). Neither
// changes the stream: only Apply and ApplyBatch do. After a restart,
// DropPartialBatch removes a batch whose commit a crash cut short.
//
// A BatchCommit travels as (EncodeBatchCommit; varints are
// encoding/binary's, uvarint unless said):
//
//	+---------+--------+----+----------------+-------------+-------+---------------+
//	| version | id len | id | time (varint)  | max payload | count | count × entry |
//	| 1 byte  |        |    | unix ns        | 0: none     |       |               |
//	+---------+--------+----+----------------+-------------+-------+---------------+
//	entry: | subject len | subject | header len + 1 (0: no header) | header | data len | data |
//
// version is 1; a decoder refuses any other, a short buffer and trailing
// bytes (ErrBadBatchCommit).
package stream
