package jetstream

import (
	"bytes"
	"fmt"
	"github.com/cairnmq/cairn/internal/jetstream/consumerrun"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/filestore"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// The determinism test (docs/engine.md, "Testing the promise"): a
// randomized workload runs on one server whose logs record every
// operation in its byte form; the recorded logs are replayed into fresh
// state machines, twice over the memory store and once over the file
// store, and every stream's and consumer's full state must come out
// byte for byte as the server's. A replica fed the same log reaches the
// same state: nothing an apply function decides comes from outside the
// log.

// recorder records the encoded operations of every stream and consumer
// log, with the state each began from, and applies each decoded copy.
type recorder struct {
	mu        sync.Mutex
	streams   map[string]*streamRecord
	consumers map[string]*consumerRecord
}

type streamRecord struct {
	cfg stream.Config
	ops [][]byte
}

type consumerRecord struct {
	started    bool
	policy     consumer.Policy
	deadLetter bool
	paused     int64
	initial    *store.ConsumerState
	ops        [][]byte
}

func newRecorder() *recorder {
	return &recorder{streams: map[string]*streamRecord{}, consumers: map[string]*consumerRecord{}}
}

type recordedLog struct {
	rec *recorder
	a   Applier[stream.Op]
	sr  *streamRecord
	idx uint64
}

func (rec *recorder) newLog(name string, a Applier[stream.Op]) Log[stream.Op] {
	sr := &streamRecord{cfg: a.(*streamrun.Stream).Config()}
	rec.mu.Lock()
	rec.streams[name] = sr
	rec.mu.Unlock()
	return &recordedLog{rec: rec, a: a, sr: sr}
}

func (l *recordedLog) Propose(op stream.Op, key uint64) error {
	b, err := stream.AppendOp(nil, op)
	if err != nil {
		panic(err)
	}
	dec, err := stream.DecodeOp(b)
	if err != nil {
		panic(err)
	}
	l.rec.mu.Lock()
	l.sr.ops = append(l.sr.ops, b)
	l.rec.mu.Unlock()
	l.idx++
	l.a.Apply(l.idx, dec, key)
	return nil
}

type recordedConsumerLog struct {
	rec *recorder
	c   *consumerrun.Consumer
	cr  *consumerRecord
	idx uint64
}

func (rec *recorder) newConsumerLog(streamName, name string, a Applier[consumer.Op]) Log[consumer.Op] {
	cr := &consumerRecord{}
	rec.mu.Lock()
	rec.consumers[streamName+" > "+name] = cr
	rec.mu.Unlock()
	return &recordedConsumerLog{rec: rec, c: a.(*consumerrun.Consumer), cr: cr}
}

// Propose runs with the consumer's mutex held (or before the consumer
// starts), so its state may be read.
func (l *recordedConsumerLog) Propose(op consumer.Op, key uint64) error {
	b, err := consumer.AppendOp(nil, op)
	if err != nil {
		panic(err)
	}
	dec, err := consumer.DecodeOp(b)
	if err != nil {
		panic(err)
	}
	l.rec.mu.Lock()
	if !l.cr.started {
		st, cfg := l.c.StateLocked()
		l.cr.started = true
		l.cr.policy, l.cr.deadLetter, l.cr.paused = consumer.PolicyOf(cfg), st.DeadLetterOn(), st.PausedUntil()
		l.cr.initial = st.Snapshot()
	}
	l.cr.ops = append(l.cr.ops, b)
	l.rec.mu.Unlock()
	l.idx++
	l.c.Apply(l.idx, dec, key)
	return nil
}

// replayStream applies a stream's recorded operations to a fresh state
// machine over st and returns its state (stream.Stream.AppendState).
func replayStream(t *testing.T, sr *streamRecord, st store.Store) []byte {
	t.Helper()
	s := stream.New(sr.cfg, st)
	var out stream.Outcome
	for i, b := range sr.ops {
		op, err := stream.DecodeOp(b)
		if err != nil {
			t.Fatalf("operation %d: %v", i, err)
		}
		s.ApplyOp(op, &out)
	}
	return s.AppendState(nil)
}

// replayConsumer applies a consumer's recorded operations to the state
// it began from and returns its state (consumerState).
func replayConsumer(t *testing.T, cr *consumerRecord) []byte {
	t.Helper()
	if !cr.started {
		return nil
	}
	s := consumer.RestoreState(cr.policy, cr.initial)
	s.SetDeadLetter(cr.deadLetter)
	var out consumer.Outcome
	if cr.paused != 0 {
		s.ApplyOp(&consumer.Pause{Until: cr.paused}, &out)
	}
	for i, b := range cr.ops {
		op, err := consumer.DecodeOp(b)
		if err != nil {
			t.Fatalf("operation %d: %v", i, err)
		}
		s.ApplyOp(op, &out)
	}
	return consumerState(s)
}

// consumerState writes a consumer's stored state and pause as text, maps
// in key order (the pending list is sorted already).
func consumerState(s *consumer.State) []byte {
	st := s.Snapshot()
	var b bytes.Buffer
	fmt.Fprintf(&b, "delivered %+v ack_floor %+v paused %d\n", st.Delivered, st.AckFloor, s.PausedUntil())
	for _, p := range st.Pending {
		fmt.Fprintf(&b, "pending %d %+v\n", p.Stream, p.Pending)
	}
	for _, seq := range sortedKeys(st.Redelivered) {
		fmt.Fprintf(&b, "redelivered %d %d\n", seq, st.Redelivered[seq])
	}
	for _, seq := range sortedKeys(st.DeadLetter) {
		fmt.Fprintf(&b, "dead_letter %d %+v\n", seq, st.DeadLetter[seq])
	}
	return b.Bytes()
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// workload drives a server with a seeded random mix of what changes
// streams and consumers (consumer resets and counters included).
type workload struct {
	t      *testing.T
	rng    *rand.Rand
	js     *JetStream
	tr     *memTransport
	clk    *fakeClock
	mu     sync.Mutex
	msgs   []delivery // deliveries received, not yet answered
	nextID int
}

type delivery struct{ reply string }

func (w *workload) publish(subj string, hdr []byte, data string) {
	w.tr.Publish(subj, "_INBOX.acks", hdr, []byte(data))
}

// header builds a NATS header block from name, value pairs; nil when
// there are none.
func header(kv ...string) []byte {
	if len(kv) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("NATS/1.0\r\n")
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteString(kv[i] + ": " + kv[i+1] + "\r\n")
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}

func (w *workload) publishL() {
	subj := fmt.Sprintf("l.%c", 'a'+w.rng.IntN(5))
	var kv []string
	if w.rng.IntN(3) == 0 {
		kv = append(kv, "Nats-Msg-Id", fmt.Sprintf("id-%d", w.rng.IntN(40)))
	}
	switch w.rng.IntN(8) {
	case 0:
		kv = append(kv, "Nats-Expected-Last-Sequence", fmt.Sprint(w.rng.IntN(300)))
	case 1:
		kv = append(kv, "Nats-Expected-Last-Subject-Sequence", fmt.Sprint(w.rng.IntN(100)))
	case 2:
		kv = append(kv, "Nats-Rollup", "sub")
	case 3:
		kv = append(kv, "Nats-TTL", fmt.Sprintf("%ds", 1+w.rng.IntN(4)))
	case 4:
		kv = append(kv, "Nats-Expected-Last-Msg-Id", fmt.Sprintf("id-%d", w.rng.IntN(40)))
	}
	w.publish(subj, header(kv...), fmt.Sprint(w.rng.Int()))
}

// publishCounter increments a counter of C (ADR-49), now and then with
// an increment C refuses or one too large for a machine word.
func (w *workload) publishCounter() {
	incr := fmt.Sprint(w.rng.IntN(200) - 100)
	switch w.rng.IntN(10) {
	case 0:
		incr = "x"
	case 1:
		incr = "123456789012345678901234567890"
	}
	data := ""
	if w.rng.IntN(20) == 0 {
		data = "refused: a payload"
	}
	w.publish(fmt.Sprintf("c.%c", 'a'+w.rng.IntN(3)), header("Nats-Incr", incr), data)
}

// publishSchedule stores, replaces or stops a message schedule of SC
// (ADR-51), which the expiry passes of the clock steps fire.
func (w *workload) publishSchedule() {
	subj := fmt.Sprintf("sc.s%d", w.rng.IntN(4))
	target := fmt.Sprintf("sc.out.%d", w.rng.IntN(3))
	switch w.rng.IntN(6) {
	case 0:
		w.publish(subj, header("Nats-Schedule", fmt.Sprintf("@at %s", w.clk.now().Add(time.Duration(w.rng.IntN(3000))*time.Millisecond).UTC().Format(time.RFC3339)), "Nats-Schedule-Target", target), "once")
	case 1, 2:
		w.publish(subj, header("Nats-Schedule", fmt.Sprintf("@every %ds", 1+w.rng.IntN(3)), "Nats-Schedule-Target", target, "Nats-Schedule-TTL", "5s"), "every")
	case 3:
		w.publish(subj, header("Nats-Schedule", "*/2 * * * * *", "Nats-Schedule-Target", target, "Nats-Schedule-Source", "sc.src"), "cron")
	case 4:
		w.publish("sc.src", nil, fmt.Sprint(w.rng.Int()))
	case 5:
		w.publish("sc.cancel", header("Nats-Schedule-Next", "purge", "Nats-Scheduler", subj), "stop")
	}
}

// step runs one random action.
func (w *workload) step() {
	switch n := w.rng.IntN(100); {
	case n < 35:
		w.publishL()
	case n < 45:
		w.publish(fmt.Sprintf("i.%c", 'a'+w.rng.IntN(2)), nil, "i")
	case n < 55:
		w.publish("w.x", header("Nats-Msg-Id", fmt.Sprintf("w-%d", w.rng.IntN(100))), "w")
	case n < 58:
		req := store.PurgeRequest{}
		switch w.rng.IntN(3) {
		case 0:
			req.Subject = fmt.Sprintf("l.%c", 'a'+w.rng.IntN(5))
		case 1:
			req.Keep = uint64(w.rng.IntN(10))
		case 2:
			req.Seq = uint64(w.rng.IntN(200))
		}
		_, _ = w.js.Purge("L", req)
	case n < 61:
		_ = w.js.DeleteMsg("L", uint64(1+w.rng.IntN(200)))
	case n < 63:
		cfg := w.streamConfig("L")
		cfg.MaxMsgs = int64([]int{-1, 40, 80}[w.rng.IntN(3)])
		cfg.MaxAge = time.Duration([]int{0, 20, 60}[w.rng.IntN(3)]) * time.Second
		_, _ = w.js.UpdateStream(cfg)
	case n < 70:
		w.clk.advance(time.Duration(w.rng.IntN(3000)) * time.Millisecond)
		for _, name := range []string{"L", "SC"} {
			if r, err := w.js.lookup(name); err == nil {
				r.ExpireAt(w.clk.now().UnixNano())
			}
		}
	case n < 85:
		stream, name := []string{"L", "I", "I", "W"}[w.rng.IntN(4)], ""
		switch stream {
		case "L":
			name = "D"
		case "I":
			name = []string{"A", "B"}[w.rng.IntN(2)]
		case "W":
			name = "Q"
		}
		w.tr.Publish("$JS.API.CONSUMER.MSG.NEXT."+stream+"."+name, "_INBOX.pull", nil, []byte(fmt.Sprintf(`{"batch":%d,"expires":1000000000}`, 1+w.rng.IntN(5))))
	case n < 86:
		// A consumer reset (ADR-60): above the ack floor, or to a sequence.
		body := ""
		if w.rng.IntN(2) == 0 {
			body = fmt.Sprintf(`{"seq":%d}`, 1+w.rng.IntN(200))
		}
		target := []string{"L.D", "I.A", "W.Q"}[w.rng.IntN(3)]
		w.tr.Publish("$JS.API.CONSUMER.RESET."+target, "_INBOX.reset", nil, []byte(body))
	case n < 91:
		w.publishCounter()
	case n < 94:
		w.publishSchedule()
	default:
		w.answer()
	}
}

// answer acknowledges, naks, terminates or extends a delivery received.
func (w *workload) answer() {
	w.mu.Lock()
	if len(w.msgs) == 0 {
		w.mu.Unlock()
		return
	}
	i := w.rng.IntN(len(w.msgs))
	d := w.msgs[i]
	w.msgs = append(w.msgs[:i], w.msgs[i+1:]...)
	w.mu.Unlock()
	body := []string{"+ACK", "+ACK", "-NAK", `-NAK {"delay":500000000}`, "+TERM", "+WPI", "+ACK"}[w.rng.IntN(7)]
	w.tr.Publish(d.reply, "", nil, []byte(body))
}

func (w *workload) streamConfig(name string) stream.Config {
	r, err := w.js.lookup(name)
	if err != nil {
		w.t.Fatal(err)
	}
	return r.Config()
}

// TestDeterministicReplay runs the workload of a few seeds and compares
// each stream's and consumer's state on the server with its replays.
func TestDeterministicReplay(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runDeterminism(t, seed) })
	}
}

