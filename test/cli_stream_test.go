package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The nats CLI (natscli v0.5.0) managing streams: nats stream
// add/info/ls/edit/rm/purge/get/rmm/report, nats pub --jetstream and
// nats bench js pub (issue 4). nats.go checks what the CLI did.

// runCLIFail runs nats --server <u> args... and expects it to fail; it
// returns stdout and stderr together.
func runCLIFail(t *testing.T, u string, args ...string) string {
	t.Helper()
	p := startCLI(t, u, args...)
	select {
	case <-p.done:
	case <-time.After(cliTimeout):
		t.Fatalf("nats %v did not finish within %v\n%s", p.args, cliTimeout, p.output())
	}
	if p.err == nil {
		t.Fatalf("nats %v succeeded, want a failure:\n%s", p.args, p.output())
	}
	return p.output()
}

// cliJSON runs a CLI command with --json and decodes its stdout.
func cliJSON(t *testing.T, u string, v any, args ...string) {
	t.Helper()
	out, errOut := runCLI(t, u, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("nats %v --json: %v\nstdout:\n%s\nstderr:\n%s", args, err, out, errOut)
	}
}

func TestCLIStream(t *testing.T) {
	natsCLI(t)
	u := startJS(t)
	_, js := jsConnect(t, u)

	// add
	out, _ := runCLI(t, u, "stream", "add", "ORDERS", "--subjects", "events.orders.>", "--storage", "file",
		"--retention", "limits", "--discard", "old", "--max-msgs", "100", "--max-msg-size", "1024",
		"--max-msgs-per-subject", "50", "--dupe-window", "1m", "--description", "orders from the cli",
		"--metadata", "owner=cli", "--defaults")
	for _, want := range []string{"Stream ORDERS was created", "Description: orders from the cli", "Subjects: events.orders.>",
		"Storage: File", "Retention: Limits", "Discard Policy: Old", "Duplicate Window: 1m0s", "Maximum Messages: 100",
		"Maximum Per Subject: 50", "Maximum Message Size: 1.0 KiB", "owner: cli", "Messages: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("nats stream add output lacks %q:\n%s", want, out)
		}
	}
	s, err := js.Stream(tctx(t), "ORDERS")
	if err != nil {
		t.Fatalf("ORDERS after nats stream add: %v", err)
	}
	cfg := s.CachedInfo().Config
	if cfg.MaxMsgs != 100 || cfg.MaxMsgSize != 1024 || cfg.MaxMsgsPerSubject != 50 || cfg.Duplicates != time.Minute ||
		cfg.Description != "orders from the cli" || cfg.Metadata["owner"] != "cli" || cfg.Storage != jetstream.FileStorage ||
		!cfg.AllowDirect || cfg.Discard != jetstream.DiscardOld || cfg.MaxBytes != -1 {
		t.Errorf("config after nats stream add: %+v", cfg)
	}
	runCLI(t, u, "stream", "add", "WORK", "--subjects", "work.*", "--storage", "memory", "--retention", "work",
		"--discard", "new", "--max-msgs", "10", "--defaults")
	var wi jetstream.StreamInfo
	cliJSON(t, u, &wi, "stream", "info", "WORK")
	if wi.Config.Name != "WORK" || wi.Config.Retention != jetstream.WorkQueuePolicy || wi.Config.Storage != jetstream.MemoryStorage ||
		wi.Config.Discard != jetstream.DiscardNew || wi.Config.MaxMsgs != 10 {
		t.Errorf("nats stream info WORK --json: %+v", wi.Config)
	}

	// pub --jetstream
	_, errOut := runCLI(t, u, "pub", "--jetstream", "events.orders.new", "order {{Count}}", "--count", "3", "-H", "X-Source:cli")
	for i := 1; i <= 3; i++ {
		if want := fmt.Sprintf("Stored in Stream: ORDERS Sequence: %d", i); !strings.Contains(errOut, want) {
			t.Errorf("nats pub --jetstream output lacks %q:\n%s", want, errOut)
		}
	}
	wantAck(t, jsPublish(t, js, "events.orders.other", "from nats.go"), "ORDERS", 4, false)
	m, err := s.GetMsg(tctx(t), 2)
	if err != nil || string(m.Data) != "order 2" || m.Header.Get("X-Source") != "cli" || m.Subject != "events.orders.new" {
		t.Errorf("message 2 from nats pub --jetstream: %+v %v", m, err)
	}
	// No stream: the CLI reports no responders.
	if out := runCLIFail(t, u, "pub", "--jetstream", "events.unknown", "x"); !strings.Contains(out, "no responders") {
		t.Errorf("nats pub --jetstream to an uncaptured subject:\n%s", out)
	}

	// info
	var info jetstream.StreamInfo
	cliJSON(t, u, &info, "stream", "info", "ORDERS")
	if info.Config.Name != "ORDERS" || info.State.Msgs != 4 || info.State.FirstSeq != 1 || info.State.LastSeq != 4 || info.State.NumSubjects != 2 {
		t.Errorf("nats stream info --json: config %+v state %+v", info.Config, info.State)
	}
	out, _ = runCLI(t, u, "stream", "info", "ORDERS")
	for _, want := range []string{"Information for Stream ORDERS", "Messages: 4", "First Sequence: 1", "Last Sequence: 4", "Active Consumers: 0", "Number of Subjects: 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("nats stream info output lacks %q:\n%s", want, out)
		}
	}

	// get
	out, _ = runCLI(t, u, "stream", "get", "ORDERS", "2")
	for _, want := range []string{"Item: ORDERS#2", "on Subject events.orders.new", "X-Source: cli", "order 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("nats stream get ORDERS 2 output lacks %q:\n%s", want, out)
		}
	}
	out, _ = runCLI(t, u, "stream", "get", "ORDERS", "--last-for", "events.orders.new")
	if !strings.Contains(out, "Item: ORDERS#3") || !strings.Contains(out, "order 3") {
		t.Errorf("nats stream get --last-for output:\n%s", out)
	}
	var got struct {
		Subject string `json:"subject"`
		Seq     uint64 `json:"seq"`
		Data    []byte `json:"data"`
	}
	cliJSON(t, u, &got, "stream", "get", "ORDERS", "4")
	if got.Subject != "events.orders.other" || got.Seq != 4 || string(got.Data) != "from nats.go" {
		t.Errorf("nats stream get ORDERS 4 --json: %+v", got)
	}

	// rmm
	runCLI(t, u, "stream", "rmm", "ORDERS", "1", "-f")
	if _, err := s.GetMsg(tctx(t), 1); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("message 1 after nats stream rmm: %v", err)
	}
	if info := streamInfo(t, s); info.State.Msgs != 3 || info.State.FirstSeq != 2 {
		t.Errorf("state after rmm: %+v", info.State)
	}

	// edit
	out, _ = runCLI(t, u, "stream", "edit", "ORDERS", "--description", "edited", "--max-msgs", "50", "-f")
	// (The diff is go-cmp's, whose spacing is deliberately unstable.)
	if !strings.Contains(out, "Stream ORDERS was updated") || !strings.Contains(out, `"edited"`) {
		t.Errorf("nats stream edit output:\n%s", out)
	}
	if c := streamInfo(t, s).Config; c.Description != "edited" || c.MaxMsgs != 50 || c.MaxMsgsPerSubject != 50 {
		t.Errorf("config after nats stream edit: %+v", c)
	}

	// ls and report
	out, _ = runCLI(t, u, "stream", "ls")
	if !regexp.MustCompile(`│ ORDERS +│ edited +│ [0-9-]+ [0-9:]+ +│ 3 +│`).MatchString(out) || !strings.Contains(out, "│ WORK ") {
		t.Errorf("nats stream ls output:\n%s", out)
	}
	out, _ = runCLI(t, u, "stream", "ls", "--names")
	if strings.Fields(out)[0] != "ORDERS" || strings.Join(strings.Fields(out), ",") != "ORDERS,WORK" {
		t.Errorf("nats stream ls --names:\n%s", out)
	}
	var names []string
	cliJSON(t, u, &names, "stream", "ls")
	if strings.Join(names, ",") != "ORDERS,WORK" {
		t.Errorf("nats stream ls --json: %v", names)
	}
	out, _ = runCLI(t, u, "stream", "report")
	if !strings.Contains(out, "Stream Report") || !regexp.MustCompile(`│ ORDERS +│ File +│ +│ 0 +│ 3 +│`).MatchString(out) ||
		!regexp.MustCompile(`│ WORK +│ Memory +│ +│ 0 +│ 0 +│`).MatchString(out) {
		t.Errorf("nats stream report output:\n%s", out)
	}

	// purge
	out, _ = runCLI(t, u, "stream", "purge", "ORDERS", "--subject", "events.orders.new", "--keep", "1", "-f")
	if !strings.Contains(out, "Purged 1 messages from ORDERS") {
		t.Errorf("nats stream purge --subject --keep output:\n%s", out)
	}
	wantState(t, streamInfo(t, s).State, 2, 3, 4)
	out, _ = runCLI(t, u, "stream", "purge", "ORDERS", "-f")
	if !strings.Contains(out, "Purged 2 messages from ORDERS") {
		t.Errorf("nats stream purge output:\n%s", out)
	}
	wantState(t, streamInfo(t, s).State, 0, 5, 4)

	// rm
	runCLI(t, u, "stream", "rm", "ORDERS", "-f")
	if _, err := js.Stream(tctx(t), "ORDERS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("ORDERS after nats stream rm: %v", err)
	}
	out, _ = runCLI(t, u, "stream", "ls", "--names")
	if strings.TrimSpace(out) != "WORK" {
		t.Errorf("nats stream ls --names after rm:\n%s", out)
	}
}

