package jetstream

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/filestore"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

func publishTo(t *testing.T, tr *memTransport, subj string, n int) {
	t.Helper()
	acks := tr.inbox("_INBOX.pub." + subj)
	for i := range n {
		tr.Publish(subj, "_INBOX.pub."+subj, nil, fmt.Appendf(nil, "m-%d", i))
	}
	for range n {
		if got := acks.next(t); strings.Contains(got, "error") {
			t.Fatalf("publish to %s: %s", subj, got)
		}
	}
}

// An update of an interest stream keeps what its consumers still need;
// a change to interest retention removes what no consumer needs, as
// nats-server v2.15.2 does (checked with the nats CLI against both: a
// description change kept 3 of 3; a switch from limits kept only the
// filtered consumer's message, and nothing without consumers).
func TestInterestRetentionOnStreamUpdate(t *testing.T) {
	fs, tr := vfs.NewCrashFS(), newMemTransport()
	js := newTestJS(t, fs, tr)
	defer js.Shutdown()

	cfg := stream.Config{Name: "IU", Subjects: []string{"iu.>"}, Retention: stream.InterestPolicy, Storage: stream.FileStorage}
	if _, err := js.AddStream(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer("IU", consumer.Config{Durable: "C", AckPolicy: consumer.AckExplicit}, CreateOrUpdate, false); err != nil {
		t.Fatal(err)
	}
	publishTo(t, tr, "iu.a", 3)
	cfg.Description = "hello"
	if _, err := js.UpdateStream(cfg); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, js, "IU"); n != 3 {
		t.Fatalf("an interest stream's update left %d of the 3 messages its consumer needs", n)
	}

	lcfg := stream.Config{Name: "L", Subjects: []string{"l.>"}, Storage: stream.FileStorage}
	if _, err := js.AddStream(lcfg); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer("L", consumer.Config{Durable: "D", AckPolicy: consumer.AckExplicit, FilterSubject: "l.b"}, CreateOrUpdate, false); err != nil {
		t.Fatal(err)
	}
	publishTo(t, tr, "l.a", 3)
	publishTo(t, tr, "l.b", 1)
	lcfg.Retention = stream.InterestPolicy
	if _, err := js.UpdateStream(lcfg); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, js, "L"); n != 1 {
		t.Fatalf("after the switch to interest retention %d messages are left, want 1 (l.b, which D needs)", n)
	}
}

// A durable consumer a start cannot restore (a damaged meta.json) holds
// an interest stream's retention: its messages are neither removed at
// the start nor on other consumers' acks, and new ones are kept. A new
// consumer of that name sets the old files aside and ends the hold.
func TestUnrestoredConsumerHoldsInterestRetention(t *testing.T) {
	fs, tr := vfs.NewCrashFS(), newMemTransport()
	js := newTestJS(t, fs, tr)
	cfg := stream.Config{Name: "ORDERS", Subjects: []string{"o.>"}, Retention: stream.InterestPolicy, Storage: stream.FileStorage}
	if _, err := js.AddStream(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer("ORDERS", consumer.Config{Durable: "C", AckPolicy: consumer.AckExplicit}, CreateOrUpdate, false); err != nil {
		t.Fatal(err)
	}
	publishTo(t, tr, "o.x", 3)
	js.Shutdown()
	obs := "/sd/jetstream/$G/streams/ORDERS/obs"
	if err := fs.FlipBit(obs+"/C/meta.json", 40); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var logs []string
	logf := func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, fmt.Sprintf(f, a...))
	}
	tr2 := newMemTransport()
	js2, err := New(Config{StoreDir: "/sd", FS: fs, ServerName: "s1", Logf: logf}, tr2)
	if err != nil {
		t.Fatal(err)
	}
	defer js2.Shutdown()
	if n := streamMsgs(t, js2, "ORDERS"); n != 3 {
		t.Fatalf("the start removed messages an unrestored consumer may need: %d of 3 left", n)
	}
	publishTo(t, tr2, "o.y", 1)
	if n := streamMsgs(t, js2, "ORDERS"); n != 4 {
		t.Fatalf("a message published with only an unrestored consumer was dropped: %d of 4 left", n)
	}
	mu.Lock()
	joined := strings.Join(logs, "\n")
	mu.Unlock()
	if !strings.Contains(joined, "removes no message while consumer C is not restored") {
		t.Fatalf("the hold is not logged: %s", joined)
	}

	// A new C: the damaged files move aside, untouched, and the hold ends.
	if _, err := js2.CreateConsumer("ORDERS", consumer.Config{Durable: "C", AckPolicy: consumer.AckExplicit, DeliverPolicy: consumer.DeliverNew}, CreateOrUpdate, false); err != nil {
		t.Fatal(err)
	}
	names, err := fs.ReadDir(obs)
	if err != nil {
		t.Fatal(err)
	}
	var aside string
	for _, n := range names {
		if strings.HasPrefix(n, "C.unrestored-") {
			aside = n
		}
	}
	if aside == "" {
		t.Fatalf("the unrestored consumer's files were not set aside: %v", names)
	}
	if _, err := readMetaRaw(fs, obs+"/"+aside+"/meta.json"); err != nil {
		t.Fatalf("the set-aside meta.json: %v", err)
	}
	if n := streamMsgs(t, js2, "ORDERS"); n != 0 {
		t.Fatalf("the hold did not end with the new consumer (deliver new): %d messages left", n)
	}
}

