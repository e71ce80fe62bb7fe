package test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Message schedules (ADR-51; nats-server v2.15.2 allow_msg_schedules,
// Nats-Schedule), through nats.go and `nats pub --schedule-*`. The
// schedules fire on the server's clock, so the tests wait for the
// produced messages with deadlines; the engine's tests drive the same
// code with an injected clock (internal/jetstream/schedule_test.go).

// schedMsg returns a schedule publish on subj with the header fields
// given as name, value pairs.
func schedMsg(subj, data string, kv ...string) *nats.Msg {
	m := nats.NewMsg(subj)
	for i := 0; i+1 < len(kv); i += 2 {
		m.Header.Set(kv[i], kv[i+1])
	}
	m.Data = []byte(data)
	return m
}

// waitLast waits until subj of s holds a message and returns the last.
func waitLast(t *testing.T, s jetstream.Stream, subj string) *jetstream.RawStreamMsg {
	t.Helper()
	var m *jetstream.RawStreamMsg
	waitFor(t, 10*time.Second, "a message on "+subj, func() bool {
		var err error
		m, err = s.GetLastMsgForSubject(tctx(t), subj)
		return err == nil
	})
	return m
}

// A delayed message (@at) is published to its target once, with
// Nats-Scheduler and "Nats-Schedule-Next: purge", and the schedule is
// gone; a repeating one (@every) keeps producing, each message naming
// the next time, until a client stops it with the purge.
func TestScheduleDelayedAndRepeating(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	s := createStream(t, js, jetstream.StreamConfig{Name: "SCH", Subjects: []string{"sch.>", "orders.>"}, AllowMsgSchedules: true, AllowMsgTTL: true})
	info := streamInfo(t, s)
	if !info.Config.AllowMsgSchedules || !info.Config.AllowRollup || info.Config.Metadata["_nats.req.level"] != "2" {
		t.Fatalf("config %+v", info.Config)
	}
	at := time.Now().Add(time.Second).UTC().Format(time.RFC3339)
	wantAck(t, jsPublishMsg(t, js, schedMsg("sch.once", "later", "Nats-Schedule", "@at "+at, "Nats-Schedule-Target", "orders.once", "X-Keep", "1")), "SCH", 1, false)
	m, err := s.GetMsg(tctx(t), 1)
	if err != nil || m.Header.Get("Nats-Rollup") != "sub" {
		t.Fatalf("stored schedule %+v %v", m, err)
	}
	got := waitLast(t, s, "orders.once")
	if string(got.Data) != "later" || got.Header.Get("Nats-Scheduler") != "sch.once" || got.Header.Get("Nats-Schedule-Next") != "purge" ||
		got.Header.Get("X-Keep") != "1" || got.Header.Get("Nats-Schedule") != "" {
		t.Errorf("delayed message %v %q", got.Header, got.Data)
	}
	waitFor(t, 10*time.Second, "the fired @at schedule to go", func() bool {
		_, err := s.GetLastMsgForSubject(tctx(t), "sch.once")
		return err != nil
	})

	jsPublishMsg(t, js, schedMsg("sch.tick", "tick", "Nats-Schedule", "@every 1s", "Nats-Schedule-Target", "orders.tick", "Nats-Schedule-TTL", "1m"))
	first := waitLast(t, s, "orders.tick")
	next, err := time.Parse(time.RFC3339Nano, first.Header.Get("Nats-Schedule-Next"))
	if err != nil || first.Header.Get("Nats-TTL") != "1m" {
		t.Fatalf("repeating message %v (%v)", first.Header, err)
	}
	waitFor(t, 10*time.Second, "a second tick", func() bool {
		m, err := s.GetLastMsgForSubject(tctx(t), "orders.tick")
		return err == nil && m.Sequence > first.Sequence
	})
	if second := waitLast(t, s, "orders.tick"); !second.Time.After(next.Add(-time.Second)) {
		t.Errorf("second tick at %v, the first said %v", second.Time, next)
	}
	// Stop it with a message on another subject, in the same publish:
	// the schedule's message goes, and with it the schedule.
	jsPublishMsg(t, js, schedMsg("sch.stopped", "stopped", "Nats-Schedule-Next", "purge", "Nats-Scheduler", "sch.tick"))
	if _, err := s.GetLastMsgForSubject(tctx(t), "sch.tick"); err == nil {
		t.Fatal("the schedule is still stored after its purge")
	}
}

// Publishes nats-server refuses, with its errors.
func TestScheduleRefused(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	createStream(t, js, jetstream.StreamConfig{Name: "SCH", Subjects: []string{"sch.>", "orders.>"}, AllowMsgSchedules: true})
	createStream(t, js, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.>"}})
	for _, tc := range []struct {
		msg     *nats.Msg
		errCode uint16
		desc    string
	}{
		{schedMsg("plain.a", "", "Nats-Schedule", "@every 1s", "Nats-Schedule-Target", "plain.b"), 10188, "message schedules is disabled"},
		{schedMsg("sch.a", "", "Nats-Schedule", "@every 10ms", "Nats-Schedule-Target", "orders.a"), 10189, "message schedules pattern is invalid"},
		{schedMsg("sch.a", "", "Nats-Schedule", "0 0 * * * *", "Nats-Schedule-Target", "orders.a", "Nats-Schedule-Time-Zone", "Mars/Olympus"), 10223, "message schedules time zone is invalid"},
		{schedMsg("sch.a", "", "Nats-Schedule", "@hourly", "Nats-Schedule-Target", "elsewhere"), 10190, "message schedules target is invalid"},
		{schedMsg("sch.a", "", "Nats-Schedule", "@hourly", "Nats-Schedule-Target", "orders.a", "Nats-Schedule-TTL", "5m"), 10166, "per-message TTL is disabled"},
		{schedMsg("sch.a", "", "Nats-Schedule", "@hourly", "Nats-Schedule-Target", "orders.a", "Nats-Schedule-Source", "orders.*"), 10203, "message schedules source is invalid"},
		{schedMsg("sch.a", "", "Nats-Schedule-Next", "purge", "Nats-Scheduler", "sch.a"), 10212, "message schedules invalid scheduler"},
	} {
		_, err := js.PublishMsg(tctx(t), tc.msg)
		wantAPIError(t, err, 400, tc.errCode, tc.desc)
	}
	_, err := js.CreateStream(tctx(t), jetstream.StreamConfig{Name: "DN", Subjects: []string{"dn"}, AllowMsgSchedules: true, Discard: jetstream.DiscardNew})
	wantAPIError(t, err, 500, 10052, "message scheduling cannot use discard new")
	_, err = js.UpdateStream(tctx(t), jetstream.StreamConfig{Name: "SCH", Subjects: []string{"sch.>", "orders.>"}})
	wantAPIError(t, err, 500, 10052, "message schedules can not be disabled")
}

// A schedule reading a source subject publishes that subject's last
// message (subject sampling), or its own body while the source is empty;
// a cron schedule fires on its seconds.
func TestScheduleSourceAndCron(t *testing.T) {
	_, js := jsConnect(t, startJS(t))
	s := createStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"sensor.>", "sample.>", "sch.>"}, AllowMsgSchedules: true})
	jsPublishMsg(t, js, schedMsg("sch.sample", "none yet", "Nats-Schedule", "* * * * * *", "Nats-Schedule-Target", "sample.temp", "Nats-Schedule-Source", "sensor.temp"))
	if m := waitLast(t, s, "sample.temp"); string(m.Data) != "none yet" {
		t.Fatalf("sample of an empty source %q", m.Data)
	}
	jsPublishMsg(t, js, schedMsg("sensor.temp", "21.5", "X-Unit", "C"))
	waitFor(t, 10*time.Second, "a sample of the reading", func() bool {
		m, err := s.GetLastMsgForSubject(tctx(t), "sample.temp")
		return err == nil && string(m.Data) == "21.5" && m.Header.Get("X-Unit") == "C" && m.Header.Get("Nats-Scheduler") == "sch.sample"
	})
	m := waitLast(t, s, "sample.temp")
	next, err := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Schedule-Next"))
	if err != nil || next.Nanosecond() != 0 {
		t.Errorf("cron Nats-Schedule-Next %q: want a whole second (%v)", m.Header.Get("Nats-Schedule-Next"), err)
	}
}

// nats pub --schedule-* (natscli v0.5.0) and nats stream add
// --allow-schedules.
func TestScheduleCLI(t *testing.T) {
	u := startJS(t)
	runCLI(t, u, "stream", "add", "SCH", "--subjects", "sch.>", "--subjects", "orders.>", "--allow-schedules", "--allow-msg-ttl", "--defaults")
	_, js := jsConnect(t, u)
	s, err := js.Stream(tctx(t), "SCH")
	if err != nil {
		t.Fatal(err)
	}
	if !streamInfo(t, s).Config.AllowMsgSchedules {
		t.Fatal("--allow-schedules did not set allow_msg_schedules")
	}
	runCLI(t, u, "pub", "sch.cli", "from the cli", "--schedule-after", "1s", "--schedule-dest", "orders.cli", "--schedule-ttl", "1m")
	m := waitLast(t, s, "orders.cli")
	if string(m.Data) != "from the cli" || m.Header.Get("Nats-TTL") != "1m0s" || !strings.HasPrefix(m.Header.Get("Nats-Schedule-Next"), "purge") {
		t.Errorf("produced %v %q", m.Header, m.Data)
	}
}
