// Command burstmem measures a cluster's memory during and after publish
// bursts (docs/benchmarks.md, "Memory after bursts"): it starts three
// servers of -bin with JetStream and pprof (-n, --routes, -js, -sd,
// --profile, as README "Run a cluster"; nats-server v2.15.2 takes the
// same flags), creates an R3 file stream, sends each burst of -bursts
// through the server that leads the stream (-via leader) or another one
// (-via follower, which forwards them over its route), every publish
// with a reply subject, sent as fast as the connection takes them, its
// reply awaited up to -wait, then leaves the cluster idle for -after.
// Every second it reads each server's VmRSS (/proc/<pid>/status) and Go's
// MemStats (its pprof heap?debug=1: HeapInuse, HeapIdle, HeapReleased),
// and CPU time (/proc/<pid>/stat), and prints, per server, the peak RSS
// from the first burst to the end of the last, RSS and heap at the end
// of the bursts, +1 min and +5 min after it, and at the end of -after,
// and the CPU seconds it used during the bursts and after them. -csv
// writes every sample; -args passes more flags to every server (-D: cairn
// logs each heap release, internal/memrelease); -memstats=false reads
// RSS and CPU only, since the heap profile asked of every server each
// second costs it CPU (for the CPU figures).
//
// HeapIdle-HeapReleased is heap the runtime holds but does not use
// (freed, not yet returned to the system); HeapInuse is what objects,
// live or not yet collected, and their spans take.
//
// Usage:
//
//	go build -o /tmp/cairn ./cmd/cairn
//	go run ./bench/burstmem -bin /tmp/cairn -port-base 27400 [-via follower]
//	go run ./bench/burstmem -bin ~/go/bin/nats-server -port-base 27420 [-via follower]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// memStats says whether read asks each server for its MemStats (a heap
// profile a second, which costs the server some CPU).
var memStats = flag.Bool("memstats", true, "read each server's Go MemStats every second (false: RSS and CPU only, for the CPU figures)")

