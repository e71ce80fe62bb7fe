package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// kill -9 under asynchronous publish load: every message the server
// acknowledged must be there after a restart, at the sequence its PubAck
// named, with its payload, in publish order (issue 4: cairn fsyncs before
// it acknowledges).
//
// Only for cairn: nats-server's default acknowledges before it syncs, so a
// kill -9 may lose acknowledged messages there by design.

// cairnProc is a cairn binary running in its own process.
type cairnProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	log    *syncBuffer
	exited chan struct{}
}

// buildCairn builds cmd/cairn into a temporary directory.
func buildCairn(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cairn")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/cairnmq/cairn/cmd/cairn")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build cmd/cairn: %v\n%s", err, out)
	}
	return bin
}

// portsGiven holds the ports freePort returned in this test process.
var portsGiven = struct {
	sync.Mutex
	m map[int]bool
}{m: map[int]bool{}}

// freePort returns a loopback port nothing listens on right now and that
// it never returned before in this process: the kernel hands a port just
// closed out again, and a cluster's route list once named one port twice
// (TestJetStreamClusterFourthServerKill9: its third server could not
// listen).
func freePort(t *testing.T) int {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		portsGiven.Lock()
		given := portsGiven.m[port]
		portsGiven.m[port] = true
		portsGiven.Unlock()
		if !given {
			return port
		}
	}
}

// startCairnProc runs bin -js -sd dir on a free port and waits until it
// accepts connections.
func startCairnProc(t *testing.T, bin, dir string) *cairnProc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, ok := tryStartCairnProc(t, bin, dir)
		if ok {
			return p
		}
		// The port may have been taken between freePort and the bind.
		if attempt == 3 {
			t.Fatalf("cairn exited at start:\n%s", p.log.String())
		}
		t.Logf("cairn exited at start (attempt %d):\n%s", attempt, p.log.String())
	}
}

func tryStartCairnProc(t *testing.T, bin, dir string) (*cairnProc, bool) {
	t.Helper()
	port := freePort(t)
	p := &cairnProc{t: t, log: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, "-js", "-sd", dir, "-a", "127.0.0.1", "-p", strconv.Itoa(port))
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start cairn: %v", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.kill)
	p.url = fmt.Sprintf("nats://127.0.0.1:%d", port)
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return p, false
		default:
		}
		if c, err := net.DialTimeout("tcp", hostPort(p.url), 100*time.Millisecond); err == nil {
			c.Close()
			return p, true
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("cairn did not accept connections within %v:\n%s", startTimeout, p.log.String())
	return nil, false
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *cairnProc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// crashPayload is the body of message i of iteration it: its identity
// followed by padding to 128 bytes.
func crashPayload(it, i int) string {
	s := fmt.Sprintf("it%d-%07d-", it, i)
	return s + strings.Repeat("p", 128-len(s))
}

// parseCrashPayload returns the iteration and index a payload names.
func parseCrashPayload(b []byte) (it, i int, ok bool) {
	s := string(b)
	if len(s) != 128 || !strings.HasPrefix(s, "it") {
		return 0, 0, false
	}
	parts := strings.SplitN(s[2:], "-", 3)
	if len(parts) != 3 {
		return 0, 0, false
	}
	it, err1 := strconv.Atoi(parts[0])
	i, err2 := strconv.Atoi(parts[1])
	return it, i, err1 == nil && err2 == nil
}

func TestStreamCrashKill9(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("nats-server acknowledges before it syncs by default; the kill -9 guarantee is cairn's")
	}
	bin := buildCairn(t)
	dir := t.TempDir()

	killAfterAcks := []int{2000, 50, 6000, 700, 3000}
	iterations := len(killAfterAcks)
	acked := map[uint64]string{} // every acknowledged sequence -> payload, over all iterations
	var highest uint64

	for it := 0; it < iterations; it++ {
		p := startCairnProc(t, bin, dir)
		// The kill makes the client report a write error: expected, so quiet.
		nc, err := nats.Connect(p.url, nats.NoReconnect(), nats.Timeout(readTimeout),
			nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatalf("iteration %d: connect: %v\n%s", it, err, p.log.String())
		}

		var mu sync.Mutex
		itAcks := map[uint64]string{}
		var ackErrs []string
		js, err := jetstream.New(nc,
			jetstream.WithPublishAsyncMaxPending(2048),
			jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, ack *jetstream.PubAck) {
				mu.Lock()
				defer mu.Unlock()
				if ack.Stream != "CRASH" || ack.Duplicate {
					ackErrs = append(ackErrs, fmt.Sprintf("odd ack %+v for %q", *ack, m.Data[:12]))
				}
				if prev, dup := itAcks[ack.Sequence]; dup {
					ackErrs = append(ackErrs, fmt.Sprintf("seq %d acknowledged twice: %q and %q", ack.Sequence, prev[:12], m.Data[:12]))
				}
				itAcks[ack.Sequence] = string(m.Data)
			}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
		if it == 0 {
			_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "CRASH", Subjects: []string{"crash.>"}, Storage: jetstream.FileStorage})
		} else {
			// The stream came back; publishing continues after the last sequence.
			var s jetstream.Stream
			s, err = js.Stream(ctx, "CRASH")
			if err == nil && s.CachedInfo().State.LastSeq < highest {
				t.Fatalf("iteration %d: last_seq %d < highest acknowledged %d", it, s.CachedInfo().State.LastSeq, highest)
			}
		}
		cancel()
		if err != nil {
			t.Fatalf("iteration %d: stream: %v\n%s", it, err, p.log.String())
		}

		// Publish as fast as the client allows until the connection dies.
		pubDone := make(chan int)
		stopPub := make(chan struct{})
		go func() {
			i := 0
			for {
				select {
				case <-stopPub:
					pubDone <- i
					return
				default:
				}
				_, err := js.PublishAsync("crash.load", []byte(crashPayload(it, i)))
				switch {
				case err == nil:
					i++
				case errors.Is(err, jetstream.ErrTooManyStalledMsgs):
					// not sent; try the same message again
				default:
					<-stopPub
					pubDone <- i
					return
				}
			}
		}()

		// Kill mid-load, after a different number of acks each iteration
		// so that the kill lands at different points of the files.
		want := killAfterAcks[it]
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			n := len(itAcks)
			mu.Unlock()
			if n >= want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("iteration %d: only %d acks after 10s\n%s", it, n, p.log.String())
			}
			time.Sleep(time.Millisecond)
		}
		p.kill()
		close(stopPub)
		sent := <-pubDone
		nc.Close()

		mu.Lock()
		for _, e := range ackErrs {
			t.Errorf("iteration %d: %s", it, e)
		}
		for seq, data := range itAcks {
			if prev, ok := acked[seq]; ok {
				t.Fatalf("iteration %d: seq %d acknowledged again (was %q, now %q)", it, seq, prev[:12], data[:12])
			}
			acked[seq] = data
			highest = max(highest, seq)
		}
		t.Logf("iteration %d: %d published, %d acknowledged before kill -9; %d acknowledged in all, highest seq %d",
			it, sent, len(itAcks), len(acked), highest)
		mu.Unlock()

		// Restart on the same directory and check everything.
		p = startCairnProc(t, bin, dir)
		verifyCrashStream(t, p, acked, highest)
		p.kill()
	}
}

