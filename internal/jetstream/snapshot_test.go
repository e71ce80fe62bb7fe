package jetstream

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/snapshot"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// snapClient is a client of a snapshot: it answers every chunk that has
// a reply subject (unless held) and keeps the bytes and the end frame.
type snapClient struct {
	mu     sync.Mutex
	data   bytes.Buffer
	chunks int
	held   []string // replies not sent while hold is set
	hold   bool
	end    chan []byte // the header of the empty message that ends it
	tr     *memTransport
	sub    Subscription
}

func newSnapClient(tr *memTransport, deliver string) *snapClient {
	c := &snapClient{end: make(chan []byte, 1), tr: tr}
	c.sub, _ = tr.Subscribe(deliver, "", func(_, reply string, hdr, data []byte) {
		if len(data) == 0 {
			c.end <- append([]byte{}, hdr...)
			return
		}
		c.mu.Lock()
		c.data.Write(data)
		c.chunks++
		hold := c.hold && reply != ""
		if hold {
			c.held = append(c.held, reply)
		}
		c.mu.Unlock()
		if reply != "" && !hold {
			tr.Publish(reply, "", nil, nil)
		}
	})
	return c
}

// takeSnapshot snapshots stream name as a client does and returns the
// snapshot and the header of its end.
func takeSnapshot(t *testing.T, js *JetStream, tr *memTransport, name string, req SnapshotRequest) ([]byte, string) {
	t.Helper()
	req.DeliverSubject = "_SNAP." + name
	c := newSnapClient(tr, req.DeliverSubject)
	defer c.sub.Unsubscribe()
	start, jerr := js.Snapshot(name, req)
	if jerr != nil {
		t.Fatal(jerr)
	}
	start.Send()
	select {
	case hdr := <-c.end:
		c.mu.Lock()
		defer c.mu.Unlock()
		return bytes.Clone(c.data.Bytes()), string(hdr)
	case <-time.After(10 * time.Second):
		t.Fatal("the snapshot did not end within 10 s")
		return nil, ""
	}
}

type restoreResult struct {
	reply string
	info  *StreamInfo
	err   *jserr.Error
}

// restoreBytes restores cfg from data sent in chunks of chunk bytes, as
// `nats stream restore` sends them (each a request, waiting for its
// answer), and returns the outcome.
func restoreBytes(t *testing.T, js *JetStream, tr *memTransport, cfg stream.Config, data []byte, chunk int) (*StreamInfo, *jserr.Error) {
	t.Helper()
	done := make(chan restoreResult, 1)
	subj, jerr := js.BeginRestore(cfg, nil, func(reply string, info *StreamInfo, err *jserr.Error) {
		done <- restoreResult{reply, info, err}
	})
	if jerr != nil {
		return nil, jerr
	}
	acks := tr.inbox("_RESTORE.ack")
	for len(data) > 0 {
		n := min(chunk, len(data))
		tr.Publish(subj, "_RESTORE.ack", nil, data[:n])
		data = data[n:]
		select {
		case <-acks.ch:
		case res := <-done:
			if res.reply != "_RESTORE.ack" {
				t.Fatalf("a failed chunk answered on %q", res.reply)
			}
			return res.info, res.err
		case <-time.After(10 * time.Second):
			t.Fatal("a chunk was not answered within 10 s")
		}
	}
	tr.Publish(subj, "_RESTORE.end", nil, nil)
	select {
	case res := <-done:
		if res.reply != "_RESTORE.end" {
			t.Fatalf("the restore answered on %q", res.reply)
		}
		return res.info, res.err
	case <-time.After(10 * time.Second):
		t.Fatal("the restore did not end within 10 s")
		return nil, nil
	}
}

