// Package consumer holds what a JetStream consumer is, apart from the
// network: its configuration (ConsumerConfig JSON, defaults, validation
// and what an update may change, as nats-server v2.15.2 decides them),
// its info shape, and the delivery state machine (delivered and ack floor
// sequences, pending acknowledgements, redelivery with ack_wait and
// backoff, max_deliver, max_ack_pending, and cairn's dead-letter marks:
// deliveries being moved to a dead-letter subject, docs/dead-letter.md)
// driven by an injected clock.
//
// Facts: ../shared/reference/protocol.md sections 2.6.9 to 2.6.11, 3.4,
// 3.5 and 5. The package does no I/O and starts no goroutine: the
// jetstream package owns consumers at run time and feeds this package
// the messages it loads from the store and the time.
package consumer
