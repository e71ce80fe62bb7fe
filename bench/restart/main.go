// Command restart measures how long a clustered cairn server takes to
// restart (docs/cluster.md, "Restarts"): it starts three servers with
// JetStream (-n, --routes, -js, a store directory each, as README "Run a
// cluster"), publishes -msgs messages of 128 bytes to an R3 file stream
// (-sync N: from N clients each waiting for its PubAck, one Raft entry
// per round of them; else asynchronously, 256 in flight), fetches and
// acknowledges them through a durable pull consumer (replicated with the
// stream), stops a server that does not lead the stream (SIGTERM, or
// SIGKILL with -kill), starts it again, -rounds times, and reports:
//
//   - connect: from the restart until a client gets the server's INFO
//     and a PONG to its PING;
//   - current: from the restart until the restarted server's own
//     replica of the stream holds every message and its replica of the
//     consumer every acknowledgement (its /jsz?consumers=true), and its
//     /healthz answers 200;
//   - the line cairn logs once recovered (entries applied again), and the
//     start's lines about checkpoints, rollbacks and warnings.
//
// -lagging keeps n3 stopped during the load and starts it after, so the
// other servers keep the log it missed (uncompacted), as a rolling
// restart leaves it; with -down it stays stopped, so the two others'
// WALs keep what it missed (up to raft's retention) through the rounds,
// as with an offline member; the restarted server's WAL size is printed. -keep keeps the work directory; -reuse DIR starts
// from such a directory instead of loading (the same data for two
// binaries: copy it first, a run changes it). -v prints what the
// restarted server waits for.
//
// -size sets the payload of each message (128 KiB: an object store's
// chunk), -single runs one server and a stream of one replica instead
// of three, -nats says the binary is nats-server (v2.15.2 takes the same
// flags; cairn's log lines are then not looked for), and -port-base
// gives the servers ports from that number up instead of free ones.
// The time to /healthz 200 is "current" below: for a server that
// stores N GB of large messages it is mostly the stores' opening.
//
// Usage:
//
//	go build -o /tmp/cairn ./cmd/cairn
//	go run ./bench/restart -bin /tmp/cairn -msgs 150000 -sync 4 -lagging -rounds 0 -keep
//	cp -a /tmp/cairn-restart-NNN /tmp/fx && go run ./bench/restart -bin /tmp/cairn -msgs 150000 -reuse /tmp/fx -rounds 3 [-kill]
//
//	# 1 GiB of 128 KiB messages per server, three servers, then cairn
//	# and nats-server restarted on the same load:
//	go run ./bench/restart -bin /tmp/cairn -size 131072 -msgs 8192 -sync 4 -rounds 3 [-kill]
//	go run ./bench/restart -bin ~/go/bin/nats-server -nats -size 131072 -msgs 8192 -sync 4 -rounds 3 [-kill]
//	# the WAL of an offline member's peers, kill -9:
//	go run ./bench/restart -bin /tmp/cairn -size 131072 -msgs 8192 -sync 4 -lagging -down -rounds 3 -kill
//	# one server, a stream of one replica:
//	go run ./bench/restart -bin /tmp/cairn -single -size 131072 -msgs 8192 -sync 4 -rounds 3
package main

