package stream

import (
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
)

// nats-server v2.15.2 wrote "Nats-Stream-Source: O 1 > > o.x em9CWD3V"
// for a stream O created at 2026-12-01T08:11:59.817162384Z.
func TestIdentity(t *testing.T) {
	created, _ := time.Parse(time.RFC3339Nano, "2026-12-01T08:11:59.817162384Z")
	if got := Identity(created); got != "em9CWD3V" {
		t.Fatalf("Identity = %q, want em9CWD3V", got)
	}
}

func TestSourcedEntry(t *testing.T) {
	src := Source{Name: "O", FilterSubject: "o.a"}
	msg := &store.StoredMsg{
		Subject: "o.a", Seq: 7, Data: []byte("x"), Time: 5,
		Header: []byte("NATS/1.0\r\nNats-Msg-Id: abc\r\nNats-Expected-Stream: O\r\nNats-Stream-Source: P 3 > > p.x ident\r\n\r\n"),
	}
	e := SourcedEntry(msg, src.IndexName(), "ID123456", "mapped.a", 99)
	want := "NATS/1.0\r\nNats-Msg-Id: abc\r\nNats-Stream-Source: O 7 o.a > o.a ID123456\r\n\r\n"
	if string(e.Header) != want || e.Subject != "mapped.a" || e.Time != 99 || !e.Sourced || string(e.Data) != "x" {
		t.Fatalf("entry %+v\nheader %q\nwant   %q", e, e.Header, want)
	}
	iname, seq, ident, ok := SourcedFrom(e.Header)
	if !ok || iname != src.IndexName() || seq != 7 || ident != "ID123456" {
		t.Fatalf("SourcedFrom = %q %d %q %v", iname, seq, ident, ok)
	}
	if _, _, _, ok := SourcedFrom([]byte("NATS/1.0\r\nNats-Stream-Source: O x\r\n\r\n")); ok {
		t.Fatal("a malformed header was read")
	}
	multi := Source{Name: "O", SubjectTransforms: []SubjectTransform{{Source: "o.a", Destination: "t.a"}, {Source: "o.c", Destination: "t.c"}}}
	e = SourcedEntry(msg, multi.IndexName(), "ID123456", "t.a", 99)
	if iname, seq, _, ok := SourcedFrom(e.Header); !ok || iname != multi.IndexName() || seq != 7 {
		t.Fatalf("several transforms: SourcedFrom = %q %d %v, want %q 7", iname, seq, ok, multi.IndexName())
	}
	plain := SourcedEntry(&store.StoredMsg{Subject: "s", Seq: 1}, "O > >", "", "s", 1)
	if string(plain.Header) != "NATS/1.0\r\nNats-Stream-Source: O 1 > > s\r\n\r\n" {
		t.Fatalf("header of a message without one: %q", plain.Header)
	}
}

func TestIndexName(t *testing.T) {
	for _, tc := range []struct {
		src  Source
		want string
	}{
		{Source{Name: "O"}, "O > >"},
		{Source{Name: "O", FilterSubject: "a.*"}, "O a.* >"},
		{Source{Name: "O", SubjectTransforms: []SubjectTransform{{Source: "a.>", Destination: "b.>"}, {Source: "c"}}}, "O a.>\fc b.>\f>"},
	} {
		if got := tc.src.IndexName(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.src, got, tc.want)
		}
	}
}

// A mirror stores at the origin's sequences: gaps are skipped, what it
// has is not stored again, and no header check applies.
func TestApplyMirror(t *testing.T) {
	cfg := Config{Name: "M", Mirror: &Source{Name: "O"}}
	cfg.SetDefaults()
	st := memstore.New(cfg.StoreConfig())
	s := New(cfg, st)
	hdr := []byte("NATS/1.0\r\nNats-Expected-Last-Sequence: 99\r\n\r\n")
	for _, seq := range []uint64{3, 4, 9} {
		if r := s.ApplyMirror(Entry{Subject: "a", Header: hdr, Time: 1}, seq); r.Err != nil || r.Seq != seq || r.Duplicate {
			t.Fatalf("seq %d: %+v", seq, r)
		}
	}
	if r := s.ApplyMirror(Entry{Subject: "a", Time: 1}, 4); !r.Duplicate {
		t.Fatalf("again: %+v", r)
	}
	state := st.State(true)
	if state.FirstSeq != 3 || state.LastSeq != 9 || state.Msgs != 3 || state.NumDeleted != 4 {
		t.Fatalf("state %+v", state)
	}
}
