package jscluster

import "testing"

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
