// Package jetstream is the JetStream engine of one server: it creates,
// updates, deletes and restores streams and their consumers, keeps their
// metadata on disk, and runs each stream and consumer in its runtime
// (jetstream/streamrun, jetstream/consumerrun, jetstream/sourcing), where
// every change is an operation proposed to a Log and applied in order
// (docs/engine.md). PubAcks are answered only once the message is
// durable (docs/design-jetstream.md).
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
// Stream snapshots and restores (snapshot.go, restore.go; the archive
// format is internal/snapshot's) run on goroutines of their own
// (JetStream.background), which Shutdown ends and waits for; a restored
// stream is started as a start restores one.
//
// # Consumers
//
// Each consumer runs in its runtime, package jetstream/consumerrun (its
// loop goroutine and its state saver). The engine keeps each stream's
// consumers in a table beside the stream's runtime (consumerTable), and
// the table of what each stream captures for dead-letter moves
// (captures.go).
//
// # Files
//
// One engine per account (Config.Account; $G, the global account, by
// default), each under its own directory:
//
//	<StoreDir>/jetstream/<account>/streams/<name>/meta.json   stream config and creation time
//	<StoreDir>/jetstream/<account>/streams/<name>/msgs/       the file store's segments (and consumer states)
//	<StoreDir>/jetstream/<account>/streams/<name>/obs/<c>/meta.json  a consumer's config and creation time
//	<StoreDir>/jetstream/<account>/streams/.<name>/              a stream being deleted (dirs.go); a start removes it
//	<StoreDir>/jetstream/<account>/streams/.restore.<id>/        a stream restore being built (restore.go); a start removes it
//	<StoreDir>/jetstream/<account>/streams/<name>.unrestored-<ns>/  a directory a start could not restore, set aside by a create of <name>
//
// Memory streams write nothing: they end with the server, as in
// nats-server. The consumers of file streams are written, durable and
// ephemeral alike, except those with mem_storage, which end with the
// server (as in nats-server v2.15.2); a restored ephemeral is deleted once
// its inactive_threshold has passed since the restart.
//
// meta.json is replaced by write-new (meta.json.tmp), fsync, rename,
// fsync-directory. Its content is the JSON of metaFile followed by a
// newline and the CRC-32C (Castagnoli) of the JSON as 8 hex digits on a
// line of its own; a file whose checksum fails is reported and the stream
// left alone, never deleted.
package jetstream
