package catchup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/store"
)

// Magic is the first byte of every catch-up frame (package comment,
// "Frames"); a raftnode frame starts with its version, 1.
const Magic = 0x43

const (
	version    = 1
	headerSize = 27

	kindRequest = 1
	kindChunk   = 2
	kindRefusal = 3

	// Refusal codes (package comment).
	refuseUnknownGroup = 1
	refuseMissing      = 2
	refuseBusy         = 3
	refuseDamaged      = 4
	refuseTooLarge     = 5
)

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	le         = binary.LittleEndian
)

// ErrBadFrame is returned by Service.Receive for a catch-up frame whose
// CRC fails or that does not decode; the transport closes the
// connection, as for a damaged raftnode frame.
var ErrBadFrame = errors.New("catchup: bad frame")

// Range is the sequences From..To, inclusive.
type Range struct{ From, To uint64 }

// header is the fixed part of every frame.
type header struct {
	kind    byte
	group   raftnode.GroupID
	fetch   uint64
	request uint64
}

// request asks for the wanted sequences of first..last.
type request struct {
	header
	first, last uint64
	max         uint32
	gaps        []Range
}

// chunk answers a request.
type chunk struct {
	header
	first, through uint64
	msgs           []*store.StoredMsg
}

// refusal answers a request that cannot be served.
type refusal struct {
	header
	code byte
	seq  uint64
	text string
}

func appendHeader(b []byte, h header) []byte {
	b = append(b, Magic, version, h.kind)
	b = le.AppendUint64(b, uint64(h.group))
	b = le.AppendUint64(b, h.fetch)
	return le.AppendUint64(b, h.request)
}

func seal(b []byte) []byte { return le.AppendUint32(b, crc32.Checksum(b, castagnoli)) }

func (r *request) encode() []byte {
	b := appendHeader(make([]byte, 0, headerSize+24+16*len(r.gaps)+4), r.header)
	b = le.AppendUint64(b, r.first)
	b = le.AppendUint64(b, r.last)
	b = le.AppendUint32(b, r.max)
	b = le.AppendUint32(b, uint32(len(r.gaps)))
	for _, g := range r.gaps {
		b = le.AppendUint64(b, g.From)
		b = le.AppendUint64(b, g.To)
	}
	return seal(b)
}

// recordSize is the encoded size of m in a chunk.
func recordSize(m *store.StoredMsg) int {
	return 8 + 8 + 2 + 4 + 4 + len(m.Subject) + len(m.Header) + len(m.Data) + 4
}

func appendRecord(b []byte, m *store.StoredMsg) []byte {
	start := len(b)
	b = le.AppendUint64(b, m.Seq)
	b = le.AppendUint64(b, uint64(m.Time))
	b = le.AppendUint16(b, uint16(len(m.Subject)))
	b = le.AppendUint32(b, uint32(len(m.Header)))
	b = le.AppendUint32(b, uint32(len(m.Data)))
	b = append(b, m.Subject...)
	b = append(b, m.Header...)
	b = append(b, m.Data...)
	return le.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

func (c *chunk) encode() []byte {
	n := headerSize + 20 + 4
	for _, m := range c.msgs {
		n += recordSize(m)
	}
	b := appendHeader(make([]byte, 0, n), c.header)
	b = le.AppendUint64(b, c.first)
	b = le.AppendUint64(b, c.through)
	b = le.AppendUint32(b, uint32(len(c.msgs)))
	for _, m := range c.msgs {
		b = appendRecord(b, m)
	}
	return seal(b)
}

func (r *refusal) encode() []byte {
	b := appendHeader(nil, r.header)
	b = append(b, r.code)
	b = le.AppendUint64(b, r.seq)
	b = append(b, r.text...)
	return seal(b)
}

// decoder reads a frame's body; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errors.New("truncated")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 {
	if b := d.take(8); b != nil {
		return le.Uint64(b)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if b := d.take(4); b != nil {
		return le.Uint32(b)
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if b := d.take(2); b != nil {
		return le.Uint16(b)
	}
	return 0
}

// decode checks a frame's magic, version and CRC and decodes it into a
// *request, *chunk or *refusal. Errors wrap ErrBadFrame.
func decode(frame []byte) (any, error) {
	if len(frame) < headerSize+4 || frame[0] != Magic {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadFrame, len(frame))
	}
	body := frame[:len(frame)-4]
	if crc32.Checksum(body, castagnoli) != le.Uint32(frame[len(frame)-4:]) {
		return nil, fmt.Errorf("%w: CRC mismatch", ErrBadFrame)
	}
	if frame[1] != version {
		return nil, fmt.Errorf("%w: version %d", ErrBadFrame, frame[1])
	}
	h := header{kind: frame[2], group: raftnode.GroupID(le.Uint64(frame[3:])), fetch: le.Uint64(frame[11:]), request: le.Uint64(frame[19:])}
	d := &decoder{b: body[headerSize:]}
	var v any
	switch h.kind {
	case kindRequest:
		r := &request{header: h, first: d.u64(), last: d.u64(), max: d.u32()}
		n := d.u32()
		if d.err == nil && (n > MaxGaps || uint64(n)*16 > uint64(len(d.b))) {
			d.err = fmt.Errorf("%d gaps", n)
		}
		prev := r.first
		for i := uint32(0); i < n && d.err == nil; i++ {
			g := Range{From: d.u64(), To: d.u64()}
			if g.From < prev || g.To < g.From || g.To > r.last {
				d.err = fmt.Errorf("gap %d-%d out of order or range", g.From, g.To)
			}
			prev = g.To + 1
			r.gaps = append(r.gaps, g)
		}
		if d.err == nil && (r.first == 0 || r.last < r.first) {
			d.err = fmt.Errorf("range %d-%d", r.first, r.last)
		}
		v = r
	case kindChunk:
		c := &chunk{header: h, first: d.u64(), through: d.u64()}
		n := d.u32()
		if d.err == nil && uint64(n)*30 > uint64(len(d.b)) {
			d.err = fmt.Errorf("%d records", n)
		}
		for i := uint32(0); i < n && d.err == nil; i++ {
			c.msgs = append(c.msgs, d.record())
		}
		v = c
	case kindRefusal:
		r := &refusal{header: h}
		if b := d.take(1); b != nil {
			r.code = b[0]
		}
		r.seq = d.u64()
		r.text = string(d.b)
		d.b = nil
		v = r
	default:
		return nil, fmt.Errorf("%w: kind %d", ErrBadFrame, h.kind)
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: kind %d: %v", ErrBadFrame, h.kind, d.err)
	}
	return v, nil
}

// record decodes one chunk record and checks its CRC.
func (d *decoder) record() *store.StoredMsg {
	start := d.b
	seq, t := d.u64(), d.u64()
	ns, nh, nd := int(d.u16()), int(d.u32()), int(d.u32())
	subj, hdr, data := d.take(ns), d.take(nh), d.take(nd)
	if d.err != nil {
		return nil
	}
	n := 26 + ns + nh + nd
	sum := d.u32()
	if d.err == nil && crc32.Checksum(start[:n], castagnoli) != sum {
		d.err = fmt.Errorf("record %d: CRC mismatch", seq)
	}
	m := &store.StoredMsg{Seq: seq, Time: int64(t), Subject: string(subj)}
	if nh > 0 {
		m.Header = append([]byte(nil), hdr...)
	}
	if nd > 0 {
		m.Data = append([]byte(nil), data...)
	}
	return m
}
