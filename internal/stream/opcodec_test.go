package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

// sampleOps has one operation of every kind, with the corner cases of
// their fields: an entry without a header and one with an empty header,
// flags, negative and large integers, sequences out of order.
func sampleOps(t testing.TB) []Op {
	var cfg Config
	if err := json.Unmarshal([]byte(`{"name":"S","subjects":["s.>"],"max_age":60000000000,"duplicate_window":120000000000,"metadata":{"k":"v"},"allow_rollup_hdrs":true}`), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.SetDefaults()
	return []Op{
		&Publish{Entries: []Entry{
			{Subject: "s.a", Data: []byte("x"), Time: 1},
			{Subject: "s.b", Header: []byte{}, Data: nil, Time: -5},
			{Subject: "s.c", Header: []byte("NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n"), Data: []byte("yy"), Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano(), FastBatch: true},
		}},
		&Publish{},
		&Copy{Entries: []Entry{{Subject: "s.d", Data: []byte("z"), Time: 7, Sourced: true}}},
		&Publish{Entries: []Entry{{Subject: "c.a", Header: []byte("NATS/1.0\r\nNats-Incr: 1\r\n\r\n"), Time: 2, MaxPayload: 1 << 20}}},
		&Copy{Mirror: true, Entries: []Entry{{Subject: "o.a", Time: 8}, {Subject: "o.b", Time: 9}}, OriginSeqs: []uint64{10, 1 << 40}},
		&BatchCommit{ID: "b1", Time: 11, Entries: []Entry{{Subject: "s.e", Header: []byte("NATS/1.0\r\n\r\n"), Data: []byte("w")}}},
		&BatchCommit{ID: "b2", Time: 12, MaxPayload: 64 << 20, Entries: []Entry{{Subject: "c.b"}}},
		&Purge{},
		&Purge{Request: store.PurgeRequest{Subject: "s.>", Seq: 12}},
		&Purge{Request: store.PurgeRequest{Keep: 3}},
		&DeleteMsg{Seq: 13},
		&UpdateConfig{Config: cfg},
		&Expire{Time: 1 << 62},
		&Expire{Time: 0},
		&FireSchedules{Time: 1_800_000_000_123_456_789},
		&Remove{Reason: RemoveAcked, Seqs: []uint64{5, 3, 1 << 63, 4}},
		&Remove{Reason: RemoveNoInterest, Seqs: []uint64{}},
		&Remove{Reason: RemoveCopied, Seqs: []uint64{1}},
	}
}

// normalize makes the empty slices and headers an encoding cannot tell
// from nil comparable: nil data and empty data are the same payload.
func normalize(op Op) Op {
	fix := func(es []Entry) []Entry {
		if len(es) == 0 {
			return nil
		}
		out := make([]Entry, len(es))
		for i, e := range es {
			if len(e.Data) == 0 {
				e.Data = nil
			}
			out[i] = e
		}
		return out
	}
	switch o := op.(type) {
	case *Publish:
		return &Publish{Entries: fix(o.Entries)}
	case *Copy:
		c := *o
		c.Entries = fix(o.Entries)
		if len(c.OriginSeqs) == 0 {
			c.OriginSeqs = nil
		}
		return &c
	case *BatchCommit:
		c := *o
		c.Entries = fix(o.Entries)
		return &c
	case *Remove:
		r := *o
		if len(r.Seqs) == 0 {
			r.Seqs = nil
		}
		return &r
	}
	return op
}

// Every kind of operation survives encoding: DecodeOp(AppendOp(op)) is
// op, headers keep the difference between none and an empty block, and
// the first two bytes are the kind and version 1 (docs/engine.md).
func TestOpRoundTrip(t *testing.T) {
	seen := map[OpKind]bool{}
	for _, op := range sampleOps(t) {
		b, err := AppendOp([]byte("prefix"), op)
		if err != nil {
			t.Fatalf("AppendOp(%T): %v", op, err)
		}
		b = b[len("prefix"):]
		if OpKind(b[0]) != op.Kind() || b[1] != 1 {
			t.Errorf("%T starts %x, want kind %d version 1", op, b[:2], op.Kind())
		}
		got, err := DecodeOp(b)
		if err != nil {
			t.Fatalf("DecodeOp(%T %x): %v", op, b, err)
		}
		if u, ok := op.(*UpdateConfig); ok {
			g := got.(*UpdateConfig)
			if !g.Config.Equal(&u.Config) {
				t.Errorf("config %+v, want %+v", g.Config, u.Config)
			}
			seen[op.Kind()] = true
			continue
		}
		if !reflect.DeepEqual(normalize(got), normalize(op)) {
			t.Errorf("round trip of %T:\n got %+v\nwant %+v", op, got, op)
		}
		if p, ok := op.(*Publish); ok && len(p.Entries) > 1 {
			if h := got.(*Publish).Entries[1].Header; h == nil || len(h) != 0 {
				t.Errorf("an empty header block decoded as %q (nil: %v), want empty, not nil", h, h == nil)
			}
			if h := got.(*Publish).Entries[0].Header; h != nil {
				t.Errorf("no header decoded as %q, want nil", h)
			}
		}
		seen[op.Kind()] = true
	}
	for k := KindPublish; k <= KindRemove; k++ {
		if !seen[k] {
			t.Errorf("kind %d has no round-trip case", k)
		}
	}
}

// DecodeOp refuses what AppendOp cannot have written: empty input,
// unknown kinds and versions, truncations, trailing bytes, unknown entry
// flags and counts the bytes cannot hold.
func TestDecodeOpRefuses(t *testing.T) {
	pub, _ := AppendOp(nil, &Publish{Entries: []Entry{{Subject: "a", Data: []byte("b"), Time: 1}}})
	bad := map[string][]byte{
		"empty":          nil,
		"kind only":      {byte(KindPublish)},
		"unknown kind":   {99, 1},
		"kind zero":      {0, 1},
		"version 2":      {byte(KindPublish), 2, 0},
		"truncated":      pub[:len(pub)-1],
		"trailing":       append(append([]byte(nil), pub...), 0),
		"flags":          append(append([]byte(nil), pub[:len(pub)-1]...), 4),
		"huge count":     {byte(KindPublish), 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"remove count":   {byte(KindRemove), 1, 1, 9, 2},
		"mirror byte":    {byte(KindCopy), 1, 2, 0},
		"config":         {byte(KindUpdateConfig), 1, '{'},
		"batch":          {byte(KindBatchCommit), 1, 7},
		"delete missing": {byte(KindDeleteMsg), 1},
	}
	for name, b := range bad {
		if op, err := DecodeOp(b); err == nil || !errors.Is(err, ErrBadOp) {
			t.Errorf("%s: DecodeOp(%x) = %+v, %v; want ErrBadOp", name, b, op, err)
		}
	}
}

// A mirror copy whose origin sequences do not match its entries cannot
// be encoded (it could not be decoded).
func TestAppendOpRefusesUnevenMirror(t *testing.T) {
	if _, err := AppendOp(nil, &Copy{Mirror: true, Entries: []Entry{{Subject: "a"}}}); err == nil {
		t.Fatal("encoded a mirror copy without its origin sequence")
	}
}

// FuzzDecodeOp: no input makes DecodeOp panic or allocate without bound,
// and whatever it accepts encodes back to bytes it decodes the same way.
func FuzzDecodeOp(f *testing.F) {
	for _, op := range sampleOps(f) {
		b, err := AppendOp(nil, op)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		op, err := DecodeOp(b)
		if err != nil {
			return
		}
		again, err := AppendOp(nil, op)
		if err != nil {
			t.Fatalf("decoded %+v from %x but cannot encode it: %v", op, b, err)
		}
		op2, err := DecodeOp(again)
		if err != nil {
			t.Fatalf("re-decoding %x: %v", again, err)
		}
		if _, isCfg := op.(*UpdateConfig); isCfg {
			return // JSON may come in any key order or spacing
		}
		b2, _ := AppendOp(nil, op2)
		if !bytes.Equal(again, b2) {
			t.Fatalf("not stable: %x then %x", again, b2)
		}
	})
}
