package raftnode

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Envelope flags (package comment, "Frames"; on the wire, append only).
const (
	flagQuiesce  = 1 << 0 // on a heartbeat: the leader is going quiet
	flagWake     = 1 << 1 // no message: wake the group
	flagLiveness = 1 << 2 // no message, group 0: the sender is alive
	// flagInSync, with flagQuiesce: the receiving replica holds the
	// leader's whole log, so the heartbeat's commit index is the leader's
	// (contact.go). A leader goes quiet without waiting for a replica on
	// a server it finds dead; that replica's quiesce heartbeat lacks it.
	flagInSync = 1 << 3
)

const (
	frameVersion     = 1
	envelopeOverhead = 13        // group u64, flags u8, length u32
	frameOverhead    = 1 + 4 + 4 // version, count, CRC
	minFrameBytes    = 4 << 10
)

// maxAppendOverhead bounds the bytes a MsgApp carrying one entry adds to
// the entry's data in its protobuf encoding (raftpb.Message, proto2: a
// field is a tag byte, then a varint of at most 10 bytes or a length of
// at most 5 and the bytes):
//
//	to, from, term, logTerm, index, commit, vote, rejectHint  8 × (1 + 10) = 88
//	type, reject                                              2 × (1 + 1)  =  4
//	entries: tag and length of the one entry                  1 + 5        =  6
//	the entry's term and index                                2 × (1 + 10) = 22
//	the entry's type                                          1 + 1        =  2
//	the entry's data: tag and length                          1 + 5        =  6
//	                                                                         128
//
// etcd raft's MsgApp (maybeSendAppend) sets type, to, from, term,
// logTerm, index, entries and commit, and no context, snapshot or
// responses: the bound counts every scalar field at its widest, so it
// holds whatever values they take (TestEntryLimitDerivation).
const maxAppendOverhead = 8*(1+10) + 2*(1+1) + (1 + 5) + 2*(1+10) + (1 + 1) + (1 + 5)

// DefaultMaxFrameBytes is Config.MaxFrameBytes's default: the largest
// frame of the cluster transport (transport.MaxFrameBytes, 64 MiB; the
// length prefix it writes before a frame is not counted).
const DefaultMaxFrameBytes = 64 << 20

// EntryOverhead is what a frame holding one append of one entry adds to
// the entry's data: the frame's version, count and CRC (9), the envelope
// (13) and the message around the entry (maxAppendOverhead, 128): 150
// bytes. An entry of up to MaxFrameBytes minus this travels in a frame
// of its own (a round's messages for a server are split into frames of
// at most MaxFrameBytes: Node.frames).
const EntryOverhead = frameOverhead + envelopeOverhead + maxAppendOverhead

// DefaultMaxEntryBytes is the largest entry a follower can receive over
// frames of DefaultMaxFrameBytes: 64 MiB less EntryOverhead, 67,108,714
// bytes (Node.MaxEntryBytes for Config.MaxFrameBytes's default).
const DefaultMaxEntryBytes = DefaultMaxFrameBytes - EntryOverhead

// appendEnvelope appends one envelope to a frame body.
func appendEnvelope(b []byte, g GroupID, flags byte, msg []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(g))
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(msg)))
	return append(b, msg...)
}

// frameHead is a frame's bytes before its first envelope: version, count.
const frameHead = 1 + 4

// marshalEnvelope encodes m in an envelope of group g, in one buffer
// with room for a frame around it (frameHead bytes before, the CRC
// after): env is the envelope, room the whole buffer. A frame of that one
// envelope is then built in place (frameBuilder.frame): a large entry's
// append is copied once, by its encoding, on its way to the transport.
func marshalEnvelope(g GroupID, flags byte, m *pb.Message) (env, room []byte, err error) {
	size := proto.Size(m)
	b := make([]byte, frameHead+envelopeOverhead, frameHead+envelopeOverhead+size+4)
	binary.LittleEndian.PutUint64(b[frameHead:], uint64(g))
	b[frameHead+8] = flags
	binary.LittleEndian.PutUint32(b[frameHead+9:], uint32(size))
	b, err = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, m)
	if err == nil && len(b) != frameHead+envelopeOverhead+size {
		err = fmt.Errorf("encoded %d bytes, sized %d", len(b)-frameHead-envelopeOverhead, size)
	}
	return b[frameHead:], b, err
}