// snapStream fills stream SNAP (storage st): sequences 1-5 on snap.a
// and snap.b with a header on 1, 2 deleted, 5 deleted (a trailing gap);
// durable D (explicit acks) delivered 1 and 3 and acknowledged 1;
// ephemeral E delivered 1; mem_storage durable M delivered nothing.
func snapStream(t *testing.T, js *JetStream, tr *memTransport, st stream.StorageType) stream.Config {
	t.Helper()
	cfg := stream.Config{Name: "SNAP", Subjects: []string{"snap.>"}, Storage: st}
	if _, err := js.AddStream(cfg); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.pub")
	for i := 1; i <= 5; i++ {
		var hdr []byte
		if i == 1 {
			hdr = []byte("NATS/1.0\r\nX-N: 1\r\n\r\n")
		}
		tr.Publish(fmt.Sprintf("snap.%c", 'a'+i%2), "_INBOX.pub", hdr, fmt.Appendf(nil, "m%d", i))
		acks.next(t)
	}
	for _, seq := range []uint64{2, 5} {
		if err := js.DeleteMsg("SNAP", seq); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []consumer.Config{
		{Durable: "D", AckPolicy: consumer.AckExplicit, AckWait: time.Hour},
		{Name: "E", AckPolicy: consumer.AckExplicit, AckWait: time.Hour, InactiveThreshold: time.Hour},
		{Durable: "M", AckPolicy: consumer.AckExplicit, MemoryStorage: true},
	} {
		if _, err := js.CreateConsumer("SNAP", c, CreateOrUpdate, false); err != nil {
			t.Fatal(err)
		}
	}
	d := collectDeliveries(tr, "_INBOX.pull")
	tr.Publish("$JS.API.CONSUMER.MSG.NEXT.SNAP.D", "_INBOX.pull", nil, []byte(`{"batch":2}`))
	d.wait(t, 2)
	d.mu.Lock()
	ack := d.subj[1]
	d.mu.Unlock()
	tr.Publish(ack, "_INBOX.acked", nil, []byte("+ACK"))
	e := collectDeliveries(tr, "_INBOX.pullE")
	tr.Publish("$JS.API.CONSUMER.MSG.NEXT.SNAP.E", "_INBOX.pullE", nil, []byte(`{"batch":1}`))
	e.wait(t, 1)
	waitUntil(t, "D's ack", func() bool {
		info, err := js.ConsumerInfo("SNAP", "D")
		return err == nil && info.AckFloor.Stream >= 1
	})
	return cfg
}

// A snapshot restores into a fresh server the same stream: its
// messages at their sequences with their times and headers, the deleted
// sequences (a trailing one too: the next message gets sequence 6), and
// its consumers with their state, each as it was (ephemeral, mem_storage).
func TestSnapshotRestoreRoundTrip(t *testing.T) {
	for _, st := range []stream.StorageType{stream.FileStorage, stream.MemoryStorage} {
		t.Run(st.String(), func(t *testing.T) {
			tr := newMemTransport()
			js := newTestJS(t, vfs.NewCrashFS(), tr)
			defer js.Shutdown()
			cfg := snapStream(t, js, tr, st)
			before, _ := js.StreamInfo("SNAP", InfoOptions{})
			data, end := takeSnapshot(t, js, tr, "SNAP", SnapshotRequest{})
			if end != "" {
				t.Fatalf("a snapshot smaller than a chunk ended with %q, want a bare empty message", end)
			}

			tr2 := newMemTransport()
			js2 := newTestJS(t, vfs.NewCrashFS(), tr2)
			defer js2.Shutdown()
			info, jerr := restoreBytes(t, js2, tr2, cfg, data, 64)
			if jerr != nil {
				t.Fatal(jerr)
			}
			b, a := before.State, info.State
			if a.Msgs != 3 || a.Msgs != b.Msgs || a.Bytes != b.Bytes || a.FirstSeq != 1 || a.LastSeq != 5 || a.NumDeleted != 2 || a.Consumers != 3 {
				t.Fatalf("restored state %+v, snapshotted %+v", a, b)
			}
			for _, seq := range []uint64{1, 3, 4} {
				m1, _ := js.GetMsg("SNAP", MsgGetRequest{Seq: seq})
				m2, err := js2.GetMsg("SNAP", MsgGetRequest{Seq: seq})
				if err != nil || m2.Subject != m1.Subject || m2.Time != m1.Time || !bytes.Equal(m2.Header, m1.Header) || !bytes.Equal(m2.Data, m1.Data) {
					t.Fatalf("message %d restored as %+v (%v), was %+v", seq, m2, err, m1)
				}
			}
			for name, want := range map[string]string{"D": "durable 3 2 1", "E": "ephemeral 1 0 1", "M": "durable 0 0 0"} {
				ci, err := js2.ConsumerInfo("SNAP", name)
				if err != nil {
					t.Fatalf("consumer %s: %v", name, err)
				}
				kind := "durable"
				if ci.Config.Durable == "" {
					kind = "ephemeral"
				}
				if got := fmt.Sprintf("%s %d %d %d", kind, ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumAckPending); got != want {
					t.Errorf("consumer %s restored as %q, want %q (kind, delivered, ack floor, pending)", name, got, want)
				}
			}
			acks := tr2.inbox("_INBOX.after")
			tr2.Publish("snap.z", "_INBOX.after", nil, []byte("new"))
			if got := acks.next(t); got != `{"stream":"SNAP","seq":6}` {
				t.Fatalf("first publish after the restore: %s", got)
			}
		})
	}
}

// The restored file stream and its consumers are what a start restores:
// they survive a restart of the server.
func TestRestoredStreamSurvivesRestart(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	cfg := snapStream(t, js, tr, stream.FileStorage)
	data, _ := takeSnapshot(t, js, tr, "SNAP", SnapshotRequest{})

	fs := vfs.NewCrashFS()
	tr2 := newMemTransport()
	js2 := newTestJS(t, fs, tr2)
	if _, jerr := restoreBytes(t, js2, tr2, cfg, data, 1<<20); jerr != nil {
		t.Fatal(jerr)
	}
	crashed := fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop}) // a restore answers once it is durable
	js2.Shutdown()
	js3 := newTestJS(t, crashed, newMemTransport())
	defer js3.Shutdown()
	info, jerr := js3.StreamInfo("SNAP", InfoOptions{})
	if jerr != nil || info.State.Msgs != 3 || info.State.LastSeq != 5 {
		t.Fatalf("after a power loss: %+v %v", info, jerr)
	}
	names, _ := js3.ConsumerNames("SNAP")
	if strings.Join(names, ",") != "D,E" {
		t.Fatalf("consumers after a power loss %v, want D and E (M keeps no files)", names)
	}
}

