// Command idle measures what a 3-server cluster holding many idle
// replicated streams costs while nothing happens: each server's CPU time
// (utime+stime, /proc/<pid>/stat), the bytes its TCP sockets sent
// (`ss -tin`, bytes_sent; the cluster is idle, so this is the route and
// Raft traffic: heartbeats and whatever else the servers exchange) and
// its RSS. It starts cairn and nats-server the same way
// (internal/faults.StartCluster), creates -streams file streams with
// -replicas replicas, one message and one durable pull consumer (same
// replicas) each, waits -settle, then measures over -idle.
//
// Usage:
//
//	go build -o bin/cairn ./cmd/cairn
//	go run ./bench/idle -streams 1000 -idle 30s
//	go run ./bench/idle -servers cairn -streams 100
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/faults"
)

func main() {
	cairn := flag.String("cairn", "bin/cairn", "cairn binary")
	natsServer := flag.String("nats-server", "", "nats-server binary (default: on PATH or ~/go/bin)")
	servers := flag.String("servers", "cairn,nats-server", "which servers to run, comma-separated")
	streams := flag.Int("streams", 1000, "streams to create")
	replicas := flag.Int("replicas", 3, "replicas of every stream and consumer")
	settle := flag.Duration("settle", 20*time.Second, "idle time before the measurement")
	idle := flag.Duration("idle", 30*time.Second, "measured idle time")
	flag.Parse()
	bins := faults.Binaries(*cairn, *natsServer)
	fmt.Printf("%-12s %7s %9s %12s %12s %12s %10s %10s\n", "server", "streams", "create", "CPU (3 srv)", "CPU %/core", "sent (3 srv)", "sent/s", "RSS max")
	failed := false
	for _, srv := range strings.Split(*servers, ",") {
		r, err := measure(bins[srv], *streams, *replicas, *settle, *idle)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", srv, err)
			failed = true
			continue
		}
		fmt.Printf("%-12s %7d %8.1fs %11.2fs %11.2f%% %11.1fK %9.1fK %8.0fMiB\n", srv, *streams, r.create.Seconds(),
			r.cpu, 100*r.cpu/idle.Seconds()/3, float64(r.sent)/1024, float64(r.sent)/1024/idle.Seconds(), float64(r.rss)/(1<<20))
	}
	if failed {
		os.Exit(1)
	}
}

// result is one server's measurement: the time to create the streams and
// consumers, and over the idle period the CPU seconds and socket bytes
// sent of the three servers together, and the largest RSS.
type result struct {
	create time.Duration
	cpu    float64
	sent   int64
	rss    int64
}

func measure(bin string, streams, replicas int, settle, idle time.Duration) (*result, error) {
	dir, err := os.MkdirTemp("", "idle-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c, err := faults.StartCluster(bin, dir, 3)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	start := time.Now()
	if err := populate(c.Servers[0].URL, streams, replicas); err != nil {
		return nil, err
	}
	r := &result{create: time.Since(start)}
	time.Sleep(settle)
	pids := []int{c.Pid(0), c.Pid(1), c.Pid(2)}
	cpu0, sent0, err := sample(pids)
	if err != nil {
		return nil, err
	}
	time.Sleep(idle)
	cpu1, sent1, err := sample(pids)
	if err != nil {
		return nil, err
	}
	r.cpu, r.sent = cpu1-cpu0, sent1-sent0
	for _, pid := range pids {
		r.rss = max(r.rss, rss(pid))
	}
	return r, nil
}

// populate creates the streams, each with one message and one durable
// pull consumer, retrying a request that found no leader yet.
func populate(url string, streams, replicas int) error {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for i := range streams {
		name := "IDLE" + strconv.Itoa(i)
		if err := retry(func(ctx context.Context) error {
			_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"idle." + strconv.Itoa(i)},
				Replicas: replicas, Storage: jetstream.FileStorage})
			return err
		}); err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		if err := retry(func(ctx context.Context) error {
			_, err := js.Publish(ctx, "idle."+strconv.Itoa(i), []byte("x"))
			return err
		}); err != nil {
			return fmt.Errorf("publish to %s: %w", name, err)
		}
		if err := retry(func(ctx context.Context) error {
			_, err := js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy,
				Replicas: replicas})
			return err
		}); err != nil {
			return fmt.Errorf("consumer of %s: %w", name, err)
		}
	}
	return nil
}

// retry runs f with a 10 s deadline until it succeeds, for 2 minutes at
// most, and reports each failure on stderr.
func retry(f func(context.Context) error) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := f(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s: %v (retrying)\n", time.Now().Format("15:04:05.000"), err)
		time.Sleep(200 * time.Millisecond)
	}
}

// sample returns the CPU seconds the processes used so far and the bytes
// their TCP sockets sent so far.
func sample(pids []int) (float64, int64, error) {
	var cpu float64
	for _, pid := range pids {
		t, err := cpuSeconds(pid)
		if err != nil {
			return 0, 0, err
		}
		cpu += t
	}
	sent, err := socketBytesSent(pids)
	return cpu, sent, err
}

// cpuSeconds reads utime+stime of pid (fields 14 and 15 of
// /proc/<pid>/stat, in clock ticks of 1/100 s on Linux).
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after it
	// start after its closing parenthesis.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100, nil
}

// socketBytesSent sums bytes_sent of every TCP socket of the given
// processes (`ss -tinpH`: a socket's line names its process, the next
// line holds its counters).
func socketBytesSent(pids []int) (int64, error) {
	out, err := exec.Command("ss", "-tinpH").Output()
	if err != nil {
		return 0, fmt.Errorf("ss: %w", err)
	}
	want := map[string]bool{}
	for _, pid := range pids {
		want["pid="+strconv.Itoa(pid)+","] = true
	}
	var total int64
	mine := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, " ") {
			mine = false
			for k := range want {
				if strings.Contains(line, k) {
					mine = true
				}
			}
			continue
		}
		if !mine {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "bytes_sent:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total, sc.Err()
}

// rss returns pid's resident set size in bytes (VmRSS), or 0.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
