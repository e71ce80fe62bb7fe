// Package streamrun is the runtime of a JetStream stream on one server:
// what runs a stream.Stream state machine, moves its bytes and keeps its
// timers (docs/engine.md). The engine (package jetstream) makes a
// Stream with New, gives it its consumers (SetConsumers, the consumer
// runtime's table) and its own sourcers (SetSources), calls Open,
// restores the consumers, calls Serve, and ends it with Stop.
//
// # Goroutines (each stream)
//
//  1. The apply goroutine owns the stream.Stream state machine. It takes
//     what the ingest queue holds, in order: publishes, and requests
//     (purge, delete, update, an expiry pass, a source's copy,
//     retention's removals), which are data, never code. As the proposer
//     (propose.go) it turns them into stream operations, deciding what
//     only the node that takes a publish may decide (the entry time,
//     10023 when storage runs out, batch staging, which messages
//     retention removes), and proposes them to the stream's Log; the
//     local log (log.go) commits each at once and hands it back to the
//     applier (applier.go), where stream.Stream.ApplyOp alone decides the
//     outcome. The waiter kept under the operation's key says whom to
//     answer.
//  2. The ack goroutine takes the PubAcks the applier produced, waits
//     once for the store to make the highest of their sequences durable
//     (group commit), then publishes them in order; it records the
//     stream's durable sequence and wakes the consumers and the sourcers
//     that read the stream: no consumer delivers a message above it,
//     since an unacknowledged tail may be rewritten after a crash. Memory
//     streams acknowledge on the apply goroutine. A file stream with
//     persist_mode async has a reply goroutine as well, which sends its
//     PubAcks once their messages are written, before the fsync
//     (replyLoop); its ack goroutine then only moves the durable
//     sequence and republishes.
//  3. The direct-get goroutine answers $JS.API.DIRECT.GET (direct.go).
//  4. A timer asks the apply goroutine for an expiry pass (max_age, TTLs,
//     the duplicate window) about once a second, sooner when something
//     is due.
//
// The stream knows its consumers and the sourcers that read it only
// through the Consumer, ConsumerSet and Watcher interfaces (parties.go),
// and the server's storage limits through Storage (storage.go).
package streamrun
