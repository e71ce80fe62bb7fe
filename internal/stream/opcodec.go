package stream

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cairnmq/cairn/internal/store"
)

// The byte form of a stream operation is drawn in the package comment
// (doc.go) and in docs/engine.md.

// opVersion is the version byte of every kind today.
const opVersion = 1

// ErrBadOp is returned (wrapped) by DecodeOp for bytes that are not an
// encoded operation.
var ErrBadOp = errors.New("stream: malformed operation")

// Entry flag bits of the encoding.
const (
	entrySourced    = 1 << 0
	entryFastBatch  = 1 << 1
	entryMaxPayload = 1 << 2 // a uvarint MaxPayload follows the flags
)

// AppendOp appends op's byte form to dst. It returns an error only for
// an UpdateConfig whose config does not encode to JSON (it always does
// for a config that passed Validate) or an op of an unknown type.
func AppendOp(dst []byte, op Op) ([]byte, error) {
	dst = append(dst, byte(op.Kind()), opVersion)
	switch o := op.(type) {
	case *Publish:
		dst = binary.AppendUvarint(dst, uint64(len(o.Entries)))
		for i := range o.Entries {
			dst = appendEntry(dst, &o.Entries[i])
		}
	case *Copy:
		return appendCopy(dst, o)
	case *BatchCommit:
		dst = EncodeBatchCommit(dst, *o)
	case *Purge:
		dst = appendBytes(dst, []byte(o.Request.Subject))
		dst = binary.AppendUvarint(dst, o.Request.Seq)
		dst = binary.AppendUvarint(dst, o.Request.Keep)
	case *DeleteMsg:
		dst = binary.AppendUvarint(dst, o.Seq)
	case *UpdateConfig:
		b, err := json.Marshal(&o.Config)
		if err != nil {
			return nil, fmt.Errorf("stream: encode config update: %w", err)
		}
		dst = append(dst, b...)
	case *Expire:
		dst = binary.AppendVarint(dst, o.Time)
	case *FireSchedules:
		dst = binary.AppendVarint(dst, o.Time)
	case *Remove:
		dst = append(dst, byte(o.Reason))
		dst = binary.AppendUvarint(dst, uint64(len(o.Seqs)))
		prev := uint64(0)
		for _, seq := range o.Seqs {
			dst = binary.AppendVarint(dst, int64(seq-prev))
			prev = seq
		}
	default:
		return nil, fmt.Errorf("stream: encode an operation of kind %d: unknown", op.Kind())
	}
	return dst, nil
}

func appendCopy(dst []byte, o *Copy) ([]byte, error) {
	if o.Mirror && len(o.OriginSeqs) != len(o.Entries) {
		return nil, fmt.Errorf("stream: encode a mirror copy of %d entries with %d origin sequences", len(o.Entries), len(o.OriginSeqs))
	}
	mirror := byte(0)
	if o.Mirror {
		mirror = 1
	}
	dst = append(dst, mirror)
	dst = binary.AppendUvarint(dst, uint64(len(o.Entries)))
	for i := range o.Entries {
		dst = appendEntry(dst, &o.Entries[i])
		if o.Mirror {
			dst = binary.AppendUvarint(dst, o.OriginSeqs[i])
		}
	}
	return dst, nil
}

func appendEntry(dst []byte, e *Entry) []byte {
	dst = appendBytes(dst, []byte(e.Subject))
	if e.Header == nil {
		dst = binary.AppendUvarint(dst, 0)
	} else {
		dst = binary.AppendUvarint(dst, uint64(len(e.Header))+1)
		dst = append(dst, e.Header...)
	}
	dst = appendBytes(dst, e.Data)
	dst = binary.AppendVarint(dst, e.Time)
	var flags byte
	if e.Sourced {
		flags |= entrySourced
	}
	if e.FastBatch {
		flags |= entryFastBatch
	}
	if e.MaxPayload > 0 {
		flags |= entryMaxPayload
	}
	dst = append(dst, flags)
	if e.MaxPayload > 0 {
		dst = binary.AppendUvarint(dst, uint64(e.MaxPayload))
	}
	return dst
}