func main() {
	bin := flag.String("bin", "", "server binary (cairn or nats-server; required)")
	portBase := flag.Int("port-base", 0, "give the servers ports from this one up, 12 in all (0: free ports)")
	bursts := flag.String("bursts", "5600x131072,11200x65536", "bursts, in order: COUNTxBYTES, comma separated")
	gap := flag.Duration("gap", 5*time.Second, "pause between bursts")
	wait := flag.Duration("wait", time.Minute, "how long a burst's replies are awaited")
	after := flag.Duration("after", 5*time.Minute, "idle time watched after the last burst")
	csvPath := flag.String("csv", "", "write every sample to this file")
	extra := flag.String("args", "", "more flags for every server, space separated (-D: cairn logs its heap releases)")
	via := flag.String("via", "leader", "send the bursts through the stream's leader's server (leader) or another's (follower)")
	keep := flag.Bool("keep", false, "keep the work directory")
	flag.Parse()
	if *bin == "" {
		flag.Usage()
		os.Exit(2)
	}
	plan, err := parseBursts(*bursts)
	if err != nil {
		fail(err)
	}
	dir, err := os.MkdirTemp("", "burstmem-")
	if err != nil {
		fail(err)
	}
	c := &cluster{bin: *bin, dir: dir, portBase: *portBase, extra: strings.Fields(*extra)}
	defer func() {
		c.stopAll()
		if *keep {
			fmt.Println("kept", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()
	if *via != "leader" && *via != "follower" {
		fail(fmt.Errorf("-via %q: want leader or follower", *via))
	}
	if err := run(c, plan, *via, *gap, *wait, *after, *csvPath); err != nil {
		c.stopAll()
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "burstmem:", err)
	os.Exit(1)
}

type burst struct{ count, size int }

func parseBursts(s string) ([]burst, error) {
	var out []burst
	for _, f := range strings.Split(s, ",") {
		c, z, ok := strings.Cut(strings.TrimSpace(f), "x")
		n, err1 := strconv.Atoi(c)
		b, err2 := strconv.Atoi(z)
		if !ok || err1 != nil || err2 != nil || n <= 0 || b <= 0 {
			return nil, fmt.Errorf("burst %q: want COUNTxBYTES", f)
		}
		out = append(out, burst{n, b})
	}
	return out, nil
}

func run(c *cluster, plan []burst, via string, gap, wait, after time.Duration, csvPath string) error {
	if err := c.start(); err != nil {
		return err
	}
	nc, err := c.connect(via)
	if err != nil {
		return err
	}
	defer nc.Close()
	w := newWatcher(c.nodes)
	go w.run()
	defer w.stop()
	w.mark("start")
	for i, b := range plan {
		if i > 0 {
			time.Sleep(gap)
		}
		r, err := sendBurst(nc, b, wait)
		if err != nil {
			return err
		}
		fmt.Printf("burst %d x %d B: %s\n", b.count, b.size, r)
	}
	w.mark("end")
	fmt.Printf("watching the idle cluster for %v\n", after)
	time.Sleep(after + 1500*time.Millisecond)
	w.stop()
	w.report(os.Stdout)
	if csvPath != "" {
		return w.writeCSV(csvPath)
	}
	return nil
}

// connect creates the stream through n1 and connects to the server
// via names: the stream's leader's, or another.
func (c *cluster) connect(via string) (*nats.Conn, error) {
	nc, err := nats.Connect(c.nodes[0].url(), nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	var leader string
	if err := retry(time.Minute, func(ctx context.Context) error {
		s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BURST", Subjects: []string{"burst.>"}, Replicas: 3, Storage: jetstream.FileStorage})
		if err != nil {
			return err
		}
		if s, err = js.Stream(ctx, "BURST"); err != nil {
			return err
		}
		if leader = s.CachedInfo().Cluster.Leader; leader == "" {
			return errors.New("no leader yet")
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("create stream: %w", err)
	}
	for _, n := range c.nodes {
		if (n.name == leader) == (via == "leader") {
			fmt.Printf("stream BURST led by %s; bursts through %s\n", leader, n.name)
			return nats.Connect(n.url(), nats.MaxReconnects(-1))
		}
	}
	return nil, fmt.Errorf("leader %q is none of the servers", leader)
}

// burstResult counts a burst's replies.
type burstResult struct {
	acks, refused, other, unanswered int
	took                             time.Duration
	codes                            map[string]int
}

func (r burstResult) String() string {
	s := fmt.Sprintf("%d acks, %d 429s, %d other errors, %d unanswered, last reply after %.1f s",
		r.acks, r.refused, r.other, r.unanswered, r.took.Seconds())
	if r.other > 0 {
		s += fmt.Sprintf(" %v", r.codes)
	}
	return s
}

// sendBurst publishes b.count messages of b.size bytes with reply
// subjects as fast as the connection takes them and counts the replies
// that come within wait of the last publish.
func sendBurst(nc *nats.Conn, b burst, wait time.Duration) (burstResult, error) {
	inbox := nats.NewInbox()
	var mu sync.Mutex
	res := burstResult{codes: map[string]int{}}
	var got atomic.Int64
	var last atomic.Int64
	done := make(chan struct{})
	start := time.Now()
	sub, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		var ack struct {
			Error *struct {
				Code    int `json:"code"`
				ErrCode int `json:"err_code"`
			} `json:"error"`
		}
		mu.Lock()
		switch {
		case m.Header.Get("Status") == "429":
			res.refused++ // NATS/1.0 429: the ingest queue is full
		case m.Header.Get("Status") != "":
			res.other++
			res.codes["status "+m.Header.Get("Status")]++
		case json.Unmarshal(m.Data, &ack) != nil:
			res.other++
			res.codes["bad reply"]++
		case ack.Error == nil:
			res.acks++
		case ack.Error.Code == 429:
			res.refused++
		default:
			res.other++
			res.codes[fmt.Sprintf("%d/%d", ack.Error.Code, ack.Error.ErrCode)]++
		}
		mu.Unlock()
		last.Store(int64(time.Since(start)))
		if got.Add(1) == int64(b.count) {
			close(done)
		}
	})
	if err != nil {
		return res, err
	}
	defer sub.Unsubscribe()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return res, err
	}
	payload := payloadOf(b.size)
	for i := range b.count {
		if err := nc.PublishRequest(fmt.Sprintf("burst.%d", i%16), fmt.Sprintf("%s.%d", inbox, i), payload); err != nil {
			return res, err
		}
	}
	if err := nc.Flush(); err != nil {
		return res, err
	}
	select {
	case <-done:
	case <-time.After(wait):
	}
	mu.Lock()
	defer mu.Unlock()
	res.unanswered = b.count - res.acks - res.refused - res.other
	res.took = time.Duration(last.Load())
	return res, nil
}

// payloadOf returns size bytes that do not compress to nothing.
func payloadOf(size int) []byte {
	p := make([]byte, size)
	x := uint32(2463534242)
	for i := range p {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[i] = byte(x)
	}
	return p
}

func retry(limit time.Duration, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := f(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// the servers

type node struct {
	name                        string
	client, cluster, http, prof int
	cmd                         *exec.Cmd
}

func (n *node) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.client) }

type cluster struct {
	bin, dir string
	extra    []string // more flags for every server
	portBase int
	nextPort int
	nodes    []*node
}

// port returns the next port of -port-base, or a free one.
func (c *cluster) port() int {
	if c.portBase == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fail(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	p := c.portBase + c.nextPort
	c.nextPort++
	return p
}

func (c *cluster) start() error {
	var routes []string
	for i := range 3 {
		n := &node{name: fmt.Sprintf("n%d", i+1), client: c.port(), cluster: c.port(), http: c.port(), prof: c.port()}
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", n.cluster))
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		args := []string{"-a", "127.0.0.1", "-p", fmt.Sprint(n.client), "-m", fmt.Sprint(n.http), "--profile", fmt.Sprint(n.prof),
			"-n", n.name, "-js", "-sd", filepath.Join(c.dir, n.name),
			"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", n.cluster), "--cluster_name", "burstmem", "--routes", strings.Join(routes, ",")}
		args = append(args, c.extra...)
		lf, err := os.Create(filepath.Join(c.dir, n.name+".log"))
		if err != nil {
			return err
		}
		n.cmd = exec.Command(c.bin, args...)
		n.cmd.Stdout, n.cmd.Stderr = lf, lf
		if err := n.cmd.Start(); err != nil {
			return err
		}
		go func() { _ = n.cmd.Wait(); lf.Close() }()
	}
	for _, n := range c.nodes {
		if err := waitPort(n.client, time.Minute); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	return nil
}

func waitPort(port int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("port %d not open in %v", port, limit)
}

func (c *cluster) stopAll() {
	for _, n := range c.nodes {
		if n.cmd == nil || n.cmd.Process == nil {
			continue
		}
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) && n.cmd.Process.Signal(syscall.Signal(0)) == nil {
			time.Sleep(10 * time.Millisecond)
		}
		_ = n.cmd.Process.Kill()
		n.cmd = nil
	}
}

// ---------------------------------------------------------------------------
// the samples

// sample is one reading of one server; sizes in bytes, -1 when unread.
type sample struct {
	at                                     time.Duration // since the watch began
	rss, heapInuse, heapIdle, heapReleased int64
	numGC                                  int64
	cpu                                    int64 // utime+stime, clock ticks (1/100 s)
}

type watcher struct {
	nodes   []*node
	begin   time.Time
	mu      sync.Mutex
	samples [][]sample // per node
	marks   map[string]time.Duration
	quit    chan struct{}
	once    sync.Once
	done    chan struct{}
}

func newWatcher(nodes []*node) *watcher {
	return &watcher{nodes: nodes, begin: time.Now(), samples: make([][]sample, len(nodes)),
		marks: map[string]time.Duration{}, quit: make(chan struct{}), done: make(chan struct{})}
}

func (w *watcher) mark(name string) {
	w.mu.Lock()
	w.marks[name] = time.Since(w.begin)
	w.mu.Unlock()
}

func (w *watcher) stop() {
	w.once.Do(func() { close(w.quit) })
	<-w.done
}

func (w *watcher) run() {
	defer close(w.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		for i, n := range w.nodes {
			s := read(n)
			s.at = time.Since(w.begin)
			w.mu.Lock()
			w.samples[i] = append(w.samples[i], s)
			w.mu.Unlock()
		}
		select {
		case <-w.quit:
			return
		case <-t.C:
		}
	}
}

// read takes one sample of n: VmRSS, its CPU time, and the MemStats its
// pprof heap profile (debug=1) ends with.
func read(n *node) sample {
	s := sample{rss: -1, heapInuse: -1, heapIdle: -1, heapReleased: -1, numGC: -1, cpu: -1}
	if n.cmd == nil || n.cmd.Process == nil {
		return s
	}
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid)); err == nil {
		// Fields after the command name (which may hold spaces): state is
		// field 3, utime 14, stime 15.
		if i := bytes.LastIndexByte(data, ')'); i >= 0 {
			if f := strings.Fields(string(data[i+1:])); len(f) > 12 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				k, _ := strconv.ParseInt(f[12], 10, 64)
				s.cpu = u + k
			}
		}
	}
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid)); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				s.rss = kb * 1024
			}
		}
	}
	if !*memStats {
		return s
	}
	cl := http.Client{Timeout: 900 * time.Millisecond}
	resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?debug=1", n.prof))
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	i := bytes.LastIndex(body, []byte("# runtime.MemStats"))
	if i < 0 {
		return s
	}
	sc := bufio.NewScanner(bytes.NewReader(body[i:]))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "# "), " = ")
		if !ok {
			continue
		}
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "HeapInuse":
			s.heapInuse = x
		case "HeapIdle":
			s.heapIdle = x
		case "HeapReleased":
			s.heapReleased = x
		case "NumGC":
			s.numGC = x
		}
	}
	return s
}

