// Command consumerkill measures how long a pull consumer's client goes
// without a message when the consumer's leader dies (issue 15, "a killed
// consumer leader's pull requests"): three server processes (cairn or
// nats-server, the same flags), an R3 file stream and an R3 durable pull
// consumer whose leader is not the stream's leader, a publisher through
// one of the other servers (one publish every -every, waiting for each
// PubAck), and a nats.go Consume (default options) through the other,
// acknowledging each message. -kill-after in, the consumer leader's
// process gets -signal (KILL: it dies; TERM: it hands over and stops;
// RESTART: every server is SIGKILLed and started again at once, the
// clients reconnecting); the round runs -run in all.
//
// One line per round: the longest time without a message from -kill-after
// to the end, the time from the signal to the first message after it,
// and the messages delivered more than once. A client whose requests died
// with the leader hears nothing until it asks again: nats.go's Consume
// asks again on a 409 Leadership Change at once, and otherwise when two
// of its idle heartbeats are missed.
//
// Usage: go run ./bench/consumerkill -bin bin/cairn -rounds 2
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/cairnmq/cairn/internal/faults"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	bin := flag.String("bin", "bin/cairn", "server binary (cairn or nats-server)")
	rounds := flag.Int("rounds", 1, "rounds, each with a new cluster")
	sig := flag.String("signal", "KILL", "signal for the consumer leader: KILL, TERM, STEPDOWN (four consumer step-downs 3.5 s apart, no process stopped) or RESTART (all servers SIGKILLed and started again)")
	killAfter := flag.Duration("kill-after", 4*time.Second, "time from the first publish to the signal")
	run := flag.Duration("run", 12*time.Second, "length of a round")
	down := flag.Duration("down", 0, "RESTART: how long the servers stay down")
	reconnect := flag.Duration("reconnect-wait", 2*time.Second, "the clients' time between reconnect attempts (nats.go's default: 2s)")
	every := flag.Duration("every", 5*time.Millisecond, "time between publishes")
	flag.BoolVar(&verbose, "v", false, "print the signal's time and each client error with its time")
	flag.Parse()
	s := syscall.SIGKILL
	if *sig == "TERM" {
		s = syscall.SIGTERM
	}
	mode := *sig
	switch mode {
	case "STEPDOWN":
		*run = max(*run, *killAfter+16*time.Second)
	case "RESTART":
		*run = max(*run, *killAfter+40*time.Second)
	}
	for r := 1; r <= *rounds; r++ {
		res, err := round(*bin, s, mode, opts{*killAfter, *run, *every, *down, *reconnect})
		if err != nil {
			fmt.Fprintf(os.Stderr, "round %d: %v\n", r, err)
			os.Exit(1)
		}
		fmt.Printf("round %d %s %s: %s\n", r, filepath.Base(*bin), *sig, res)
	}
}

// round runs one round on a new cluster and returns its result line.
// verbose is -v.
var verbose bool

// opts are a round's times (the flags).
type opts struct {
	killAfter, run, every, down, reconnect time.Duration
}

func round(bin string, sig syscall.Signal, mode string, o opts) (string, error) {
	killAfter, run, every := o.killAfter, o.run, o.every
	dir, err := os.MkdirTemp("", "consumerkill")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	c, err := faults.StartCluster(bin, dir, 3)
	if err != nil {
		return "", err
	}
	defer c.Close()
	leader, err := setUp(c)
	if err != nil {
		return "", err
	}
	var others []*faults.Server
	for i, sv := range c.Servers {
		if i != leader {
			others = append(others, sv)
		}
	}
	pub, err := nats.Connect(others[0].URL, nats.ReconnectWait(o.reconnect), nats.MaxReconnects(-1))
	if err != nil {
		return "", err
	}
	defer pub.Close()
	sub, err := nats.Connect(others[1].URL, nats.ReconnectWait(o.reconnect), nats.MaxReconnects(-1))
	if err != nil {
		return "", err
	}
	defer sub.Close()
	rec := &recorder{seen: map[uint64]int{}}
	js, _ := jetstream.New(sub)
	cons, err := js.Consumer(context.Background(), "ORDERS", "C")
	if err != nil {
		return "", err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		rec.note(m)
		_ = m.Ack()
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { rec.fail(err) }))
	if err != nil {
		return "", err
	}
	defer cc.Stop()
	start := time.Now()
	done := make(chan struct{})
	go publish(pub, every, done)
	time.Sleep(killAfter)
	killed := time.Now()
	if verbose {
		fmt.Printf("%s %s\n", killed.Format("15:04:05.000"), mode)
	}
	switch {
	case mode == "STEPDOWN":
		for range 4 {
			if _, err := pub.Request("$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.C", nil, 5*time.Second); err != nil {
				return "", err
			}
			time.Sleep(3500 * time.Millisecond)
		}
	case mode == "RESTART":
		c.Kill(0, 1, 2)
		time.Sleep(o.down)
		if err := c.Start(0, 1, 2); err != nil {
			return "", err
		}
	case sig == syscall.SIGKILL:
		c.Kill(leader)
	default:
		if err := syscall.Kill(c.Pid(leader), sig); err != nil {
			return "", err
		}
	}
	time.Sleep(max(run-time.Since(start), 0))
	close(done)
	waiting := -1
	if ci, err := cons.Info(context.Background()); err == nil {
		waiting = ci.NumWaiting
	}
	gap, first, dups, n := rec.result(killed, start.Add(run))
	if verbose {
		rec.mu.Lock()
		for _, l := range rec.errLog {
			fmt.Println(l)
		}
		rec.mu.Unlock()
	}
	firstS := "none"
	if first >= 0 {
		firstS = fmt.Sprintf("%.2fs", first.Seconds())
	}
	return fmt.Sprintf("consumer leader %s: longest gap %.2fs, first message after the signal %s, %d messages, %d delivered again, %d client errors, %d pull requests waiting at the end",
		c.Servers[leader].Name, gap.Seconds(), firstS, n, dups, rec.errors(), waiting), nil
}

