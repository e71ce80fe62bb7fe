package meta

import (
	"encoding/binary"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// The primitives of the operation and snapshot encodings (package
// comment): uvarints, signed varints, length-prefixed strings, 16-byte
// incarnations.

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ss)))
	for _, s := range ss {
		dst = appendString(dst, s)
	}
	return dst
}

func appendServers(dst []byte, ss []raftnode.ServerID) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ss)))
	for _, s := range ss {
		dst = appendString(dst, string(s))
	}
	return dst
}

// decoder reads the primitives; the first failure sets failed and makes
// every later read return zero values.
type decoder struct {
	b      []byte
	failed bool
}

func (d *decoder) fail() { d.failed, d.b = true, nil }

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) take(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// bytes returns a copy: decoded values never alias the input (the raft
// entry's data must not be kept after Apply).
func (d *decoder) bytes() []byte {
	b := d.take(d.uvarint())
	if d.failed {
		return nil
	}
	return append([]byte{}, b...)
}

// optBytes is bytes, nil when empty (an optional field).
func (d *decoder) optBytes() []byte {
	if b := d.bytes(); len(b) > 0 {
		return b
	}
	return nil
}

func (d *decoder) string() string { return string(d.take(d.uvarint())) }

// count reads a count of items that take at least min bytes each, and
// fails if the bytes left cannot hold that many.
func (d *decoder) count(min uint64) uint64 {
	n := d.uvarint()
	if n > uint64(len(d.b))/min {
		d.fail()
		return 0
	}
	return n
}

func (d *decoder) strings() []string {
	n := d.count(1)
	var ss []string
	for range n {
		ss = append(ss, d.string())
	}
	return ss
}

func (d *decoder) servers() []raftnode.ServerID {
	n := d.count(1)
	var ss []raftnode.ServerID
	for range n {
		ss = append(ss, raftnode.ServerID(d.string()))
	}
	return ss
}

// replicaIDs reads a count and that many uvarint replica IDs (nil for
// none).
func (d *decoder) replicaIDs() []raftnode.ReplicaID {
	n := d.count(1)
	var ids []raftnode.ReplicaID
	for range n {
		ids = append(ids, raftnode.ReplicaID(d.uvarint()))
	}
	return ids
}

func (d *decoder) incarnation() raftnode.Incarnation {
	var inc raftnode.Incarnation
	copy(inc[:], d.take(uint64(len(inc))))
	return inc
}