// frameBuilder collects the envelopes of one frame for one destination.
type frameBuilder struct {
	to   ServerID
	envs [][]byte
	size int // bytes of envs
	// room is the buffer of the first envelope if marshalEnvelope made
	// it (nil otherwise): a frame of that envelope alone is built in it.
	room []byte
}

// fits reports whether env can join the frame without passing max bytes;
// an empty frame takes any envelope (one larger than max is refused by
// the transport, and an entry that would make one is refused by Propose).
func (fb *frameBuilder) fits(env []byte, max int) bool {
	return len(fb.envs) == 0 || frameOverhead+fb.size+len(env) <= max
}

// add adds env, whose buffer with room for a frame is room (or nil).
func (fb *frameBuilder) add(env, room []byte) {
	if len(fb.envs) == 0 {
		fb.room = room
	}
	fb.envs = append(fb.envs, env)
	fb.size += len(env)
}

// frame returns the finished frame: the envelopes copied once into a
// frame of their size, or, for one envelope with room around it, that
// buffer itself.
func (fb *frameBuilder) frame() []byte {
	var f []byte
	if len(fb.envs) == 1 && fb.room != nil {
		f = fb.room[:frameHead]
	} else {
		f = make([]byte, frameHead, frameOverhead+fb.size)
	}
	f[0] = frameVersion
	binary.LittleEndian.PutUint32(f[1:], uint32(len(fb.envs)))
	if len(fb.envs) == 1 && fb.room != nil {
		f = f[:frameHead+fb.size]
	} else {
		for _, env := range fb.envs {
			f = append(f, env...)
		}
	}
	return binary.LittleEndian.AppendUint32(f, crc32.Checksum(f, castagnoli))
}

// decodeFrame checks a frame and calls fn for each envelope, in order. msg
// aliases frame. It returns ErrBadFrame, before calling fn at all, if the
// frame is damaged or malformed.
func decodeFrame(frame []byte, fn func(g GroupID, flags byte, msg []byte)) error {
	if len(frame) < 9 {
		return fmt.Errorf("%w: %d bytes", ErrBadFrame, len(frame))
	}
	body, sum := frame[:len(frame)-4], binary.LittleEndian.Uint32(frame[len(frame)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return fmt.Errorf("%w: checksum", ErrBadFrame)
	}
	if body[0] != frameVersion {
		return fmt.Errorf("%w: version %d", ErrBadFrame, body[0])
	}
	n := binary.LittleEndian.Uint32(body[1:])
	type env struct {
		g     GroupID
		flags byte
		msg   []byte
	}
	envs := make([]env, 0, min(n, uint32(len(body)/envelopeOverhead)))
	b := body[5:]
	for i := uint32(0); i < n; i++ {
		if len(b) < envelopeOverhead {
			return fmt.Errorf("%w: truncated envelope", ErrBadFrame)
		}
		e := env{g: GroupID(binary.LittleEndian.Uint64(b)), flags: b[8]}
		l := binary.LittleEndian.Uint32(b[9:])
		b = b[envelopeOverhead:]
		if uint64(l) > uint64(len(b)) {
			return fmt.Errorf("%w: truncated message", ErrBadFrame)
		}
		e.msg, b = b[:l:l], b[l:]
		envs = append(envs, e)
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d bytes after the last envelope", ErrBadFrame, len(b))
	}
	for _, e := range envs {
		fn(e.g, e.flags, e.msg)
	}
	return nil
}

// beatOnly reports whether frame holds nothing but one liveness beat.
func beatOnly(frame []byte) bool {
	return len(frame) == 5+envelopeOverhead+4 && frame[5+8] == flagLiveness
}

// BeatOnly reports whether frame holds nothing but one liveness beat
// ("Frames" in the package comment): a transport with such a frame still
// queued for the same peer may drop another, since both say the same.
func BeatOnly(frame []byte) bool { return beatOnly(frame) }