// A damaged or cut snapshot is refused with the reason, and leaves no
// stream and no files behind.
func TestRestoreRefusesDamagedSnapshot(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	cfg := snapStream(t, js, tr, stream.FileStorage)
	data, _ := takeSnapshot(t, js, tr, "SNAP", SnapshotRequest{})
	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 0x10
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"cut in a chunk", data[:len(data)-7], "restore failed: s2: corrupt input"},
		{"bit flipped", flipped, "restore failed: s2: corrupt input"},
		{"nothing", nil, "restore failed: backup was truncated"},
		{"not a snapshot", []byte("hello, world"), "restore failed: s2: corrupt input"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewCrashFS()
			tr2 := newMemTransport()
			js2 := newTestJS(t, fs, tr2)
			defer js2.Shutdown()
			_, jerr := restoreBytes(t, js2, tr2, cfg, tc.data, 64)
			if jerr == nil || jerr.ErrCode != uint16(jserr.StreamRestore) || !strings.HasPrefix(jerr.Description, tc.want) {
				t.Fatalf("got %v, want 10062 %q", jerr, tc.want)
			}
			if names := js2.Names(""); len(names) != 0 {
				t.Fatalf("streams after a refused restore: %v", names)
			}
			if left, _ := fs.ReadDir(js2.streamsDir()); len(left) != 0 {
				t.Fatalf("left in the streams directory: %v", left)
			}
		})
	}
	t.Run("cut after an entry", func(t *testing.T) {
		// A snapshot whose bytes end cleanly before the end entry: the
		// archive without it, compressed whole.
		js2 := newTestJS(t, vfs.NewCrashFS(), newMemTransport())
		defer js2.Shutdown()
		tr2 := js2.tr.(*memTransport)
		var buf bytes.Buffer
		w := snapshot.NewWriter(&buf)
		state := []byte(`{"messages":1,"first_seq":1,"last_seq":1,"consumer_count":0}`)
		msg := []byte("hi")
		if w.WriteEntry(snapshot.Header{Name: snapshot.StateName, PayloadSize: int64(len(state))}, state) != nil ||
			w.WriteEntry(snapshot.Header{Name: "snap.a", Sequence: 1, PayloadSize: 2}, msg) != nil || w.Flush() != nil {
			t.Fatal("write")
		}
		_, jerr := restoreBytes(t, js2, tr2, cfg, buf.Bytes(), 1<<20)
		if jerr == nil || jerr.Description != "restore failed: backup was truncated" {
			t.Fatalf("got %v, want backup was truncated", jerr)
		}
	})
}

