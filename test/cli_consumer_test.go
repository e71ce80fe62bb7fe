package test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The nats CLI (natscli v0.5.0) managing consumers, key-value buckets and
// object stores: nats consumer add/info/ls/next/rm, nats kv
// add/put/get/update/create/del/purge/history/ls/watch, nats object
// add/put/get/ls/rm. nats.go checks what the CLI did.

// cxCLIWait waits until the running CLI process has printed all of
// want (stdout and stderr together).
func cxCLIWait(t *testing.T, p *cliProc, want ...string) {
	t.Helper()
	deadline := time.Now().Add(cxWait)
	for {
		out := p.output()
		missing := ""
		for _, w := range want {
			if !strings.Contains(out, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if !p.running() {
			t.Fatalf("nats %v exited (%v) before printing %q:\n%s", p.args, p.err, missing, out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats %v has not printed %q:\n%s", p.args, missing, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCLIConsumer(t *testing.T) {
	natsCLI(t)
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.%d", 5)

	// add: a pull consumer with the defaults.
	out, _ := runCLI(t, u, "consumer", "add", "ORDERS", "PULL", "--pull", "--defaults")
	for _, want := range []string{"Information for Consumer ORDERS > PULL", "Name: PULL", "Pull Mode: true",
		"Deliver Policy: All", "Ack Policy: Explicit", "Ack Wait: 30.00s", "Replay Policy: Instant",
		"Max Ack Pending: 1,000", "Max Waiting Pulls: 512",
		"Last Delivered Message: Consumer sequence: 0 Stream sequence: 0",
		"Acknowledgment Floor: Consumer sequence: 0 Stream sequence: 0", "Outstanding Acks: 0 out of maximum 1,000",
		"Redelivered Messages: 0", "Unprocessed Messages: 5", "Waiting Pulls: 0 of maximum 512"} {
		if !strings.Contains(out, want) {
			t.Errorf("nats consumer add --pull output lacks %q:\n%s", want, out)
		}
	}
	c, err := js.Consumer(tctx(t), "ORDERS", "PULL")
	if err != nil {
		t.Fatalf("PULL after nats consumer add: %v", err)
	}
	if cfg := c.CachedInfo().Config; cfg.Durable != "PULL" || cfg.AckPolicy != jetstream.AckExplicitPolicy ||
		cfg.DeliverSubject != "" || cfg.AckWait != 30*time.Second || cfg.MaxDeliver != -1 {
		t.Errorf("PULL config: %+v", cfg)
	}

	// add: a push consumer with a filter and options.
	out, _ = runCLI(t, u, "consumer", "add", "ORDERS", "PUSH", "--target", "deliver.push", "--filter", "events.orders.2",
		"--ack", "explicit", "--deliver", "all", "--heartbeat", "1s", "--flow-control", "--max-deliver", "3",
		"--description", "pushed", "--defaults")
	for _, want := range []string{"Information for Consumer ORDERS > PUSH", "Delivery Subject: deliver.push",
		"Filter Subject: events.orders.2", "Ack Policy: Explicit", "Flow Control: true", "Idle Heartbeat: 1.00s",
		"Maximum Deliveries: 3", "Description: pushed", "Unprocessed Messages: 1", "Active Interest: No interest"} {
		if !strings.Contains(out, want) {
			t.Errorf("nats consumer add --target output lacks %q:\n%s", want, out)
		}
	}
	pc, err := js.PushConsumer(tctx(t), "ORDERS", "PUSH")
	if err != nil {
		t.Fatalf("PUSH after nats consumer add: %v", err)
	}
	if cfg := pc.CachedInfo().Config; cfg.DeliverSubject != "deliver.push" || cfg.FilterSubject != "events.orders.2" ||
		!cfg.FlowControl || cfg.IdleHeartbeat != time.Second || cfg.MaxDeliver != 3 || cfg.Description != "pushed" {
		t.Errorf("PUSH config: %+v", cfg)
	}
	// A push consumer with all defaults (the CLI picks ack none for push).
	runCLI(t, u, "consumer", "add", "ORDERS", "PUSH2", "--target", "deliver.push2", "--defaults")
	if pc2, err := js.PushConsumer(tctx(t), "ORDERS", "PUSH2"); err != nil || pc2.CachedInfo().Config.DeliverSubject != "deliver.push2" {
		t.Errorf("PUSH2 after nats consumer add: %v", err)
	}

	// info
	var ci jetstream.ConsumerInfo
	cliJSON(t, u, &ci, "consumer", "info", "ORDERS", "PULL")
	if ci.Name != "PULL" || ci.Stream != "ORDERS" || ci.NumPending != 5 || ci.Config.AckPolicy != jetstream.AckExplicitPolicy {
		t.Errorf("nats consumer info --json: %+v", ci)
	}
	out, _ = runCLI(t, u, "consumer", "info", "ORDERS", "PULL")
	if !strings.Contains(out, "Information for Consumer ORDERS > PULL") || !strings.Contains(out, "Unprocessed Messages: 5") {
		t.Errorf("nats consumer info output:\n%s", out)
	}

	// ls
	out, _ = runCLI(t, u, "consumer", "ls", "ORDERS")
	if !regexp.MustCompile(`│ PULL +│ +│ [0-9-]+ [0-9:]+ +│ +0 │ +5 │ never +│`).MatchString(out) ||
		!regexp.MustCompile(`│ PUSH +│ pushed +│`).MatchString(out) {
		t.Errorf("nats consumer ls output:\n%s", out)
	}
	out, _ = runCLI(t, u, "consumer", "ls", "ORDERS", "--names")
	if strings.Join(strings.Fields(out), ",") != "PULL,PUSH,PUSH2" {
		t.Errorf("nats consumer ls --names:\n%s", out)
	}
	var names []string
	cliJSON(t, u, &names, "consumer", "ls", "ORDERS")
	if strings.Join(names, ",") != "PULL,PUSH,PUSH2" {
		t.Errorf("nats consumer ls --json: %v", names)
	}

	// next
	out, _ = runCLI(t, u, "consumer", "next", "ORDERS", "PULL", "--count", "3", "--ack")
	for i := 1; i <= 3; i++ {
		want := fmt.Sprintf("subj: events.orders.%d / tries: 1 / cons seq: %d / str seq: %d / pending: %d", i, i, i, 5-i)
		if !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("\nm%d\n", i)) {
			t.Errorf("nats consumer next output lacks %q or m%d:\n%s", want, i, out)
		}
	}
	if n := strings.Count(out, "Acknowledged message"); n != 3 {
		t.Errorf("nats consumer next --ack acknowledged %d messages:\n%s", n, out)
	}
	info := cxWaitInfo(t, c, "the CLI's acks", func(i *jetstream.ConsumerInfo) bool { return i.AckFloor.Stream == 3 })
	cxCounts(t, info, 2, 0, 0, 0)
	cxSeqInfo(t, "delivered", info.Delivered, 3, 3)
	out, _ = runCLI(t, u, "consumer", "next", "ORDERS", "PULL", "--count", "2", "--raw", "--ack")
	if out != "m4\nm5\n" {
		t.Errorf("nats consumer next --raw output %q", out)
	}
	// Without --ack the message stays pending.
	jsPublish(t, js, "events.orders.6", "m6")
	runCLI(t, u, "consumer", "next", "ORDERS", "PULL", "--no-ack")
	info = cxInfo(t, c)
	cxCounts(t, info, 0, 1, 0, 0)
	cxSeqInfo(t, "ack_floor", info.AckFloor, 5, 5)
	// Nothing left: the CLI reports a timeout. natscli v0.5.0 asks for
	// expires equal to its own wait, so which comes first is a race on
	// either server: its timeout, or the server's 408 Request Timeout
	// status, which it then prints and fails to acknowledge.
	if out := runCLIFail(t, u, "consumer", "next", "ORDERS", "PULL", "--ack", "--timeout", "500ms"); !strings.Contains(out, "no message received") && !strings.Contains(out, "Status: 408") {
		t.Errorf("nats consumer next with nothing pending:\n%s", out)
	}

	// rm
	runCLI(t, u, "consumer", "rm", "ORDERS", "PULL", "-f")
	if _, err := js.Consumer(tctx(t), "ORDERS", "PULL"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("PULL after nats consumer rm: %v", err)
	}
	if out := runCLIFail(t, u, "consumer", "rm", "ORDERS", "NOPE", "-f"); !strings.Contains(out, "consumer not found (10014)") {
		t.Errorf("nats consumer rm of a missing consumer:\n%s", out)
	}
	out, _ = runCLI(t, u, "consumer", "ls", "ORDERS", "--names")
	if strings.Join(strings.Fields(out), ",") != "PUSH,PUSH2" {
		t.Errorf("nats consumer ls --names after rm:\n%s", out)
	}
}

func TestCLIKV(t *testing.T) {
	natsCLI(t)
	u := startJS(t)
	_, js := jsConnect(t, u)

	out, _ := runCLI(t, u, "kv", "add", "CFG", "--history", "5", "--description", "from the cli")
	for _, want := range []string{"Information for Key-Value Store Bucket CFG", "Bucket Name: CFG", "History Kept: 5",
		"Values Stored: 0", "Backing Store Kind: JetStream", "JetStream Stream: KV_CFG"} {
		if !strings.Contains(out, want) {
			t.Errorf("nats kv add output lacks %q:\n%s", want, out)
		}
	}
	kv, err := js.KeyValue(tctx(t), "CFG")
	if err != nil {
		t.Fatalf("CFG after nats kv add: %v", err)
	}
	if st, err := kv.Status(tctx(t)); err != nil || st.History() != 5 {
		t.Errorf("CFG status: %v %v", st, err)
	}

	// A watcher started now sees everything that follows.
	w := startCLI(t, u, "kv", "watch", "CFG")
	// The watch has begun when its consumer exists; a put before that would
	// show only as the key's latest value.
	waitFor(t, cliTimeout, "the nats kv watch consumer", func() bool {
		s, err := js.Stream(tctx(t), "KV_CFG")
		if err != nil {
			t.Fatalf("KV_CFG: %v", err)
		}
		return s.CachedInfo().State.Consumers == 1
	})

	// put / get
	if out, _ := runCLI(t, u, "kv", "put", "CFG", "a", "1"); strings.TrimSpace(out) != "1" {
		t.Errorf("nats kv put output %q", out)
	}
	runCLI(t, u, "kv", "put", "CFG", "a", "2")
	if e, err := kv.Get(tctx(t), "a"); err != nil || string(e.Value()) != "2" || e.Revision() != 2 {
		t.Errorf("a after nats kv put: %v", err)
	}
	out, _ = runCLI(t, u, "kv", "get", "CFG", "a")
	if !strings.Contains(out, "CFG > a revision: 2 created @") || !strings.Contains(out, "\n2\n") {
		t.Errorf("nats kv get output:\n%s", out)
	}
	if out, _ := runCLI(t, u, "kv", "get", "CFG", "a", "--raw"); out != "2" {
		t.Errorf("nats kv get --raw output %q", out)
	}
	kvxPut(t, kv, "fromgo", "hello")
	if out, _ := runCLI(t, u, "kv", "get", "CFG", "fromgo", "--raw"); out != "hello" {
		t.Errorf("nats kv get of a key put by nats.go: %q", out)
	}
	if out := runCLIFail(t, u, "kv", "get", "CFG", "missing"); !strings.Contains(out, "key not found") {
		t.Errorf("nats kv get of a missing key:\n%s", out)
	}

	// update (compare-and-set)
	runCLI(t, u, "kv", "update", "CFG", "a", "3", "2")
	if e, err := kv.Get(tctx(t), "a"); err != nil || string(e.Value()) != "3" || e.Revision() != 4 {
		t.Errorf("a after nats kv update: %v", err)
	}
	if out := runCLIFail(t, u, "kv", "update", "CFG", "a", "stale", "2"); !strings.Contains(out, "wrong last sequence: 4") {
		t.Errorf("nats kv update at a stale revision:\n%s", out)
	}

	// create
	if out := runCLIFail(t, u, "kv", "create", "CFG", "a", "x"); !strings.Contains(out, "key exists") {
		t.Errorf("nats kv create of an existing key:\n%s", out)
	}
	runCLI(t, u, "kv", "create", "CFG", "b", "bee")
	if e, err := kv.Get(tctx(t), "b"); err != nil || string(e.Value()) != "bee" {
		t.Errorf("b after nats kv create: %v", err)
	}

	// del / purge
	runCLI(t, u, "kv", "del", "CFG", "b", "-f")
	if _, err := kv.Get(tctx(t), "b"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("b after nats kv del: %v", err)
	}
	runCLI(t, u, "kv", "purge", "CFG", "a", "-f")
	h, err := kv.History(tctx(t), "a")
	if err != nil || len(h) != 1 || h[0].Operation() != jetstream.KeyValuePurge {
		t.Errorf("history of a after nats kv purge: %d entries %v", len(h), err)
	}

	// history
	runCLI(t, u, "kv", "put", "CFG", "c", "see")
	runCLI(t, u, "kv", "put", "CFG", "c", "sea")
	out, _ = runCLI(t, u, "kv", "history", "CFG", "c")
	if !strings.Contains(out, "History for CFG > c") ||
		!regexp.MustCompile(`│ c +│ +8 │ PUT +│ [0-9-]+ [0-9:]+ │ 3 +│ see +│`).MatchString(out) ||
		!regexp.MustCompile(`│ c +│ +9 │ PUT +│ [0-9-]+ [0-9:]+ │ 3 +│ sea +│`).MatchString(out) {
		t.Errorf("nats kv history output:\n%s", out)
	}

	// keys (ls with a bucket) and buckets (ls)
	out, _ = runCLI(t, u, "kv", "ls", "CFG")
	if strings.Join(strings.Fields(out), ",") != "fromgo,c" && strings.Join(strings.Fields(out), ",") != "c,fromgo" {
		t.Errorf("nats kv ls CFG:\n%s", out)
	}
	out, _ = runCLI(t, u, "kv", "ls")
	if !regexp.MustCompile(`│ CFG +│ from the cli +│`).MatchString(out) {
		t.Errorf("nats kv ls:\n%s", out)
	}
	if out, _ := runCLI(t, u, "kv", "ls", "--names"); strings.TrimSpace(out) != "CFG" {
		t.Errorf("nats kv ls --names: %q", out)
	}

	// The watcher saw it all, in order.
	cxCLIWait(t, w, "PUT CFG > c: sea")
	var lines []string
	for _, l := range strings.Split(w.stdout.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, regexp.MustCompile(`^\[[0-9-]+ [0-9:]+\] `).ReplaceAllString(l, ""))
		}
	}
	want := []string{"PUT CFG > a: 1", "PUT CFG > a: 2", "PUT CFG > fromgo: hello", "PUT CFG > a: 3", "PUT CFG > b: bee",
		"DELETE CFG > b", "PURGE CFG > a", "PUT CFG > c: see", "PUT CFG > c: sea"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("nats kv watch printed:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// A new watcher starts with the latest value of each key.
	w2 := startCLI(t, u, "kv", "watch", "CFG", "c")
	cxCLIWait(t, w2, "PUT CFG > c: sea")
	if strings.Contains(w2.output(), "c: see") {
		t.Errorf("a new watch of c shows the old value:\n%s", w2.output())
	}
	kvxPut(t, kv, "c", "live")
	cxCLIWait(t, w2, "PUT CFG > c: live")

	// Delete the bucket.
	runCLI(t, u, "kv", "del", "CFG", "-f")
	if _, err := js.KeyValue(tctx(t), "CFG"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("CFG after nats kv del: %v", err)
	}
}

func TestCLIObject(t *testing.T) {
	natsCLI(t)
	u := startJS(t)
	_, js := jsConnect(t, u)
	dir := t.TempDir()
	data := make([]byte, 300*1024+7) // 3 chunks
	rand.New(rand.NewSource(2)).Read(data)
	file := filepath.Join(dir, "file.bin")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)

	out, _ := runCLI(t, u, "object", "add", "FILES", "--description", "cli files")
	for _, want := range []string{"Information for Object Store Bucket FILES", "Bucket Name: FILES", "Sealed: false",
		"Backing Store Kind: JetStream", "JetStream Stream: OBJ_FILES"} {
		if !strings.Contains(out, want) {
			t.Errorf("nats object add output lacks %q:\n%s", want, out)
		}
	}
	obs, err := js.ObjectStore(tctx(t), "FILES")
	if err != nil {
		t.Fatalf("FILES after nats object add: %v", err)
	}

	// put
	out, _ = runCLI(t, u, "object", "put", "FILES", file, "--name", "file.bin", "--no-progress")
	for _, want := range []string{"Object information for FILES > file.bin", "Size: 300 KiB", "Chunks: 3",
		fmt.Sprintf("Digest: SHA-256 %x", sum)} {
		if !strings.Contains(out, want) {
			t.Errorf("nats object put output lacks %q:\n%s", want, out)
		}
	}
	got, err := obs.GetBytes(tctx(t), "file.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("file.bin through nats.go: %d bytes %v", len(got), err)
	}
	runCLI(t, u, "object", "put", "FILES", file, "--name", "other/name.bin", "--no-progress", "-f")
	if _, err := obs.PutString(tctx(t), "fromgo.txt", "written by nats.go"); err != nil {
		t.Fatal(err)
	}

	// ls
	out, _ = runCLI(t, u, "object", "ls", "FILES")
	if !regexp.MustCompile(`│ file\.bin +│ 300 KiB │`).MatchString(out) || !regexp.MustCompile(`│ other/name\.bin +│ 300 KiB │`).MatchString(out) ||
		!regexp.MustCompile(`│ fromgo\.txt +│ 18 B +│`).MatchString(out) {
		t.Errorf("nats object ls FILES:\n%s", out)
	}
	out, _ = runCLI(t, u, "object", "ls")
	if !regexp.MustCompile(`│ FILES +│ cli files +│`).MatchString(out) {
		t.Errorf("nats object ls:\n%s", out)
	}

	// get
	dst := filepath.Join(dir, "out.bin")
	runCLI(t, u, "object", "get", "FILES", "other/name.bin", "--output", dst, "--no-progress")
	if b, err := os.ReadFile(dst); err != nil || !bytes.Equal(b, data) {
		t.Errorf("nats object get wrote %d bytes, %v", len(b), err)
	}
	dst2 := filepath.Join(dir, "fromgo.txt")
	runCLI(t, u, "object", "get", "FILES", "fromgo.txt", "--output", dst2, "--no-progress")
	if b, err := os.ReadFile(dst2); err != nil || string(b) != "written by nats.go" {
		t.Errorf("nats object get of a nats.go object: %q %v", b, err)
	}
	if out := runCLIFail(t, u, "object", "get", "FILES", "missing", "--output", filepath.Join(dir, "x"), "--no-progress"); !strings.Contains(out, "object not found") {
		t.Errorf("nats object get of a missing object:\n%s", out)
	}

	// rm
	out, _ = runCLI(t, u, "object", "rm", "FILES", "file.bin", "-f")
	if !strings.Contains(out, "Removed FILES > file.bin") {
		t.Errorf("nats object rm output:\n%s", out)
	}
	if _, err := obs.GetInfo(tctx(t), "file.bin"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("file.bin after nats object rm: %v", err)
	}
	// Its chunks are gone: other/name.bin (3 chunks + meta), fromgo.txt
	// (1 + meta) and file.bin's deleted meta remain.
	s := cxStreamByName(t, js, "OBJ_FILES")
	cxWaitMsgs(t, s, 7)
	out, _ = runCLI(t, u, "object", "ls", "FILES")
	if strings.Contains(out, "file.bin ") || !strings.Contains(out, "other/name.bin") {
		t.Errorf("nats object ls after rm:\n%s", out)
	}
	// Remove the bucket.
	runCLI(t, u, "object", "rm", "FILES", "-f")
	if _, err := js.ObjectStore(tctx(t), "FILES"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("FILES after nats object rm: %v", err)
	}
}