// DecodeOp reads an operation AppendOp wrote. Headers and payloads alias
// b. Anything else gives an error wrapping ErrBadOp.
func DecodeOp(b []byte) (Op, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadOp, len(b))
	}
	kind, version := OpKind(b[0]), b[1]
	if version != opVersion {
		return nil, fmt.Errorf("%w: kind %d version %d", ErrBadOp, kind, version)
	}
	d := &decoder{b: b[2:]}
	var op Op
	switch kind {
	case KindPublish:
		op = &Publish{Entries: decodeEntries(d, false, nil)}
	case KindCopy:
		op = decodeCopy(d)
	case KindBatchCommit:
		c, err := DecodeBatchCommit(d.b)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadOp, err)
		}
		return &c, nil
	case KindPurge:
		op = &Purge{Request: store.PurgeRequest{Subject: string(d.bytes()), Seq: d.uvarint(), Keep: d.uvarint()}}
	case KindDeleteMsg:
		op = &DeleteMsg{Seq: d.uvarint()}
	case KindUpdateConfig:
		var cfg Config
		if err := json.Unmarshal(d.b, &cfg); err != nil {
			return nil, fmt.Errorf("%w: config: %w", ErrBadOp, err)
		}
		return &UpdateConfig{Config: cfg}, nil
	case KindExpire:
		op = &Expire{Time: d.varint()}
	case KindFire:
		op = &FireSchedules{Time: d.varint()}
	case KindRemove:
		op = decodeRemove(d)
	default:
		return nil, fmt.Errorf("%w: unknown kind %d", ErrBadOp, kind)
	}
	if d.err != nil || len(d.b) > 0 {
		return nil, fmt.Errorf("%w: kind %d: truncated, or trailing bytes", ErrBadOp, kind)
	}
	return op, nil
}

// decodeEntries reads a count and that many entries, each followed by an
// origin sequence when mirror is set (appended to seqs).
func decodeEntries(d *decoder, mirror bool, seqs *[]uint64) []Entry {
	n := d.uvarint()
	if n > uint64(len(d.b)) { // an entry takes at least 5 bytes
		d.fail()
		return nil
	}
	var es []Entry
	for range n {
		es = append(es, decodeEntry(d))
		if mirror {
			*seqs = append(*seqs, d.uvarint())
		}
		if d.err != nil {
			return nil
		}
	}
	return es
}

func decodeEntry(d *decoder) Entry {
	e := Entry{Subject: string(d.bytes())}
	if h := d.uvarint(); h > 0 {
		e.Header = d.take(h - 1)
	}
	e.Data = d.bytes()
	e.Time = d.varint()
	flags := d.byte()
	if flags&^(entrySourced|entryFastBatch|entryMaxPayload) != 0 {
		d.fail()
	}
	e.Sourced, e.FastBatch = flags&entrySourced != 0, flags&entryFastBatch != 0
	if flags&entryMaxPayload != 0 {
		if e.MaxPayload = int64(d.uvarint()); e.MaxPayload <= 0 {
			d.fail()
		}
	}
	return e
}

func decodeCopy(d *decoder) *Copy {
	c := &Copy{}
	switch d.byte() {
	case 0:
	case 1:
		c.Mirror = true
	default:
		d.fail()
		return c
	}
	c.Entries = decodeEntries(d, c.Mirror, &c.OriginSeqs)
	return c
}

func decodeRemove(d *decoder) *Remove {
	r := &Remove{Reason: RemoveReason(d.byte())}
	n := d.uvarint()
	if n > uint64(len(d.b)) { // a sequence takes at least a byte
		d.fail()
		return r
	}
	r.Seqs = make([]uint64, 0, n)
	prev := uint64(0)
	for range n {
		prev += uint64(d.varint())
		r.Seqs = append(r.Seqs, prev)
	}
	return r
}
