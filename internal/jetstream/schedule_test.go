package jetstream

import (
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// Message schedules (ADR-51) on the engine, with an injected clock: the
// expiry pass fires what is due at the clock's time (FireSchedules), the
// next pass is set for the next schedule, and a restart finds the
// schedules again.

func scheduleStream(storage stream.StorageType) stream.Config {
	return stream.Config{Name: "SCH", Subjects: []string{"sch.>", "orders.>"}, Storage: storage, AllowMsgSchedules: true, AllowMsgTTL: true}
}

// lastData returns the header and payload of the last message on subj of
// stream name, "" when there is none.
func lastData(t *testing.T, js *JetStream, name, subj string) string {
	t.Helper()
	r, jerr := js.lookup(name)
	if jerr != nil {
		t.Fatal(jerr)
	}
	m, err := r.Store().LoadLast(subj)
	if err != nil {
		return ""
	}
	return string(m.Header) + "|" + string(m.Data)
}

func TestScheduleEveryWithClock(t *testing.T) {
	js, tr, clk := clockedJS(t)
	if _, err := js.AddStream(scheduleStream(stream.FileStorage)); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.s")
	start := clk.now() // a whole second
	tr.Publish("sch.tick", "_INBOX.s", []byte("NATS/1.0\r\nNats-Schedule: @every 5s\r\nNats-Schedule-Target: orders.tick\r\nNats-Schedule-TTL: 1m\r\n\r\n"), []byte("tick"))
	if got := acks.next(t); got != `{"stream":"SCH","seq":1}` {
		t.Fatalf("schedule PubAck %s", got)
	}
	// The pass before it is due fires nothing and is set for it.
	clk.advance(4 * time.Second)
	if wait := passAt(t, js, clk, "SCH"); wait != time.Second {
		t.Fatalf("next pass in %v, want 1s (the schedule)", wait)
	}
	if got := lastData(t, js, "SCH", "orders.tick"); got != "" {
		t.Fatalf("fired early: %q", got)
	}
	clk.advance(time.Second)
	passAt(t, js, clk, "SCH")
	want := "NATS/1.0\r\nNats-Scheduler: sch.tick\r\nNats-Schedule-Next: " + start.Add(10*time.Second).UTC().Format(time.RFC3339Nano) + "\r\nNats-TTL: 1m\r\n\r\n|tick"
	if got := lastData(t, js, "SCH", "orders.tick"); got != want {
		t.Fatalf("produced\n %q\nwant\n %q", got, want)
	}
	info, _ := js.StreamInfo("SCH", InfoOptions{})
	if info.State.Msgs != 2 {
		t.Fatalf("%d messages, want the schedule and one produced", info.State.Msgs)
	}
}

// A schedule missed while the server was down fires once at the start,
// then keeps its cadence from there; one not yet due waits.
func TestScheduleAcrossRestart(t *testing.T) {
	fs, clk := vfs.NewCrashFS(), &fakeClock{t: time.Unix(1_800_000_000, 0)}
	open := func() (*JetStream, *memTransport) {
		tr := newMemTransport()
		js, err := New(Config{StoreDir: "/sd", FS: fs, ServerName: "s1", Now: clk.now}, tr)
		if err != nil {
			t.Fatal(err)
		}
		return js, tr
	}
	js, tr := open()
	if _, err := js.AddStream(scheduleStream(stream.FileStorage)); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.s")
	tr.Publish("sch.min", "_INBOX.s", []byte("NATS/1.0\r\nNats-Schedule: 0 * * * * *\r\nNats-Schedule-Target: orders.min\r\n\r\n"), nil)
	tr.Publish("sch.later", "_INBOX.s", []byte("NATS/1.0\r\nNats-Schedule: @at 2030-01-01T00:00:00Z\r\nNats-Schedule-Target: orders.later\r\n\r\n"), nil)
	acks.next(t)
	acks.next(t)
	js.Shutdown()

	clk.advance(10 * time.Minute)
	js2, _ := open()
	defer js2.Shutdown()
	got := lastData(t, js2, "SCH", "orders.min")
	next := time.Unix(1_800_000_000, 0).Add(10 * time.Minute).Truncate(time.Minute).Add(time.Minute).UTC()
	if !strings.Contains(got, "Nats-Schedule-Next: "+next.Format(time.RFC3339Nano)+"\r\n") {
		t.Fatalf("the missed minute at the start: %q, want it to name %v next", got, next)
	}
	info, _ := js2.StreamInfo("SCH", InfoOptions{})
	if info.State.Msgs != 3 {
		t.Fatalf("%d messages after the start, want the two schedules and one produced", info.State.Msgs)
	}
	if got := lastData(t, js2, "SCH", "orders.later"); got != "" {
		t.Fatalf("the @at schedule not yet due fired: %q", got)
	}
}