// verifyCrashStream checks that every acknowledged message is stored at
// its sequence, and that the stored messages are in publish order.
func verifyCrashStream(t *testing.T, p *cairnProc, acked map[uint64]string, highest uint64) {
	t.Helper()
	nc, err := nats.Connect(p.url, nats.NoReconnect(), nats.Timeout(readTimeout))
	if err != nil {
		t.Fatalf("connect after restart: %v\n%s", err, p.log.String())
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
	defer cancel()
	s, err := js.Stream(ctx, "CRASH")
	if err != nil {
		t.Fatalf("stream after restart: %v\n%s", err, p.log.String())
	}
	st := s.CachedInfo().State
	if st.LastSeq < highest {
		t.Fatalf("after restart last_seq %d < highest acknowledged seq %d (state %+v)", st.LastSeq, highest, st)
	}
	if st.Msgs < uint64(len(acked)) {
		t.Errorf("after restart %d messages stored, %d were acknowledged", st.Msgs, len(acked))
	}

	// Read every sequence up to last_seq with pipelined MSG.GET requests.
	type result struct {
		seq  uint64
		data []byte
		err  string
	}
	results := make([]result, st.LastSeq+1)
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox + ".*")
	if err != nil {
		t.Fatal(err)
	}
	const window = 256
	next, got := uint64(1), uint64(0)
	total := st.LastSeq
	for got < total {
		for next <= total && next-got <= window {
			req := fmt.Sprintf(`{"seq":%d}`, next)
			if err := nc.PublishRequest("$JS.API.STREAM.MSG.GET.CRASH", inbox+"."+strconv.FormatUint(next, 10), []byte(req)); err != nil {
				t.Fatal(err)
			}
			next++
		}
		m, err := sub.NextMsg(jsTimeout)
		if err != nil {
			t.Fatalf("MSG.GET replies: %v after %d of %d", err, got, total)
		}
		seq, _ := strconv.ParseUint(m.Subject[len(inbox)+1:], 10, 64)
		var resp struct {
			Message *struct {
				Seq  uint64 `json:"seq"`
				Data []byte `json:"data"`
			} `json:"message"`
			Error *struct {
				ErrCode int    `json:"err_code"`
				Desc    string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &resp); err != nil {
			t.Fatalf("MSG.GET %d: %q: %v", seq, m.Data, err)
		}
		r := result{seq: seq}
		switch {
		case resp.Error != nil:
			r.err = fmt.Sprintf("%d %s", resp.Error.ErrCode, resp.Error.Desc)
		case resp.Message == nil || resp.Message.Seq != seq:
			r.err = fmt.Sprintf("bad reply %q", m.Data)
		default:
			r.data = resp.Message.Data
		}
		results[seq] = r
		got++
	}

	missing := 0
	for seq, want := range acked {
		r := results[seq]
		if r.err != "" || string(r.data) != want {
			missing++
			if missing <= 10 {
				t.Errorf("acknowledged seq %d (%q): after kill -9 got %q, error %q", seq, want[:12], trunc(string(r.data)), r.err)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged messages lost or changed\nserver log:\n%s", missing, len(acked), p.log.String())
	}
	// Whatever is stored (acknowledged or not) is a message we published,
	// in publish order, with no sequence holding a stranger.
	prevIt, prevI := -1, -1
	stored := 0
	for seq := uint64(1); seq <= total; seq++ {
		r := results[seq]
		if r.err != "" {
			continue
		}
		it, i, ok := parseCrashPayload(r.data)
		if !ok {
			t.Fatalf("seq %d holds %q, not a published message", seq, trunc(string(r.data)))
		}
		if it < prevIt || (it == prevIt && i <= prevI) {
			t.Fatalf("seq %d holds it%d-%d after it%d-%d: out of publish order", seq, it, i, prevIt, prevI)
		}
		prevIt, prevI = it, i
		stored++
	}
	if uint64(stored) != st.Msgs {
		t.Errorf("state says %d messages, %d readable", st.Msgs, stored)
	}
}
