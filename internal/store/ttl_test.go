package store

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// ParseTTL follows nats-server v2.15.2 parseMessageTTL value by value.
func TestParseTTL(t *testing.T) {
	cases := []struct {
		in  string
		ttl int64
		ok  bool
	}{
		{"never", TTLNever, true},
		{"Never", TTLNever, true},
		{"1s", 1, true},
		{"1.9s", 1, true},
		{"2m", 120, true},
		{"+5s", 5, true},
		{"60", 60, true},
		{"00", 0, true}, // not a Go duration; digits read as 0: no TTL
		{"0", 0, false}, // a Go duration of 0
		{"0s", 0, false},
		{"999ms", 0, false},
		{"-1s", 0, false},
		{"-1", 0, false},
		{"1 s", 0, false},
		{"abc", 0, false},
		{"", 0, false},
		{"9223372036854775808", 0, false}, // wraps negative, as nats-server's parseInt64
	}
	for _, c := range cases {
		ttl, ok := ParseTTL(c.in)
		if ttl != c.ttl || ok != c.ok {
			t.Errorf("ParseTTL(%q) = %d, %v; want %d, %v", c.in, ttl, ok, c.ttl, c.ok)
		}
	}
}

func TestMsgTTLAndMarkers(t *testing.T) {
	cases := []struct {
		hdr    string
		ttl    int64
		marker bool
	}{
		{"", 0, false},
		{"NATS/1.0\r\nNats-TTL: 5s\r\n\r\n", 5, false},
		{"NATS/1.0\r\nNats-TTL:   7\r\n\r\n", 7, false},
		{"NATS/1.0\r\nnats-ttl: 5s\r\n\r\n", 0, false}, // names match exactly
		{"NATS/1.0\r\nNats-TTL: 10ms\r\n\r\n", 0, false},
		{"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 1m0s\r\n\r\n", 60, true},
		{"NATS/1.0\r\nNats-Marker-Reason: \r\n\r\n", 0, false},
		{"NATS/1.0\r\nKV-Operation: PURGE\r\n\r\n", 0, true},
		{"NATS/1.0\r\nKV-Operation: DEL\r\n\r\n", 0, false},
	}
	for _, c := range cases {
		if got := MsgTTL([]byte(c.hdr)); got != c.ttl {
			t.Errorf("MsgTTL(%q) = %d, want %d", c.hdr, got, c.ttl)
		}
		if got := IsDeleteMarker([]byte(c.hdr)); got != c.marker {
			t.Errorf("IsDeleteMarker(%q) = %v, want %v", c.hdr, got, c.marker)
		}
	}
}

func TestTTLDeadline(t *testing.T) {
	if got := TTLDeadline(5, 2); got != 5+2e9 {
		t.Errorf("TTLDeadline(5, 2) = %d", got)
	}
	if got := TTLDeadline(1e18, math.MaxInt64/1_000_000_000); got != math.MaxInt64 {
		t.Errorf("overflow gives %d, want MaxInt64", got)
	}
}

// The index hands out due deadlines in sequence order whatever the
// order they fall due in, and pruning keeps exactly the live entries.
func TestTTLIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var x TTLIndex
	want := map[uint64]int64{}
	for seq := uint64(1); seq <= 500; seq++ {
		ttl := 1 + r.Int64N(100)
		x.push(ttlEntry{at: ttl, seq: seq})
		want[seq] = ttl
	}
	live := func(seq uint64) bool { return seq%3 != 0 }
	x.Prune(live)
	if x.Len() != 334 {
		t.Fatalf("Len after prune = %d, want 334", x.Len())
	}
	var got []uint64
	for now := int64(0); now <= 100; now += 7 {
		due := x.popDue(now)
		for k, e := range due {
			if e.at > now || want[e.seq] != e.at || !live(e.seq) {
				t.Fatalf("popDue(%d) gave %+v", now, e)
			}
			if k > 0 && due[k-1].seq >= e.seq {
				t.Fatalf("popDue(%d) not in sequence order: %+v", now, due)
			}
			got = append(got, e.seq)
		}
		if next, ok := x.Next(); ok && next <= now {
			t.Fatalf("Next() = %d after popDue(%d)", next, now)
		}
	}
	for _, e := range x.popDue(math.MaxInt64) {
		got = append(got, e.seq)
	}
	if x.Len() != 0 || len(got) != 334 || slices.Contains(got, 3) {
		t.Fatalf("left %d, handed out %d", x.Len(), len(got))
	}
}

// MaybePrune keeps the index within twice the stored messages plus a
// constant.
func TestTTLIndexMaybePrune(t *testing.T) {
	var x TTLIndex
	stored := map[uint64]bool{}
	hdr := []byte("NATS/1.0\r\nNats-TTL: 5\r\n\r\n")
	for seq := uint64(1); seq <= 100_000; seq++ {
		x.Add(seq, 0, hdr)
		stored[seq] = true
		delete(stored, seq-1) // one message stored at a time
		x.MaybePrune(uint64(len(stored)), func(s uint64) bool { return stored[s] })
		if x.Len() > 2*len(stored)+pruneSlack+1 {
			t.Fatalf("seq %d: index holds %d entries for %d messages", seq, x.Len(), len(stored))
		}
	}
	x.Add(100_001, 0, []byte("NATS/1.0\r\nNats-TTL: never\r\n\r\n"))
	if !x.Never(100_001) || x.Never(100_000) {
		t.Fatal("Never does not tell the never messages")
	}
}
