package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/store"
)

// A lost end of the log never hands out acknowledged sequences again
// (issue 12, finding 1): acknowledged messages are stored, cairn stops,
// the end of the stream's last segment file is cut off (3000 bytes) or the file is
// removed, and cairn starts again. The missing sequences must be reported
// lost (stream info "lost" and a [WRN] naming the range), last_seq must
// stay at the highest acknowledged sequence, and the next publish must
// get the sequence after it. cairn once logged a torn tail, reported
// nothing lost and gave the next message an acknowledged sequence.
// nats-server v2.15.2 keeps last_seq too (from its stream state file).
//
// Only for cairn: the damage is done to cairn's files.
func TestLostTailKeepsSequences(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("damages cairn's segment files")
	}
	bin := buildCairn(t)
	for _, damage := range []string{"cut", "remove"} {
		t.Run(damage, func(t *testing.T) { lostTailRun(t, bin, damage) })
	}
}

// lostTailMsgs messages of lostTailSize bytes fill more than one segment
// file (8 MiB each), so that removing the last one leaves a stream.
const (
	lostTailMsgs = 9000
	lostTailSize = 1024
)

func lostTailRun(t *testing.T, bin, damage string) {
	dir := t.TempDir()
	p := startCairnProc(t, bin, dir)
	nc, js := lostTailConnect(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TAIL", Subjects: []string{"tail.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	payload := []byte(strings.Repeat("x", lostTailSize))
	futures := make([]jetstream.PubAckFuture, 0, lostTailMsgs)
	for i := range lostTailMsgs {
		// 9000 outstanding exceed the async window (4000): a loaded machine
		// may hold the window full past the default 200 ms stall wait.
		f, err := js.PublishAsync("tail.a", payload, jetstream.WithMsgID(fmt.Sprintf("id-%d", i)), jetstream.WithStallWait(jsTimeout))
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		futures = append(futures, f)
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if ack.Sequence != uint64(i+1) {
				t.Fatalf("message %d acknowledged at sequence %d", i, ack.Sequence)
			}
		case err := <-f.Err():
			t.Fatalf("message %d: %v", i, err)
		case <-ctx.Done():
			t.Fatalf("message %d: no PubAck", i)
		}
	}
	nc.Close()
	p.stop()

	segs, err := filepath.Glob(filepath.Join(dir, "jetstream", "$G", "streams", "TAIL", "msgs", "msgs", "*.blk"))
	if err != nil || len(segs) < 2 {
		t.Fatalf("segment files %v, %v: want at least two", segs, err)
	}
	last := segs[len(segs)-1]
	if damage == "cut" {
		fi, err := os.Stat(last)
		if err == nil {
			err = os.Truncate(last, fi.Size()-3000)
		}
		if err != nil {
			t.Fatal(err)
		}
	} else if err := os.Remove(last); err != nil {
		t.Fatal(err)
	}

	p = startCairnProc(t, bin, dir)
	nc, js = lostTailConnect(t, p)
	defer nc.Close()
	s, err := js.Stream(ctx, "TAIL")
	if err != nil {
		t.Fatalf("stream info: %v\n%s", err, p.log.String())
	}
	st := s.CachedInfo().State
	if st.LastSeq != lostTailMsgs {
		t.Fatalf("last_seq %d after the damage, want %d (the highest acknowledged)\n%s", st.LastSeq, lostTailMsgs, p.log.String())
	}
	if st.Lost == nil || len(st.Lost.Msgs) == 0 || st.Msgs+uint64(len(st.Lost.Msgs)) != lostTailMsgs ||
		!slices.IsSorted(st.Lost.Msgs) || st.Lost.Msgs[len(st.Lost.Msgs)-1] != lostTailMsgs {
		t.Fatalf("%d messages, lost %+v: want the missing end reported lost\n%s", st.Msgs, st.Lost, p.log.String())
	}
	first := st.Lost.Msgs[0]
	want := fmt.Sprintf("[WRN] filestore: %s: lost %s", filepath.Join(dir, "jetstream", "$G", "streams", "TAIL", "msgs"), store.SeqRange(first, lostTailMsgs))
	if !strings.Contains(p.log.String(), want) {
		t.Fatalf("no %q in the log:\n%s", want, p.log.String())
	}
	ack, err := js.Publish(ctx, "tail.a", []byte("after"))
	if err != nil || ack.Sequence != lostTailMsgs+1 {
		t.Fatalf("publish after the damage: %+v, %v; want sequence %d", ack, err, lostTailMsgs+1)
	}
	t.Logf("%s: %d messages kept, sequences %d-%d reported lost, next publish got %d", damage, st.Msgs, first, lostTailMsgs, ack.Sequence)
}

// lostTailConnect connects to p with a JetStream context.
func lostTailConnect(t *testing.T, p *cairnProc) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(p.url, nats.NoReconnect(), nats.Timeout(readTimeout))
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, p.log.String())
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1024))
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// stop shuts the server down with SIGTERM and waits for it to exit.
func (p *cairnProc) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(startTimeout):
		p.t.Fatalf("cairn did not exit within %v of SIGTERM:\n%s", startTimeout, p.log.String())
	}
}
