package stream

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
)

// A checkpoint of the stream state machine is what the Stream holds
// besides its store, at one point of its log, so that a replica of a
// replicated stream restarts from its store rolled back to that point
// (filestore.Config.RollbackTo) and from these bytes, and holds exactly
// the state of the replicas that never stopped (the package comment,
// "Checkpoints"; docs/cluster.md, "Checkpoints"). Rebuild cannot do
// that: it reads the Nats-Msg-Ids of the stored messages only (a deleted
// message's id leaves the window; an expired one's may come back) and it
// cannot know which schedules were parked or fired.

// ErrBadCheckpoint is returned (wrapped) by RestoreCheckpoint and
// CheckpointConfig for bytes that are not a checkpoint this build reads:
// a failed CRC, another version, a truncated or overlong body, a config
// that does not decode. The caller fences the replica; it never guesses
// a state.
var ErrBadCheckpoint = errors.New("stream: damaged or unknown checkpoint")

// checkpointVersion is the version byte of AppendCheckpoint's bytes.
const checkpointVersion = 1

// checkpointCRC is the Castagnoli table of the checkpoint's CRC.
var checkpointCRC = crc32.MakeTable(crc32.Castagnoli)

// Checkpoint is a copy of a stream's own state at one point
// (Stream.Checkpoint), to encode later with Append: the goroutine that
// owns the stream is held only for the copy (a slice of the duplicate
// window's records, whose ids are shared strings), not for the encoding.
type Checkpoint struct {
	cfg       Config
	lastMsgID string
	nextAge   int64
	window    []dedupeRecord
	sched     []schedEntry // ascending seq; nil without allow_msg_schedules
	hasSched  bool
}

// Checkpoint returns a copy of the stream's own state (see
// AppendCheckpoint), for Append to encode while the stream goes on.
func (s *Stream) Checkpoint() *Checkpoint {
	c := &Checkpoint{cfg: s.cfg.Clone(), lastMsgID: s.lastMsgID, nextAge: s.nextAge,
		window: slices.Clone(s.dedupe.queue[s.dedupe.head:]), hasSched: s.sched != nil}
	if s.sched != nil {
		c.sched = make([]schedEntry, 0, len(s.sched.bySeq))
		for _, e := range s.sched.bySeq {
			c.sched = append(c.sched, schedEntry{subj: e.subj, seq: e.seq, at: e.at})
		}
		slices.SortFunc(c.sched, func(a, b schedEntry) int { return cmp.Compare(a.seq, b.seq) })
	}
	return c
}

// AppendCheckpoint appends the stream's own state to dst (the format
// drawn in the package comment, "Checkpoints"): its config, the
// Nats-Msg-Id of the last message, the max_age deadline the last expiry
// found, the duplicate window in storage order (id, sequence, time; the
// ids a later one superseded included, as the window keeps them), and the
// schedules (subject, sequence, when due) of a stream with
// allow_msg_schedules; then a CRC-32C of all of it. It is
// s.Checkpoint().Append(dst). The error is the config's JSON encoding's
// (none for a config that passed Validate).
func (s *Stream) AppendCheckpoint(dst []byte) ([]byte, error) {
	return s.Checkpoint().Append(dst)
}

// Append appends the encoding of c to dst (Stream.AppendCheckpoint).
func (c *Checkpoint) Append(dst []byte) ([]byte, error) {
	cfg, err := json.Marshal(&c.cfg)
	if err != nil {
		return dst, fmt.Errorf("stream %s: checkpoint: encode config: %w", c.cfg.Name, err)
	}
	start := len(dst)
	dst = append(dst, checkpointVersion)
	dst = appendBytes(dst, cfg)
	dst = appendString(dst, c.lastMsgID)
	dst = binary.AppendVarint(dst, c.nextAge)
	dst = binary.AppendUvarint(dst, uint64(len(c.window)))
	for _, r := range c.window {
		dst = appendString(dst, r.id)
		dst = binary.AppendUvarint(dst, r.seq)
		dst = binary.AppendVarint(dst, r.time)
	}
	if !c.hasSched {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
		dst = binary.AppendUvarint(dst, uint64(len(c.sched)))
		for _, e := range c.sched {
			dst = appendString(dst, e.subj)
			dst = binary.AppendUvarint(dst, e.seq)
			dst = binary.AppendVarint(dst, e.at)
		}
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], checkpointCRC)), nil
}

