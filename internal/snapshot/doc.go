// Package snapshot encodes and decodes stream snapshots in the format
// nats-server v2.15.2 sends for $JS.API.STREAM.SNAPSHOT and accepts on
// $JS.API.STREAM.RESTORE (its "v2" snapshot: server/stream_backup.go and
// server/archive), which `nats stream backup` stores as stream.arc.s2 and
// `nats stream restore` sends back. A snapshot made by cairn restores
// into nats-server 2.15 and later, and one made by them into cairn. It
// knows nothing of stores or the network: jetstream produces and consumes
// the entries.
//
// # Layers
//
// The bytes are S2-compressed in the S2 stream format (package
// github.com/klauspost/compress/s2): a stream identifier, then chunks of
// at most 1 MiB of data, each carrying the CRC-32C (Castagnoli, masked)
// of its uncompressed bytes. The CRC is the snapshot's checksum: a flipped
// bit fails the chunk that holds it ("s2: corrupt input, crc mismatch");
// a cut in the middle of a chunk fails it too ("s2: corrupt input").
//
// The uncompressed bytes are an archive:
//
//	magic   "NATSARC1" (8 bytes), once
//	entry*  each:
//	  uvarint  len(name)            at most 1 MiB
//	  varint   timestamp            unix nanoseconds
//	  uvarint  sequence             0 = none
//	  uvarint  header size          bytes of the payload that are a NATS header block
//	  uvarint  payload size         bytes after them
//	  bytes    name
//	  bytes    header size + payload size bytes of payload
//
// Varints are those of encoding/binary (LEB128; varint zig-zag encodes
// the sign). Header and payload sizes must not be negative as int64 nor
// overflow it together.
//
// # Entries of a stream snapshot, in order
//
//  1. "state.json": the stream's state when the snapshot began, as the
//     JSON of a stream info's "state" (messages, bytes, first_seq,
//     first_ts, last_seq, last_ts, num_subjects, num_deleted,
//     consumer_count); consumer_count is the number of consumer entries
//     that follow (0 without consumers).
//  2. consumer_count entries "consumers/<name>": {"config": <consumer
//     config>, "state": <consumer state>}, the state as nats-server's
//     ConsumerState JSON (delivered and ack_floor as {consumer_seq,
//     stream_seq}, pending keyed by stream sequence with "Sequence" (the
//     consumer sequence) and "Timestamp" (unix nanoseconds of the
//     delivery), redelivered keyed by stream sequence with the number of
//     redeliveries).
//  3. One entry per stored message, in ascending sequence: name = the
//     subject, sequence and timestamp = the message's, header size = the
//     length of its NATS header block (0 without), then header and data.
//     Sequences that hold no message are absent.
//  4. The end of the snapshot: an entry whose fields are all zero (empty
//     name). A snapshot without it was cut short: a restore refuses it
//     ("backup was truncated").
package snapshot
