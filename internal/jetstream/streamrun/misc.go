package streamrun

import (
	"time"

	"github.com/cairnmq/cairn/internal/stream"
)

// RefusalLogEvery is how often the runtimes repeat the log line of a
// failure that repeats unchanged (an expiry pass on a fenced store, a
// copy a stream keeps refusing, a refused dead-letter copy).
const RefusalLogEvery = time.Minute

// setDeadLetter records the stream's own dead-letter subject (its
// metadata) for its consumers.
func (r *Stream) setDeadLetter(cfg *stream.Config) {
	subj, _ := stream.DeadLetterSubject(cfg.Metadata)
	r.dlq.Store(&subj)
}

// DeadLetter returns the stream's own dead-letter subject, "" for none.
func (r *Stream) DeadLetter() string {
	if p := r.dlq.Load(); p != nil {
		return *p
	}
	return ""
}

// shortensMaxAge reports whether an update from max_age old to new
// (0: none) can make stored messages too old, so that they go at once
// rather than at the next regular expiry pass, up to a second later, as
// nats-server v2.15.2 removes them when its store's config is updated.
func shortensMaxAge(old, new time.Duration) bool {
	return new > 0 && (old == 0 || new < old)
}