// A restore is refused for a stream that exists or is being restored;
// a stream created while the restore runs wins, and the restore fails.
func TestRestoreNameTaken(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	cfg := snapStream(t, js, tr, stream.FileStorage)
	data, _ := takeSnapshot(t, js, tr, "SNAP", SnapshotRequest{NoConsumers: true})
	noop := func(string, *StreamInfo, *jserr.Error) {}
	if _, err := js.BeginRestore(cfg, nil, noop); err == nil || err.ErrCode != uint16(jserr.StreamNameExistRestoreFailed) {
		t.Fatalf("restore of an existing stream: %v, want 10130", err)
	}

	tr2 := newMemTransport()
	js2 := newTestJS(t, vfs.NewCrashFS(), tr2)
	defer js2.Shutdown()
	done := make(chan *jserr.Error, 1)
	subj, jerr := js2.BeginRestore(cfg, nil, func(_ string, _ *StreamInfo, err *jserr.Error) { done <- err })
	if jerr != nil {
		t.Fatal(jerr)
	}
	if _, err := js2.BeginRestore(cfg, nil, noop); err == nil || err.ErrCode != uint16(jserr.StreamNameExistRestoreFailed) {
		t.Fatalf("second restore of the same name: %v, want 10130", err)
	}
	if _, err := js2.AddStream(cfg); err != nil {
		t.Fatal(err)
	}
	acks := tr2.inbox("_R.ack")
	tr2.Publish(subj, "_R.ack", nil, data)
	<-acks.ch
	tr2.Publish(subj, "_R.end", nil, nil)
	if err := <-done; err == nil || err.ErrCode != uint16(jserr.StreamNameExistRestoreFailed) {
		t.Fatalf("restore over a stream created meanwhile: %v, want 10130", err)
	}
	info, _ := js2.StreamInfo("SNAP", InfoOptions{})
	if info.State.Msgs != 0 {
		t.Fatalf("the stream created meanwhile holds %d messages", info.State.Msgs)
	}
	if left, _ := js2.cfg.FS.ReadDir(js2.streamsDir()); len(left) != 1 || left[0] != "SNAP" {
		t.Fatalf("streams directory %v, want only SNAP", left)
	}
}

