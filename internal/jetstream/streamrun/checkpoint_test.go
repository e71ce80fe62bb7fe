package streamrun

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
)

type nopTransport struct{}

type nopSub struct{}

func (nopSub) Unsubscribe() {}

func (nopTransport) Subscribe(string, string, MsgHandler) (Subscription, error) { return nopSub{}, nil }
func (nopTransport) Publish(string, string, []byte, []byte) bool                { return true }
func (nopTransport) PublishAs(string, string, string, []byte, []byte) bool      { return true }
func (nopTransport) HasInterest(string) bool                                    { return false }

func newCkptStream(t *testing.T) *Stream {
	t.Helper()
	cfg := stream.Config{Name: "K", Subjects: []string{"k.>"}, Storage: stream.MemoryStorage}
	cfg.SetDefaults()
	env := Env{Transport: nopTransport{}, Now: time.Now, Logf: t.Logf, Storage: NewStorage(nil, "", NewUsage(), time.Now, t.Logf, t.Logf)}
	r := New(env, cfg, time.Now(), "", memstore.New(cfg.StoreConfig()))
	if err := r.Open(); err != nil {
		t.Fatal(err)
	}
	if err := r.Serve(); err != nil {
		t.Fatal(err)
	}
	return r
}

// AppliedIndex follows the log's indexes; Held runs its function with
// the state still, and refuses once the stream stopped.
func TestHeldAndAppliedIndex(t *testing.T) {
	r := newCkptStream(t)
	for range 3 {
		if _, ok := r.Do(&stream.Purge{}); !ok {
			t.Fatal("purge not applied")
		}
	}
	var index uint64
	var state []byte
	if !r.Held(func() {
		index = r.AppliedIndex()
		var err error
		ck, at := r.Checkpoint()
		if state, err = ck.Append(nil); err != nil || at != index {
			t.Error(err, at)
		}
	}) {
		t.Fatal("Held refused a running stream")
	}
	if index < 3 || len(state) == 0 {
		t.Fatalf("applied index %d, state %d bytes", index, len(state))
	}
	if err := r.Stop(nil); err != nil {
		t.Fatal(err)
	}
	if r.Held(func() { t.Error("ran on a stopped stream") }) {
		t.Fatal("Held on a stopped stream")
	}
}

// Restore takes a checkpoint's state and index in place of Open, and
// refuses damaged bytes.
func TestRestore(t *testing.T) {
	src := newCkptStream(t)
	defer src.Stop(nil)
	var state []byte
	var ck *stream.Checkpoint
	src.Held(func() { ck, _ = src.Checkpoint() })
	state, err := ck.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := stream.CheckpointConfig(state)
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Transport: nopTransport{}, Now: time.Now, Logf: t.Logf, Storage: NewStorage(nil, "", NewUsage(), time.Now, t.Logf, t.Logf)}
	r := New(env, cfg, time.Now(), "", memstore.New(cfg.StoreConfig()))
	bad := bytes.Clone(state)
	bad[1] ^= 1
	if err := r.Restore(bad, 9); !errors.Is(err, stream.ErrBadCheckpoint) {
		t.Fatalf("damaged: %v", err)
	}
	if err := r.Restore(state, 9); err != nil || r.AppliedIndex() != 9 {
		t.Fatalf("restore: %v, applied %d", err, r.AppliedIndex())
	}
}