func readMetaRaw(fs vfs.FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 1<<16)
	n, _ := f.ReadAt(b, 0)
	return b[:n], nil
}

// A crash between the save of a consumer state that acknowledges
// messages and their removal from a workqueue or interest stream leaves
// them stored: the next start removes them, as nats-server v2.15.2 acks
// them again when it restores the consumer
// (consumer.checkStateForInterestStream). The state is written here
// directly, as such a crash leaves it: acked up to 2 of 3, plus 3
// acknowledged above the floor for the filtered consumer F.
func TestRestartRemovesAcknowledgedMessages(t *testing.T) {
	for _, ret := range []stream.RetentionPolicy{stream.WorkQueuePolicy, stream.InterestPolicy} {
		t.Run(ret.String(), func(t *testing.T) {
			fs, tr := vfs.NewCrashFS(), newMemTransport()
			js := newTestJS(t, fs, tr)
			cfg := stream.Config{Name: "W", Subjects: []string{"w.>"}, Retention: ret, Storage: stream.FileStorage}
			if _, err := js.AddStream(cfg); err != nil {
				t.Fatal(err)
			}
			for _, c := range []consumer.Config{
				{Durable: "C", AckPolicy: consumer.AckExplicit, FilterSubject: "w.a"},
				{Durable: "F", AckPolicy: consumer.AckExplicit, FilterSubject: "w.b"},
			} {
				if _, err := js.CreateConsumer("W", c, CreateOrUpdate, false); err != nil {
					t.Fatal(err)
				}
			}
			publishTo(t, tr, "w.a", 3) // 1-3
			publishTo(t, tr, "w.b", 3) // 4-6
			js.Shutdown()

			writeConsumerState(t, fs, "W", "C", &store.ConsumerState{
				Delivered: store.SequencePair{Consumer: 3, Stream: 3},
				AckFloor:  store.SequencePair{Consumer: 2, Stream: 2},
				Pending:   []store.StreamPending{{Stream: 3, Pending: store.Pending{Sequence: 3, Timestamp: 1}}},
			})
			writeConsumerState(t, fs, "W", "F", &store.ConsumerState{
				Delivered: store.SequencePair{Consumer: 3, Stream: 6},
				AckFloor:  store.SequencePair{Consumer: 1, Stream: 4},
				Pending:   []store.StreamPending{{Stream: 5, Pending: store.Pending{Sequence: 2, Timestamp: 1}}},
			})

			js2 := newTestJS(t, fs, newMemTransport())
			defer js2.Shutdown()
			deadline := time.Now().Add(10 * time.Second)
			for streamMsgs(t, js2, "W") != 2 {
				if time.Now().After(deadline) {
					ci, _ := js2.ConsumerInfo("W", "C")
					t.Fatalf("%d messages left after the restart, want 2 (3 and 5, pending); C %+v", streamMsgs(t, js2, "W"), ci)
				}
				time.Sleep(5 * time.Millisecond)
			}
			for _, seq := range []uint64{3, 5} {
				if _, err := js2.GetMsg("W", MsgGetRequest{Seq: seq}); err != nil {
					t.Fatalf("pending message %d was removed: %v", seq, err)
				}
			}
		})
	}
}

// writeConsumerState replaces the stored state of a consumer of a file
// stream while no engine runs.
func writeConsumerState(t *testing.T, fs vfs.FS, streamName, name string, st *store.ConsumerState) {
	t.Helper()
	s, err := filestore.Open(filestore.Config{Dir: "/sd/jetstream/$G/streams/" + streamName + "/msgs", FS: fs}, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cs, err := s.ConsumerStore(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.Update(st); err != nil {
		t.Fatal(err)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
}
