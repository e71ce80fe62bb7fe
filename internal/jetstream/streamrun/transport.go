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

// Withdrawer is implemented by a Subscription shared with a cluster that
// can stop being announced to the other servers while it still receives
// what they routed before they learned it (the server's
// InternalSub.Withdraw): a stream's leader handing its leadership over
// withdraws its subscriptions first (Stream.Withdraw).
type Withdrawer interface {
	Withdraw()
}

// Tracer is the message trace (ADR-41, nats-server v2.15.2 msgtrace.go)
// of a publish a stream receives, when the publish carries a
// Nats-Trace-Dest header the server traces. The server sends the trace
// event; the stream only reports what it did with the message.
type Tracer interface {
	// Only reports Nats-Trace-Only: the stream must not store the
	// message nor answer it, only report.
	Only() bool
	// JetStream records the "js" event: the stream's name, the subject
	// the message was taken under and, when the stream refused it, the
	// error's text. It is called once, on the publisher's goroutine.
	JetStream(stream, subject string, err error)
}

// TracedHandler is a MsgHandler that also receives the publish's trace,
// nil when the publish is not traced.
type TracedHandler func(subject, reply string, hdr, data []byte, t Tracer)

// TracedSubscriber is implemented by a Transport that passes message
// traces to a stream's subscriptions; a stream subscribes its subjects
// through it when the Transport has it.
type TracedSubscriber interface {
	SubscribeTraced(subject, queue string, h TracedHandler) (Subscription, error)
}