// setUp creates the stream ORDERS and the durable pull consumer C, both
// R3, and steps the consumer down until its leader is not the stream's
// leader (five tries); it returns the consumer leader's index.
func setUp(c *faults.Cluster) (int, error) {
	nc, err := nats.Connect(c.Servers[0].URL)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st jetstream.Stream
	err = faults.Until(30*time.Second, func() error {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		st, err = js.CreateStream(cctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("create the stream: %w", err)
	}
	if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 3}); err != nil {
		return 0, fmt.Errorf("create the consumer: %w", err)
	}
	for range 5 {
		si, err := st.Info(ctx)
		if err != nil {
			return 0, err
		}
		ci, err := st.Consumer(ctx, "C")
		if err != nil {
			return 0, err
		}
		info := ci.CachedInfo()
		if info.Cluster == nil || si.Cluster == nil {
			return 0, errors.New("no cluster info")
		}
		if info.Cluster.Leader != "" && info.Cluster.Leader != si.Cluster.Leader {
			return c.Index(info.Cluster.Leader), nil
		}
		if _, err := nc.Request("$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.C", nil, 5*time.Second); err != nil {
			return 0, err
		}
		time.Sleep(time.Second)
	}
	return 0, errors.New("the consumer's leader stays on the stream's leader")
}

// publish publishes one message every every until done, each waiting for
// its PubAck (errors ignored: the stream's leader stays up).
func publish(nc *nats.Conn, every time.Duration, done chan struct{}) {
	js, _ := jetstream.New(nc)
	t := time.NewTicker(every)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = js.Publish(ctx, fmt.Sprintf("orders.%d", i), []byte("x"))
		cancel()
	}
}

// recorder notes when each message arrived, and the errors the
// client's Consume reported (a 409 Leadership Change each).
type recorder struct {
	mu    sync.Mutex
	times []time.Time
	seen  map[uint64]int // stream sequence -> deliveries
	errs  int
	// errLog is each client error with its time (printed with -v).
	errLog []string
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	r.errs++
	r.errLog = append(r.errLog, fmt.Sprintf("%s %v", time.Now().Format("15:04:05.000"), err))
	r.mu.Unlock()
}

func (r *recorder) errors() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errs
}

func (r *recorder) note(m jetstream.Msg) {
	md, err := m.Metadata()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.times = append(r.times, time.Now())
	if err == nil {
		r.seen[md.Sequence.Stream]++
	}
}

// result returns the longest time without a message between from and to,
// the time from from to the first message after it (-1: none), the messages
// delivered more than once and the messages received.
func (r *recorder) result(from, to time.Time) (gap, first time.Duration, dups, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := from
	first = -1
	for _, t := range r.times {
		if t.Before(from) {
			continue
		}
		if first < 0 {
			first = t.Sub(from)
		}
		gap = max(gap, t.Sub(last))
		last = t
	}
	gap = max(gap, to.Sub(last))
	for _, k := range r.seen {
		if k > 1 {
			dups++
		}
	}
	return gap, first, dups, len(r.times)
}
