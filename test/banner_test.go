package test

import (
	"strings"
	"testing"
)

// TestStartBannerDifferential: cairn -js logs nats-server v2.15.2's start
// lines, in its order (server.go Start, jetstream.go enableJetStream),
// for operators and log scrapers that look for them; values are each
// server's own, and cairn leaves out the ASCII art and Strict
// (docs/compatibility.md).
func TestStartBannerDifferential(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("compares cairn with nats-server itself")
	}
	diffRequireNatsServer(t)
	want := []string{
		"  Version:  ", "  Git:      [", "  Name:     ", "  Node:     ", "  ID:       N",
		"Starting JetStream", "---------------- JETSTREAM ----------------",
		"  Max Memory:      ", "  Max Storage:     ", "  Store Directory: \"", "  API Level:       ",
		"-------------------------------------------", "Took ",
		"Listening for client connections on 127.0.0.1:", "Server is ready",
	}
	for name, bin := range map[string]string{"cairn": buildCairn(t), "nats-server": natsServerBinary(t)} {
		p := startProc(t, bin, nil, "-js", "-sd", t.TempDir(), "-a", "127.0.0.1", "-p", "-1")
		var texts []string
		for _, line := range strings.Split(p.log.String(), "\n") {
			// "[pid] date time [INF] text"
			if _, text, ok := strings.Cut(line, "[INF] "); ok {
				texts = append(texts, text)
			}
		}
		i := 0
		for _, text := range texts {
			if i < len(want) && strings.HasPrefix(text, want[i]) {
				i++
			}
		}
		if i < len(want) {
			t.Errorf("%s: no %q in order in its start lines:\n%s", name, want[i], strings.Join(texts, "\n"))
		}
	}
}