// The CLI reports the server's errors.
func TestCLIStreamErrors(t *testing.T) {
	natsCLI(t)
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))

	out := runCLIFail(t, u, "stream", "add", "R3", "--subjects", "r3", "--replicas", "3", "--defaults")
	if !strings.Contains(out, "replicas > 1 not supported in non-clustered mode (10074)") {
		t.Errorf("nats stream add --replicas 3:\n%s", out)
	}
	out = runCLIFail(t, u, "stream", "add", "OVERLAP", "--subjects", "events.orders.x", "--defaults")
	if !strings.Contains(out, "subjects overlap with an existing stream (10065)") {
		t.Errorf("nats stream add with overlapping subjects:\n%s", out)
	}
	out = runCLIFail(t, u, "stream", "add", "ORDERS", "--subjects", "events.orders.>", "--max-msgs", "5", "--defaults")
	if !strings.Contains(out, "stream name already in use with a different configuration (10058)") {
		t.Errorf("nats stream add of an existing name:\n%s", out)
	}
	out = runCLIFail(t, u, "stream", "get", "ORDERS", "7")
	if !strings.Contains(out, "no message found") {
		t.Errorf("nats stream get of a missing message:\n%s", out)
	}
	if got := streamNames(t, js); strings.Join(got, ",") != "ORDERS" {
		t.Errorf("streams after refused adds: %v", got)
	}
}

