package jetstream

import (
	"testing"
	"time"
)

// waitUntil polls cond until it holds, failing after 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20 s for %s", what)
		}
	}
}

// waitState waits until stream name holds n messages.
func waitState(t *testing.T, js *JetStream, name string, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := js.StreamInfo(name, InfoOptions{})
		if err == nil && info.State.Msgs == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s: %v messages, want %d", name, info, n)
		}
		time.Sleep(time.Millisecond)
	}
}
