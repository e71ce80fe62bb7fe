package raftnode

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
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
	envelopeOverhead = 13 // group u64, flags u8, length u32
)

// appendEnvelope appends one envelope to a frame body.
func appendEnvelope(b []byte, g GroupID, flags byte, msg []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(g))
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(msg)))
	return append(b, msg...)
}

// frameBuilder collects the envelopes for one destination.
type frameBuilder struct {
	n    uint32
	body []byte
}

func (fb *frameBuilder) add(env []byte) {
	fb.n++
	fb.body = append(fb.body, env...)
}

// frame returns the finished frame.
func (fb *frameBuilder) frame() []byte {
	f := make([]byte, 0, 5+len(fb.body)+4)
	f = append(f, frameVersion)
	f = binary.LittleEndian.AppendUint32(f, fb.n)
	f = append(f, fb.body...)
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
