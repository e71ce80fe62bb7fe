package jscluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// A start on a new Raft WAL (a first start, a wiped store) says it had
// nothing to recover rather than "recovered" (trial 38); a restart says
// what it applied again.
func TestRecoveredLine(t *testing.T) {
	if got, want := recoveredLine(Recovery{Done: true}, true), "JetStream cluster: started on a new Raft WAL: nothing to recover"; got != want {
		t.Errorf("new WAL: %q, want %q", got, want)
	}
	if got, want := recoveredLine(Recovery{Done: true}, false), "JetStream cluster: recovered; entries applied again since the checkpoints: 0 (meta 0, streams 0, consumers 0)"; got != want {
		t.Errorf("restart: %q, want %q", got, want)
	}
	if got, want := recoveredLine(Recovery{Done: true, Meta: 1, Streams: 2}, false), "JetStream cluster: recovered; entries applied again since the checkpoints: 3 (meta 1, streams 2, consumers 0)"; got != want {
		t.Errorf("after a crash: %q, want %q", got, want)
	}
}

// A replica the node removed already (its assignment replaced, as a
// wiped server's stale replica during its replacement) is logged at
// [INF] when it cannot start; any other failure stays a warning (trial
// 38's wipe logged the first at [WRN]).
func TestGroupNotStartedLevel(t *testing.T) {
	var warn, info []string
	c := &Cluster{cfg: Config{
		Logf:  func(f string, a ...any) { warn = append(warn, fmt.Sprintf(f, a...)) },
		Infof: func(f string, a ...any) { info = append(info, fmt.Sprintf(f, a...)) },
	}}
	c.groupNotStarted("consumer APP > WQ > c", 5, 5, fmt.Errorf("%w: group 5 replica 5 (removed up to 5)", raftnode.ErrRemoved))
	if len(warn) != 0 || len(info) != 1 || !strings.Contains(info[0], "consumer APP > WQ > c: its replica 5 of group 5 is not started here: this server removed it already") {
		t.Errorf("removed: warn %q, info %q", warn, info)
	}
	c.groupNotStarted("stream APP > S", 2, 1, errors.New("disk full"))
	if len(warn) != 1 || warn[0] != "jscluster: stream APP > S: its group 2 cannot start here: disk full" {
		t.Errorf("other: warn %q", warn)
	}
}
