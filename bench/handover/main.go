// Command handover repeats the operator trial of issues 15 and 16: three
// server processes (cairn or nats-server, the same flags) with JetStream,
// an R3 file stream ORDERS whose leader is also the meta leader, and two
// publishers that wait for each PubAck:
//
//   - "js": a nats.go jetstream publisher connected to the leader's
//     server, one publish every 50 ms (it retries a 503 no responders
//     twice, 250 ms apart, as nats.go does by default);
//   - "req": a plain request connected to another server, one every
//     100 ms, as `nats pub --jetstream` publishes (no retry).
//
// With -burst N, a third publisher connected to another server sends N
// messages of -size bytes as fast as its connection takes them, each with
// a reply subject, starting -burst-lead before the signal, and waits up
// to 40 s for their replies (trial 38: a leader stopped during a burst).
//
// After a warm-up the leader's process gets the signal (USR2: lame duck
// mode, as the Helm chart's preStop; TERM: a clean shutdown). The
// publishers go on until the process has exited and a while after; then
// every acknowledged message is looked for in the stream. One line of
// results per round, failures listed with their time from the signal.
//
// Usage: go run ./bench/handover -bin bin/cairn -signal USR2 -rounds 3
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairnmq/cairn/internal/faults"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	bin := flag.String("bin", "bin/cairn", "server binary (cairn or nats-server)")
	sig := flag.String("signal", "USR2", "signal for the leader: USR2 (lame duck), TERM, or KILL (no handover: the failover to compare with)")
	rounds := flag.Int("rounds", 1, "rounds, each with a new cluster")
	grace := flag.Duration("grace", 2*time.Second, "lame_duck_grace_period")
	after := flag.Duration("after", 2*time.Second, "publishing after the leader's process exited")
	keep := flag.Bool("keep", false, "keep the data and logs directory")
	flag.IntVar(&burstN, "burst", 0, "messages of a burst through another server during the signal (0: none)")
	flag.IntVar(&burstSize, "size", 128<<10, "bytes of each burst message")
	flag.DurationVar(&burstLead, "burst-lead", time.Second, "how long the burst runs before the signal")
	flag.Parse()
	s := syscall.SIGUSR2
	switch *sig {
	case "TERM":
		s = syscall.SIGTERM
	case "KILL":
		s = syscall.SIGKILL
	}
	for r := 1; r <= *rounds; r++ {
		res, err := round(*bin, s, *grace, *after, *keep)
		if err != nil {
			fmt.Fprintf(os.Stderr, "round %d: %v\n", r, err)
			os.Exit(1)
		}
		fmt.Printf("round %d %s %s: %s\n", r, filepath.Base(*bin), *sig, res)
	}
}

// The burst's flags.
var (
	burstN, burstSize int
	burstLead         time.Duration
)

// proc is one server process.
type proc struct {
	name, url, mon string
	cmd            *exec.Cmd
	exited         chan struct{}
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start starts three servers in one cluster and waits until they accept.
func start(bin, dir string, grace time.Duration) ([]*proc, error) {
	const n = 3
	routes := make([]string, n)
	for i := range routes {
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(freePort())
	}
	conf := filepath.Join(dir, "ldm.conf")
	text := fmt.Sprintf("lame_duck_duration: \"30s\"\nlame_duck_grace_period: %q\n", grace.String())
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return nil, err
	}
	var ps []*proc
	for i := range n {
		name := "n" + strconv.Itoa(i+1)
		port, mon := freePort(), freePort()
		args := []string{"-c", conf, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-m", strconv.Itoa(mon), "-n", name,
			"-js", "-sd", filepath.Join(dir, name), "--cluster", routes[i], "--cluster_name", "HO",
			"--routes", strings.Join(routes, ",")}
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		p := &proc{name: name, url: "nats://127.0.0.1:" + strconv.Itoa(port), mon: "http://127.0.0.1:" + strconv.Itoa(mon), cmd: cmd, exited: make(chan struct{})}
		go func() { _ = cmd.Wait(); logf.Close(); close(p.exited) }()
		ps = append(ps, p)
	}
	for _, p := range ps {
		if err := faults.Until(20*time.Second, func() error { return faults.Accepts(p.url) }); err != nil {
			return ps, fmt.Errorf("%s does not accept: %w", p.name, err)
		}
	}
	return ps, nil
}

