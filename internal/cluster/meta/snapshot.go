package meta

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// snapVersion is the snapshot encoding's version byte: 2 adds a
// stream's log config (StreamAssignment.LogConfig), 3 a consumer's
// initial replica count (ConsumerAssignment.Initial), 4 a stream's move
// in flight (StreamAssignment.Move), 5 a stream's excluded servers
// (StreamAssignment.Excluded), 6 whether a recorded move is a scale
// (MoveOrigin.Scale). DecodeSnapshot also reads version
// 1, whose streams' log config is their config, versions 1 and 2, whose
// consumers never changed their replicas (every replica ID they gave
// started the group), versions 1 to 3, which had no moves recorded,
// versions 1 to 4, which had no excluded servers, and version 5, whose
// recorded moves are all moves.
const (
	snapVersion   = 6
	snapVersionV5 = 5
	snapVersionV4 = 4
	snapVersionV3 = 3
	snapVersionV2 = 2
	snapVersionV1 = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadSnapshot is returned (wrapped) by DecodeSnapshot for bytes that
// are not a snapshot AppendSnapshot wrote.
var ErrBadSnapshot = errors.New("meta: malformed snapshot")

// AppendSnapshot appends the whole state's byte form (package comment,
// "Snapshot encoding") to dst. Equal states give equal bytes.
func (s *State) AppendSnapshot(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, snapVersion)
	dst = binary.AppendUvarint(dst, uint64(s.nextGroup))
	svs := s.Servers()
	dst = binary.AppendUvarint(dst, uint64(len(svs)))
	for _, sv := range svs {
		dst = appendString(dst, string(sv.Name))
		dst = appendString(dst, sv.Cluster)
		dst = appendStrings(dst, sv.Tags)
		dst = append(dst, sv.Incarnation[:]...)
		dst = append(dst, boolByte(sv.Removed))
	}
	streams := s.sortedStreams()
	dst = binary.AppendUvarint(dst, uint64(len(streams)))
	for _, e := range streams {
		dst = appendString(dst, e.sa.Account)
		dst = appendString(dst, e.sa.Name)
		dst = appendAsset(dst, e.sa.Config, e.sa.Created, e.sa.Group, e.sa.NextReplica, e.sa.Replicas)
		if bytes.Equal(e.sa.LogConfig, e.sa.Config) {
			dst = appendBytes(dst, nil) // the usual case: no update since the group started
		} else {
			dst = appendBytes(dst, e.sa.LogConfig)
		}
		cs := e.sortedConsumers()
		dst = binary.AppendUvarint(dst, uint64(len(cs)))
		for _, ca := range cs {
			dst = appendString(dst, ca.Name)
			dst = appendAsset(dst, ca.Config, ca.Created, ca.Group, ca.NextReplica, ca.Replicas)
			dst = binary.AppendUvarint(dst, uint64(ca.Initial))
		}
		dst = appendMove(dst, e.sa.Move)
		dst = binary.AppendUvarint(dst, uint64(len(e.sa.Excluded)))
		for _, sv := range e.sa.Excluded {
			dst = appendString(dst, string(sv))
		}
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

func appendAsset(dst, config []byte, created int64, g raftnode.GroupID, next raftnode.ReplicaID, rs []Replica) []byte {
	dst = appendBytes(dst, config)
	dst = binary.AppendVarint(dst, created)
	dst = binary.AppendUvarint(dst, uint64(g))
	dst = binary.AppendUvarint(dst, uint64(next))
	dst = binary.AppendUvarint(dst, uint64(len(rs)))
	for _, r := range rs {
		dst = binary.AppendUvarint(dst, uint64(r.ID))
		dst = appendString(dst, string(r.Server))
		dst = append(dst, r.Incarnation[:]...)
	}
	return dst
}

// appendMove appends a stream's move field (package comment).
func appendMove(dst []byte, m *MoveOrigin) []byte {
	if m == nil {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.AppendVarint(dst, m.Created)
	dst = binary.AppendUvarint(dst, uint64(len(m.Replicas)))
	for _, r := range m.Replicas {
		dst = binary.AppendUvarint(dst, uint64(r.ID))
		dst = appendString(dst, string(r.Server))
		dst = append(dst, r.Incarnation[:]...)
	}
	dst = appendBytes(dst, m.Placement)
	return append(dst, boolByte(m.Cancelled), boolByte(m.Scale))
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// DecodeSnapshot returns the state AppendSnapshot wrote into b. It
// refuses, with an error wrapping ErrBadSnapshot, a wrong version or
// checksum, truncation, trailing bytes, keys out of order or repeated, a
// group repeated or at or past the next group, a replica ID 0, repeated,
// or at or past its group's next replica, a replica named twice on one
// server, and a stream config that does not name its stream. The state
// does not alias b.
func DecodeSnapshot(b []byte) (*State, error) {
	if len(b) < 5 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadSnapshot, len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum", ErrBadSnapshot)
	}
	if body[0] < snapVersionV1 || body[0] > snapVersion {
		return nil, fmt.Errorf("%w: version %d", ErrBadSnapshot, body[0])
	}
	r := &snapReader{d: decoder{b: body[1:]}, s: NewState(), groups: map[raftnode.GroupID]bool{}, version: body[0]}
	r.s.nextGroup = raftnode.GroupID(r.d.uvarint())
	if r.s.nextGroup < FirstGroup {
		r.bad("next group %d", r.s.nextGroup)
	}
	r.servers()
	r.streams()
	if r.err == nil && (r.d.failed || len(r.d.b) > 0) {
		r.bad("truncated, or trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return r.s, nil
}

// snapReader decodes a snapshot body, checking it as it goes; the first
// problem is kept in err.
type snapReader struct {
	d       decoder
	s       *State
	groups  map[raftnode.GroupID]bool
	version byte
	err     error
}

func (r *snapReader) bad(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrBadSnapshot, fmt.Sprintf(format, args...))
	}
	r.d.fail()
}

func (r *snapReader) servers() {
	n := r.d.count(1)
	var prev raftnode.ServerID
	for i := range n {
		sv := &Server{Name: raftnode.ServerID(r.d.string()), Cluster: r.d.string(), Tags: r.d.strings(), Incarnation: r.d.incarnation()}
		switch r.d.byte() {
		case 0:
		case 1:
			sv.Removed = true
		default:
			r.bad("server %q: removed flag", sv.Name)
		}
		if r.d.failed {
			return
		}
		if sv.Name == "" || (i > 0 && sv.Name <= prev) {
			r.bad("server %q out of order", sv.Name)
			return
		}
		prev = sv.Name
		r.s.servers[sv.Name] = sv
	}
}

func (r *snapReader) streams() {
	n := r.d.count(1)
	var prev *StreamAssignment
	for range n {
		e := &streamEntry{consumers: map[string]*ConsumerAssignment{}}
		e.sa.Account, e.sa.Name = r.d.string(), r.d.string()
		e.sa.Config, e.sa.Created, e.sa.Group, e.sa.NextReplica, e.sa.Replicas = r.asset()
		if r.version != snapVersionV1 {
			e.sa.LogConfig = r.d.bytes()
		}
		if r.d.failed {
			return
		}
		if e.sa.Account == "" || e.sa.Name == "" || (prev != nil &&
			cmp.Or(cmp.Compare(prev.Account, e.sa.Account), cmp.Compare(prev.Name, e.sa.Name)) >= 0) {
			r.bad("stream %q > %q out of order", e.sa.Account, e.sa.Name)
			return
		}
		f, err := parseStream(e.sa.Config)
		if err != nil || f.Name != e.sa.Name {
			r.bad("stream %q > %q: config", e.sa.Account, e.sa.Name)
			return
		}
		if len(e.sa.LogConfig) == 0 {
			e.sa.LogConfig = slices.Clone(e.sa.Config)
		} else if lf, err := parseStream(e.sa.LogConfig); err != nil || lf.Name != e.sa.Name {
			r.bad("stream %q > %q: log config", e.sa.Account, e.sa.Name)
			return
		}
		e.subjects = f.Subjects
		prev = &e.sa
		r.consumers(e)
		if r.version >= snapVersionV4 {
			e.sa.Move = r.move(e.sa)
		}
		if r.version >= snapVersionV5 {
			e.sa.Excluded = r.excluded(e.sa)
		}
		if r.s.accounts[e.sa.Account] == nil {
			r.s.accounts[e.sa.Account] = map[string]*streamEntry{}
		}
		r.s.accounts[e.sa.Account][e.sa.Name] = e
	}
}

// excluded reads a stream's excluded servers: nil when none; refused
// out of order, repeated or empty.
func (r *snapReader) excluded(sa StreamAssignment) []raftnode.ServerID {
	n := r.d.count(1)
	var out []raftnode.ServerID
	for range n {
		sv := raftnode.ServerID(r.d.string())
		if r.d.failed || sv == "" || (len(out) > 0 && out[len(out)-1] >= sv) {
			r.bad("stream %q > %q: excluded servers", sa.Account, sa.Name)
			return nil
		}
		out = append(out, sv)
	}
	return out
}

// move reads a stream's move field: nil when none is recorded.
func (r *snapReader) move(sa StreamAssignment) *MoveOrigin {
	switch r.d.byte() {
	case 0:
		return nil
	case 1:
	default:
		r.bad("stream %q > %q: move flag", sa.Account, sa.Name)
		return nil
	}
	m := &MoveOrigin{Created: r.d.varint()}
	n := r.d.count(1)
	for range n {
		m.Replicas = append(m.Replicas, Replica{ID: raftnode.ReplicaID(r.d.uvarint()), Server: raftnode.ServerID(r.d.string()), Incarnation: r.d.incarnation()})
	}
	m.Placement = r.d.optBytes()
	switch r.d.byte() {
	case 0:
	case 1:
		m.Cancelled = true
	default:
		r.d.fail()
	}
	if r.version > snapVersionV5 {
		switch r.d.byte() {
		case 0:
		case 1:
			m.Scale = true
		default:
			r.d.fail()
		}
	}
	if r.d.failed || !originReplicas(m.Replicas, sa.NextReplica) || placementJSON(m.Placement) != nil {
		r.bad("stream %q > %q: move", sa.Account, sa.Name)
		return nil
	}
	return m
}

// originReplicas reports whether a move's origin replicas are 1 to
// MaxServers, each of an ID from 1 below next, on a named server, no ID
// or server twice.
func originReplicas(rs []Replica, next raftnode.ReplicaID) bool {
	if len(rs) == 0 || len(rs) > MaxServers {
		return false
	}
	for i, x := range rs {
		if x.ID == 0 || x.ID >= next || x.Server == "" {
			return false
		}
		for _, y := range rs[:i] {
			if y.ID == x.ID || y.Server == x.Server {
				return false
			}
		}
	}
	return true
}

func (r *snapReader) consumers(e *streamEntry) {
	n := r.d.count(1)
	prev := ""
	for i := range n {
		ca := &ConsumerAssignment{Account: e.sa.Account, Stream: e.sa.Name, Name: r.d.string()}
		ca.Config, ca.Created, ca.Group, ca.NextReplica, ca.Replicas = r.asset()
		if r.version >= snapVersionV3 {
			ca.Initial = int(r.d.uvarint())
		} else {
			ca.Initial = int(ca.NextReplica) - 1
		}
		if r.d.failed {
			return
		}
		if ca.Name == "" || (i > 0 && ca.Name <= prev) || !isObject(ca.Config) || ca.Initial < 1 || ca.Initial >= int(ca.NextReplica) {
			r.bad("consumer %q > %q > %q", e.sa.Account, e.sa.Name, ca.Name)
			return
		}
		prev = ca.Name
		e.consumers[ca.Name] = ca
	}
}

// asset reads the fields a stream and a consumer share, and checks the
// group and replica IDs.
func (r *snapReader) asset() ([]byte, int64, raftnode.GroupID, raftnode.ReplicaID, []Replica) {
	config, created := r.d.bytes(), r.d.varint()
	g, next := raftnode.GroupID(r.d.uvarint()), raftnode.ReplicaID(r.d.uvarint())
	n := r.d.count(1)
	var rs []Replica
	for range n {
		rs = append(rs, Replica{ID: raftnode.ReplicaID(r.d.uvarint()), Server: raftnode.ServerID(r.d.string()), Incarnation: r.d.incarnation()})
	}
	if r.d.failed {
		return nil, 0, 0, 0, nil
	}
	if g < FirstGroup || g >= r.s.nextGroup || r.groups[g] {
		r.bad("group %d (next %d)", g, r.s.nextGroup)
	}
	r.groups[g] = true
	ids, srvs := map[raftnode.ReplicaID]bool{}, map[raftnode.ServerID]bool{}
	for _, rep := range rs {
		if rep.ID == 0 || rep.ID >= next || rep.Server == "" || ids[rep.ID] || srvs[rep.Server] {
			r.bad("group %d: replica %d on %q (next %d)", g, rep.ID, rep.Server, next)
			break
		}
		ids[rep.ID], srvs[rep.Server] = true, true
	}
	return config, created, g, next, rs
}
