// Package stream is a JetStream stream without its I/O: the StreamConfig
// (JSON form, defaults, validation, what an update may change) and the
// state machine that decides each publish. It is level 2 of
// docs/design-jetstream.md: it starts no goroutine, reads no clock and
// knows nothing of the network. nats-server v2.15.2 is the reference for
// every byte a client sees; protocol.md sections 3, 4 and 6 collect the
// facts.
//
// # Configs
//
// The API layer decodes a request body into a Config (unknown keys are
// ignored) and then, for a create, in nats-server's order:
//
//  1. SetStaticMetadata, then check the name against the subject (10056).
//  2. CheckCreate (10128, sealed, mirror_direct).
//  3. SetDefaults, then Validate.
//  4. If the stream exists: CopyVersionMetadata from the existing config,
//     then Equal decides between success and 10058. Else the overlap with
//     other streams' subjects (10065) and the store.
//
// For an update: SetDefaults and Validate, the name check (10056), the
// lookup (10059), SetStaticMetadata, CheckUpdate (which also applies a
// seal), the consumer limits (10069) and subject overlap (10065), then
// Stream.SetConfig. Every config returned to a client goes through
// WithServerMetadata.
//
// # Publishing
//
// New makes a Stream over a store configured with Config.StoreConfig;
// after opening a store that holds messages, Rebuild and then ExpireDedupe
// restore the duplicate window. The one goroutine that owns the Stream
// then:
//
//  1. calls Apply for each entry, in arrival order; Apply stores the
//     message with store.Append, which does not wait for the disk;
//  2. builds the reply with AppendPubAck, unless the config has NoAck or
//     the publish had no reply subject, and hands it on;
//  3. the replies go out in order, a success only once store.WaitDurable
//     covered its sequence and a duplicate only once it covered the
//     original sequence (docs/design-jetstream.md, the publish path);
//  4. calls ExpireDedupe(now) when DedupeDeadline comes.
//
// Apply is a pure function of the stream's state (its store included) and
// the entry (DESIGN.md section 3), so a replicated log can later sit in
// front of it.
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
//	+---------+--------+----+----------------+-------+-------------------------+
//	| version | id len | id | time (varint)  | count | count × entry           |
//	| 1 byte  |        |    | unix ns        |       |                         |
//	+---------+--------+----+----------------+-------+-------------------------+
//	entry: | subject len | subject | header len + 1 (0: no header) | header | data len | data |
//
// version is 1; a decoder refuses any other, a short buffer and trailing
// bytes (ErrBadBatchCommit).
package stream
