package jetstream

import (
	"github.com/cairnmq/cairn/internal/jetstream/consumerrun"
)

// Retired consumers (docs/cluster.md, "Scaling consumers", "In
// place"): DetachConsumer and DetachStream, which a clustered JetStream
// calls when a consumer's or its stream's replica count changes, retire
// the consumers they stop (consumerrun.Consumer.Retire) rather than end
// their subscriptions and pull requests at once. The engine keeps each
// by its stream's and its own name until the next runtime of that
// consumer (the same creation time) starts here, which takes it over
// once subscribed (consumerrun.Consumer.Succeed); one nobody takes ends
// by itself.

// retiredKey names a retired consumer: its stream's name and its own.
type retiredKey struct{ stream, name string }

// retire retires the consumer c of stream streamName
// (consumerrun.Consumer.Retire) and keeps it for its successor; when it
// kept nothing (it stopped), the retired runtime it was to take over,
// if any, is kept instead.
func (js *JetStream) retire(streamName string, c *consumerrun.Consumer) {
	if c.Retire() {
		js.keepRetired(streamName, c)
	} else if p := c.TakePred(); p != nil {
		js.keepRetired(streamName, p)
	}
}

// keepRetired keeps the retired consumer c of stream streamName for its
// successor; an earlier one of the name still kept ends.
func (js *JetStream) keepRetired(streamName string, c *consumerrun.Consumer) {
	js.retiredMu.Lock()
	if js.retired == nil {
		js.retired = map[retiredKey]*consumerrun.Consumer{}
	}
	k := retiredKey{streamName, c.Name()}
	old := js.retired[k]
	js.retired[k] = c
	for k, p := range js.retired {
		if p != c && p != old && !p.Retiring() {
			delete(js.retired, k) // ended by itself (nobody came)
		}
	}
	js.retiredMu.Unlock()
	if old != nil && old != c {
		old.EndRetired()
	}
}

// succeedRetired makes c, a runtime of consumer c.Name() of stream
// streamName about to start, the successor of the retired runtime of
// the same consumer (same creation time) kept here, if any.
func (js *JetStream) succeedRetired(streamName string, c *consumerrun.Consumer) {
	k := retiredKey{streamName, c.Name()}
	js.retiredMu.Lock()
	p := js.retired[k]
	if p != nil && p.Created().Equal(c.Created()) {
		delete(js.retired, k)
	} else {
		p = nil
	}
	js.retiredMu.Unlock()
	if p != nil {
		c.Succeed(p)
	}
}

// endAllRetired ends every retired consumer kept (the engine shuts
// down).
func (js *JetStream) endAllRetired() {
	js.retiredMu.Lock()
	rs := js.retired
	js.retired = nil
	js.retiredMu.Unlock()
	for _, p := range rs {
		p.EndRetired()
	}
}
