// Package consumerrun is the runtime of a JetStream consumer on one
// server: what runs a consumer's delivery logic (consumer.Deliverer)
// and state (consumer.State), moves its bytes and keeps its timers
// (docs/engine.md). The engine (package jetstream) makes a Consumer with
// New (a new consumer, at its starting position) or Restore (from its
// files), keeps it in its stream's consumer table, calls Start, and ends
// it with Stop.
//
// # Goroutines (each consumer)
//
// A Consumer has one loop goroutine. Its subscriptions (acks on
// $JS.ACK.<S>.<C>.>, pull requests on $JS.API.CONSUMER.MSG.NEXT.<S>.<C>,
// flow control replies on $JS.FC.<S>.<C>.*, resets on
// $JS.API.CONSUMER.RESET.<S>.<C>) run on the publishers' read
// loops and only queue events and wake the loop. Each round of the loop,
// under the consumer's mutex, turns the events and the timers that came
// due into consumer operations through the consumer's Log (Commit;
// consumer.State.ApplyOp decides), asks the Deliverer what to send and
// sends it, and, at most every 100 ms, hands a snapshot of a persisted
// consumer's state to the consumer's saver goroutine, which writes the
// newest snapshot it holds. API calls (info, update, pause) take the same
// mutex briefly; the writes of its meta.json (update, pause, a new
// ephemeral's first write) are serialized by metaMu, taken before it.
// After the round, with the mutex released, the acknowledged sequences
// go to the stream for interest and work-queue retention
// (streamrun.Stream.OnAcked). No goroutine holds two consumer mutexes at
// once.
//
// A consumer with a dead-letter subject (docs/dead-letter.md) copies a
// message that reached max_deliver, or that a client terminated, to it;
// when a stream captures the subject the copy is a move, which its loop
// drives (deadletter.go has the order and the crash windows).
//
// A consumer of a file stream without mem_storage, durable or ephemeral,
// keeps files (Persisted); a new ephemeral's are written by a short-lived
// goroutine of its own once it runs (persistLater), so that its create
// waits for no fsync. A consumer also answers its own reset requests
// ($JS.API.CONSUMER.RESET.<S>.<C>, reset.go) on its loop.
//
// The consumer's files:
//
//	<stream dir>/obs/<name>/meta.json   its config and creation time (metafile)
//	<stream dir>/msgs/...               its state and ack journal, in the stream's file store
package consumerrun