// At most window/chunk chunks are unanswered at a time; a snapshot of
// whole chunks ends with 204.
func TestSnapshotFlowControl(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	if _, err := js.AddStream(stream.Config{Name: "BIG", Subjects: []string{"big"}}); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.pub")
	payload := make([]byte, 2000)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		for i := range payload {
			payload[i] = byte(rng.Uint32()) // incompressible
		}
		tr.Publish("big", "_INBOX.pub", nil, payload)
		acks.next(t)
	}
	c := newSnapClient(tr, "_SNAP.big")
	c.hold = true
	start, jerr := js.Snapshot("BIG", SnapshotRequest{DeliverSubject: "_SNAP.big", ChunkSize: 1024, WindowSize: 3 * 1024})
	if jerr != nil {
		t.Fatal(jerr)
	}
	start.Send()
	waitUntil(t, "3 chunks", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.chunks == 3 })
	// Nothing more comes while the three are unanswered: the sender
	// needs an answer for the fourth. (It would end the snapshot with
	// 408 No Flow Response after 5 s.)
	c.mu.Lock()
	held := c.held
	c.held, c.hold = nil, false
	if c.chunks != 3 {
		t.Fatalf("%d chunks sent without answers, window of 3", c.chunks)
	}
	c.mu.Unlock()
	for _, reply := range held {
		tr.Publish(reply, "", nil, nil)
	}
	select {
	case end := <-c.end:
		if string(end) != string(snapEOF) {
			t.Fatalf("end %q, want %q", end, snapEOF)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the snapshot did not end")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rd := bytes.NewReader(c.data.Bytes())
	if rd.Len() < 20*2000/2 {
		t.Fatalf("snapshot of %d bytes for 40 kB of messages", rd.Len())
	}
}

// A client that stops answering ends the snapshot with 408 No Flow
// Response, reported in the complete advisory.
func TestSnapshotNoFlowResponse(t *testing.T) {
	old := snapAckTimeout
	snapAckTimeout = 50 * time.Millisecond
	t.Cleanup(func() { snapAckTimeout = old })
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	if _, err := js.AddStream(stream.Config{Name: "NF", Subjects: []string{"nf"}}); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.pub")
	payload := make([]byte, 4000)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 4 {
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		tr.Publish("nf", "_INBOX.pub", nil, payload)
		acks.next(t)
	}
	done := tr.inbox("$JS.EVENT.ADVISORY.STREAM.SNAPSHOT_COMPLETE.NF")
	c := newSnapClient(tr, "_SNAP.nf")
	c.hold = true
	start, jerr := js.Snapshot("NF", SnapshotRequest{DeliverSubject: "_SNAP.nf", ChunkSize: 1024, WindowSize: 2048})
	if jerr != nil {
		t.Fatal(jerr)
	}
	start.Send()
	select {
	case end := <-c.end:
		if string(end) != string(snapNoFlow) {
			t.Fatalf("end %q, want %q", end, snapNoFlow)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the snapshot did not end")
	}
	if adv := done.next(t); !strings.Contains(adv, `"error":"no flow response"`) {
		t.Fatalf("complete advisory %s", adv)
	}
}

// A restore that receives no chunk for the stall timeout is abandoned:
// no answer, nothing left, the name free again.
func TestRestoreStalls(t *testing.T) {
	old := restoreStallTimeout
	restoreStallTimeout = 200 * time.Millisecond
	t.Cleanup(func() { restoreStallTimeout = old })
	fs := vfs.NewCrashFS()
	tr := newMemTransport()
	js := newTestJS(t, fs, tr)
	defer js.Shutdown()
	cfg := stream.Config{Name: "ST", Subjects: []string{"st"}}
	var buf bytes.Buffer
	w := snapshot.NewWriter(&buf)
	state := []byte(`{"messages":0,"consumer_count":0}`)
	if w.WriteEntry(snapshot.Header{Name: snapshot.StateName, PayloadSize: int64(len(state))}, state) != nil || w.Flush() != nil {
		t.Fatal("write")
	}
	acks := tr.inbox("_R.ack")
	called := make(chan struct{}, 8)
	// A chunk, acknowledged, then nothing. On a loaded machine the
	// restore may stall before its first chunk arrives (no ack then):
	// begin again.
	for attempt := 1; ; attempt++ {
		var subj string
		waitUntil(t, "a restore to begin (an earlier one stalled first)", func() bool {
			var jerr *jserr.Error
			subj, jerr = js.BeginRestore(cfg, nil, func(string, *StreamInfo, *jserr.Error) { called <- struct{}{} })
			return jerr == nil
		})
		tr.Publish(subj, "_R.ack", nil, buf.Bytes())
		select {
		case <-acks.ch:
		case <-time.After(5 * restoreStallTimeout):
			if attempt == 5 {
				t.Fatal("no chunk acknowledged in 5 restores")
			}
			continue
		}
		break
	}
	waitUntil(t, "the stalled restore to end", func() bool {
		_, err := js.BeginRestore(cfg, nil, func(string, *StreamInfo, *jserr.Error) {})
		return err == nil
	})
	select {
	case <-called:
		t.Fatal("a stalled restore was answered")
	default:
	}
	waitUntil(t, "its files to go", func() bool {
		left, _ := fs.ReadDir(js.streamsDir())
		return len(left) <= 1 // the second restore's, at most
	})
}

// A restore that failed has freed its stream's name by the time its
// failure is answered, so that the client may restore again at once
// (before, the name stayed taken until the session's goroutine ended,
// and an immediate second restore got 10130).
func TestRestoreNameFreedBeforeAnswer(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	cfg := stream.Config{Name: "R", Subjects: []string{"r.>"}}
	again := make(chan *jserr.Error, 1)
	subj, jerr := js.BeginRestore(cfg, nil, func(_ string, _ *StreamInfo, err *jserr.Error) {
		_, err2 := js.BeginRestore(cfg, nil, func(string, *StreamInfo, *jserr.Error) {})
		again <- err2
	})
	if jerr != nil {
		t.Fatal(jerr)
	}
	tr.Publish(subj, "_R.ack", nil, []byte("not a snapshot"))
	tr.Publish(subj, "_R.end", nil, nil)
	select {
	case err := <-again:
		if err != nil {
			t.Fatalf("a restore begun when the failed one was answered: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the restore did not end within 10 s")
	}
}
