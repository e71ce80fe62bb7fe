package jetstream

import (
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// frames collects header+payload replies on one subject.
type frames struct {
	mu  sync.Mutex
	got []string
}

func collect(t *testing.T, tr *memTransport, subj string) *frames {
	f := &frames{}
	_, _ = tr.Subscribe(subj, "", func(_, _ string, hdr, data []byte) {
		f.mu.Lock()
		f.got = append(f.got, string(hdr)+"|"+string(data))
		f.mu.Unlock()
	})
	return f
}

func (f *frames) wait(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		got := append([]string(nil), f.got...)
		f.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d replies, want %d: %q", len(got), n, got)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDirectGet(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	cfg := stream.Config{Name: "KV_b", Subjects: []string{"$KV.b.>"}, AllowDirect: true, Storage: stream.FileStorage}
	if _, err := js.AddStream(cfg); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("acks")
	tr.Publish("$KV.b.k1", "acks", []byte("NATS/1.0\r\nA: 1\r\n\r\n"), []byte("v1"))
	tr.Publish("$KV.b.k2", "acks", nil, []byte("v2"))
	tr.Publish("$KV.b.k1", "acks", nil, []byte("v3"))
	for i := 0; i < 3; i++ {
		acks.next(t)
	}
	replies := collect(t, tr, "r")
	tr.Publish("$JS.API.DIRECT.GET.KV_b.$KV.b.k1", "r", nil, nil)
	tr.Publish("$JS.API.DIRECT.GET.KV_b", "r", nil, []byte(`{"seq":1}`))
	tr.Publish("$JS.API.DIRECT.GET.KV_b", "r", nil, []byte(`{"last_by_subj":"$KV.b.nope"}`))
	tr.Publish("$JS.API.DIRECT.GET.KV_b", "r", nil, nil)
	tr.Publish("$JS.API.DIRECT.GET.KV_b", "r", nil, []byte(`{"seq":1,"last_by_subj":"x"}`))
	tr.Publish("$JS.API.DIRECT.GET.KV_b", "r", nil, []byte(`{"seq":1,"batch":5,"next_by_subj":"$KV.b.k1"}`))
	got := replies.wait(t, 8)
	ts := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`
	want := []string{
		`^NATS/1.0\r\nNats-Stream: KV_b\r\nNats-Subject: \$KV.b.k1\r\nNats-Sequence: 3\r\nNats-Time-Stamp: ` + ts + `\r\n\r\n\|v3$`,
		`^NATS/1.0\r\nA: 1\r\nNats-Stream: KV_b\r\nNats-Subject: \$KV.b.k1\r\nNats-Sequence: 1\r\nNats-Time-Stamp: ` + ts + `\r\n\r\n\|v1$`,
		`^NATS/1.0 404 Message Not Found\r\n\r\n\|$`,
		`^NATS/1.0 408 Empty Request\r\n\r\n\|$`,
		`^NATS/1.0 408 Bad Request\r\n\r\n\|$`,
		`^NATS/1.0\r\nA: 1\r\nNats-Stream: KV_b\r\nNats-Subject: \$KV.b.k1\r\nNats-Sequence: 1\r\nNats-Time-Stamp: ` + ts + `\r\nNats-Num-Pending: 1\r\nNats-Last-Sequence: 0\r\n\r\n\|v1$`,
		`^NATS/1.0\r\nNats-Stream: KV_b\r\nNats-Subject: \$KV.b.k1\r\nNats-Sequence: 3\r\nNats-Time-Stamp: ` + ts + `\r\nNats-Num-Pending: 0\r\nNats-Last-Sequence: 1\r\n\r\n\|v3$`,
		`^NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\nNats-Last-Sequence: 3\r\n\r\n\|$`,
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(got[i]) {
			t.Errorf("reply %d: %q does not match %q", i, got[i], w)
		}
	}
	if tr.Publish("$JS.API.DIRECT.GET.OTHER", "r", nil, []byte(`{"seq":1}`)) {
		t.Fatal("a stream that does not exist answers direct gets")
	}
}

// streamrun.SeqFromTime finds the first message at or after a time across gaps,
// as nats-server's GetSeqFromTime: LastSeq+1 after the last message.
func TestSeqFromTime(t *testing.T) {
	js, tr, clk := clockedJS(t)
	if _, err := js.AddStream(stream.Config{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.t")
	base := clk.now().UnixNano()
	for i := 1; i <= 20; i++ {
		tr.Publish("t.x", "_INBOX.t", nil, []byte("x"))
		acks.next(t)
		clk.advance(time.Second)
	}
	for _, seq := range []uint64{1, 2, 7, 8, 9, 20} {
		if err := js.DeleteMsg("T", seq); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := js.lookup("T")
	sec := int64(time.Second)
	for _, tc := range []struct {
		at   int64
		want uint64
	}{
		{base - sec, 3}, {base, 3}, {base + 2*sec, 3}, {base + 2*sec + 1, 4},
		{base + 6*sec, 10}, {base + 9*sec, 10}, {base + 18*sec, 19}, {base + 18*sec + 1, 21}, {base + 100*sec, 21},
	} {
		if got := streamrun.SeqFromTime(r.Store(), tc.at); got != tc.want {
			t.Errorf("SeqFromTime(base%+ds) = %d, want %d", (tc.at-base)/sec, got, tc.want)
		}
	}
}

// multi_last with up_to_seq below a subject's last message finds the
// subject's last message at or below it; more than 1024 matching
// subjects is 413.
func TestDirectMultiLast(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	if _, err := js.AddStream(stream.Config{Name: "M", Subjects: []string{"m.>"}, AllowDirect: true, Storage: stream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.m")
	for _, subj := range []string{"m.a", "m.b", "m.a", "m.a", "m.b"} { // 1..5
		tr.Publish(subj, "_INBOX.m", nil, []byte(subj))
		acks.next(t)
	}
	replies := collect(t, tr, "r")
	tr.Publish("$JS.API.DIRECT.GET.M", "r", nil, []byte(`{"multi_last":["m.*"],"up_to_seq":3}`))
	got := replies.wait(t, 3)
	want := []string{
		`(?s)Nats-Sequence: 2\r\n.*Nats-Num-Pending: 1\r\nNats-Last-Sequence: 0\r\n`,
		`(?s)Nats-Sequence: 3\r\n.*Nats-Num-Pending: 0\r\nNats-Last-Sequence: 2\r\n`,
		`^NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\nNats-Last-Sequence: 3\r\nNats-UpTo-Sequence: 3\r\n\r\n\|$`,
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(got[i]) {
			t.Errorf("reply %d: %q does not match %q", i, got[i], w)
		}
	}
	for i := range 1025 {
		tr.Publish(fmt.Sprintf("m.many.%d", i), "_INBOX.m", nil, nil)
		acks.next(t)
	}
	replies2 := collect(t, tr, "r2")
	tr.Publish("$JS.API.DIRECT.GET.M", "r2", nil, []byte(`{"multi_last":["m.many.*"]}`))
	if got := replies2.wait(t, 1); got[0] != "NATS/1.0 413 Too Many Results\r\n\r\n|" {
		t.Fatalf("1025 subjects: %q", got[0])
	}
}
