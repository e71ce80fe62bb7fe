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
// # Streams
//
// Each stream runs in its runtime, package jetstream/streamrun (its
// apply, ack and direct-get goroutines and its expiry timer; the Log its
// operations go through). The engine keeps, beside each stream's
// runtime, its consumer table and its own sourcers (streamEntry).
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
