// Package faults is the process-level fault suite of docs/clustering.md
// ("The process-level fault suite"): three server processes on loopback
// (cairn or nats-server, the same flags), an R3 file stream, producers
// and a durable consumer with nats.go, one fault per run, then a check of
// the whole history. Used by bench/faults (every fault, a table) and by
// test/faults_test.go (one short run in CI).
package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Faults lists the faults Run knows, in the order bench/faults runs them.
var Faults = []string{
	"kill-leader", "kill-random", "kill-majority", "pause-leader", "restart-all",
	"partition-leader-out", "partition-leader-in", "partition-leader", "partition-random", "wipe-random",
}

// stalls are the faults after which a majority is down: the stream is
// not expected to be writable until the heal.
var stalls = map[string]bool{"kill-majority": true, "restart-all": true}

// Config describes one run.
type Config struct {
	Bin     string        // server binary: cairn or nats-server
	Dir     string        // stores and logs (a new directory in it); "" for the system's temporary directory
	Fault   string        // one of Faults
	Seed    uint64        // picks the random servers
	Warm    time.Duration // publishing before the fault (default 2 s)
	MinHold time.Duration // the fault lasts at least this long (default 2 s)
	MaxHold time.Duration // and at most this long waiting for a PubAck (default 20 s)
	After   time.Duration // publishing after the heal (default 2 s)
	Wait    time.Duration // bound on every wait for recovery (default 60 s)
	Keep    bool          // keep the directory
	Logf    func(format string, args ...any)
}

// Result is what one run measured and found. A duration of -1 means the
// event did not happen within Config.Wait.
type Result struct {
	Fault   string
	Target  string        // the servers the fault hit
	ToAck   time.Duration // fault in effect → first PubAck of a publish sent after it
	Healed  time.Duration // heal → first PubAck of a publish sent after it
	Current time.Duration // heal → every replica current in stream info
	Errors  int64         // failed publish attempts (retried)
	Report  *Report
	Dir     string // kept directory, if any
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Warm, 2*time.Second)
	def(&c.MinHold, 2*time.Second)
	def(&c.MaxHold, 20*time.Second)
	def(&c.After, 2*time.Second)
	def(&c.Wait, 60*time.Second)
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

const (
	streamName = "FAULTS"
	subject    = "faults.data"
	durable    = "CHECK"
)

// Run starts a cluster, runs the workload, injects cfg.Fault, heals it
// and checks the history. An error means the run could not be carried
// out (the cluster did not form, the stream could not be read); what the
// check found is in Result.Report.
func Run(cfg Config) (*Result, error) {
	cfg.defaults()
	dir, err := os.MkdirTemp(cfg.Dir, "faults-")
	if err != nil {
		return nil, err
	}
	res := &Result{Fault: cfg.Fault, ToAck: -1, Healed: -1, Current: -1}
	if ev, err := os.Create(filepath.Join(dir, "events.log")); err == nil {
		defer ev.Close()
		logf := cfg.Logf
		cfg.Logf = func(format string, args ...any) {
			fmt.Fprintf(ev, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05.000000")}, args...)...)
			logf(format, args...)
		}
	}
	c, err := StartCluster(cfg.Bin, dir, 3)
	if err != nil {
		return nil, err
	}
	defer func() {
		c.Close()
		if cfg.Keep || res.Report == nil || !res.Report.OK() {
			res.Dir = dir
		} else {
			os.RemoveAll(dir)
		}
	}()
	r := &runner{cfg: cfg, c: c, rng: rand.New(rand.NewPCG(cfg.Seed, 0xfa17))}
	defer r.closeConns()
	return res, r.run(res)
}

type runner struct {
	cfg   Config
	c     *Cluster
	rng   *rand.Rand
	mu    sync.Mutex
	conns []*nats.Conn
}

func (r *runner) connect(first int) (*nats.Conn, error) {
	var urls []string
	for i := range r.c.Servers {
		urls = append(urls, r.c.Servers[(first+i)%len(r.c.Servers)].URL)
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.PingInterval(2*time.Second), nats.MaxPingsOutstanding(2),
		nats.Timeout(2*time.Second), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.conns = append(r.conns, nc)
	r.mu.Unlock()
	return nc, nil
}

func (r *runner) closeConns() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, nc := range r.conns {
		nc.Close()
	}
}

// admin returns a JetStream context on a server that is running and not
// cut off by a fault, connecting afresh so that a request never waits on
// a connection to a server a fault took.
func (r *runner) admin(avoid map[int]bool) (jetstream.JetStream, func(), error) {
	for i := range r.c.Servers {
		if !r.c.Running(i) || avoid[i] {
			continue
		}
		nc, err := nats.Connect(r.c.Servers[i].URL, nats.Timeout(2*time.Second), nats.NoReconnect())
		if err != nil {
			continue
		}
		js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
		if err != nil {
			nc.Close()
			continue
		}
		return js, nc.Close, nil
	}
	return nil, nil, errors.New("no server to ask")
}

// info returns the stream's info through a healthy server.
func (r *runner) info(avoid map[int]bool) (*jetstream.StreamInfo, error) {
	js, done, err := r.admin(avoid)
	if err != nil {
		return nil, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, streamName)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

// allCurrent reports whether the stream has a leader and every other
// server is a replica reporting current.
func allCurrent(si *jetstream.StreamInfo, n int) bool {
	if si.Cluster == nil || si.Cluster.Leader == "" || len(si.Cluster.Replicas) != n-1 {
		return false
	}
	for _, p := range si.Cluster.Replicas {
		if !p.Current || p.Offline {
			return false
		}
	}
	return true
}

// leader returns the index of the stream's leader, once every replica is
// current.
func (r *runner) leader(avoid map[int]bool) (int, error) {
	var idx int
	err := Until(r.cfg.Wait, func() error {
		si, err := r.info(avoid)
		if err != nil {
			return err
		}
		if !allCurrent(si, len(r.c.Servers)) {
			return fmt.Errorf("replicas not current: %+v", si.Cluster)
		}
		idx = r.c.Index(si.Cluster.Leader)
		return nil
	})
	return idx, err
}

func (r *runner) setup() error {
	return Until(r.cfg.Wait, func() error {
		js, done, err := r.admin(nil)
		if err != nil {
			return err
		}
		defer done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{"faults.>"},
			Replicas: 3, Storage: jetstream.FileStorage})
		if err != nil {
			return err
		}
		_, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: durable,
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: 3 * time.Second, MaxAckPending: -1})
		return err
	})
}
