package streamckpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/cairnmq/cairn/internal/cluster/catchup"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// manifestMagic starts a manifest (package comment, "Manifest").
var manifestMagic = []byte("CAIRNMAN")

const (
	manifestVersion = 1
	// maxManifest bounds an encoded manifest: it travels in one Raft
	// snapshot message, one transport frame (64 MiB at most). A stream
	// whose deleted sequences would not fit has no snapshot: a replica
	// that lags past the log is not caught up (logged).
	maxManifest = 48 << 20
)

// ErrBadManifest is returned (wrapped) for a snapshot whose manifest
// fails its checks: the install fails and the replica is fenced
// (docs/cluster.md decision 12).
var ErrBadManifest = errors.New("streamckpt: bad snapshot manifest")

// manifest is the Raft snapshot of a replicated file stream: what its
// state was at a raft index, without its messages.
type manifest struct {
	index  uint64
	source raftnode.ServerID // the server that captured it, asked first
	first  uint64            // FirstSeq at index
	last   uint64            // LastSeq at index
	msgs   uint64
	bytes  uint64
	// gaps are the sequences of first..last that were not stored at
	// index (deleted, or never stored), ascending and disjoint.
	gaps  []catchup.Range
	state []byte // stream.AppendCheckpoint's bytes at index
}

// deletedCount returns the sequences the gaps hold.
func (m *manifest) deletedCount() uint64 {
	var n uint64
	for _, g := range m.gaps {
		n += g.To - g.From + 1
	}
	return n
}

// gapsOf turns a store's deleted sequences (ascending) into ranges.
func gapsOf(deleted []uint64) []catchup.Range {
	var gaps []catchup.Range
	for _, d := range deleted {
		if k := len(gaps) - 1; k >= 0 && gaps[k].To+1 == d {
			gaps[k].To = d
			continue
		}
		gaps = append(gaps, catchup.Range{From: d, To: d})
	}
	return gaps
}

// encode returns the manifest's bytes (package comment, "Manifest").
func (m *manifest) encode() []byte {
	b := append([]byte(nil), manifestMagic...)
	b = append(b, manifestVersion)
	b = binary.LittleEndian.AppendUint64(b, m.index)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(m.source)))
	b = append(b, m.source...)
	for _, v := range []uint64{m.first, m.last, m.msgs, m.bytes} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(m.gaps)))
	prev := m.first
	for _, g := range m.gaps {
		b = binary.AppendUvarint(b, g.From-prev)
		b = binary.AppendUvarint(b, g.To-g.From)
		prev = g.To + 1
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.state)))
	b = append(b, m.state...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// decodeManifest checks and decodes a manifest; errors wrap
// ErrBadManifest.
func decodeManifest(b []byte) (*manifest, error) {
	bad := func(why string, args ...any) (*manifest, error) {
		return nil, fmt.Errorf("%w: %s", ErrBadManifest, fmt.Sprintf(why, args...))
	}
	if len(b) < len(manifestMagic)+1+4 || string(b[:len(manifestMagic)]) != string(manifestMagic) {
		return bad("%d bytes, not a manifest", len(b))
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return bad("CRC mismatch")
	}
	if v := body[len(manifestMagic)]; v != manifestVersion {
		return bad("version %d", v)
	}
	d := body[len(manifestMagic)+1:]
	short := false
	u64 := func() uint64 {
		if len(d) < 8 {
			short = true
			return 0
		}
		v := binary.LittleEndian.Uint64(d)
		d = d[8:]
		return v
	}
	uv := func() uint64 {
		v, n := binary.Uvarint(d)
		if n <= 0 {
			short = true
			return 0
		}
		d = d[n:]
		return v
	}
	m := &manifest{index: u64()}
	if len(d) < 2 {
		return bad("truncated")
	}
	ns := int(binary.LittleEndian.Uint16(d))
	d = d[2:]
	if len(d) < ns {
		return bad("truncated")
	}
	m.source, d = raftnode.ServerID(d[:ns]), d[ns:]
	m.first, m.last, m.msgs, m.bytes = u64(), u64(), u64(), u64()
	n := uv()
	if short || n > uint64(len(d)) {
		return bad("truncated")
	}
	prev := m.first
	for range n {
		from := prev + uv()
		to := from + uv()
		if short || from < prev || to < from || to > m.last {
			return bad("gap %d-%d out of order or range", from, to)
		}
		m.gaps = append(m.gaps, catchup.Range{From: from, To: to})
		prev = to + 1
	}
	if short || len(d) < 4 {
		return bad("truncated")
	}
	ls := int(binary.LittleEndian.Uint32(d))
	d = d[4:]
	if ls != len(d) {
		return bad("state of %d bytes in %d", ls, len(d))
	}
	m.state = d
	switch {
	case m.first == 0 && (m.index == 0 || m.last != 0 || m.msgs != 0 || m.bytes != 0 || len(m.gaps) > 0):
		return bad("index %d, sequences %d-%d, %d messages", m.index, m.first, m.last, m.msgs)
	case m.first == 0:
		// A stream that never stored a message (its store's first and
		// last sequences are both 0).
	case m.index == 0 || m.first > m.last+1:
		return bad("index %d, sequences %d-%d", m.index, m.first, m.last)
	case m.msgs+m.deletedCount() != m.last+1-m.first:
		return bad("%d messages and %d deleted in %d-%d", m.msgs, m.deletedCount(), m.first, m.last)
	}
	return m, nil
}
