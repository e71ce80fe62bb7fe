// Package consumer holds what a JetStream consumer is, apart from the
// network: its configuration (ConsumerConfig JSON, defaults, validation
// and what an update may change, as nats-server v2.15.2 decides them),
// its info shape, and the delivery state machine (delivered and ack floor
// sequences, pending acknowledgements, redelivery with ack_wait and
// backoff, max_deliver, max_ack_pending, pause, and cairn's dead-letter
// marks: deliveries being moved to a dead-letter subject,
// docs/dead-letter.md) driven by an injected clock.
//
// Facts: docs/engine.md, docs/dead-letter.md, and nats-server v2.15.2's
// consumer.go. The package does no I/O and starts no goroutine: the
// jetstream package owns consumers at run time and feeds this package
// the messages it loads from the store and the time.
//
// # Operations
//
// Every change to the delivery state is an operation (ops.go): Deliver,
// Redeliver, Ack, Nak, Term, Progress, ExpireAcks (ack deadlines),
// SkipTo (after a purge), Drop (messages the stream removed), Pause,
// UpdatePolicy (after a config update), DeadLetter (the steps of a
// dead-letter move), Reset (a consumer reset, ADR-60) and PullRequest (a
// replicated consumer's record of a waiting pull request's reply
// subject, which changes no delivery state). State.ApplyOp is the one function that applies
// them: its outcome depends only on the state and the operation, never
// on a clock, so every replica that applies the same operations reaches
// the same Snapshot. The State methods it is made of (DeliverNew, Ack,
// Expire, ...) stay for tests and for restoring a state (Replay of the
// ack journal); the runtime changes a state through ApplyOp only.
//
// An operation travels as (AppendOp, DecodeOp; varints are
// encoding/binary's, unsigned unless marked signed):
//
//	+-------------+-------------+-------------------+
//	| kind 1 byte | version = 1 | the kind's fields |
//	+-------------+-------------+-------------------+
//	 1 Deliver      | stream seq | time (signed, unix ns) |
//	 2 Redeliver    | stream seq | time (signed) |
//	 3 Ack          | stream seq | consumer seq |
//	 4 Nak          | stream seq | delay (signed, ns) | time (signed) |
//	 5 Term         | stream seq | consumer seq |
//	 6 Progress     | stream seq | time (signed) |
//	 7 ExpireAcks   | time (signed) |
//	 8 SkipTo       | stream seq |
//	 9 Drop         | count | count × stream seq |
//	10 Pause        | until (signed, unix ns; 0 resumes) |
//	11 UpdatePolicy | ack policy (signed) | ack wait (signed, ns) | count | count × backoff (signed, ns) | max_deliver (signed) | max_ack_pending (signed) | dead letter (1 byte, 0 or 1) |
//	12 DeadLetter   | step (1 byte) | stream seq | reason (1 byte) | value (signed: a time, or After) |
//	13 Reset        | stream seq (where deliveries start again) |
//	14 PullRequest  | reply length | reply bytes | expires (signed, unix ns) | time (signed, unix ns) |
//
// Kinds are append-only. DecodeOp refuses an unknown kind or version, a
// short buffer, a count the bytes left cannot hold and trailing bytes
// (ErrBadOp).
package consumer