// nats bench js pub sync|async into an existing stream.
func TestCLIStreamBench(t *testing.T) {
	natsCLI(t)
	u := startJS(t)
	_, js := jsConnect(t, u)
	s := createStream(t, js, jetstream.StreamConfig{Name: "benchstream", Subjects: []string{"bench.js"}})

	out, errOut := runCLI(t, u, "bench", "js", "pub", "async", "bench.js", "--msgs", "3000", "--batch", "100", "--size", "128", "--no-progress")
	if !strings.Contains(out, "JetStream asynchronous publisher stats") {
		t.Errorf("nats bench js pub async output:\n%s\n%s", out, errOut)
	}
	out, errOut = runCLI(t, u, "bench", "js", "pub", "sync", "bench.js", "--msgs", "300", "--size", "128", "--no-progress")
	if !strings.Contains(out, "JetStream synchronous publisher stats") {
		t.Errorf("nats bench js pub sync output:\n%s\n%s", out, errOut)
	}
	wantState(t, streamInfo(t, s).State, 3300, 1, 3300)
	if m, err := s.GetMsg(tctx(t), 3300); err != nil || len(m.Data) != 128 {
		t.Errorf("last bench message: %v", err)
	}
}

// nats bench js pub --create makes its own stream; natscli v0.5.0 asks for
// allow_atomic and allow_batched there, with Nats-Required-Api-Level: 3,
// and its atomic and fast batch publishers check for API levels 2 and 4.
// All three publishers then fill the stream the first one created.
func TestCLIStreamBenchCreate(t *testing.T) {
	natsCLI(t)
	u := startJS(t)
	_, js := jsConnect(t, u)
	out, errOut := runCLI(t, u, "bench", "js", "pub", "async", "bench.create", "--create", "--msgs", "1000", "--no-progress")
	if !strings.Contains(out, "JetStream asynchronous publisher stats") {
		t.Fatalf("nats bench js pub async --create output:\n%s\n%s", out, errOut)
	}
	s, err := js.Stream(tctx(t), "benchstream")
	if err != nil {
		t.Fatalf("benchstream after nats bench --create: %v", err)
	}
	cfg := streamInfo(t, s).Config
	if !cfg.AllowAtomicPublish || !cfg.AllowBatchPublish {
		t.Errorf("benchstream config: allow_atomic %v, allow_batched %v", cfg.AllowAtomicPublish, cfg.AllowBatchPublish)
	}
	wantState(t, streamInfo(t, s).State, 1000, 1, 1000)

	out, errOut = runCLI(t, u, "bench", "js", "pub", "batch", "bench.create", "--create", "--msgs", "1000", "--batch", "100", "--clients", "2", "--no-progress")
	if !strings.Contains(out, "atomic batch publisher aggregated stats") {
		t.Errorf("nats bench js pub batch output:\n%s\n%s", out, errOut)
	}
	out, errOut = runCLI(t, u, "bench", "js", "pub", "fast", "bench.create", "--create", "--msgs", "2000", "--batch", "50", "--no-progress")
	if !strings.Contains(out, "fast batch publisher stats") {
		t.Errorf("nats bench js pub fast output:\n%s\n%s", out, errOut)
	}
	wantState(t, streamInfo(t, s).State, 4000, 1, 4000)
}