// appendString appends s as its length (a uvarint) and its bytes.
func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// decoded is a decoded checkpoint.
type decoded struct {
	cfg       Config
	lastMsgID string
	nextAge   int64
	window    []dedupeRecord
	sched     *schedules
}

// decodeCheckpoint checks and decodes AppendCheckpoint's bytes.
func decodeCheckpoint(b []byte) (*decoded, error) {
	if len(b) < 5 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadCheckpoint, len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, checkpointCRC) != sum {
		return nil, fmt.Errorf("%w: CRC mismatch", ErrBadCheckpoint)
	}
	if body[0] != checkpointVersion {
		return nil, fmt.Errorf("%w: version %d", ErrBadCheckpoint, body[0])
	}
	d := &decoder{b: body[1:]}
	c := &decoded{}
	if err := json.Unmarshal(d.bytes(), &c.cfg); err != nil && d.err == nil {
		return nil, fmt.Errorf("%w: config: %w", ErrBadCheckpoint, err)
	}
	c.lastMsgID = string(d.bytes())
	c.nextAge = d.varint()
	n := d.uvarint()
	if n > uint64(len(d.b)) { // an id takes at least 3 bytes
		d.fail()
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		c.window = append(c.window, dedupeRecord{id: string(d.bytes()), dedupeEntry: dedupeEntry{seq: d.uvarint(), time: d.varint()}})
	}
	switch d.byte() {
	case 0:
	case 1:
		c.sched = decodeSchedules(d)
	default:
		d.fail()
	}
	if d.err != nil || len(d.b) > 0 {
		return nil, fmt.Errorf("%w: truncated, or trailing bytes", ErrBadCheckpoint)
	}
	if (c.sched != nil) != c.cfg.AllowMsgSchedules {
		return nil, fmt.Errorf("%w: schedules table %v with allow_msg_schedules %v", ErrBadCheckpoint, c.sched != nil, c.cfg.AllowMsgSchedules)
	}
	return c, nil
}

// decodeSchedules reads a count and that many schedules.
func decodeSchedules(d *decoder) *schedules {
	t := newSchedules()
	n := d.uvarint()
	if n > uint64(len(d.b)) { // a schedule takes at least 3 bytes
		d.fail()
		return t
	}
	for range n {
		subj, seq, at := string(d.bytes()), d.uvarint(), d.varint()
		if d.err != nil {
			return t
		}
		if t.bySubj[subj] != nil || t.bySeq[seq] != nil {
			d.fail()
			return t
		}
		t.add(seq, subj, at)
	}
	return t
}

// CheckpointConfig returns the config held in AppendCheckpoint's bytes:
// the config to open the stream's store with (its limits as they were at
// the checkpoint) and to make the Stream with before RestoreCheckpoint.
// Errors wrap ErrBadCheckpoint.
func CheckpointConfig(b []byte) (Config, error) {
	c, err := decodeCheckpoint(b)
	if err != nil {
		return Config{}, err
	}
	return c.cfg, nil
}

// RestoreCheckpoint replaces the stream's own state with AppendCheckpoint's
// bytes: config (and what is compiled from it), last Nats-Msg-Id, max_age
// deadline, duplicate window, schedules. The store is not touched: it
// must hold the state of the same point (a file store rolled back to the
// position taken with these bytes) and enforce the config's limits. It
// replaces Rebuild and ExpireDedupe after such a restart. Errors wrap
// ErrBadCheckpoint; the stream is then unchanged.
func (s *Stream) RestoreCheckpoint(b []byte) error {
	c, err := decodeCheckpoint(b)
	if err != nil {
		return fmt.Errorf("stream %s: %w", s.cfg.Name, err)
	}
	s.cfg = c.cfg
	s.in = compileTransform(&s.cfg)
	s.rp = compileRePublish(&s.cfg)
	s.lastMsgID, s.nextAge, s.sched = c.lastMsgID, c.nextAge, c.sched
	s.dedupe.reset()
	for _, r := range c.window {
		s.dedupe.add(r.id, r.seq, r.time)
	}
	return nil
}
