// Command bigentry publishes large single messages and large atomic
// batches into an R3 stream named BIG (created anew, subjects big.>,
// allow_atomic), each with a reply awaited up to -timeout, a small
// publish after each, and prints every answer, its latency, and the
// stream's state at the end (docs/benchmarks.md, "Large entries under
// CPU load"; trial 36's tool). -sizes lists the single messages' payload
// sizes, -batches the atomic batches as COUNTxSIZE, each committed by its
// last message (Nats-Batch-Commit), its first one also carrying a reply
// subject (as orbit.go does; -replyall: every message). The servers
// need max_payload 64MB for the largest sizes, and a user app with
// password apppw in an account with JetStream.
//
// Usage:
//
//	go run ./bench/bigentry -urls nats://127.0.0.1:27201,... -timeout 20s \
//	  -sizes 30000000,30000000 -batches 8x8000000,4x8000000,60x1000000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var nc *nats.Conn

func main() {
	urls := flag.String("urls", "", "")
	sizes := flag.String("sizes", "1048576,7900000", "single message payload sizes")
	batches := flag.String("batches", "10x1024,1000x1024,1001x100", "atomic batches NxSIZE")
	timeout := flag.Duration("timeout", 30*time.Second, "")
	replyAll := flag.Bool("replyall", false, "a reply subject on every batch message")
	flag.Parse()
	var err error
	nc, err = nats.Connect(*urls, nats.UserInfo("app", "apppw"), nats.Timeout(10*time.Second))
	must(err)
	fmt.Printf("connected to %s, max_payload %d\n", nc.ConnectedServerName(), nc.MaxPayload())
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	_ = js.DeleteStream(ctx, "BIG")
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big.>"}, Replicas: 3, AllowAtomicPublish: true})
	must(err)
	small := func(label string) {
		t := time.Now()
		m := nats.NewMsg("big.small")
		m.Data = []byte("ok")
		r, err := nc.RequestMsg(m, *timeout)
		fmt.Printf("   then a small publish: %s (%v)\n", answer(r, err), time.Since(t).Round(time.Millisecond))
	}
	for _, s := range strings.Split(*sizes, ",") {
		if s == "" {
			continue
		}
		n, _ := strconv.Atoi(s)
		m := nats.NewMsg("big.one")
		m.Data = make([]byte, n)
		t := time.Now()
		r, err := nc.RequestMsg(m, *timeout)
		fmt.Printf("single %d bytes: %s (%v)\n", n, answer(r, err), time.Since(t).Round(time.Millisecond))
		small("")
	}
	for _, b := range strings.Split(*batches, ",") {
		if b == "" {
			continue
		}
		p := strings.Split(b, "x")
		cnt, _ := strconv.Atoi(p[0])
		sz, _ := strconv.Atoi(p[1])
		id := fmt.Sprintf("b%d", time.Now().UnixNano())
		t := time.Now()
		var last string
		var perr error
		inbox := nats.NewInbox()
		sub, _ := nc.SubscribeSync(inbox)
		for i := 1; i <= cnt; i++ {
			m := nats.NewMsg("big.batch")
			m.Data = make([]byte, sz)
			m.Header.Set("Nats-Batch-Id", id)
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i))
			if i == 1 || *replyAll {
				m.Reply = inbox // first message with a reply, as orbit.go does
			}
			if i == cnt {
				m.Header.Set("Nats-Batch-Commit", "1")
				r, err := nc.RequestMsg(m, *timeout)
				last = answer(r, err)
				break
			}
			if perr = nc.PublishMsg(m); perr != nil {
				last = "publish error: " + perr.Error()
				break
			}
		}
		// anything the server said on the first message's reply
		extra := ""
		empties := 0
		for {
			r, err := sub.NextMsg(200 * time.Millisecond)
			if err != nil {
				break
			}
			if a := answer(r, nil); a != "" {
				extra += " | early: " + a
			} else {
				empties++
			}
		}
		sub.Unsubscribe()
		extra += fmt.Sprintf(" | %d empty replies", empties)
		fmt.Printf("atomic batch %d x %d bytes (%d MB): %s (%v)%s\n", cnt, sz, cnt*sz/1000000, last, time.Since(t).Round(time.Millisecond), extra)
		small("")
	}
	s, _ := js.Stream(ctx, "BIG")
	i, err := s.Info(ctx)
	if err == nil {
		fmt.Printf("stream BIG: %d msgs, %d bytes, leader %s\n", i.State.Msgs, i.State.Bytes, i.Cluster.Leader)
		for _, r := range i.Cluster.Replicas {
			fmt.Printf("   replica %s current=%v lag=%d\n", r.Name, r.Current, r.Lag)
		}
	} else {
		fmt.Println("stream info:", err)
	}
}

func answer(r *nats.Msg, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	st := r.Header.Get("Status")
	if st != "" {
		return "status " + st + " " + r.Header.Get("Description")
	}
	var v map[string]any
	if json.Unmarshal(r.Data, &v) == nil {
		if e, ok := v["error"]; ok {
			b, _ := json.Marshal(e)
			return "ERROR " + string(b)
		}
		return fmt.Sprintf("ack seq=%v batch=%v count=%v", v["seq"], v["batch"], v["count"])
	}
	return string(r.Data)
}

func must(err error) {
	if err != nil {
		fmt.Println("fatal:", err)
		os.Exit(1)
	}
}
