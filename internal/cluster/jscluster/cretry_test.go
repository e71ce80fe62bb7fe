package jscluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// noteConsumerStart schedules a failed consumer start again by the
// cluster's clock, 250 ms then twice as long each time up to 10 s, logs
// a failure only when it differs from the last, drops a failure marked
// noRetry, and logs the start that follows failures.
func TestNoteConsumerStartBackoff(t *testing.T) {
	now := time.Unix(1000, 0)
	var logs, infos []string
	c := &Cluster{cfg: Config{
		Now:   func() time.Time { return now },
		Logf:  func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) },
		Infof: func(f string, a ...any) { infos = append(infos, fmt.Sprintf(f, a...)) },
	}}
	k := consumerKey{"APP", "S", "C"}
	stale := errors.New("this server's replica cannot start: stale")
	var waits []time.Duration
	for range 8 {
		c.noteConsumerStart(k, stale)
		r := c.cretry[k]
		if r == nil {
			t.Fatal("a failure that may pass is not scheduled")
		}
		waits = append(waits, r.at.Sub(now))
		now = r.at
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "consumer APP > S > C: this server's replica cannot start: stale") {
		t.Fatalf("logs %q, want the failure once", logs)
	}
	c.noteConsumerStart(k, errors.New("another failure"))
	if len(logs) != 2 {
		t.Fatalf("a different failure not logged: %q", logs)
	}
	c.noteConsumerStart(k, nil)
	if c.cretry[k] != nil || len(infos) != 1 || !strings.Contains(infos[0], "after 9 failed attempt(s)") {
		t.Fatalf("after the start: retry %+v, infos %q", c.cretry[k], infos)
	}
	c.noteConsumerStart(k, nil)
	if len(infos) != 1 {
		t.Fatalf("a start without failures logged: %q", infos)
	}
	c.noteConsumerStart(k, stale)
	c.noteConsumerStart(k, noRetry(errors.New("its assigned config does not decode")))
	if c.cretry[k] != nil {
		t.Fatal("a failure marked noRetry is scheduled")
	}
	if last := logs[len(logs)-1]; !strings.HasSuffix(last, ": its assigned config does not decode") {
		t.Fatalf("logged %q", last)
	}
}