func runDeterminism(t *testing.T, seed uint64) {
	rec := newRecorder()
	tr := newMemTransport()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	js, err := New(Config{StoreDir: "/sd", FS: vfs.NewCrashFS(), ServerName: "s1", Now: clk.now, NewLog: rec.newLog, NewConsumerLog: rec.newConsumerLog}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Shutdown()
	w := &workload{t: t, rng: rand.New(rand.NewPCG(seed, 99)), js: js, tr: tr, clk: clk}
	_, _ = tr.Subscribe("_INBOX.pull", "", func(_, reply string, hdr, _ []byte) {
		if reply != "" {
			w.mu.Lock()
			w.msgs = append(w.msgs, delivery{reply: reply})
			w.mu.Unlock()
		}
	})
	for _, cfg := range []stream.Config{
		{Name: "L", Subjects: []string{"l.>"}, Storage: stream.FileStorage, DuplicateWindow: 2 * time.Second,
			MaxMsgsPerSubject: 5, MaxAge: 60 * time.Second, AllowRollup: true, AllowMsgTTL: true, SubjectDeleteMarkerTTL: 5 * time.Second},
		{Name: "I", Subjects: []string{"i.>"}, Storage: stream.FileStorage, Retention: stream.InterestPolicy},
		{Name: "W", Subjects: []string{"w.>"}, Storage: stream.FileStorage, Retention: stream.WorkQueuePolicy, DuplicateWindow: time.Minute},
		{Name: "M", Storage: stream.FileStorage, Mirror: &stream.Source{Name: "L"}},
		{Name: "S", Storage: stream.FileStorage, Sources: []*stream.Source{{Name: "W"}}},
		{Name: "C", Subjects: []string{"c.>"}, Storage: stream.FileStorage, AllowMsgCounter: true, MaxMsgsPerSubject: 3},
		{Name: "CA", Storage: stream.FileStorage, AllowMsgCounter: true, Sources: []*stream.Source{{Name: "C"}}},
		{Name: "SC", Subjects: []string{"sc.>"}, Storage: stream.FileStorage, AllowMsgSchedules: true, AllowMsgTTL: true, MaxMsgsPerSubject: 20},
	} {
		if _, err := js.AddStream(cfg); err != nil {
			t.Fatalf("create %s: %v", cfg.Name, err)
		}
	}
	for _, c := range []struct {
		stream string
		cfg    consumer.Config
	}{
		{"L", consumer.Config{Durable: "D", AckPolicy: consumer.AckExplicit, MaxDeliver: 3, AckWait: time.Second}},
		{"I", consumer.Config{Durable: "A", AckPolicy: consumer.AckExplicit, AckWait: 2 * time.Second}},
		{"I", consumer.Config{Durable: "B", FilterSubject: "i.b", AckPolicy: consumer.AckAll}},
		{"W", consumer.Config{Durable: "Q", AckPolicy: consumer.AckExplicit, AckWait: time.Second}},
	} {
		if _, err := js.CreateConsumer(c.stream, c.cfg, CreateOrUpdate, false); err != nil {
			t.Fatalf("create %s > %s: %v", c.stream, c.cfg.Durable, err)
		}
	}
	for range 1500 {
		w.step()
	}
	// The schedules of SC fired, so the replay covers FireSchedules.
	if sc, _ := js.lookup("SC"); sc != nil {
		if _, err := sc.Store().LoadLast("sc.out.>"); err != nil {
			t.Fatalf("no schedule of SC fired: %v", err)
		}
	}
	// The aggregate counter CA copies what C stores, so the replay covers
	// counters built from copies too.
	waitUntil(t, "CA to copy C's counters", func() bool {
		c, _ := js.lookup("C")
		ca, _ := js.lookup("CA")
		last, err := ca.Store().LoadLast(">")
		if err != nil {
			return false
		}
		_, seq, _, ok := stream.SourcedFrom(last.Header)
		return ok && seq == c.Store().State(false).LastSeq
	})

	live := freeze(t, js, rec)
	checkReplays(t, rec, live)
}

// freeze holds every stream's apply goroutine and every consumer's lock,
// so that no log moves, and returns the state of each stream and
// consumer by name, with a copy of the logs taken meanwhile.
func freeze(t *testing.T, js *JetStream, rec *recorder) map[string][]byte {
	t.Helper()
	js.mu.Lock()
	runners := make([]*streamEntry, 0, len(js.streams))
	for _, r := range js.streams {
		runners = append(runners, r)
	}
	js.mu.Unlock()
	var releases []func()
	defer func() {
		for _, f := range releases {
			f()
		}
	}()
	for _, r := range runners {
		releases = append(releases, holdApply(r))
	}
	live := map[string][]byte{}
	for _, r := range runners {
		live[r.Name()] = r.AppendState(nil)
		for _, c := range r.cons.list() {
			st, release := c.Hold()
			live[r.Name()+" > "+c.Name()] = consumerState(st)
			releases = append(releases, release)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for name, sr := range rec.streams {
		rec.streams[name] = &streamRecord{cfg: sr.cfg, ops: slices.Clone(sr.ops)}
	}
	for name, cr := range rec.consumers {
		c := *cr
		c.ops = slices.Clone(cr.ops)
		rec.consumers[name] = &c
	}
	return live
}

// checkReplays replays every recorded log and compares it with the live
// state.
func checkReplays(t *testing.T, rec *recorder, live map[string][]byte) {
	t.Helper()
	var ops int
	for name, sr := range rec.streams {
		ops += len(sr.ops)
		sc := sr.cfg.StoreConfig()
		sc.MemSizes = false // count as the file store does
		fs, err := filestore.Open(filestore.Config{Dir: path.Join("/replay", name), FS: vfs.NewCrashFS()}, sc)
		if err != nil {
			t.Fatal(err)
		}
		states := map[string][]byte{
			"memory store, first replay":  replayStream(t, sr, memstore.New(sc)),
			"memory store, second replay": replayStream(t, sr, memstore.New(sc)),
			"file store replay":           replayStream(t, sr, fs),
		}
		_ = fs.Close()
		for how, got := range states {
			if !bytes.Equal(got, live[name]) {
				t.Errorf("stream %s, %s after %d operations differs from the server's:\n%s", name, how, len(sr.ops), diffLines(live[name], got))
			}
		}
	}
	var resets int
	for name, cr := range rec.consumers {
		ops += len(cr.ops)
		for _, b := range cr.ops {
			if consumer.OpKind(b[0]) == consumer.KindReset {
				resets++
			}
		}
		for i := range 2 {
			if got := replayConsumer(t, cr); cr.started && !bytes.Equal(got, live[name]) {
				t.Errorf("consumer %s, replay %d after %d operations differs from the server's:\n%s", name, i+1, len(cr.ops), diffLines(live[name], got))
			}
		}
	}
	t.Logf("%d streams, %d consumers, %d operations replayed (%d consumer resets)", len(rec.streams), len(rec.consumers), ops, resets)
}

// diffLines shows the first lines where want and got differ.
func diffLines(want, got []byte) string {
	a, b := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n server: %s\n replay: %s", i+1, x, y)
		}
	}
	return "(equal lines)"
}
