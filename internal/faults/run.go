// Package faults is the process-level fault suite of docs/cluster.md
// ("The process-level fault suite"): three or five server processes on
// loopback (cairn or nats-server, the same flags), an R3 file stream, producers
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
	"net-delay", "net-loss", "net-slow", "pause-follower", "flap-leader", "corrupt-msgs", "corrupt-wal",
	"peer-remove",
}

// Shapes are the bad networks of the net-* faults and of Config.Net, by
// name: "delay" adds 20 to 50 ms to every read of every cluster
// connection; "loss" emulates lost packets on TCP, where a loss is a stall
// until the retransmission (2% of reads wait 0.2 to 1 s more) or, when it
// persists, a connection that breaks (each connection is reset after 5 s
// on average); "slow" limits each direction of each connection to
// 128 KiB/s.
var Shapes = map[string]Shape{
	"delay": {Delay: 20 * time.Millisecond, Jitter: 30 * time.Millisecond},
	"loss":  {StallProb: 0.02, StallMin: 200 * time.Millisecond, StallMax: time.Second, ResetMean: 5 * time.Second},
	"slow":  {Rate: 128 << 10},
}

// stalls are the faults after which a majority is down: the stream is
// not expected to be writable until the heal.
var stalls = map[string]bool{"kill-majority": true, "restart-all": true}

// Config describes one run.
type Config struct {
	Bin      string        // server binary: cairn or nats-server
	Dir      string        // stores and logs (a new directory in it); "" for the system's temporary directory
	Fault    string        // one of Faults
	Servers  int           // server processes (default 3)
	Replicas int           // the stream's replicas (default 3, at most Servers)
	Net      string        // a bad network (a key of Shapes) for the whole run, "" for none
	Flaps    int           // partitions of flap-leader (default 5)
	Seed     uint64        // picks the random servers
	Warm     time.Duration // publishing before the fault (default 2 s)
	MinHold  time.Duration // the fault lasts at least this long (default 2 s)
	MaxHold  time.Duration // and at most this long waiting for a PubAck (default 20 s)
	After    time.Duration // publishing after the heal (default 2 s)
	Wait     time.Duration // bound on every wait for recovery (default 60 s)
	Keep     bool          // keep the directory
	Logf     func(format string, args ...any)
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
	Notes   []string // what the run saw besides the checks (leader changes, files corrupted, resets)
	Dir     string   // kept directory, if any
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
	if c.Servers == 0 {
		c.Servers = 3
	}
	if c.Replicas == 0 {
		c.Replicas = min(3, c.Servers)
	}
	if c.Flaps == 0 {
		c.Flaps = 5
	}
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
	if _, ok := Shapes[cfg.Net]; cfg.Net != "" && !ok {
		return nil, fmt.Errorf("unknown network %q", cfg.Net)
	}
	c, err := StartCluster(cfg.Bin, dir, cfg.Servers)
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
	r := &runner{cfg: cfg, c: c, rng: rand.New(rand.NewPCG(cfg.Seed, 0xfa17)), gone: map[string]bool{}}
	defer r.closeConns()
	return res, r.run(res)
}

type runner struct {
	cfg   Config
	c     *Cluster
	rng   *rand.Rand
	gone  map[string]bool // servers a peer-remove took the stream from
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

// allCurrent reports whether the stream has a leader and replicas-1
// other replicas, all current, none on a server in gone.
func allCurrent(si *jetstream.StreamInfo, replicas int, gone map[string]bool) bool {
	if si.Cluster == nil || si.Cluster.Leader == "" || len(si.Cluster.Replicas) != replicas-1 || gone[si.Cluster.Leader] {
		return false
	}
	for _, p := range si.Cluster.Replicas {
		if !p.Current || p.Offline || gone[p.Name] {
			return false
		}
	}
	return true
}

// behind returns the number of replicas si lists as not current.
func behind(si *jetstream.StreamInfo) int {
	n := 0
	if si.Cluster != nil {
		for _, p := range si.Cluster.Replicas {
			if !p.Current {
				n++
			}
		}
	}
	return n
}

// describe sums up the replicas of si for an error message.
func describe(si *jetstream.StreamInfo) string {
	if si.Cluster == nil {
		return "no cluster info"
	}
	s := "leader " + si.Cluster.Leader
	for _, p := range si.Cluster.Replicas {
		s += fmt.Sprintf(", %s current=%v offline=%v lag=%d", p.Name, p.Current, p.Offline, p.Lag)
	}
	return s
}

// peers returns the indexes of the servers holding the stream's replicas
// in si, the leader first.
func (r *runner) peers(si *jetstream.StreamInfo) []int {
	if si.Cluster == nil {
		return nil
	}
	var idx []int
	if i := r.c.Index(si.Cluster.Leader); i >= 0 {
		idx = append(idx, i)
	}
	for _, p := range si.Cluster.Replicas {
		if i := r.c.Index(p.Name); i >= 0 {
			idx = append(idx, i)
		}
	}
	return idx
}

// leader returns the index of the stream's leader and the servers of its
// replicas (the leader first), once every replica is current.
func (r *runner) leader(avoid map[int]bool) (int, []int, error) {
	var idx int
	var peers []int
	err := Until(r.cfg.Wait, func() error {
		si, err := r.info(avoid)
		if err != nil {
			return err
		}
		if !allCurrent(si, r.cfg.Replicas, r.gone) {
			return fmt.Errorf("replicas not current: %s", describe(si))
		}
		idx, peers = r.c.Index(si.Cluster.Leader), r.peers(si)
		return nil
	})
	return idx, peers, err
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
			Replicas: r.cfg.Replicas, Storage: jetstream.FileStorage, AllowDirect: true})
		if err != nil {
			return err
		}
		_, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: durable,
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: 3 * time.Second, MaxAckPending: -1})
		return err
	})
}
