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
//     what the stream's ingest queue holds, in order: publishes, and
//     requests (purge, delete, update, an expiry pass, a source's copy,
//     retention's removals), which are data, never code. As the
//     proposer (propose.go) it turns them into stream operations,
//     deciding what only the node that takes a publish may decide (the
//     entry time, 10023 when storage runs out, batch staging, which
//     messages retention removes), and proposes them to the stream's
//     Log; the local log (log.go) commits each at once and hands it
//     back to the applier (applier.go), where stream.Stream.ApplyOp alone
//     decides the outcome (docs/engine.md). The waiter kept under the
//     operation's key says whom to answer.
//  2. The ack goroutine takes the PubAcks the applier produced, waits
//     once for the store to make the highest of their sequences durable
//     (group commit), then publishes them in order.
//  3. A timer asks the apply goroutine for an expiry pass (max_age,
//     TTLs, the duplicate window) about once a second.
//
// Once the ack goroutine has waited for the store, it records the
// stream's durable sequence and wakes the consumers: no consumer delivers
// a message above it, since an unacknowledged tail may be rewritten
// after a crash. Memory streams acknowledge on the apply goroutine.
//
// # Goroutines (each consumer)
//
// A consumer (cons) has one loop goroutine. Its subscriptions (acks on
// $JS.ACK.<S>.<C>.>, pull requests on $JS.API.CONSUMER.MSG.NEXT.<S>.<C>,
// flow control replies on $JS.FC.<S>.<C>.*) run on the publishers' read
// loops and only queue events and wake the loop. Each round of the loop,
// under the consumer's mutex, applies the events to the delivery state
// machine (consumer.State), moves expired acks to redelivery, expires
// pull requests, loads messages from the store and publishes them
// (redeliveries first), sends heartbeats and, at most every 100 ms, hands
// a snapshot of a durable consumer's state to the consumer's saver
// goroutine, which writes the newest snapshot it holds. API calls (info, update, pause)
// take the same mutex briefly. After the round, with the mutex released,
// the acknowledged sequences go to the stream for interest and workqueue
// retention, which asks the other consumers (each under its own mutex)
// and queues the removals on the stream's apply goroutine. No goroutine
// holds two consumer mutexes at once.
//
// A consumer with a dead-letter subject (docs/dead-letter.md) copies a
// message that reached max_deliver, or that a client terminated, to it;
// when a stream captures the subject the copy is a move, which its loop
// drives: the mark is stored with the state, the copy published, and
// the original acknowledged once the capturing stream's PubAck came
// (deadletter.go has the order and the crash windows).
//
// # Files
//
//	<StoreDir>/jetstream/$G/streams/<name>/meta.json   stream config and creation time
//	<StoreDir>/jetstream/$G/streams/<name>/msgs/       the file store's segments (and consumer states)
//	<StoreDir>/jetstream/$G/streams/<name>/obs/<c>/meta.json  a durable consumer's config and creation time
//	<StoreDir>/jetstream/$G/streams/.<name>/              a stream being deleted (dirs.go); a start removes it
//	<StoreDir>/jetstream/$G/streams/<name>.unrestored-<ns>/  a directory a start could not restore, set aside by a create of <name>
//
// Memory streams write nothing: they end with the server, as in
// nats-server. Only durable consumers of file streams without
// mem_storage are written; ephemerals end with the server.
//
// meta.json is replaced by write-new (meta.json.tmp), fsync, rename,
// fsync-directory. Its content is the JSON of metaFile followed by a
// newline and the CRC-32C (Castagnoli) of the JSON as 8 hex digits on a
// line of its own; a file whose checksum fails is reported and the stream
// left alone, never deleted.
package jetstream
