package test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// A stream with compression "s2" keeps its messages across a restart and
// serves them as published; its state, bytes included, is that of the
// same messages in an uncompressed stream (nats-server v2.15.2 counts
// state.bytes uncompressed).
func TestCompressedStreamRestart(t *testing.T) {
	opts := jsIn(t.TempDir())
	u, stop := startServerStoppable(t, opts)
	nc, js := jsConnect(t, u)
	packed := createStream(t, js, jetstream.StreamConfig{Name: "PACKED", Subjects: []string{"zip.>"}, Compression: jetstream.S2Compression})
	plain := createStream(t, js, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"raw.>"}})
	payload := func(i int) string {
		return strings.Repeat(fmt.Sprintf(`{"order":%d,"status":"shipped","warehouse":"north"},`, i), 40)
	}
	const n = 50
	for i := 1; i <= n; i++ {
		jsPublish(t, js, fmt.Sprintf("zip.%d", i%3), payload(i))
		jsPublish(t, js, fmt.Sprintf("raw.%d", i%3), payload(i))
	}
	if got := streamInfo(t, packed).Config.Compression; got != jetstream.S2Compression {
		t.Fatalf("compression %v, want s2", got)
	}
	if a, b := streamInfo(t, packed).State, streamInfo(t, plain).State; a.Msgs != n || a.Bytes != b.Bytes {
		t.Fatalf("compressed stream: %d msgs, %d bytes; uncompressed: %d msgs, %d bytes", a.Msgs, a.Bytes, b.Msgs, b.Bytes)
	}
	before := streamInfo(t, packed).State
	nc.Close()
	stop()

	u2, _ := startServerStoppable(t, opts)
	_, js2 := jsConnect(t, u2)
	s, err := js2.Stream(tctx(t), "PACKED")
	if err != nil {
		t.Fatalf("PACKED after restart: %v", err)
	}
	info := streamInfo(t, s)
	if info.Config.Compression != jetstream.S2Compression || info.State.Msgs != before.Msgs || info.State.Bytes != before.Bytes ||
		info.State.LastSeq != before.LastSeq {
		t.Fatalf("after restart: compression %v, state %+v; before %+v", info.Config.Compression, info.State, before)
	}
	for seq := uint64(1); seq <= n; seq++ {
		m, err := s.GetMsg(tctx(t), seq)
		if err != nil || string(m.Data) != payload(int(seq)) || m.Subject != fmt.Sprintf("zip.%d", seq%3) {
			t.Fatalf("seq %d after restart: %v", seq, err)
		}
	}
}
