package jetstream

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

func newTestJS(t *testing.T, fs vfs.FS, tr Transport) *JetStream {
	t.Helper()
	js, err := New(Config{StoreDir: "/sd", FS: fs, ServerName: "s1"}, tr)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func (in *inbox) next(t *testing.T) string {
	t.Helper()
	select {
	case b := <-in.ch:
		return string(b)
	case <-time.After(5 * time.Second):
		t.Fatal("no reply within 5s")
		return ""
	}
}

func ordersConfig(storage stream.StorageType) stream.Config {
	return stream.Config{Name: "ORDERS", Subjects: []string{"events.orders.>"}, Storage: storage}
}

func TestPublishIsStoredAndAcknowledged(t *testing.T) {
	for _, storage := range []stream.StorageType{stream.FileStorage, stream.MemoryStorage} {
		t.Run(storage.String(), func(t *testing.T) {
			fs, tr := vfs.NewCrashFS(), newMemTransport()
			js := newTestJS(t, fs, tr)
			defer js.Shutdown()
			if _, err := js.AddStream(ordersConfig(storage)); err != nil {
				t.Fatal(err)
			}
			acks := tr.inbox("_INBOX.acks")
			for i := 1; i <= 3; i++ {
				tr.Publish("events.orders.created", "_INBOX.acks", nil, []byte(fmt.Sprint("order-", i)))
				if got, want := acks.next(t), fmt.Sprintf(`{"stream":"ORDERS","seq":%d}`, i); got != want {
					t.Fatalf("PubAck %q, want %q", got, want)
				}
			}
			hdr := []byte("NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n")
			tr.Publish("events.orders.x", "_INBOX.acks", hdr, []byte("once"))
			tr.Publish("events.orders.x", "_INBOX.acks", hdr, []byte("twice"))
			if got := acks.next(t); got != `{"stream":"ORDERS","seq":4}` {
				t.Fatalf("first publish with id: %q", got)
			}
			if got := acks.next(t); got != `{"stream":"ORDERS","seq":4,"duplicate": true}` {
				t.Fatalf("duplicate publish: %q", got)
			}
			sm, jerr := js.GetMsg("ORDERS", MsgGetRequest{Seq: 2})
			if jerr != nil || string(sm.Data) != "order-2" || sm.Subject != "events.orders.created" {
				t.Fatalf("GetMsg seq 2: %+v %v", sm, jerr)
			}
		})
	}
}

func TestStreamsSurviveRestart(t *testing.T) {
	fs, tr := vfs.NewCrashFS(), newMemTransport()
	js := newTestJS(t, fs, tr)
	if _, err := js.AddStream(ordersConfig(stream.FileStorage)); err != nil {
		t.Fatal(err)
	}
	acks := tr.inbox("_INBOX.a")
	hdr := []byte("NATS/1.0\r\nNats-Msg-Id: k1\r\n\r\n")
	tr.Publish("events.orders.1", "_INBOX.a", hdr, []byte("x"))
	acks.next(t)
	crashed := fs.Crash(vfs.CrashOptions{Tail: vfs.TailDrop})
	js.Shutdown()

	tr2 := newMemTransport()
	js2 := newTestJS(t, crashed, tr2)
	defer js2.Shutdown()
	info, jerr := js2.StreamInfo("ORDERS", InfoOptions{})
	if jerr != nil {
		t.Fatal(jerr)
	}
	if info.State.Msgs != 1 || info.State.LastSeq != 1 {
		t.Fatalf("after power loss: %+v", info.State)
	}
	acks2 := tr2.inbox("_INBOX.a")
	tr2.Publish("events.orders.1", "_INBOX.a", hdr, []byte("x"))
	if got := acks2.next(t); got != `{"stream":"ORDERS","seq":1,"duplicate": true}` {
		t.Fatalf("duplicate after restart: %q", got)
	}
}

func TestCreateConflictsAndErrors(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	cfg := ordersConfig(stream.MemoryStorage)
	if _, err := js.AddStream(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := js.AddStream(cfg); err != nil {
		t.Fatalf("identical re-create: %v", err)
	}
	cfg.MaxMsgs = 10
	expectErr(t, second(js.AddStream(cfg)), jserr.StreamNameExist)
	expectErr(t, second(js.AddStream(stream.Config{Name: "B", Subjects: []string{"events.*.created"}, Storage: stream.MemoryStorage})), jserr.StreamSubjectOverlap)
	expectErr(t, second(js.StreamInfo("NOPE", InfoOptions{})), jserr.StreamNotFound)
	expectErr(t, js.DeleteMsg("ORDERS", 99), jserr.SequenceNotFound)
	expectErr(t, second(js.Purge("ORDERS", store.PurgeRequest{Seq: 2, Keep: 1})), jserr.BadRequest)
	if err := js.DeleteStream("ORDERS"); err != nil {
		t.Fatal(err)
	}
	expectErr(t, js.DeleteStream("ORDERS"), jserr.StreamNotFound)
	if tr.Publish("events.orders.x", "", nil, nil) {
		t.Fatal("a deleted stream still captures its subjects")
	}
}

func second[T any](_ T, err *jserr.Error) *jserr.Error { return err }

func expectErr(t *testing.T, err *jserr.Error, code jserr.ErrCode) {
	t.Helper()
	if err == nil || err.ErrCode != uint16(code) {
		t.Fatalf("got %v, want err_code %d", err, code)
	}
}

func TestCorruptMetadataIsReportedAndKept(t *testing.T) {
	fs, tr := vfs.NewCrashFS(), newMemTransport()
	js := newTestJS(t, fs, tr)
	if _, err := js.AddStream(ordersConfig(stream.FileStorage)); err != nil {
		t.Fatal(err)
	}
	js.Shutdown()
	meta := "/sd/jetstream/$G/streams/ORDERS/meta.json"
	if err := fs.FlipBit(meta, 40); err != nil {
		t.Fatal(err)
	}
	var logs []string
	js2, err := New(Config{StoreDir: "/sd", FS: fs, Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }}, newMemTransport())
	if err != nil {
		t.Fatal(err)
	}
	defer js2.Shutdown()
	if len(js2.Names("")) != 0 || len(logs) == 0 || !strings.Contains(strings.Join(logs, "\n"), "corrupt") {
		t.Fatalf("corrupt metadata not reported: names %v logs %v", js2.Names(""), logs)
	}
	if _, _, err := fs.Stat(meta); err != nil {
		t.Fatalf("corrupt stream files were removed: %v", err)
	}
}

func TestStreamActionAdvisories(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	created, updated, deleted := tr.inbox("$JS.EVENT.ADVISORY.STREAM.CREATED.ORDERS"),
		tr.inbox("$JS.EVENT.ADVISORY.STREAM.UPDATED.ORDERS"), tr.inbox("$JS.EVENT.ADVISORY.STREAM.DELETED.ORDERS")
	cfg := ordersConfig(stream.MemoryStorage)
	if _, err := js.AddStream(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.MaxMsgs = 5
	if _, err := js.UpdateStream(cfg); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream("ORDERS"); err != nil {
		t.Fatal(err)
	}
	for in, action := range map[*inbox]string{created: "create", updated: "modify", deleted: "delete"} {
		got := in.next(t)
		want := `"type":"io.nats.jetstream.advisory.v1.stream_action"`
		if !strings.Contains(got, want) || !strings.Contains(got, `"stream":"ORDERS","action":"`+action+`"`) {
			t.Errorf("advisory %q lacks %s or action %s", got, want, action)
		}
	}
}

// A stream created while another of the same name is being deleted
// starts empty and keeps its files: before, it could open the files the
// delete had yet to remove (and recover their messages), which the
// delete then removed from under it (found by the review: 52 of 508
// creates during a delete storm came back with the old messages).
func TestCreateDuringDeleteStartsEmpty(t *testing.T) {
	tr := newMemTransport()
	js := newTestJS(t, vfs.NewCrashFS(), tr)
	defer js.Shutdown()
	full := stream.Config{Name: "S", Subjects: []string{"a"}, Storage: stream.FileStorage}
	fresh := stream.Config{Name: "S", Subjects: []string{"zzz"}, Storage: stream.FileStorage}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			if _, err := js.AddStream(full); err != nil {
				continue // the other config holds the name
			}
			for range 20 {
				tr.Publish("a", "", nil, []byte("old"))
			}
			_ = js.DeleteStream("S")
		}
	}()
	for i := 0; ; i++ {
		select {
		case <-done:
			return
		default:
		}
		info, err := js.AddStream(fresh)
		if err != nil {
			continue
		}
		if info.State.LastSeq != 0 {
			t.Fatalf("create %d: a new stream holds %+v from a deleted one", i, info.State)
		}
		_ = js.DeleteStream("S")
	}
}

// A stream of 60,000 subjects is created, and checked against the other
// streams, with one index query per subject rather than a comparison per
// pair (issue: an 8,000-subject create took 10 s, a 60,000-subject one
// minutes, stalling the API workers and shutdown).
func TestManySubjectsStream(t *testing.T) {
	js := newTestJS(t, vfs.NewCrashFS(), newMemTransport())
	defer js.Shutdown()
	subjects := make([]string, 60000)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("big.r%d.s%d", i%100, i)
	}
	if _, err := js.AddStream(stream.Config{Name: "BIG", Subjects: subjects, Storage: stream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	_, err := js.AddStream(stream.Config{Name: "OTHER", Subjects: []string{"other.>", "big.*.s59999"}, Storage: stream.MemoryStorage})
	if err == nil || err.ErrCode != 10065 {
		t.Fatalf("overlap with one of 60,000 subjects: %v, want 10065", err)
	}
	if _, err := js.AddStream(stream.Config{Name: "OTHER", Subjects: []string{"other.>", "big.r1.s0"}, Storage: stream.MemoryStorage}); err != nil {
		t.Fatalf("no overlap (big.r1.s0 is not a subject of BIG): %v", err)
	}
}
