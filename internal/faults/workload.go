package faults

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers carrying a message's producer and the producer's sequence.
const (
	hdrProducer = "Faults-Producer"
	hdrSeq      = "Faults-Seq"
)

// key names one attempted message: producer and per-producer sequence.
type key struct {
	p   int
	seq uint64
}

func (k key) String() string { return fmt.Sprintf("p%d#%d", k.p, k.seq) }

// record is one message a producer tried to publish.
type record struct {
	key
	acked   bool
	ackSeq  uint64 // stream sequence in the PubAck
	retried bool   // sent more than once
}

// ackEvent is one successful publish: when its attempt was sent and when
// the PubAck came.
type ackEvent struct{ sent, acked time.Time }

// history is what the producers did; safe for concurrent use.
type history struct {
	mu   sync.Mutex
	recs map[key]*record
	acks []ackEvent
	errs atomic.Int64
}

func newHistory() *history {
	return &history{recs: map[key]*record{}}
}

func (h *history) add(k key) *record {
	r := &record{key: k}
	h.mu.Lock()
	h.recs[k] = r
	h.mu.Unlock()
	return r
}

func (h *history) acked(r *record, a *jetstream.PubAck, sent time.Time) {
	now := time.Now()
	h.mu.Lock()
	r.acked, r.ackSeq = true, a.Sequence
	h.acks = append(h.acks, ackEvent{sent, now})
	h.mu.Unlock()
}

// firstAckAfter returns the time from t to the first PubAck of an attempt
// sent after t, or -1 if there is none.
func (h *history) firstAckAfter(t time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	best := time.Duration(-1)
	for _, e := range h.acks {
		if e.sent.After(t) {
			if d := e.acked.Sub(t); best < 0 || d < best {
				best = d
			}
		}
	}
	return best
}

func (h *history) ackCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.acks)
}

// message builds producer p's message seq: headers with both numbers and
// the Nats-Msg-Id, payload naming them.
func message(subject string, k key) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set(hdrProducer, strconv.Itoa(k.p))
	m.Header.Set(hdrSeq, strconv.FormatUint(k.seq, 10))
	m.Header.Set(jetstream.MsgIDHeader, msgID(k))
	m.Data = payload(k)
	return m
}

func msgID(k key) string { return fmt.Sprintf("p%d-%d", k.p, k.seq) }

func payload(k key) []byte { return []byte(fmt.Sprintf("producer %d message %d", k.p, k.seq)) }

// parse reads the producer and sequence headers of a stored message.
func parse(h nats.Header) (key, bool) {
	p, err1 := strconv.Atoi(h.Get(hdrProducer))
	s, err2 := strconv.ParseUint(h.Get(hdrSeq), 10, 64)
	return key{p, s}, err1 == nil && err2 == nil
}

// producerConfig sets a producer's pace and timeouts.
type producerConfig struct {
	id       int
	async    bool
	interval time.Duration // between new messages
	timeout  time.Duration // per attempt
}

// runSync publishes one message at a time, each retried (same
// Nats-Msg-Id) until acknowledged or giveUp is closed, until stop is
// closed.
func runSync(js jetstream.JetStream, subject string, h *history, cfg producerConfig, stop, giveUp <-chan struct{}) {
	for seq := uint64(1); ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		r := h.add(key{cfg.id, seq})
		for attempt := 0; ; attempt++ {
			select {
			case <-giveUp:
				return
			default:
			}
			if attempt > 0 {
				h.mu.Lock()
				r.retried = true
				h.mu.Unlock()
			}
			sent := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
			a, err := js.PublishMsg(ctx, message(subject, r.key), jetstream.WithRetryAttempts(0))
			cancel()
			if err == nil {
				h.acked(r, a, sent)
				break
			}
			h.errs.Add(1)
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(cfg.interval)
	}
}

// runAsync publishes a new message every interval without waiting for
// acknowledgements (up to 4096 in flight); a failed attempt is sent again
// (same Nats-Msg-Id) before new messages. nats.go's own retry of a 503 is
// off (it would resend behind later messages without the history
// knowing), as it is for runSync. After stop it only retries,
// until every message is acknowledged or giveUp is closed.
func runAsync(js jetstream.JetStream, subject string, h *history, cfg producerConfig, stop, giveUp <-chan struct{}) {
	var (
		mu      sync.Mutex
		retry   []*record
		pending sync.WaitGroup
		open    int
	)
	tick := time.NewTicker(cfg.interval)
	defer tick.Stop()
	stopped := false
	var seq uint64
	for {
		select {
		case <-giveUp:
			return
		case <-stop:
			stopped = true
		case <-tick.C:
		}
		mu.Lock()
		var r *record
		if len(retry) > 0 {
			r, retry = retry[0], retry[1:]
		} else if stopped {
			done := open == 0
			mu.Unlock()
			if done {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		mu.Unlock()
		if r == nil {
			seq++
			r = h.add(key{cfg.id, seq})
		} else {
			h.mu.Lock()
			r.retried = true
			h.mu.Unlock()
		}
		sent := time.Now()
		f, err := js.PublishMsgAsync(message(subject, r.key), jetstream.WithStallWait(cfg.timeout),
			jetstream.WithRetryAttempts(0))
		if err != nil {
			h.errs.Add(1)
			mu.Lock()
			retry = append(retry, r)
			mu.Unlock()
			continue
		}
		mu.Lock()
		open++
		mu.Unlock()
		pending.Add(1)
		go func(r *record) {
			defer pending.Done()
			var failed bool
			select {
			case a := <-f.Ok():
				h.acked(r, a, sent)
			case <-f.Err():
				h.errs.Add(1)
				failed = true
			}
			mu.Lock()
			open--
			if failed {
				retry = append(retry, r)
			}
			mu.Unlock()
		}(r)
	}
}

// consumerLog is what a durable pull consumer delivered.
type consumerLog struct {
	mu  sync.Mutex
	got map[key]bool
}

func (c *consumerLog) has(k key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[k]
}

// runConsumer fetches from the durable consumer and acknowledges each
// message, noting what it delivered, until stop is closed.
func runConsumer(js jetstream.JetStream, stream, durable string, log *consumerLog, stop <-chan struct{}) {
	var cons jetstream.Consumer
	for {
		select {
		case <-stop:
			return
		default:
		}
		if cons == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			c, err := js.Consumer(ctx, stream, durable)
			cancel()
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			cons = c
		}
		batch, err := cons.Fetch(200, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for m := range batch.Messages() {
			if k, ok := parse(m.Headers()); ok {
				log.mu.Lock()
				log.got[k] = true
				log.mu.Unlock()
			}
			_ = m.Ack()
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			time.Sleep(50 * time.Millisecond)
		}
	}
}
