package stream

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
)

// BatchCommit is the operation that stores an atomic batch (ADR-50,
// nats-server v2.15.2 processJetStreamAtomicBatchMsg on one server): the
// batch's messages in batch order, the last one carrying
// "Nats-Batch-Commit: 1", all stored at Time (unix nanoseconds, chosen
// once when the commit arrived). ApplyBatch applies it all or nothing.
// AtomicBatches builds it; EncodeBatchCommit and DecodeBatchCommit give
// it the byte form drawn in the package comment, so that a replicated log
// can carry it.
//
// MaxPayload is the server's max_payload when the commit arrived (0 for
// none), the limit of a counter message built from a Nats-Incr of the
// batch (Entry.MaxPayload).
type BatchCommit struct {
	ID         string
	Time       int64
	MaxPayload int64
	Entries    []Entry // Entry.Time, Entry.Sourced and Entry.MaxPayload are not used
}

// ErrBadBatchCommit is returned by DecodeBatchCommit for bytes that are
// not an encoded BatchCommit.
var ErrBadBatchCommit = errors.New("stream: malformed batch commit")

// batchCommitVersion is the first byte of an encoded BatchCommit.
const batchCommitVersion = 1

// EncodeBatchCommit appends c's byte form to dst.
func EncodeBatchCommit(dst []byte, c BatchCommit) []byte {
	dst = append(dst, batchCommitVersion)
	dst = appendBytes(dst, []byte(c.ID))
	dst = binary.AppendVarint(dst, c.Time)
	dst = binary.AppendUvarint(dst, uint64(max(c.MaxPayload, 0)))
	dst = binary.AppendUvarint(dst, uint64(len(c.Entries)))
	for _, e := range c.Entries {
		dst = appendBytes(dst, []byte(e.Subject))
		if e.Header == nil {
			dst = binary.AppendUvarint(dst, 0)
		} else {
			dst = binary.AppendUvarint(dst, uint64(len(e.Header))+1)
			dst = append(dst, e.Header...)
		}
		dst = appendBytes(dst, e.Data)
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

// DecodeBatchCommit reads a BatchCommit that EncodeBatchCommit wrote. The
// entries' headers and payloads alias b. It returns ErrBadBatchCommit
// (wrapped) for anything else, trailing bytes included.
func DecodeBatchCommit(b []byte) (BatchCommit, error) {
	d := decoder{b: b}
	if d.byte() != batchCommitVersion {
		return BatchCommit{}, fmt.Errorf("%w: unknown version", ErrBadBatchCommit)
	}
	c := BatchCommit{ID: string(d.bytes()), Time: d.varint()}
	if c.MaxPayload = int64(d.uvarint()); c.MaxPayload < 0 {
		return BatchCommit{}, fmt.Errorf("%w: max payload out of range", ErrBadBatchCommit)
	}
	n := d.uvarint()
	if n > uint64(len(b)) { // every entry takes at least 3 bytes
		return BatchCommit{}, fmt.Errorf("%w: %d entries in %d bytes", ErrBadBatchCommit, n, len(b))
	}
	for range n {
		e := Entry{Subject: string(d.bytes())}
		if h := d.uvarint(); h > 0 {
			e.Header = d.take(h - 1)
		}
		e.Data = d.bytes()
		c.Entries = append(c.Entries, e)
	}
	if d.err != nil || len(d.b) > 0 {
		return BatchCommit{}, fmt.Errorf("%w: truncated or trailing bytes", ErrBadBatchCommit)
	}
	return c, nil
}

// decoder reads the varint-framed fields of an encoded operation; the
// first failure sticks in err.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() { d.err, d.b = ErrBadBatchCommit, nil }

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

func (d *decoder) bytes() []byte { return d.take(d.uvarint()) }

// ApplyBatch applies an atomic batch all or nothing: it checks every
// message in batch order against the stream and the messages before it
// (batchcheck.go; a Nats-Expected-Last-Msg-Id first gets 10177
// "atomic publish unsupported header used: Nats-Expected-Last-Msg-Id"),
// and stores nothing at the first failure, whose error it returns.
// Otherwise it stores them all, as Apply stores one message, and returns
// one Result per message. If the store refuses one anyway (a write error,
// or a config changed between the checks' assumptions and the store's),
// the messages of the batch already stored are deleted again and the
// store's error is returned; what the batch's appends pushed out of the stream under discard old is
// not restored. Like Apply, it reads no clock.
func (s *Stream) ApplyBatch(c BatchCommit) ([]Result, *jserr.Error) {
	msgs, err := s.checkCommit(c)
	if err != nil {
		return nil, err
	}
	results := make([]Result, 0, len(msgs))
	for _, m := range msgs {
		s.raiseTTL(m)
		r := s.commit(m)
		if r.Err != nil {
			return s.undoBatch(results, r)
		}
		results = append(results, r)
	}
	return results, nil
}

// checkCommit runs the checks of every message of c in order.
func (s *Stream) checkCommit(c BatchCommit) ([]*pub, *jserr.Error) {
	d := &batchDiff{}
	last := s.store.State(false).LastSeq
	msgs := make([]*pub, len(c.Entries))
	for i, e := range c.Entries {
		e.Subject = s.mapSubject(e.Subject)
		e.Time, e.Sourced, e.MaxPayload = c.Time, false, c.MaxPayload
		m := newPub(e)
		m.hdr = removeHeader(m.hdr, hdrRequestInfo)
		if _, ok := headerValue(m.hdr, hdrExpectedLastMsgID); ok {
			return nil, jserr.New(jserr.AtomicPublishUnsupportedHeaderBatch, jserr.Sub("header", hdrExpectedLastMsgID))
		}
		if _, err := s.checkBatchMsg(m, d, last+uint64(i)); err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	return msgs, nil
}

// undoBatch deletes the messages of a batch stored before failed (the
// result of the message the store refused, itself stored when only its
// rollup purge failed) and returns failed's error. A store that fails
// the deletion too is fenced: nothing more is acknowledged, and the next
// start drops the batch's stored messages (DropPartialBatch), none of
// which carries the commit header.
func (s *Stream) undoBatch(stored []Result, failed Result) ([]Result, *jserr.Error) {
	seqs := make([]uint64, 0, len(stored)+1)
	for _, r := range stored {
		seqs = append(seqs, r.Seq)
	}
	if failed.Seq > 0 {
		seqs = append(seqs, failed.Seq)
	}
	if len(seqs) > 0 {
		_, _ = s.store.DeleteMany(seqs)
	}
	return nil, failed.Err
}

// The atomic batch headers (ADR-50).
const (
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
)

// PartialBatch describes the messages of an atomic batch a start found
// stored without the batch's commit header (DropPartialBatch).
type PartialBatch struct {
	ID          string
	First, Last uint64 // the sequences removed
}

// DropPartialBatch removes, when the stream was opened over a store that
// holds messages, an atomic batch that a crash cut short: the last
// stored message carries Nats-Batch-Id and Nats-Batch-Sequence n but no
// Nats-Batch-Commit, and the n messages ending there are the batch's
// first n. ApplyBatch stores a batch in one run and its PubAck waits for
// the fsync of its last message, so such a batch was never acknowledged
// and never delivered; removing it keeps the batch all or nothing (the
// client retries, as after a lost PubAck). nats-server v2.15.2 instead
// completes the batch from the copy it staged on disk (jetstream.go,
// "Restoring partial batch write"); cairn stages in memory. Like
// nats-server, it looks only at streams with allow_atomic. It returns ok
// false when there is nothing to remove. Call it before Rebuild.
func (s *Stream) DropPartialBatch() (PartialBatch, bool, error) {
	if !s.cfg.AllowAtomicPublish {
		return PartialBatch{}, false, nil // no atomic batch was ever committed here
	}
	last, err := s.store.LoadLast(store.FilterAll)
	if err != nil || last.Seq != s.store.State(false).LastSeq {
		return PartialBatch{}, false, nil // nothing stored, or the tail is already gone
	}
	id := headerString(last.Header, hdrBatchID)
	n, ok := parseBatchSeq(headerString(last.Header, hdrBatchSeq))
	if _, committed := headerValue(last.Header, hdrBatchCommit); id == "" || !ok || committed || n > last.Seq {
		return PartialBatch{}, false, nil
	}
	seqs := []uint64{last.Seq}
	for i := uint64(1); i < n; i++ {
		m, err := s.store.Load(last.Seq - i)
		if err != nil || headerString(m.Header, hdrBatchID) != id {
			break // removed by a limit, or not the batch's: keep what is not provably the batch's
		}
		if k, ok := parseBatchSeq(headerString(m.Header, hdrBatchSeq)); !ok || k != n-i {
			break
		}
		seqs = append(seqs, m.Seq)
	}
	if _, err := s.store.DeleteMany(seqs); err != nil {
		return PartialBatch{}, false, fmt.Errorf("stream %s: remove the partial batch %q: %w", s.cfg.Name, id, err)
	}
	return PartialBatch{ID: id, First: seqs[len(seqs)-1], Last: last.Seq}, true, nil
}

// parseBatchSeq reads a batch sequence as nats-server's parseUint64 does:
// ASCII digits only, no overflow, not empty.
func parseBatchSeq(v string) (uint64, bool) {
	if v == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (^uint64(0)-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// BatchID returns the Nats-Batch-Id of a publish's header block, "" when
// it has none (an ordinary publish).
func BatchID(hdr []byte) string {
	if len(hdr) == 0 {
		return ""
	}
	return headerString(hdr, hdrBatchID)
}