import (
	"bufio"
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
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	bin := flag.String("bin", "", "cairn binary (required)")
	msgs := flag.Int("msgs", 150000, "messages to publish, fetch and acknowledge")
	kill := flag.Bool("kill", false, "stop the server with SIGKILL instead of SIGTERM")
	rounds := flag.Int("rounds", 1, "stop and restart the server this many times")
	keep := flag.Bool("keep", false, "keep the work directory")
	profile := flag.Int("profile", 0, "serve pprof on this port on the restarted server (--profile)")
	reuse := flag.String("reuse", "", "start the servers from this work directory (kept by an earlier -keep run, whose -msgs must be given) instead of loading new ones")
	lagging := flag.Bool("lagging", false, "keep n3 stopped while the messages are published, then start it (the others keep the log it missed, uncompacted, as a rolling restart leaves it)")
	verbose := flag.Bool("v", false, "print what the restarted server waits for while it catches up")
	syncPubs := flag.Int("sync", 0, "publish with this many clients each waiting for its PubAck (0: asynchronous, 256 in flight)")
	size := flag.Int("size", 128, "payload bytes of each message")
	single := flag.Bool("single", false, "one server and a stream of one replica (no cluster)")
	natsServer := flag.Bool("nats", false, "the binary is nats-server: cairn's log lines are not waited for")
	portBase := flag.Int("port-base", 0, "give the servers ports from this one up (0: free ports)")
	down := flag.Bool("down", false, "with -lagging: leave n3 stopped for the rounds too (the others' WALs keep what it missed, as with an offline member)")
	flag.Parse()
	if *bin == "" {
		flag.Usage()
		os.Exit(2)
	}
	dir := *reuse
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "cairn-restart-"); err != nil {
			fail(err)
		}
	}
	b := &bench{bin: *bin, dir: dir, msgs: *msgs, profile: *profile, syncPubs: *syncPubs, reuse: *reuse != "", verbose: *verbose, lagging: *lagging,
		size: *size, single: *single, natsServer: *natsServer, portBase: *portBase, down: *lagging && *down}
	defer func() {
		b.stopAll()
		if *keep || b.reuse {
			fmt.Println("kept", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()
	if err := b.run(*kill, *rounds); err != nil {
		b.stopAll()
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "restart:", err)
	os.Exit(1)
}

type node struct {
	name                  string
	client, cluster, http int
	cmd                   *exec.Cmd
	logPath               string
}

type bench struct {
	bin, dir string
	msgs     int
	profile  int
	syncPubs int
	reuse    bool
	verbose  bool
	lagging  bool
	nodes    []*node

	size       int  // payload bytes per message
	single     bool // one server, a stream of one replica
	natsServer bool // the binary is nats-server
	portBase   int  // first port to give out (0: free ports)
	down       bool // n3 stays stopped after the load
	nextPort   int
}

// port returns the next port of -port-base, or a free one.
func (b *bench) port() int {
	if b.portBase == 0 {
		return freePort()
	}
	p := b.portBase + b.nextPort
	b.nextPort++
	return p
}

// servers returns how many servers the bench runs.
func (b *bench) servers() int {
	if b.single {
		return 1
	}
	return 3
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (b *bench) run(kill bool, rounds int) error {
	var routes []string
	for i := range b.servers() {
		n := &node{name: fmt.Sprintf("n%d", i+1), client: b.port(), cluster: b.port(), http: b.port()}
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", n.cluster))
		b.nodes = append(b.nodes, n)
	}
	for _, n := range b.nodes {
		if b.down && b.reuse && n == b.nodes[2] {
			continue // stopped since the load
		}
		if err := b.start(n, strings.Join(routes, ","), false); err != nil {
			return err
		}
	}
	for _, n := range b.nodes {
		if n.cmd == nil {
			continue
		}
		if _, err := waitConnect(n, time.Minute); err != nil {
			return err
		}
	}
	nc, err := nats.Connect(b.url(), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if !b.reuse {
		if err := b.load(js, routes); err != nil {
			return err
		}
	}
	return b.rounds(js, routes, kill, rounds)
}

// load creates the stream and the consumer, publishes the messages and
// fetches and acknowledges them.
func (b *bench) load(js jetstream.JetStream, routes []string) error {
	if err := retry(time.Minute, func(ctx context.Context) error {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RESTART", Subjects: []string{"restart.>"}, Replicas: b.servers(), Storage: jetstream.FileStorage})
		return err
	}); err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	var cons jetstream.Consumer
	if err := retry(time.Minute, func(ctx context.Context) error {
		var err error
		cons, err = js.CreateOrUpdateConsumer(ctx, "RESTART", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		return err
	}); err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	if b.lagging {
		if err := b.stop(b.nodes[2], syscall.SIGTERM); err != nil {
			return err
		}
	}
	t0 := time.Now()
	pub := func(js jetstream.JetStream, n int) error { return publish(js, n, b.size) }
	if b.syncPubs > 0 {
		pub = func(js jetstream.JetStream, n int) error { return publishSync(js, n, b.syncPubs, b.size) }
	}
	if err := pub(js, b.msgs); err != nil {
		return err
	}
	fmt.Printf("published %d messages of %d bytes (%.2f GiB) in %v\n", b.msgs, b.size, float64(b.msgs)*float64(b.size)/(1<<30), time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if err := consume(cons, b.msgs); err != nil {
		return err
	}
	fmt.Printf("fetched and acknowledged them in %v\n", time.Since(t0).Round(time.Millisecond))
	if b.lagging && !b.down {
		t0 = time.Now()
		if err := b.start(b.nodes[2], strings.Join(routes, ","), false); err != nil {
			return err
		}
		if err := b.waitCurrent(b.nodes[2], 10*time.Minute); err != nil {
			return err
		}
		fmt.Printf("n3, stopped during the load, caught up in %v\n", time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// rounds stops a server that does not lead the stream and restarts it,
// rounds times, timing each restart.
func (b *bench) rounds(js jetstream.JetStream, routes []string, kill bool, rounds int) error {
	var victim *node
	if err := retry(time.Minute, func(ctx context.Context) error {
		s, err := js.Stream(ctx, "RESTART")
		if err != nil {
			return err
		}
		for _, n := range b.nodes {
			if b.down && n == b.nodes[2] {
				continue
			}
			if b.single || n.name != s.CachedInfo().Cluster.Leader {
				victim = n
				return nil
			}
		}
		return errors.New("no follower")
	}); err != nil {
		return err
	}
	for _, n := range b.nodes {
		if b.down && n == b.nodes[2] {
			continue
		}
		if err := b.waitCurrent(n, 5*time.Minute); err != nil {
			return fmt.Errorf("before the stop: %w", err)
		}
	}
	for round := 1; round <= rounds; round++ {
		sig := syscall.SIGTERM
		if kill {
			sig = syscall.SIGKILL
		}
		t0 := time.Now()
		if err := b.stop(victim, sig); err != nil {
			return err
		}
		fmt.Printf("round %d: %s stopped (%v) in %v\n", round, victim.name, sig, time.Since(t0).Round(time.Millisecond))
		t0 = time.Now()
		if err := b.reportWAL(victim); err != nil {
			return err
		}
		if err := b.start(victim, strings.Join(routes, ","), b.profile != 0); err != nil {
			return err
		}
		connect, err := waitConnect(victim, 5*time.Minute)
		if err != nil {
			return err
		}
		fmt.Printf("round %d: connect after %v\n", round, connect.Sub(t0).Round(time.Millisecond))
		if err := b.waitCurrent(victim, 5*time.Minute); err != nil {
			return err
		}
		fmt.Printf("round %d: replica current after %v\n", round, time.Since(t0).Round(time.Millisecond))
		if b.natsServer {
			continue
		}
		if line := b.waitLogLine(victim, "JetStream cluster: recovered;", 3*time.Second); line != "" {
			fmt.Printf("round %d: %s\n", round, line)
		}
		b.logLines(victim)
	}
	return nil
}

func (b *bench) url() string {
	var us []string
	for _, n := range b.nodes {
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", n.client))
	}
	return strings.Join(us, ",")
}

func (b *bench) start(n *node, routes string, profile bool) error {
	args := []string{"-a", "127.0.0.1", "-p", fmt.Sprint(n.client), "-m", fmt.Sprint(n.http), "-n", n.name,
		"-js", "-sd", filepath.Join(b.dir, n.name)}
	if !b.single {
		args = append(args, "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", n.cluster), "--cluster_name", "restart", "--routes", routes)
	}
	if profile {
		args = append(args, "--profile", fmt.Sprint(b.profile))
	}
	n.logPath = filepath.Join(b.dir, n.name+".log")
	lf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(lf, "=== start %v\n", time.Now().Format(time.RFC3339Nano))
	n.cmd = exec.Command(b.bin, args...)
	n.cmd.Stdout, n.cmd.Stderr = lf, lf
	if err := n.cmd.Start(); err != nil {
		return err
	}
	go func() { _ = n.cmd.Wait(); lf.Close() }()
	return nil
}

// reportWAL prints the size of n's Raft WAL (cairn's, under the store
// directory: $SYS/_js_/raft/*.wal).
func (b *bench) reportWAL(n *node) error {
	if b.natsServer || b.single {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(b.dir, n.name, "jetstream", "$SYS", "_js_", "raft", "*.wal"))
	var size int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			size += st.Size()
		}
	}
	fmt.Printf("      %s: Raft WAL %d segment(s), %.0f MB\n", n.name, len(files), float64(size)/1e6)
	return nil
}

func (b *bench) stop(n *node, sig syscall.Signal) error {
	if n.cmd == nil || n.cmd.Process == nil {
		return nil
	}
	_ = n.cmd.Process.Signal(sig)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if err := n.cmd.Process.Signal(syscall.Signal(0)); err != nil {
			n.cmd = nil
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = n.cmd.Process.Kill()
	return fmt.Errorf("%s did not exit", n.name)
}

func (b *bench) stopAll() {
	for _, n := range b.nodes {
		_ = b.stop(n, syscall.SIGTERM)
	}
}

// waitConnect returns when a client gets INFO and a PONG from n.
func waitConnect(n *node, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if ping(n.client) == nil {
			return time.Now(), nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("%s: no client connection in %v", n.name, limit)
}

func ping(port int) error {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "INFO ") {
		return fmt.Errorf("no INFO: %q %v", line, err)
	}
	if _, err := io.WriteString(c, "CONNECT {\"verbose\":false}\r\nPING\r\n"); err != nil {
		return err
	}
	line, err = r.ReadString('\n')
	if err != nil || line != "PONG\r\n" {
		return fmt.Errorf("no PONG: %q %v", line, err)
	}
	return nil
}

// waitCurrent waits until n's own replica of the stream holds every
// message and of the consumer every acknowledgement, and its /healthz
// answers 200.
func (b *bench) waitCurrent(n *node, limit time.Duration) error {
	start := time.Now()
	deadline := start.Add(limit)
	var last error
	said := ""
	for time.Now().Before(deadline) {
		if last = b.current(n); last == nil {
			return nil
		}
		if b.verbose {
			if why := strings.Fields(last.Error())[0]; why != said {
				said = why
				fmt.Printf("      +%v %s: %v\n", time.Since(start).Round(time.Millisecond), n.name, last)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s not current in %v: %v", n.name, limit, last)
}

type jsz struct {
	AccountDetails []struct {
		Streams []struct {
			Name  string `json:"name"`
			State struct {
				LastSeq uint64 `json:"last_seq"`
			} `json:"state"`
			Consumers []struct {
				Name     string `json:"name"`
				AckFloor struct {
					Stream uint64 `json:"stream_seq"`
				} `json:"ack_floor"`
			} `json:"consumer_detail"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

func (b *bench) current(n *node) error {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz?consumers=true", n.http))
	if err != nil {
		return err
	}
	var z jsz
	err = json.NewDecoder(resp.Body).Decode(&z)
	resp.Body.Close()
	if err != nil {
		return err
	}
	want := uint64(b.msgs)
	ok := false
	for _, a := range z.AccountDetails {
		for _, s := range a.Streams {
			if s.Name != "RESTART" {
				continue
			}
			if s.State.LastSeq != want {
				return fmt.Errorf("stream at %d of %d", s.State.LastSeq, want)
			}
			for _, c := range s.Consumers {
				if c.Name == "worker" {
					if c.AckFloor.Stream != want {
						return fmt.Errorf("consumer ack floor %d of %d", c.AckFloor.Stream, want)
					}
					ok = true
				}
			}
		}
	}
	if !ok {
		return errors.New("stream or consumer not running yet")
	}
	resp, err = cl.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.http))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz %d %s", resp.StatusCode, body)
	}
	return nil
}

// waitLogLine waits, at most limit, for a line containing what in n's
// log of its last start (cairn logs how much of its log a restart
// applied again once it has recovered); "" if none came.
func (b *bench) waitLogLine(n *node, what string, limit time.Duration) string {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(n.logPath)
		s := string(data)
		if i := strings.LastIndex(s, "=== start"); i >= 0 {
			s = s[i:]
		}
		if i := strings.Index(s, what); i >= 0 {
			line := s[i:]
			if j := strings.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			return line
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ""
}

// logLines prints the restarted server's log lines of its last start
// that speak of replays, rollbacks and checkpoints.
func (b *bench) logLines(n *node) {
	data, err := os.ReadFile(n.logPath)
	if err != nil {
		return
	}
	s := string(data)
	if i := strings.LastIndex(s, "=== start"); i >= 0 {
		s = s[i:]
	}
	count := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "transport:") || strings.Contains(l, "route") {
			continue
		}
		if strings.Contains(l, "rolledback") || strings.Contains(l, "rollback") || strings.Contains(l, "checkpoint") ||
			strings.Contains(l, "replay") || strings.Contains(l, "[WRN]") || strings.Contains(l, "[ERR]") {
			if count++; count <= 20 {
				fmt.Println("   ", l)
			}
		}
	}
	if count > 20 {
		fmt.Printf("    ... %d such lines in all\n", count)
	}
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

// publish sends n messages of size bytes with up to 256 acknowledgements
// outstanding.
func publish(js jetstream.JetStream, n, size int) error {
	payload := payloadOf(size)
	window := make(chan jetstream.PubAckFuture, 256)
	errc := make(chan error, 1)
	go func() {
		for f := range window {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				select {
				case errc <- err:
				default:
				}
			}
		}
		close(errc)
	}()
	for i := 1; i <= n; i++ {
		f, err := js.PublishAsync(fmt.Sprintf("restart.%d", i%16), payload, jetstream.WithMsgID(fmt.Sprint(i)))
		if err != nil {
			close(window)
			return err
		}
		window <- f
	}
	close(window)
	if err := <-errc; err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

// consume fetches n messages and acknowledges each; the last
// acknowledgement is confirmed (double ack), so every earlier one
// reached the consumer's leader.
func consume(cons jetstream.Consumer, n int) error {
	got := 0
	for got < n {
		batch, err := cons.Fetch(min(500, n-got), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		k := 0
		for m := range batch.Messages() {
			k++
			got++
			if got == n {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := m.DoubleAck(ctx)
				cancel()
				if err != nil {
					return err
				}
			} else if err := m.Ack(); err != nil {
				return err
			}
		}
		if k == 0 {
			return fmt.Errorf("no message after %d of %d", got, n)
		}
	}
	return nil
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

// publishSync sends n messages of size bytes from clients goroutines,
// each waiting for the PubAck of its message before the next.
func publishSync(js jetstream.JetStream, n, clients, size int) error {
	payload := payloadOf(size)
	errc := make(chan error, clients)
	next := make(chan int, clients)
	go func() {
		for i := 1; i <= n; i++ {
			next <- i
		}
		close(next)
	}()
	for range clients {
		go func() {
			for i := range next {
				// Retried (the same message ID: deduplicated) while a
				// leader is being elected.
				err := retry(time.Minute, func(ctx context.Context) error {
					_, err := js.Publish(ctx, fmt.Sprintf("restart.%d", i%16), payload, jetstream.WithMsgID(fmt.Sprint(i)))
					return err
				})
				if err != nil {
					errc <- fmt.Errorf("publish %d: %w", i, err)
					for range next {
					}
					return
				}
			}
			errc <- nil
		}()
	}
	var first error
	for range clients {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}