// at returns the last sample of node i taken at or before d; false if
// none, or if the watch ended before d.
func (w *watcher) at(i int, d time.Duration) (sample, bool) {
	var best sample
	ok, past := false, false
	for _, s := range w.samples[i] {
		if s.at > d {
			past = true
			break
		}
		best, ok = s, true
	}
	return best, ok && past
}

func mib(b int64) string {
	if b < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(b)/(1<<20))
}

func (w *watcher) report(out io.Writer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	start, end := w.marks["start"], w.marks["end"]
	fmt.Fprintf(out, "bursts took %.1f s; MiB: RSS (heap in use / idle not released); CPU seconds of the server during the bursts and from their end to the last sample\n", (end - start).Seconds())
	fmt.Fprintln(out, "| server | peak RSS | end of bursts | +1 min | +5 min | last | CPU s bursts / after |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|")
	cell := func(s sample, ok bool) string {
		if !ok {
			return "-"
		}
		return fmt.Sprintf("%s (%s / %s)", mib(s.rss), mib(s.heapInuse), mib(s.heapIdle-s.heapReleased))
	}
	for i, n := range w.nodes {
		var peak int64 = -1
		for _, s := range w.samples[i] {
			if s.at >= start && s.at <= end+time.Second && s.rss > peak {
				peak = s.rss
			}
		}
		e, eok := w.at(i, end)
		m1, ok1 := w.at(i, end+time.Minute)
		m5, ok5 := w.at(i, end+5*time.Minute)
		l := w.samples[i][len(w.samples[i])-1]
		b, _ := w.at(i, start)
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s at +%.0f s | %.1f / %.1f |\n", n.name, mib(peak), cell(e, eok), cell(m1, ok1), cell(m5, ok5),
			cell(l, true), (l.at - end).Seconds(), float64(e.cpu-b.cpu)/100, float64(l.cpu-e.cpu)/100)
	}
}

func (w *watcher) writeCSV(path string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "# start %.1f end %.1f\nserver,t_s,rss,heap_inuse,heap_idle,heap_released,num_gc,cpu_ticks\n",
		w.marks["start"].Seconds(), w.marks["end"].Seconds())
	for i, n := range w.nodes {
		for _, s := range w.samples[i] {
			fmt.Fprintf(&b, "%s,%.1f,%d,%d,%d,%d,%d,%d\n", n.name, s.at.Seconds(), s.rss, s.heapInuse, s.heapIdle, s.heapReleased, s.numGC, s.cpu)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
