package consumer

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

// sampleOps has one operation of every kind, with negative, zero and
// large values.
func sampleOps() []Op {
	return []Op{
		&Deliver{Stream: 1, Time: 1_700_000_000_000_000_000},
		&Redeliver{Stream: 1 << 60, Time: -1},
		&Ack{Stream: 7, Consumer: 9},
		&Nak{Stream: 3, Delay: 5 * time.Second, Time: 42},
		&Nak{Stream: 3},
		&Term{Stream: 4, Consumer: 1},
		&Progress{Stream: 5, Time: 6},
		&ExpireAcks{Time: 1 << 62},
		&SkipTo{Stream: 100},
		&Drop{Seqs: []uint64{9, 2, 1 << 63}},
		&Drop{Seqs: []uint64{}},
		&Pause{Until: 1_800_000_000_000_000_000},
		&Pause{},
		&UpdatePolicy{Policy: Policy{Ack: AckExplicit, AckWait: 30 * time.Second, BackOff: []time.Duration{time.Second, time.Minute}, MaxDeliver: -1, MaxAckPending: 1000}, DeadLetter: true},
		&UpdatePolicy{Policy: Policy{Ack: AckNone}},
		&DeadLetter{Step: DeadLetterMark, Stream: 8, Reason: store.DeadLetterTerm, Value: 77},
		&DeadLetter{Step: DeadLetterAfter, Stream: 8, Value: 12},
		&DeadLetter{Step: DeadLetterRetryAt, Stream: 8, Value: 99},
		&DeadLetter{Step: DeadLetterMoved, Stream: 8},
		&DeadLetter{Step: DeadLetterUnmark, Stream: 8},
		&Reset{Stream: 42},
		&Reset{},
		&PullRequest{Reply: "_INBOX.abc.1", Expires: 1_700_000_000_000_000_000, Time: 1_699_999_970_000_000_000},
		&PullRequest{},
	}
}

// Every kind survives encoding, and starts with its kind and version 1
// (package comment).
func TestOpRoundTrip(t *testing.T) {
	seen := map[OpKind]bool{}
	for _, op := range sampleOps() {
		b, err := AppendOp(nil, op)
		if err != nil {
			t.Fatalf("AppendOp(%T): %v", op, err)
		}
		if OpKind(b[0]) != op.Kind() || b[1] != 1 {
			t.Errorf("%T starts %x", op, b[:2])
		}
		got, err := DecodeOp(b)
		if err != nil {
			t.Fatalf("DecodeOp(%T %x): %v", op, b, err)
		}
		if d, ok := op.(*Drop); ok && len(d.Seqs) == 0 {
			if g := got.(*Drop); len(g.Seqs) != 0 {
				t.Errorf("empty drop decoded as %v", g.Seqs)
			}
		} else if !reflect.DeepEqual(got, op) {
			t.Errorf("round trip of %T:\n got %+v\nwant %+v", op, got, op)
		}
		seen[op.Kind()] = true
	}
	for k := KindDeliver; k <= KindPullRequest; k++ {
		if !seen[k] {
			t.Errorf("kind %d has no round-trip case", k)
		}
	}
}

// DecodeOp refuses what AppendOp cannot have written.
func TestDecodeOpRefuses(t *testing.T) {
	ack, _ := AppendOp(nil, &Ack{Stream: 300, Consumer: 2})
	pol, _ := AppendOp(nil, &UpdatePolicy{Policy: Policy{Ack: AckAll}})
	bad := map[string][]byte{
		"empty":       nil,
		"kind only":   {byte(KindAck)},
		"unknown":     {200, 1},
		"kind zero":   {0, 1},
		"version":     {byte(KindAck), 2, 1, 1},
		"truncated":   ack[:len(ack)-1],
		"trailing":    append(append([]byte(nil), ack...), 0),
		"drop count":  {byte(KindDrop), 1, 5, 1},
		"backoffs":    {byte(KindUpdatePolicy), 1, 2, 2, 0xff, 0x01},
		"policy flag": append(append([]byte(nil), pol[:len(pol)-1]...), 2),
		"reply long":  {byte(KindPullRequest), 1, 9, 'a', 0, 0},
	}
	for name, b := range bad {
		if op, err := DecodeOp(b); err == nil || !errors.Is(err, ErrBadOp) {
			t.Errorf("%s: DecodeOp(%x) = %+v, %v; want ErrBadOp", name, b, op, err)
		}
	}
}

// FuzzDecodeConsumerOp: no input makes DecodeOp panic, and what it
// accepts encodes to bytes that decode alike.
func FuzzDecodeConsumerOp(f *testing.F) {
	for _, op := range sampleOps() {
		b, _ := AppendOp(nil, op)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		op, err := DecodeOp(b)
		if err != nil {
			return
		}
		again, err := AppendOp(nil, op)
		if err != nil {
			t.Fatalf("decoded %+v from %x, cannot encode it: %v", op, b, err)
		}
		op2, err := DecodeOp(again)
		if err != nil {
			t.Fatalf("re-decoding %x: %v", again, err)
		}
		b2, _ := AppendOp(nil, op2)
		if !bytes.Equal(again, b2) {
			t.Fatalf("not stable: %x then %x", again, b2)
		}
	})
}
