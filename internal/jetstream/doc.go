// Package jetstream runs the JetStream streams of one server: it creates,
// updates, deletes and restores streams, keeps their metadata on disk,
// and runs one ingest runner per stream that applies publishes in order
// and answers PubAcks only once the message is durable (docs/design-jetstream.md).
//
// It reaches the network only through the Transport it is given (the
// server implements it with internal subscriptions and Publish), so it
// knows nothing of connections or of the $JS.API subjects (jsapi owns
// those).
//
// # Goroutines (each stream)
//
//  1. The apply goroutine owns the stream.Stream state machine. It takes
//     items from the stream's ingest queue in order: publishes (applied
//     with stream.Apply) and operations from the API (purge, delete,
//     update, expiry), so one goroutine decides everything about the
//     stream's contents.
//  2. The ack goroutine takes the PubAcks the apply goroutine produced,
//     waits once for the store to make the highest of their sequences
//     durable (group commit), then publishes them in order.
//  3. A timer submits an expiry operation (max_age, the duplicate window)
//     to the apply goroutine about once a second.
//
// # Files
//
//	<StoreDir>/jetstream/$G/streams/<name>/meta.json   stream config and creation time
//	<StoreDir>/jetstream/$G/streams/<name>/msgs/       the file store's segments
//
// meta.json is replaced by write-new (meta.json.tmp), fsync, rename,
// fsync-directory. Its content is the JSON of metaFile followed by a
// newline and the CRC-32C (Castagnoli) of the JSON as 8 hex digits on a
// line of its own; a file whose checksum fails is reported and the stream
// left alone, never deleted.
package jetstream
