package jetstream

import (
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// Dead-letter subjects (docs/dead-letter.md): the consumer runtime moves
// messages (jetstream/consumerrun); the engine keeps the table of what
// each stream captures, which the moves read without a lock.

// capture is a stream and the subjects it captures, for captureOf.
type capture struct {
	subjects []string
	r        *streamEntry
}

// refreshCapturesLocked rebuilds the table captureOf reads after the
// stream table or a stream's subjects changed, and the account's share
// of the server's reservations (updateReservationsLocked), which change
// with them. The caller holds js.mu.
func (js *JetStream) refreshCapturesLocked() {
	cs := make([]capture, 0, len(js.streams))
	for _, r := range js.streams {
		cs = append(cs, capture{subjects: r.Config().Subjects, r: r})
	}
	js.captures.Store(&cs)
	js.updateReservationsLocked()
}

// captureOf returns the stream that captures the literal subject subj,
// or nil. It takes no lock (a consumer calls it holding its Consumer.mu,
// which may not be held while taking js.mu).
func (js *JetStream) captureOf(subj string) *streamEntry {
	p := js.captures.Load()
	if p == nil || subj == "" {
		return nil
	}
	for _, c := range *p {
		if stream.Captures(c.subjects, subj) {
			return c.r
		}
	}
	return nil
}

// captureStream is captureOf for the consumer runtime: the capturing
// stream's runtime, nil for none.
func (js *JetStream) captureStream(subj string) *streamrun.Stream {
	if r := js.captureOf(subj); r != nil {
		return r.Stream
	}
	return nil
}

// checkDeadLetters refuses (10052, stream.CheckDeadLetter) an update
// whose subjects would capture the dead-letter subject of one of the
// stream's consumers.
func (r *streamEntry) checkDeadLetters(cfg *stream.Config) *jserr.Error {
	for _, c := range r.cons.list() {
		cc := c.Config()
		if err := stream.CheckDeadLetter(cc.Metadata, cfg.Name, cfg.Subjects); err != nil {
			return err
		}
	}
	return nil
}
