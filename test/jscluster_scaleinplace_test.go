package test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A durable's replica count changes 3 -> 1 -> 3, three times, by
// consumer update, and then its stream's, while a publisher feeds the
// stream and a pull client (a loop of Fetch, as the trial's) double-acks
// every message: as with nats-server v2.15.2, which scales a consumer in
// place, no ack is refused or lost (every double ack confirmed, no
// message delivered twice), and no pull request is answered 503 no
// responders or 409 Server Shutdown (docs/cluster.md, "Scaling
// consumers", "In place"). Before the runtime of the consumer's old
// form kept its subscriptions and pull requests until the new one took
// them over, each conversion stopped the consumer and started it again:
// acks and pull requests in between met no responders, and the pull
// requests waiting got 409 Server Shutdown.
func TestJetStreamClusterScaleInPlaceNoAckLost(t *testing.T) {
	serialTest(t) // a heavy client beside three servers, and each update's answer waited for
	servers := jsCluster(t, 3)
	js, err := jetstream.New(connect(t, servers[0].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	scfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3}
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(pollCtx(t), scfg)
		return err
	})
	ccfg := jetstream.ConsumerConfig{Durable: "WORK", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Second, Replicas: 3}
	var cons jetstream.Consumer
	eventually(t, "create WORK", func() error {
		cons, err = js.CreateOrUpdateConsumer(pollCtx(t), "ORDERS", ccfg)
		return err
	})
	pub := startPublisher(t, connect(t, servers[2].ClientURL()))
	cl := startDoubleAcker(t, cons)
	const step = 40 // messages received between two updates: each conversion happens under the client's load
	waitFor(t, 60*time.Second, "the first messages", func() bool { return cl.received() >= step })
	updateConsumer := func(n int) {
		ccfg.Replicas = n
		eventually(t, fmt.Sprintf("consumer update to %d replicas", n), func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := js.UpdateConsumer(ctx, "ORDERS", ccfg)
			return err
		})
	}
	updateStream := func(n int) {
		scfg.Replicas = n
		eventually(t, fmt.Sprintf("stream update to %d replicas", n), func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := js.UpdateStream(ctx, scfg)
			return err
		})
	}
	for i, update := range []func(){
		func() { updateConsumer(1) }, func() { updateConsumer(3) },
		func() { updateConsumer(1) }, func() { updateConsumer(3) },
		func() { updateConsumer(1) }, func() { updateConsumer(3) },
		func() { updateStream(1) }, func() { updateStream(3) },
	} {
		update()
		want := cl.received() + step
		waitFor(t, 60*time.Second, fmt.Sprintf("%d messages after update %d", want, i+1), func() bool { return cl.received() >= want })
	}
	last := pub.stop()
	waitFor(t, 60*time.Second, fmt.Sprintf("every one of the %d messages received", last), func() bool { return cl.received() >= int(last) })
	eventually(t, "every message acknowledged", func() error {
		info, err := cons.Info(pollCtx(t))
		if err != nil {
			return err
		}
		if info.AckFloor.Stream != last || info.NumAckPending != 0 {
			return fmt.Errorf("ack floor %d, %d pending acks; %d published", info.AckFloor.Stream, info.NumAckPending, last)
		}
		return nil
	})
	cl.stop()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	t.Logf("%d messages, %d double acks; pull errors %v; pauses %v", last, cl.acks, cl.pullErrs, cl.gaps)
	if len(cl.ackErrs) > 0 {
		t.Errorf("%d double acks failed: %v", len(cl.ackErrs), cl.ackErrs[:min(len(cl.ackErrs), 5)])
	}
	if len(cl.again) > 0 {
		t.Errorf("%d messages delivered again (an ack lost), first %v", len(cl.again), cl.again[:min(len(cl.again), 5)])
	}
	for e, n := range cl.pullErrs {
		if strings.Contains(e, "no responders") || strings.Contains(e, "server shutdown") {
			t.Errorf("%d pull requests ended with %q", n, e)
		}
	}
}

// publisher publishes to orders.x one message after the other, each
// acknowledged (a message refused or unanswered is sent again with the
// same msg id), until stop, which returns the last stream sequence.
type publisher struct {
	quit chan struct{}
	wg   sync.WaitGroup
	last uint64
}

func startPublisher(t *testing.T, nc *nats.Conn) *publisher {
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := &publisher{quit: make(chan struct{})}
	p.wg.Go(func() {
		for i := 0; ; {
			select {
			case <-p.quit:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ack, err := js.Publish(ctx, "orders.x", []byte("o"), jetstream.WithMsgID(fmt.Sprint(i)))
			cancel()
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			p.last = ack.Sequence
			i++
			time.Sleep(2 * time.Millisecond)
		}
	})
	t.Cleanup(func() { p.stop() })
	return p
}

func (p *publisher) stop() uint64 {
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	p.wg.Wait()
	return p.last
}

// doubleAcker fetches from a pull consumer in a loop (batches of 20,
// 2 s) and double-acks every message (10 s for the confirmation),
// recording what it received, what came again, the failed acks and the
// errors that ended pull requests.
type doubleAcker struct {
	quit     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	seen     map[uint64]bool
	again    []string
	acks     int
	ackErrs  []string
	pullErrs map[string]int
	last     time.Time
	gaps     []string // pauses of a second or more between two messages
}

func startDoubleAcker(t *testing.T, cons jetstream.Consumer) *doubleAcker {
	c := &doubleAcker{quit: make(chan struct{}), seen: map[uint64]bool{}, pullErrs: map[string]int{}}
	c.wg.Go(func() {
		for {
			select {
			case <-c.quit:
				return
			default:
			}
			batch, err := cons.Fetch(20, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				c.pullFailed(err)
				time.Sleep(20 * time.Millisecond)
				continue
			}
			for m := range batch.Messages() {
				c.got(m)
			}
			if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
				c.pullFailed(err)
			}
		}
	})
	t.Cleanup(c.stop)
	return c
}

func (c *doubleAcker) got(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = m.DoubleAck(ctx)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if md.NumDelivered > 1 || c.seen[md.Sequence.Stream] {
		c.again = append(c.again, fmt.Sprintf("%d (delivery %d, at %s)", md.Sequence.Stream, md.NumDelivered, time.Now().Format("15:04:05.000")))
	}
	c.seen[md.Sequence.Stream] = true
	if now := time.Now(); !c.last.IsZero() && now.Sub(c.last) >= time.Second {
		c.gaps = append(c.gaps, fmt.Sprintf("%v before %d at %s", now.Sub(c.last).Round(time.Millisecond), md.Sequence.Stream, now.Format("15:04:05.000")))
	}
	c.last = time.Now()
	if err != nil {
		c.ackErrs = append(c.ackErrs, fmt.Sprintf("%d: %v", md.Sequence.Stream, err))
		return
	}
	c.acks++
}

func (c *doubleAcker) pullFailed(err error) {
	c.mu.Lock()
	c.pullErrs[err.Error()]++
	c.mu.Unlock()
}

func (c *doubleAcker) received() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

func (c *doubleAcker) stop() {
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	c.wg.Wait()
}