// persist_mode async (ADR-56) through natscli and nats.go: nats stream
// add --persist-mode async makes the stream, the CLI shows the mode, both
// clients publish to it and read back what they published, an update
// that drops the mode is refused with nats-server's text, and nats bench
// js pub --create --persistasync creates and fills its stream. A memory
// stream in async mode is refused.
func TestCLIStreamPersistAsync(t *testing.T) {
	natsCLI(t)
	u := startJS(t)
	_, js := jsConnect(t, u)

	out, _ := runCLI(t, u, "stream", "add", "PA", "--subjects", "pa.>", "--storage", "file", "--persist-mode", "async", "--defaults")
	if !strings.Contains(out, "Persistence Mode: Async") {
		t.Errorf("nats stream add --persist-mode async output:\n%s", out)
	}
	s, err := js.Stream(tctx(t), "PA")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s.CachedInfo().Config; cfg.PersistMode != jetstream.AsyncPersistMode || cfg.Metadata["_nats.req.level"] != "2" {
		t.Errorf("PA config: persist_mode %v, metadata %v", cfg.PersistMode, cfg.Metadata)
	}
	_, errOut := runCLI(t, u, "pub", "--jetstream", "pa.cli", "from the cli")
	if !strings.Contains(errOut, "Stored in Stream: PA Sequence: 1") {
		t.Errorf("nats pub --jetstream output:\n%s", errOut)
	}
	wantAck(t, jsPublish(t, js, "pa.go", "from nats.go"), "PA", 2, false)
	for seq, want := range map[uint64]string{1: "from the cli", 2: "from nats.go"} {
		if m, err := s.GetMsg(tctx(t), seq); err != nil || string(m.Data) != want {
			t.Errorf("message %d: %v %v", seq, m, err)
		}
	}
	cfg := s.CachedInfo().Config
	cfg.PersistMode = jetstream.DefaultPersistMode
	if _, err := js.UpdateStream(tctx(t), cfg); err == nil || !strings.Contains(err.Error(), "stream configuration update can not change persist mode") {
		t.Errorf("update to the default persist mode: %v", err)
	}
	if out := runCLIFail(t, u, "stream", "add", "PM", "--subjects", "pm", "--storage", "memory", "--persist-mode", "async", "--defaults"); !strings.Contains(out, "async persist mode is only supported on file storage") {
		t.Errorf("nats stream add of a memory stream in async mode:\n%s", out)
	}

	out, errOut = runCLI(t, u, "bench", "js", "pub", "async", "bench.pa", "--create", "--persistasync", "--msgs", "2000", "--no-progress")
	if !strings.Contains(out, "JetStream asynchronous publisher stats") {
		t.Fatalf("nats bench js pub async --create --persistasync output:\n%s\n%s", out, errOut)
	}
	b, err := js.Stream(tctx(t), "benchstream")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := streamInfo(t, b).Config; cfg.PersistMode != jetstream.AsyncPersistMode {
		t.Errorf("benchstream persist_mode %v, want async", cfg.PersistMode)
	}
	wantState(t, streamInfo(t, b).State, 2000, 1, 2000)
}

// nats trace (natscli v0.5.0) refuses servers older than 2.11 by their
// INFO version; cairn advertises a version that lets it run, and answers
// with the events of a JetStream publish (ADR-41).
func TestCLITrace(t *testing.T) {
	natsCLI(t)
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	out, errOut := runCLI(t, u, "trace", "t.x", "hello")
	for _, want := range []string{"Tracing message route to subject t.x", `JetStream action:"stored" stream:"T" subject:"t.x"`, "JetStream: 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("nats trace output lacks %q:\n%s\n%s", want, out, errOut)
		}
	}
}
