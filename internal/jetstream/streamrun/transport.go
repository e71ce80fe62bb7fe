package streamrun

// MsgHandler receives a message on an internal subscription: the
// published subject, the reply subject ("" when none), the header block
// (nil when none) and the payload. It runs on the publisher's goroutine:
// it must copy what it keeps and must not block.
type MsgHandler func(subject, reply string, hdr, data []byte)

// Transport is what JetStream needs from the messaging layer. The server
// implements it; tests use an in-memory one.
type Transport interface {
	// Subscribe subscribes h to subject (wildcards allowed), in queue group
	// queue when not empty.
	Subscribe(subject, queue string, h MsgHandler) (Subscription, error)
	// Publish routes a message to every matching subscription and reports
	// whether anything received it.
	Publish(subject, reply string, hdr, data []byte) bool
	// PublishAs routes a message by the literal subject route (a deliver
	// subject or pull inbox) but presents it under subject, the stored
	// subject (a delivered message, ADR-15), and reports whether anything
	// received it.
	PublishAs(route, subject, reply string, hdr, data []byte) bool
	// HasInterest reports whether anything is subscribed to the literal
	// subject (push_bound, pull request interest).
	HasInterest(subject string) bool
}

// Subscription is an internal subscription.
type Subscription interface {
	Unsubscribe()
}
