package consumer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

// The byte form of a consumer operation is drawn in the package comment
// (doc.go) and in docs/engine.md.

// opVersion is the version byte of every kind today.
const opVersion = 1

// ErrBadOp is returned (wrapped) by DecodeOp for bytes that are not an
// encoded consumer operation.
var ErrBadOp = errors.New("consumer: malformed operation")

// AppendOp appends op's byte form to dst. It returns an error only for
// an op of a type it does not know.
func AppendOp(dst []byte, op Op) ([]byte, error) {
	dst = append(dst, byte(op.Kind()), opVersion)
	u := binary.AppendUvarint
	v := binary.AppendVarint
	switch o := op.(type) {
	case *Deliver:
		dst = v(u(dst, o.Stream), o.Time)
	case *Redeliver:
		dst = v(u(dst, o.Stream), o.Time)
	case *Ack:
		dst = u(u(dst, o.Stream), o.Consumer)
	case *Nak:
		dst = v(v(u(dst, o.Stream), int64(o.Delay)), o.Time)
	case *Term:
		dst = u(u(dst, o.Stream), o.Consumer)
	case *Progress:
		dst = v(u(dst, o.Stream), o.Time)
	case *ExpireAcks:
		dst = v(dst, o.Time)
	case *SkipTo:
		dst = u(dst, o.Stream)
	case *Drop:
		dst = u(dst, uint64(len(o.Seqs)))
		for _, s := range o.Seqs {
			dst = u(dst, s)
		}
	case *Pause:
		dst = v(dst, o.Until)
	case *UpdatePolicy:
		dst = appendPolicy(dst, o)
	case *DeadLetter:
		dst = append(dst, byte(o.Step))
		dst = u(dst, o.Stream)
		dst = append(dst, byte(o.Reason))
		dst = v(dst, o.Value)
	case *Reset:
		dst = u(dst, o.Stream)
	case *PullRequest:
		dst = append(u(dst, uint64(len(o.Reply))), o.Reply...)
		dst = v(v(dst, o.Expires), o.Time)
	default:
		return nil, fmt.Errorf("consumer: encode an operation of kind %d: unknown", op.Kind())
	}
	return dst, nil
}

func appendPolicy(dst []byte, o *UpdatePolicy) []byte {
	p := o.Policy
	dst = binary.AppendVarint(dst, int64(p.Ack))
	dst = binary.AppendVarint(dst, int64(p.AckWait))
	dst = binary.AppendUvarint(dst, uint64(len(p.BackOff)))
	for _, b := range p.BackOff {
		dst = binary.AppendVarint(dst, int64(b))
	}
	dst = binary.AppendVarint(dst, int64(p.MaxDeliver))
	dst = binary.AppendVarint(dst, int64(p.MaxAckPending))
	flag := byte(0)
	if o.DeadLetter {
		flag = 1
	}
	return append(dst, flag)
}

// DecodeOp reads an operation AppendOp wrote; anything else gives an
// error wrapping ErrBadOp.
func DecodeOp(b []byte) (Op, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadOp, len(b))
	}
	kind, version := OpKind(b[0]), b[1]
	if version != opVersion {
		return nil, fmt.Errorf("%w: kind %d version %d", ErrBadOp, kind, version)
	}
	d := &reader{b: b[2:]}
	var op Op
	switch kind {
	case KindDeliver:
		op = &Deliver{Stream: d.uvarint(), Time: d.varint()}
	case KindRedeliver:
		op = &Redeliver{Stream: d.uvarint(), Time: d.varint()}
	case KindAck:
		op = &Ack{Stream: d.uvarint(), Consumer: d.uvarint()}
	case KindNak:
		op = &Nak{Stream: d.uvarint(), Delay: time.Duration(d.varint()), Time: d.varint()}
	case KindTerm:
		op = &Term{Stream: d.uvarint(), Consumer: d.uvarint()}
	case KindProgress:
		op = &Progress{Stream: d.uvarint(), Time: d.varint()}
	case KindExpireAcks:
		op = &ExpireAcks{Time: d.varint()}
	case KindSkipTo:
		op = &SkipTo{Stream: d.uvarint()}
	case KindDrop:
		op = &Drop{Seqs: d.uvarints()}
	case KindPause:
		op = &Pause{Until: d.varint()}
	case KindUpdatePolicy:
		op = decodePolicy(d)
	case KindDeadLetter:
		op = &DeadLetter{Step: DeadLetterStep(d.byte()), Stream: d.uvarint(), Reason: store.DeadLetterReason(d.byte()), Value: d.varint()}
	case KindReset:
		op = &Reset{Stream: d.uvarint()}
	case KindPullRequest:
		op = &PullRequest{Reply: d.string(), Expires: d.varint(), Time: d.varint()}
	default:
		return nil, fmt.Errorf("%w: unknown kind %d", ErrBadOp, kind)
	}
	if d.bad || len(d.b) > 0 {
		return nil, fmt.Errorf("%w: kind %d: truncated, or trailing bytes", ErrBadOp, kind)
	}
	return op, nil
}

func decodePolicy(d *reader) *UpdatePolicy {
	var p Policy
	p.Ack = AckPolicy(d.varint())
	p.AckWait = time.Duration(d.varint())
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.bad = true
		return &UpdatePolicy{}
	}
	for range n {
		p.BackOff = append(p.BackOff, time.Duration(d.varint()))
	}
	p.MaxDeliver = int(d.varint())
	p.MaxAckPending = int(d.varint())
	o := &UpdatePolicy{Policy: p}
	switch d.byte() {
	case 0:
	case 1:
		o.DeadLetter = true
	default:
		d.bad = true
	}
	return o
}

// reader reads the varint fields of an encoded operation; the first
// failure sticks (bad).
type reader struct {
	b   []byte
	bad bool
}

func (d *reader) byte() byte {
	if len(d.b) == 0 {
		d.bad = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *reader) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *reader) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

// string reads a length and that many bytes.
func (d *reader) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.bad, d.b = true, nil
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// uvarints reads a count and that many uvarints.
func (d *reader) uvarints() []uint64 {
	n := d.uvarint()
	if n > uint64(len(d.b)) { // each takes at least a byte
		d.bad = true
		return nil
	}
	out := make([]uint64, 0, n)
	for range n {
		out = append(out, d.uvarint())
	}
	return out
}
