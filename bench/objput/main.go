// Command objput publishes an object's chunks as nats.go's object store
// Put does (v1.53.1, which natscli v0.5.0 uses: jetstream/object.go):
// every chunk of -chunk bytes to $O.<bucket>.C.<nuid> with a reply
// subject, without waiting (PublishMsgAsync, up to 4,000 in flight), each
// given -timeout from its publication to its PubAck (the CLI's default
// 5 s: "nats: timeout waiting for ack"). It records when each chunk left
// and when its PubAck came, and prints the put's time, the slowest PubAck
// (its chunk, when it was sent and answered), the number past -timeout,
// and with -v per 250 ms how many chunks left and how many were answered.
// The chunks are purged at the end (the meta record is not written).
// bench/objput.sh runs it with OBJPUT=path.
//
// Usage: objput -s nats://127.0.0.1:25001 -user app -pass app -bucket OB -size 100000000
package main

import (
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

func main() {
	servers := flag.String("s", "nats://127.0.0.1:4222", "server URLs, comma separated")
	user := flag.String("user", "", "user")
	pass := flag.String("pass", "", "password")
	bucket := flag.String("bucket", "OB", "object store bucket")
	size := flag.Int("size", 100_000_000, "object size in bytes")
	chunk := flag.Int("chunk", 128*1024, "chunk size in bytes")
	timeout := flag.Duration("timeout", 5*time.Second, "PubAck timeout per chunk")
	verbose := flag.Bool("v", false, "print sends and acks per 250 ms")
	flag.Parse()
	if err := run(*servers, *user, *pass, *bucket, *size, *chunk, *timeout, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "objput:", err)
		os.Exit(1)
	}
}

// ack is one PubAck: when it came and whether it was an error.
type ack struct {
	at  time.Time
	err string
}

func run(servers, user, pass, bucket string, size, chunk int, timeout time.Duration, verbose bool) error {
	nc, err := nats.Connect(servers, nats.UserInfo(user, pass))
	if err != nil {
		return err
	}
	defer nc.Close()
	n := (size + chunk - 1) / chunk
	sent := make([]time.Time, n)
	acks := make([]ack, n)
	var mu sync.Mutex
	var resend func(i int)
	done := make(chan struct{})
	got := 0
	retries := make([]int, n)
	prefix := nats.NewInbox() + "."
	subj := fmt.Sprintf("$O.%s.C.%s", bucket, nuid.Next())
	sub, err := nc.Subscribe(prefix+"*", func(m *nats.Msg) {
		i, err := strconv.Atoi(strings.TrimPrefix(m.Subject, prefix))
		if err != nil || i < 0 || i >= n {
			return
		}
		var pa struct {
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		e := ""
		if len(m.Data) == 0 {
			e = m.Header.Get("Status")
		} else if json.Unmarshal(m.Data, &pa) == nil && pa.Error != nil {
			e = pa.Error.Description
		}
		mu.Lock()
		defer mu.Unlock()
		if e == "503" && retries[i] < 2 {
			// nats.go retries a "no responders" twice, 250 ms apart,
			// restarting the PubAck timeout (jetstream/publish.go).
			retries[i]++
			time.AfterFunc(250*time.Millisecond, func() { resend(i) })
			return
		}
		if acks[i].at.IsZero() {
			acks[i] = ack{time.Now(), e}
			got++
			if got == n {
				close(done)
			}
		}
	})
	if err != nil {
		return err
	}
	sub.SetPendingLimits(-1, -1)
	data := make([]byte, size)
	rand.Read(data)
	// send stamps the chunk under mu and publishes it outside, as
	// nats.go registers the PubAck's future and then publishes.
	send := func(i int) error {
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		return nc.PublishMsg(&nats.Msg{Subject: subj, Reply: prefix + strconv.Itoa(i), Data: data[i*chunk : min(size, (i+1)*chunk)]})
	}
	resend = func(i int) { _ = send(i) }
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := send(i); err != nil {
			return err
		}
	}
	select {
	case <-done:
	case <-time.After(time.Since(start) + timeout + 5*time.Second):
	}
	total := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	report(start, total, sent, acks, retries, timeout, verbose)
	req, _ := json.Marshal(map[string]string{"filter": subj})
	_, err = nc.Request("$JS.API.STREAM.PURGE.OBJ_"+bucket, req, 10*time.Second)
	return err
}

func report(start time.Time, total time.Duration, sent []time.Time, acks []ack, retries []int, timeout time.Duration, verbose bool) {
	worst, late, missing, errs, retried := -1, 0, 0, 0, 0
	var worstD time.Duration
	for i := range sent {
		retried += retries[i]
		if acks[i].at.IsZero() {
			missing++
			continue
		}
		if acks[i].err != "" {
			errs++
		}
		d := acks[i].at.Sub(sent[i])
		if d > timeout {
			late++
		}
		if d > worstD {
			worst, worstD = i, d
		}
	}
	fmt.Printf("put %.2fs chunks=%d late=%d missing=%d errors=%d retried=%d", total.Seconds(), len(sent), late, missing, errs, retried)
	if worst >= 0 {
		fmt.Printf(" slowest=chunk %d sent %.2fs acked %.2fs (%.2fs)", worst, sent[worst].Sub(start).Seconds(),
			acks[worst].at.Sub(start).Seconds(), worstD.Seconds())
	}
	fmt.Println()
	if !verbose {
		return
	}
	const step = 250 * time.Millisecond
	slots := int(total/step) + 1
	s, a := make([]int, slots), make([]int, slots)
	for i := range sent {
		s[min(slots-1, int(sent[i].Sub(start)/step))]++
		if !acks[i].at.IsZero() {
			a[min(slots-1, int(acks[i].at.Sub(start)/step))]++
		}
	}
	for k := range s {
		fmt.Printf("  %5.2fs sent %4d acked %4d\n", (time.Duration(k) * step).Seconds(), s[k], a[k])
	}
}