// metaLeader reads the meta leader from a server's /jsz.
func metaLeader(p *proc) (string, error) {
	resp, err := http.Get(p.mon + "/jsz")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var jsz struct {
		Meta *struct {
			Leader string `json:"leader"`
		} `json:"meta_cluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		return "", err
	}
	if jsz.Meta == nil || jsz.Meta.Leader == "" {
		return "", errors.New("no meta leader yet")
	}
	return jsz.Meta.Leader, nil
}

// failure is one failed publish.
type failure struct {
	id  string
	at  time.Duration // from the signal
	err string
}

// publisher counts one publisher's outcome.
type publisher struct {
	mu    sync.Mutex
	ok    int
	fails []failure
	acked []string // message ids with a PubAck
	slow  time.Duration
}

func (p *publisher) note(id string, took time.Duration, err error, sent time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slow = max(p.slow, took)
	if err != nil {
		p.fails = append(p.fails, failure{id: id, at: time.Since(sent), err: err.Error()})
		return
	}
	p.ok++
	p.acked = append(p.acked, id)
}

func (p *publisher) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := fmt.Sprintf("%d ok, %d failed, slowest %v", p.ok, len(p.fails), p.slow.Round(time.Millisecond))
	for _, f := range p.fails {
		s += fmt.Sprintf(" [%+.2fs %s]", f.at.Seconds(), f.err)
	}
	return s
}

func round(bin string, sig syscall.Signal, grace, after time.Duration, keep bool) (string, error) {
	dir, err := os.MkdirTemp("", "handover-")
	if err != nil {
		return "", err
	}
	ps, err := start(bin, dir, grace)
	defer func() {
		for _, p := range ps {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if !keep {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Println("logs in", dir)
		}
	}()
	if err != nil {
		return "", err
	}
	admin, err := nats.Connect(ps[1].url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		return "", err
	}
	defer admin.Close()
	ajs, _ := jetstream.New(admin)
	if err := faults.Until(30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := ajs.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3, Storage: jetstream.FileStorage})
		return err
	}); err != nil {
		return "", fmt.Errorf("create ORDERS: %w", err)
	}
	// The stream's leader on the meta leader's server, as in the trial.
	var leader *proc
	if err := faults.Until(30*time.Second, func() error {
		ml, err := metaLeader(ps[0])
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := ajs.Stream(ctx, "ORDERS")
		if err != nil {
			return err
		}
		ci := st.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" {
			return errors.New("no stream leader yet")
		}
		if ci.Leader != ml {
			body := fmt.Sprintf(`{"placement":{"preferred":%q}}`, ml)
			_, _ = admin.Request("$JS.API.STREAM.LEADER.STEPDOWN.ORDERS", []byte(body), 2*time.Second)
			return fmt.Errorf("stream leader %s, meta leader %s", ci.Leader, ml)
		}
		for _, p := range ps {
			if p.name == ml {
				leader = p
			}
		}
		return nil
	}); err != nil {
		return "", err
	}
	other := ps[0]
	if other == leader {
		other = ps[1]
	}

	ncJS, err := nats.Connect(leader.url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		return "", err
	}
	defer ncJS.Close()
	js, _ := jetstream.New(ncJS)
	ncReq, err := nats.Connect(other.url)
	if err != nil {
		return "", err
	}
	defer ncReq.Close()

	var signalled time.Time
	var sigMu sync.Mutex
	since := func() time.Time {
		sigMu.Lock()
		defer sigMu.Unlock()
		if signalled.IsZero() {
			return time.Now()
		}
		return signalled
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	pubJS, pubReq := &publisher{}, &publisher{}
	run := func(every time.Duration, p *publisher, send func(id string) error) {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			select {
			case <-stop: // a tick and the stop both ready: stop
				return
			default:
			}
			id := fmt.Sprintf("%p-%d", p, i)
			t0 := time.Now()
			err := send(id)
			p.note(id, time.Since(t0), err, since())
		}
	}
	wg.Add(2)
	go run(50*time.Millisecond, pubJS, func(id string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := js.Publish(ctx, "orders.js", []byte(id), jetstream.WithMsgID(id))
		return err
	})
	go run(100*time.Millisecond, pubReq, func(id string) error {
		m := nats.NewMsg("orders.req")
		m.Data = []byte(id)
		m.Header.Set("Nats-Msg-Id", id)
		resp, err := ncReq.RequestMsg(m, 5*time.Second)
		if err != nil {
			return err
		}
		var ack struct {
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if json.Unmarshal(resp.Data, &ack) != nil || ack.Error != nil {
			return fmt.Errorf("answer %s", resp.Data)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	var bst *burst
	if burstN > 0 {
		if bst, err = startBurst(other.url, burstN, burstSize); err != nil {
			return "", err
		}
		defer bst.nc.Close()
		time.Sleep(burstLead)
	}
	sigMu.Lock()
	signalled = time.Now()
	sigMu.Unlock()
	if err := leader.cmd.Process.Signal(sig); err != nil {
		return "", err
	}
	select {
	case <-leader.exited:
	case <-time.After(60 * time.Second):
		return "", errors.New("the leader's process did not exit")
	}
	exitedAfter := time.Since(signalled)
	time.Sleep(after)
	close(stop)
	wg.Wait()
	pubs := fmt.Sprintf("leader %s exited after %v; js: %v; req: %v", leader.name, exitedAfter.Round(time.Millisecond), pubJS, pubReq)
	if bst != nil {
		bst.wait(40 * time.Second)
		pubs += "; burst: " + bst.String()
	}

	// Every acknowledged message is in the stream.
	var info *jetstream.StreamInfo
	if err := faults.Until(10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := ajs.Stream(ctx, "ORDERS")
		if err != nil {
			return err
		}
		info = st.CachedInfo()
		return nil
	}); err != nil {
		return "", fmt.Errorf("%s; stream info: %w", pubs, err)
	}
	have := map[string]bool{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		if err := faults.Until(10*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			st, err := ajs.Stream(ctx, "ORDERS")
			if err != nil {
				return err
			}
			m, err := st.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			id, _, _ := bytes.Cut(m.Data, []byte{'\n'})
			have[string(id)] = true
			return nil
		}); err != nil {
			return "", fmt.Errorf("%s; read ORDERS %d: %w", pubs, seq, err)
		}
	}
	missing, stored := 0, 0
	if bst != nil {
		for id, ok := range bst.acked() {
			if ok && !have[id] {
				missing++
			} else if !ok && have[id] {
				stored++
			}
		}
	}
	for _, p := range []*publisher{pubJS, pubReq} {
		for _, id := range p.acked {
			if !have[id] {
				missing++
			}
		}
		for _, f := range p.fails {
			if have[f.id] {
				stored++
			}
		}
	}
	return fmt.Sprintf("%s; stream %d msgs, %d acknowledged missing, %d failed stored", pubs, info.State.Msgs, missing, stored), nil
}

// burst is the -burst publisher: every message sent with its own reply
// subject under one inbox, the replies counted as they come.
type burst struct {
	nc   *nats.Conn
	n    int
	mu   sync.Mutex
	ids  []string
	ans  map[int]string // message index -> "ok", "503", or the error's description
	done chan struct{}  // closed once every message was answered
	sent chan error     // the sender's end
}

// startBurst sends n messages of size bytes through url, in the
// background.
func startBurst(url string, n, size int) (*burst, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	b := &burst{nc: nc, n: n, ans: map[int]string{}, done: make(chan struct{}), sent: make(chan error, 1)}
	inbox := nats.NewInbox()
	_, err = nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		i, err := strconv.Atoi(m.Subject[len(inbox)+1:])
		if err != nil {
			return
		}
		b.answer(i, m)
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	for i := range n {
		b.ids = append(b.ids, fmt.Sprintf("burst-%d", i))
	}
	go func() {
		pad := bytes.Repeat([]byte{'x'}, size)
		for i, id := range b.ids {
			m := nats.NewMsg("orders.burst")
			m.Reply = inbox + "." + strconv.Itoa(i)
			m.Header.Set("Nats-Msg-Id", id)
			m.Data = append(append([]byte(id), '\n'), pad[min(len(pad), len(id)+1):]...)
			if err := nc.PublishMsg(m); err != nil {
				b.sent <- err
				return
			}
		}
		b.sent <- nc.Flush()
	}()
	return b, nil
}

// answer records the reply to message i.
func (b *burst) answer(i int, m *nats.Msg) {
	what := "ok"
	if m.Header.Get("Status") != "" {
		what = m.Header.Get("Status")
	} else {
		var ack struct {
			Error *struct {
				Code int `json:"err_code"`
			} `json:"error"`
		}
		if json.Unmarshal(m.Data, &ack) != nil {
			what = "unreadable"
		} else if ack.Error != nil {
			what = "err " + strconv.Itoa(ack.Error.Code)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, dup := b.ans[i]; dup || i < 0 || i >= b.n {
		return
	}
	b.ans[i] = what
	if len(b.ans) == b.n {
		close(b.done)
	}
}

// wait waits until every message was answered, or d passed.
func (b *burst) wait(d time.Duration) {
	select {
	case <-b.done:
	case <-time.After(d):
	}
}

// acked returns each message's id and whether it was acknowledged.
func (b *burst) acked() map[string]bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]bool{}
	for i, id := range b.ids {
		out[id] = b.ans[i] == "ok"
	}
	return out
}

func (b *burst) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	count := map[string]int{}
	for _, a := range b.ans {
		count[a]++
	}
	s := fmt.Sprintf("%d sent", b.n)
	for _, k := range slices.Sorted(maps.Keys(count)) {
		s += fmt.Sprintf(", %d %s", count[k], k)
	}
	if unanswered := b.n - len(b.ans); unanswered > 0 {
		s += fmt.Sprintf(", %d unanswered", unanswered)
	}
	return s
}
