package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestCheckFindsAnomalies: the checker reports each anomaly it exists
// for, from a history and a stream content built by hand.
func TestCheckFindsAnomalies(t *testing.T) {
	h := newHistory()
	ack := func(p int, seq, at uint64, retried bool) {
		r := h.add(key{p, seq})
		r.retried = retried
		h.acked(r, &jetstream.PubAck{Sequence: at}, time.Now())
	}
	ack(1, 1, 1, false)
	ack(1, 2, 2, false)
	ack(1, 3, 3, false) // lost
	ack(2, 1, 4, false)
	ack(2, 2, 7, false) // stored at 5
	h.add(key{2, 3})    // never acked, stored twice
	ack(3, 1, 8, true)  // async, retried: may land after p3#2
	ack(3, 2, 6, false)
	msg := func(seq uint64, p int, n uint64) stored {
		return stored{seq: seq, k: key{p, n}, data: payload(key{p, n}), ok: true}
	}
	// p1#2 at 1 and p1#1 at 2: out of order, and not where acked.
	msgs := []stored{msg(1, 1, 2), msg(2, 1, 1), msg(4, 2, 1), msg(5, 2, 2), msg(6, 3, 2),
		msg(7, 2, 3), msg(8, 3, 1), msg(9, 2, 3), msg(10, 9, 9), {seq: 11}}
	rep := check(h, msgs, map[int]bool{3: true})
	want := map[string][]string{
		"lost":     {"p1#3 (acked at 3)"},
		"dups":     {"p2#3 at 7 and 9"},
		"phantoms": {"p9#9 at 10", "seq 11 without producer headers"},
		"mismatch": {"p1#2 acked at 2, stored at 1", "p1#1 acked at 1, stored at 2", "p2#2 acked at 7, stored at 5"},
		"order":    {"p1#1 at 2 after p1#2"},
	}
	got := map[string][]string{"lost": rep.Lost, "dups": rep.Duplicates, "phantoms": rep.Phantoms,
		"mismatch": rep.AckMismatch, "order": rep.OrderViolations}
	for k, w := range want {
		if strings.Join(sorted(got[k]), "|") != strings.Join(sorted(w), "|") {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
	if rep.OK() || rep.Acked != 7 || rep.Attempted != 8 {
		t.Fatalf("report %+v", rep)
	}
	clean := check(h, []stored{msg(1, 1, 1), msg(2, 1, 2), msg(3, 1, 3), msg(4, 2, 1), msg(6, 3, 2),
		msg(7, 2, 2), msg(8, 3, 1)}, map[int]bool{3: true})
	if !clean.OK() {
		t.Fatalf("a matching stream reported: %s", clean)
	}
}

func sorted(l []string) []string {
	out := append([]string(nil), l...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
