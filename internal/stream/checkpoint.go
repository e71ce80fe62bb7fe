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
// "Checkpoints"; docs/clustering.md, "Checkpoints"). Rebuild cannot do
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

// AppendCheckpoint appends the stream's own state to dst (the format
// drawn in the package comment, "Checkpoints"): its config, the
// Nats-Msg-Id of the last message, the max_age deadline the last expiry
// found, the duplicate window in storage order (id, sequence, time; the
// ids a later one superseded included, as the window keeps them), and the
// schedules (subject, sequence, when due) of a stream with
// allow_msg_schedules; then a CRC-32C of all of it. The error is the
// config's JSON encoding's (none for a config that passed Validate).
func (s *Stream) AppendCheckpoint(dst []byte) ([]byte, error) {
	cfg, err := json.Marshal(&s.cfg)
	if err != nil {
		return dst, fmt.Errorf("stream %s: checkpoint: encode config: %w", s.cfg.Name, err)
	}
	start := len(dst)
	dst = append(dst, checkpointVersion)
	dst = appendBytes(dst, cfg)
	dst = appendBytes(dst, []byte(s.lastMsgID))
	dst = binary.AppendVarint(dst, s.nextAge)
	window := s.dedupe.queue[s.dedupe.head:]
	dst = binary.AppendUvarint(dst, uint64(len(window)))
	for _, r := range window {
		dst = appendBytes(dst, []byte(r.id))
		dst = binary.AppendUvarint(dst, r.seq)
		dst = binary.AppendVarint(dst, r.time)
	}
	if s.sched == nil {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
		es := make([]*schedEntry, 0, len(s.sched.bySeq))
		for _, e := range s.sched.bySeq {
			es = append(es, e)
		}
		slices.SortFunc(es, func(a, b *schedEntry) int { return cmp.Compare(a.seq, b.seq) })
		dst = binary.AppendUvarint(dst, uint64(len(es)))
		for _, e := range es {
			dst = appendBytes(dst, []byte(e.subj))
			dst = binary.AppendUvarint(dst, e.seq)
			dst = binary.AppendVarint(dst, e.at)
		}
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], checkpointCRC)), nil
}

// checkpoint is a decoded checkpoint.
type checkpoint struct {
	cfg       Config
	lastMsgID string
	nextAge   int64
	window    []dedupeRecord
	sched     *schedules
}

// decodeCheckpoint checks and decodes AppendCheckpoint's bytes.
func decodeCheckpoint(b []byte) (*checkpoint, error) {
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
	c := &checkpoint{}
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
