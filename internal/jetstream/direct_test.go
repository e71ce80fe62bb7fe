package jetstream

import (
	"regexp"
	"sync"
	"testing"
	"time"

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
