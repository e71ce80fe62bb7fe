package stream

import (
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
)

// scheduleCfg is the stream the schedule scripts ran on in nats-server
// v2.15.2.
const scheduleCfg = `{"name":"SCH","subjects":["sch.>","orders.>"],"allow_msg_schedules":true,"allow_msg_ttl":true}`

// scriptSchedules: the answers nats-server v2.15.2 gave to these
// publishes on scheduleCfg (ADR-51).
var scriptSchedules = []pubStep{
	{"sch.b", "Nats-Schedule:garbage|Nats-Schedule-Target:orders.b", "x", `{"error":{"code":400,"err_code":10189,"description":"message schedules pattern is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@every 500ms|Nats-Schedule-Target:orders.b", "x", `{"error":{"code":400,"err_code":10189,"description":"message schedules pattern is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@every 1s", "x", `{"error":{"code":400,"err_code":10190,"description":"message schedules target is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@every 1s|Nats-Schedule-Target:sch.b", "x", `{"error":{"code":400,"err_code":10190,"description":"message schedules target is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@every 1s|Nats-Schedule-Target:other.b", "x", `{"error":{"code":400,"err_code":10190,"description":"message schedules target is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@every 1s|Nats-Schedule-Target:orders.*", "x", `{"error":{"code":400,"err_code":10190,"description":"message schedules target is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@every 1s|Nats-Schedule-Target:orders.b|Nats-Schedule-TTL:500ms", "x", `{"error":{"code":400,"err_code":10191,"description":"message schedules invalid per-message TTL"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@every 1s|Nats-Schedule-Target:orders.b|Nats-Schedule-Rollup:all", "x", `{"error":{"code":400,"err_code":10192,"description":"message schedules invalid rollup"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@every 1s|Nats-Schedule-Target:orders.b|Nats-Rollup:all", "x", `{"error":{"code":400,"err_code":10192,"description":"message schedules invalid rollup"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@every 1s|Nats-Schedule-Target:orders.b|Nats-Schedule-Source:orders.b", "x", `{"error":{"code":400,"err_code":10203,"description":"message schedules source is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@every 1s|Nats-Schedule-Target:orders.b|Nats-Schedule-Source:sch.b", "x", `{"error":{"code":400,"err_code":10203,"description":"message schedules source is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@every 1s|Nats-Schedule-Target:orders.b|Nats-Schedule-Source:other.x", "x", `{"error":{"code":400,"err_code":10203,"description":"message schedules source is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@every 1s|Nats-Schedule-Target:orders.b|Nats-Schedule-Source:orders.>", "x", `{"error":{"code":400,"err_code":10203,"description":"message schedules source is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@every 1s|Nats-Schedule-Target:orders.b|Nats-Schedule-Time-Zone:UTC", "x", `{"error":{"code":400,"err_code":10189,"description":"message schedules pattern is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@at 2020-01-01T00:00:00Z|Nats-Schedule-Target:orders.b|Nats-Schedule-Time-Zone:Europe/Amsterdam", "x", `{"error":{"code":400,"err_code":10189,"description":"message schedules pattern is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:0 0 * * * *|Nats-Schedule-Target:orders.b|Nats-Schedule-Time-Zone:Nowhere/Land", "x", `{"error":{"code":400,"err_code":10223,"description":"message schedules time zone is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:0 0 * * * *|Nats-Schedule-Target:orders.b|Nats-Schedule-Time-Zone:", "x", `{"error":{"code":400,"err_code":10223,"description":"message schedules time zone is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule-Time-Zone:Nowhere/Land", "x", `{"error":{"code":400,"err_code":10223,"description":"message schedules time zone is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:0 0 * * *|Nats-Schedule-Target:orders.b", "x", `{"error":{"code":400,"err_code":10189,"description":"message schedules pattern is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:0 0 0 30 2 *|Nats-Schedule-Target:orders.b", "x", `{"error":{"code":400,"err_code":10189,"description":"message schedules pattern is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:61 0 * * * *|Nats-Schedule-Target:orders.b", "x", `{"error":{"code":400,"err_code":10189,"description":"message schedules pattern is invalid"},"stream":"SCH","seq":0}`},
	{"sch.b", "Nats-Schedule:@yearly|Nats-Schedule-Target:orders.b|Nats-Schedule-Time-Zone:Europe/Amsterdam", "x", `{"stream":"SCH","seq":1}`},
	{"sch.c", "Nats-Schedule-Next:purge", "x", `{"error":{"code":400,"err_code":10212,"description":"message schedules invalid scheduler"},"stream":"SCH","seq":0}`},
	{"sch.c", "Nats-Schedule-Next:soon|Nats-Scheduler:sch.b", "x", `{"error":{"code":400,"err_code":10212,"description":"message schedules invalid scheduler"},"stream":"SCH","seq":0}`},
	{"sch.c", "Nats-Schedule-Next:purge|Nats-Scheduler:sch.c", "x", `{"error":{"code":400,"err_code":10212,"description":"message schedules invalid scheduler"},"stream":"SCH","seq":0}`},
	{"sch.c", "Nats-Schedule-Next:purge|Nats-Scheduler:orders.zz", "x", `{"stream":"SCH","seq":2}`},
	{"sch.c", "Nats-Scheduler:orders.zz", "x", `{"error":{"code":400,"err_code":10212,"description":"message schedules invalid scheduler"},"stream":"SCH","seq":0}`},
	{"sch.c", "Nats-Schedule-Next:purge|Nats-Scheduler:sch.b", "x", `{"stream":"SCH","seq":3}`},
	{"sch.d", "Nats-Schedule:@at 0001-01-01T00:00:00Z|Nats-Schedule-Target:orders.b", "x", `{"stream":"SCH","seq":4}`},
	{"sch.e", "Nats-Schedule:@at 2999-01-01T00:00:00+02:00|Nats-Schedule-Target:orders.e|Nats-Rollup:SUB", "x", `{"stream":"SCH","seq":5}`},
	{"sch.f", "Nats-Schedule:@every 1s|Nats-Schedule-Target:orders.f|Nats-Schedule-TTL:1", "x", `{"stream":"SCH","seq":6}`},
	{"sch.c", "Nats-Schedule-Next:purge|Nats-Scheduler:sch.g", "x", `{"stream":"SCH","seq":7}`},
	{"sch.g", "", "plain", `{"stream":"SCH","seq":8}`},
	{"sch.c", "Nats-Schedule-Next:purge|Nats-Scheduler:sch.g", "x", `{"error":{"code":400,"err_code":10212,"description":"message schedules invalid scheduler"},"stream":"SCH","seq":0}`},
}

func TestScheduleScripts(t *testing.T) {
	s := newTestStream(t, scheduleCfg)
	runScript(t, s, scriptSchedules)
	// A schedule is stored with "Nats-Rollup: sub" added; one with its
	// own (any case) keeps it; the zero @at time is no schedule.
	for _, tc := range []struct {
		subj, hdr string
		sched     bool
	}{
		{"sch.b", "NATS/1.0\r\nNats-Schedule: @yearly\r\nNats-Schedule-Target: orders.b\r\nNats-Schedule-Time-Zone: Europe/Amsterdam\r\nNats-Rollup: sub\r\n\r\n", false}, // purged by seq 3
		{"sch.d", "NATS/1.0\r\nNats-Schedule: @at 0001-01-01T00:00:00Z\r\nNats-Schedule-Target: orders.b\r\n\r\n", false},
		{"sch.e", "NATS/1.0\r\nNats-Schedule: @at 2999-01-01T00:00:00+02:00\r\nNats-Schedule-Target: orders.e\r\nNats-Rollup: SUB\r\n\r\n", true},
		{"sch.f", "NATS/1.0\r\nNats-Schedule: @every 1s\r\nNats-Schedule-Target: orders.f\r\nNats-Schedule-TTL: 1\r\nNats-Rollup: sub\r\n\r\n", true},
	} {
		m, err := s.store.LoadLast(tc.subj)
		if tc.subj == "sch.b" {
			if err == nil {
				t.Errorf("sch.b after its purge: %q", m.Header)
			}
			continue
		}
		if err != nil || string(m.Header) != tc.hdr {
			t.Errorf("%s stored %q (%v), want %q", tc.subj, m.Header, err, tc.hdr)
		}
		if _, ok := s.sched.bySubj[tc.subj]; ok != tc.sched {
			t.Errorf("%s in the schedule table: %v, want %v", tc.subj, ok, tc.sched)
		}
	}
}

// firing applies a FireSchedules at ts and returns its outcome.
func firing(s *Stream, ts int64) Outcome {
	var out Outcome
	s.ApplyOp(&FireSchedules{Time: ts}, &out)
	return out
}

// lastOn loads the last message on subj.
func lastOn(t *testing.T, s *Stream, subj string) *store.StoredMsg {
	t.Helper()
	m, err := s.store.LoadLast(subj)
	if err != nil {
		t.Fatalf("last %s: %v", subj, err)
	}
	return m
}

func mustTime(t *testing.T, v string) int64 {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixNano()
}

// TestScheduleFire replays what nats-server v2.15.2 stored for an @at
// schedule in the past, an @every schedule with a TTL, a rollup and
// headers to drop, a cron schedule in New York, and schedules reading
// their source subject (with and without a message there).
func TestScheduleFire(t *testing.T) {
	s := newTestStream(t, `{"name":"SCX","subjects":["sch.>","scx.>","out.>","src.>","orders.>"],"allow_msg_schedules":true,"allow_msg_ttl":true}`)
	t1 := mustTime(t, "2026-12-03T06:46:09.860481049Z")
	pub := func(subj, hdr, data string) Result {
		t.Helper()
		r := s.Apply(Entry{Subject: subj, Header: []byte(hdr), Data: []byte(data), Time: t1})
		if r.Err != nil {
			t.Fatalf("%s: %v", subj, r.Err)
		}
		return r
	}
	pub("src.a", "NATS/1.0\r\nX-Src: 1\r\nNats-Msg-Id: m1\r\n\r\n", "srcdata")
	at := pub("sch.a", "NATS/1.0\r\nNats-Schedule: @at 2020-01-01T00:00:00Z\r\nNats-Schedule-Target: orders.a\r\n\r\n", "body")
	every := pub("scx.a", "NATS/1.0\r\nNats-Schedule: @every 1s\r\nNats-Schedule-Target: out.a\r\nNats-Schedule-TTL: 5m\r\nNats-Schedule-Rollup: sub\r\nX-Keep: yes\r\nNats-Msg-Id: s1\r\nNats-TTL: 1h\r\nNats-Expected-Stream: SCX\r\n\r\n", "every")
	pub("scx.c", "NATS/1.0\r\nNats-Schedule: */2 * * * * *\r\nNats-Schedule-Target: out.c\r\nNats-Schedule-Time-Zone: America/New_York\r\n\r\n", "cron")
	pub("scx.s", "NATS/1.0\r\nNats-Schedule: @every 1s\r\nNats-Schedule-Target: out.s\r\nNats-Schedule-Source: src.a\r\n\r\n", "fallback")
	pub("scx.n", "NATS/1.0\r\nNats-Schedule: @every 1s\r\nNats-Schedule-Target: out.n\r\nNats-Schedule-Source: src.none\r\n\r\n", "fallback")
	if want := mustTime(t, "2020-01-01T00:00:00Z"); at.Expires != want {
		t.Errorf("@at schedule due %d, want %d", at.Expires, want)
	}
	if want := mustTime(t, "2026-12-03T06:46:11Z"); every.Expires != want {
		t.Errorf("@every schedule due %v, want %v (its time rounded, plus 1s)", time.Unix(0, every.Expires).UTC(), time.Unix(0, want).UTC())
	}
	if next, _ := s.NextSchedule(); next != mustTime(t, "2020-01-01T00:00:00Z") {
		t.Errorf("next schedule %v", time.Unix(0, next).UTC())
	}

	// Nothing is due before 06:46:10 but the @at one.
	out := firing(s, mustTime(t, "2026-12-03T06:46:09.9Z"))
	if len(out.Results) != 1 || out.Results[0].Err != nil {
		t.Fatalf("first pass: %+v", out.Results)
	}
	m := lastOn(t, s, "orders.a")
	if string(m.Header) != "NATS/1.0\r\nNats-Scheduler: sch.a\r\nNats-Schedule-Next: purge\r\n\r\n" || string(m.Data) != "body" {
		t.Errorf("@at produced %q %q", m.Header, m.Data)
	}
	if _, err := s.store.LoadLast("sch.a"); err == nil {
		t.Error("the @at schedule is still stored after it fired")
	}
	if r := out.Results[0]; r.SchedulerPurge == nil || r.SchedulerPurge.Subject != "sch.a" || r.SchedulerPurged != 1 {
		t.Errorf("@at produced message's purge %+v %d", r.SchedulerPurge, r.SchedulerPurged)
	}
	if want := mustTime(t, "2026-12-03T06:46:10Z"); out.Next != want {
		t.Errorf("next after the first pass %v, want %v", time.Unix(0, out.Next).UTC(), time.Unix(0, want).UTC())
	}

	// 06:46:12: the cron one (even seconds, due 10) and the three @every
	// ones (due 11) fire, in the order of their sequences.
	out = firing(s, mustTime(t, "2026-12-03T06:46:12.001352523Z"))
	if len(out.Results) != 4 {
		t.Fatalf("second pass: %d results", len(out.Results))
	}
	for subj, want := range map[string]string{
		"out.a": "NATS/1.0\r\nX-Keep: yes\r\nNats-Scheduler: scx.a\r\nNats-Schedule-Next: 2026-12-03T06:46:13Z\r\nNats-TTL: 5m\r\nNats-Rollup: sub\r\n\r\n|every",
		"out.c": "NATS/1.0\r\nNats-Scheduler: scx.c\r\nNats-Schedule-Next: 2026-12-03T01:46:14-05:00\r\n\r\n|cron",
		"out.s": "NATS/1.0\r\nX-Src: 1\r\nNats-Scheduler: scx.s\r\nNats-Schedule-Next: 2026-12-03T06:46:13Z\r\n\r\n|srcdata",
		"out.n": "NATS/1.0\r\nNats-Scheduler: scx.n\r\nNats-Schedule-Next: 2026-12-03T06:46:13Z\r\n\r\n|fallback",
	} {
		m := lastOn(t, s, subj)
		if got := string(m.Header) + "|" + string(m.Data); got != want {
			t.Errorf("%s produced\n %q\nwant\n %q", subj, got, want)
		}
		if m.Time != mustTime(t, "2026-12-03T06:46:12.001352523Z") {
			t.Errorf("%s stamped %d", subj, m.Time)
		}
	}
	if want := mustTime(t, "2026-12-03T06:46:13Z"); out.Next != want {
		t.Errorf("next after the second pass %v", time.Unix(0, out.Next).UTC())
	}
	if got := lastOn(t, s, "out.a"); store.MsgTTL(got.Header) != 300 {
		t.Errorf("out.a TTL %d, want 300 s", store.MsgTTL(got.Header))
	}

	// Missed while down: a pass long after fires each once, then moves on
	// from the pass.
	late := mustTime(t, "2026-12-03T08:00:00.2Z")
	if out = firing(s, late); len(out.Results) != 4 {
		t.Fatalf("late pass: %d results", len(out.Results))
	}
	if got := string(lastOn(t, s, "out.a").Header); !strings.Contains(got, "Nats-Schedule-Next: 2026-12-03T08:00:01Z\r\n") {
		t.Errorf("after a late pass out.a says %q", got)
	}
	if out = firing(s, late); len(out.Results) != 0 {
		t.Errorf("a second pass at the same time fired %d", len(out.Results))
	}
}

// TestScheduleStop: a schedule stops when a plain message replaces it,
// when its message is deleted, and when a client publishes the purge.
func TestScheduleStop(t *testing.T) {
	s := newTestStream(t, scheduleCfg)
	every := func(subj string) {
		t.Helper()
		if r := s.Apply(Entry{Subject: subj, Header: hdrBlock("Nats-Schedule:@every 1s|Nats-Schedule-Target:orders.x"), Time: t0}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	every("sch.a")
	every("sch.b")
	every("sch.c")
	if r := s.Apply(Entry{Subject: "sch.a", Data: []byte("plain"), Time: t0}); r.Err != nil {
		t.Fatal(r.Err)
	}
	var out Outcome
	s.ApplyOp(&DeleteMsg{Seq: 2}, &out)
	if r := s.Apply(Entry{Subject: "orders.x", Header: hdrBlock("Nats-Schedule-Next:purge|Nats-Scheduler:sch.c"), Data: []byte("early"), Time: t0}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if out = firing(s, t0+int64(time.Hour)); len(out.Results) != 0 {
		t.Errorf("stopped schedules fired %d messages", len(out.Results))
	}
	if _, ok := s.NextSchedule(); ok || len(s.sched.bySubj) != 0 {
		t.Errorf("schedules left: %v", s.sched.bySubj)
	}
}

// TestScheduleRebuild: a restart finds the schedules again, each due
// when the last message it produced says.
func TestScheduleRebuild(t *testing.T) {
	c := mustConfig(t, scheduleCfg)
	st := newMemStore(t, c)
	s := New(c, st)
	s.Apply(Entry{Subject: "sch.a", Header: hdrBlock("Nats-Schedule:@every 10s|Nats-Schedule-Target:orders.a"), Time: t0})
	s.Apply(Entry{Subject: "sch.b", Header: hdrBlock("Nats-Schedule:@at 2999-01-01T00:00:00Z|Nats-Schedule-Target:orders.b"), Time: t0})
	firing(s, t0+int64(10*time.Second))
	want := string(s.AppendState(nil))
	r := New(c, st)
	if err := r.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if got := string(r.AppendState(nil)); got != want {
		t.Errorf("after a rebuild:\n%s\nwant\n%s", got, want)
	}
	if next, _ := r.NextSchedule(); next != t0+int64(20*time.Second) {
		t.Errorf("next %d, want %d", next, t0+int64(20*time.Second))
	}
}

// TestScheduleTurnedOn: an update that turns schedules on finds those
// stored before.
func TestScheduleTurnedOn(t *testing.T) {
	s := newTestStream(t, `{"name":"SC8","subjects":["sc8.>"]}`)
	// Without schedules the publish is refused; a copy from a source is
	// stored as it is.
	hdr := hdrBlock("Nats-Schedule:@every 1s|Nats-Schedule-Target:sc8.out")
	if r := s.Apply(Entry{Subject: "sc8.a", Header: hdr, Time: t0}); r.Err == nil || r.Err.ErrCode != 10188 {
		t.Fatalf("schedule without allow_msg_schedules: %+v", r)
	}
	if r := s.Apply(Entry{Subject: "sc8.a", Header: hdr, Time: t0, Sourced: true}); r.Err != nil {
		t.Fatal(r.Err)
	}
	c := mustConfig(t, `{"name":"SC8","subjects":["sc8.>"],"allow_msg_schedules":true}`)
	var out Outcome
	s.ApplyOp(&UpdateConfig{Config: c}, &out)
	if next, ok := s.NextSchedule(); !ok || next != t0+int64(time.Second) {
		t.Fatalf("after turning schedules on: %d %v", next, ok)
	}
}

// TestCron checks next times against crontab(5)'s rules as nats-server
// v2.15.2 applies them.
func TestCron(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	for _, tc := range []struct {
		pattern, from, want string
		loc                 *time.Location
	}{
		{"0 0 0 1 1 *", "2026-12-03T06:46:00Z", "2027-01-01T00:00:00Z", nil},
		{"*/2 * * * * *", "2026-12-03T06:46:09.86Z", "2026-12-03T06:46:10Z", nil},
		{"*/2 * * * * *", "2026-12-03T06:46:10Z", "2026-12-03T06:46:12Z", nil},
		{"30 4 1,15 * 5", "2026-12-03T00:00:00Z", "", nil}, // five fields
		{"0 30 4 1,15 * fri", "2026-12-03T00:00:00Z", "2026-12-04T04:30:00Z", nil},
		{"0 30 4 1,15 * *", "2026-12-03T00:00:00Z", "2026-12-15T04:30:00Z", nil},
		{"0 0 0 29 2 *", "2026-12-03T00:00:00Z", "2028-02-29T00:00:00Z", nil},
		{"0 0 0 30 2 *", "2026-12-03T00:00:00Z", "", nil},
		{"0 0 9 * * mon-fri", "2026-12-05T12:00:00Z", "2026-12-07T09:00:00-05:00", ny},
		{"0 15 10 ? JAN-mar/2 *", "2026-12-03T00:00:00Z", "2027-01-01T10:15:00Z", nil},
		{"0 0 0 , * mon", "2026-12-03T00:00:00Z", "2026-12-07T00:00:00Z", nil},
		{", * * * * *", "2026-12-03T00:00:00Z", "", nil},
		{"61 * * * * *", "2026-12-03T00:00:00Z", "", nil},
		{"5-1 * * * * *", "2026-12-03T00:00:00Z", "", nil},
		{"*/0 * * * * *", "2026-12-03T00:00:00Z", "", nil},
		{"1-2-3 * * * * *", "2026-12-03T00:00:00Z", "", nil},
		{"1/2/3 * * * * *", "2026-12-03T00:00:00Z", "", nil},
		{"-1 * * * * *", "2026-12-03T00:00:00Z", "", nil},
		{"+5 * * * * *", "2026-12-03T00:00:10Z", "2026-12-03T00:01:05Z", nil},
		{"10/20 * * * * *", "2026-12-03T00:00:31Z", "2026-12-03T00:00:50Z", nil},
	} {
		spec, err := parseCronSpec(tc.pattern)
		var got string
		if err == nil {
			loc := tc.loc
			if loc == nil {
				loc = time.UTC
			}
			var next time.Time
			if next, err = spec.next(mustTime(t, tc.from), loc); err == nil {
				got = next.Format(time.RFC3339)
			}
		}
		if got != tc.want {
			t.Errorf("%q from %s: %q (%v), want %q", tc.pattern, tc.from, got, err, tc.want)
		}
	}
}

func newMemStore(t *testing.T, c Config) store.Store {
	t.Helper()
	return memstore.New(c.StoreConfig())
}

// TestScheduleBatch: in an atomic batch a stop may name a schedule an
// earlier message of the batch stored (nats-server v2.15.2 accepted the
// batch and the stop purged it), but not a subject whose batch message
// is no schedule (10212).
func TestScheduleBatch(t *testing.T) {
	s := newTestStream(t, `{"name":"SB","subjects":["sb.>"],"allow_msg_schedules":true,"allow_atomic":true}`)
	rs, err := s.ApplyBatch(BatchCommit{ID: "b1", Time: t0, Entries: []Entry{
		{Subject: "sb.a", Header: hdrBlock("Nats-Batch-Id:b1|Nats-Batch-Sequence:1|Nats-Schedule:@at 2999-01-01T00:00:00Z|Nats-Schedule-Target:sb.t"), Data: []byte("x")},
		{Subject: "sb.c", Header: hdrBlock("Nats-Batch-Id:b1|Nats-Batch-Sequence:2|Nats-Batch-Commit:1|Nats-Schedule-Next:purge|Nats-Scheduler:sb.a"), Data: []byte("y")},
	}})
	if err != nil || len(rs) != 2 {
		t.Fatalf("batch with a schedule and its stop: %v", err)
	}
	if _, err := s.store.LoadLast("sb.a"); err == nil {
		t.Error("the schedule the batch stopped is stored")
	}
	if _, ok := s.NextSchedule(); ok {
		t.Error("the stopped schedule is in the table")
	}
	_, err = s.ApplyBatch(BatchCommit{ID: "b2", Time: t0, Entries: []Entry{
		{Subject: "sb.p", Header: hdrBlock("Nats-Batch-Id:b2|Nats-Batch-Sequence:1"), Data: []byte("x")},
		{Subject: "sb.c", Header: hdrBlock("Nats-Batch-Id:b2|Nats-Batch-Sequence:2|Nats-Batch-Commit:1|Nats-Schedule-Next:purge|Nats-Scheduler:sb.p"), Data: []byte("y")},
	}})
	if err == nil || err.ErrCode != 10212 {
		t.Errorf("stop of a batch message that is no schedule: %v, want 10212", err)
	}
	rs, err = s.ApplyBatch(BatchCommit{ID: "b3", Time: t0, Entries: []Entry{
		{Subject: "sb.q", Header: hdrBlock("Nats-Batch-Id:b3|Nats-Batch-Sequence:1|Nats-Schedule:@at 2999-01-01T00:00:00Z|Nats-Schedule-Target:sb.t|Nats-Batch-Commit:1"), Data: []byte("x")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := s.store.Load(rs[0].Seq)
	if want := "NATS/1.0\r\nNats-Batch-Id: b3\r\nNats-Batch-Sequence: 1\r\nNats-Schedule: @at 2999-01-01T00:00:00Z\r\nNats-Schedule-Target: sb.t\r\nNats-Batch-Commit: 1\r\nNats-Rollup: sub\r\n\r\n"; string(m.Header) != want {
		t.Errorf("stored %q, want %q", m.Header, want)
	}
}
