package stream

import (
	"testing"

	"github.com/cairnmq/cairn/internal/store/memstore"
)

func TestRePublish(t *testing.T) {
	cfg := Config{Name: "R", Subjects: []string{"in.>"}, RePublish: &RePublish{Source: "in.*", Destination: "out.$1"}}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := New(cfg, memstore.New(cfg.StoreConfig()))
	first := s.Apply(Entry{Subject: "in.a", Data: []byte("1"), Time: 1e9})
	deep := s.Apply(Entry{Subject: "in.a.b", Data: []byte("x"), Time: 1e9})
	second := s.Apply(Entry{Subject: "in.a", Header: []byte("NATS/1.0\r\nX: y\r\n\r\n"), Data: []byte("2"), Time: 2e9})
	if deep.RePublish != nil {
		t.Errorf("in.a.b does not match in.* but was republished to %s", deep.RePublish.Subject)
	}
	want1 := "NATS/1.0\r\nNats-Stream: R\r\nNats-Subject: in.a\r\nNats-Sequence: 1\r\nNats-Time-Stamp: 1970-01-01T00:00:01Z\r\nNats-Last-Sequence: 0\r\n\r\n"
	if rp := first.RePublish; rp == nil || rp.Subject != "out.a" || string(rp.Header) != want1 || string(rp.Data) != "1" {
		t.Fatalf("first: %+v", first.RePublish)
	}
	want2 := "NATS/1.0\r\nX: y\r\nNats-Stream: R\r\nNats-Subject: in.a\r\nNats-Sequence: 3\r\nNats-Time-Stamp: 1970-01-01T00:00:02Z\r\nNats-Last-Sequence: 1\r\n\r\n"
	if rp := second.RePublish; rp == nil || string(rp.Header) != want2 {
		t.Fatalf("second: %q", second.RePublish.Header)
	}

	cfg.RePublish.HeadersOnly = true
	if err := s.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	ho := s.Apply(Entry{Subject: "in.c", Data: []byte("123"), Time: 3e9})
	if rp := ho.RePublish; rp == nil || rp.Data != nil ||
		string(rp.Header) != "NATS/1.0\r\nNats-Stream: R\r\nNats-Subject: in.c\r\nNats-Sequence: 4\r\nNats-Time-Stamp: 1970-01-01T00:00:03Z\r\nNats-Last-Sequence: 0\r\nNats-Msg-Size: 3\r\n\r\n" {
		t.Fatalf("headers only: %+v", ho.RePublish)
	}
}

// A ">" to ">" republish of a stream whose only subject is its
// transform's source republishes the transformed subjects.
func TestImplicitRePublish(t *testing.T) {
	cfg := Config{Name: "I", Subjects: []string{"a.>"}, SubjectTransform: &SubjectTransform{Source: "a.>", Destination: "b.>"},
		RePublish: &RePublish{Source: ">", Destination: ">"}}
	cfg.SetDefaults()
	if cfg.RePublish.Source != "b.>" || cfg.RePublish.Destination != "b.>" {
		t.Fatalf("republish %+v", cfg.RePublish)
	}
}
