// Package store defines the message store of a JetStream stream: the
// interface both engines implement (filestore on disk, memstore in
// memory), the shared types, the limit rules and the errors. It knows
// nothing of the network (docs/architecture.md rule 1).
//
// # Contract
//
//  1. Append assigns the next sequence (LastSeq+1) and applies the
//     stream's limits at once, deterministically: discard new refuses with
//     an error, discard old removes the oldest messages. Nothing in Append
//     reads a clock; the message carries its timestamp, chosen once when
//     the entry was made (docs/engine.md, "What decides what").
//  2. Append does not wait for the disk. WaitDurable(seq) returns once
//     every message through seq is durable under the sync policy (the
//     default is fsync before returning, shared by every append waiting at
//     that moment: group commit). A PubAck is sent only after WaitDurable
//     returned nil.
//  3. Age-based and per-message TTL expiry happen only when the caller
//     says what time it is: ExpireUpTo(now). Its result tells when the
//     next TTL falls due.
//  4. After a write or sync error the store is fenced: Append and
//     WaitDurable return ErrFenced until the store is closed and reopened
//     (recovery then decides from the log what is durable).
//  5. Corrupt data is never returned: a load of a damaged record returns an
//     error that wraps ErrCorrupt and names the sequence range.
//
// Engines are safe for concurrent use.
package store

import (
	"errors"
	"fmt"
	"time"
)

// Msg is a message to append. Header is the raw NATS header block
// ("NATS/1.0\r\n...\r\n\r\n") or nil; Time is the publish time in unix
// nanoseconds, chosen once when the entry was made.
type Msg struct {
	Subject string
	Header  []byte
	Data    []byte
	Time    int64
}

// StoredMsg is a message as loaded from a store. The slices are owned by
// the caller (engines never hand out their internal buffers).
type StoredMsg struct {
	Subject string
	Header  []byte
	Data    []byte
	Seq     uint64
	Time    int64 // unix nanoseconds
}

// DiscardPolicy says what a full stream does with a new message
// (docs/protocol.md section 6.2).
type DiscardPolicy int

// Discard policies. The values are stored in stream metadata: append only.
const (
	DiscardOld DiscardPolicy = iota // store it and remove the oldest
	DiscardNew                      // refuse it
)

// Config holds the limits a store enforces. Zero or negative limits mean
// unlimited (the JSON API's -1 maps to 0 here).
type Config struct {
	MaxMsgs              int64         // messages in the stream
	MaxBytes             int64         // bytes, counted with MsgSize
	MaxAge               time.Duration // applied by ExpireUpTo
	MaxMsgsPerSubject    int64         // messages per distinct subject
	MaxMsgSize           int64         // bytes of header plus payload
	Discard              DiscardPolicy // what a full stream does
	DiscardNewPerSubject bool          // with DiscardNew, refuse at the per-subject limit too
	FirstSeq             uint64        // the first sequence of a new, empty store (0 means 1)
	// MsgTTL makes the store honour the Nats-TTL header of the messages
	// it stores (allow_msg_ttl; ttl.go): ExpireUpTo removes a message once
	// its TTL has passed, and never removes one with TTLNever by MaxAge.
	MsgTTL bool
	// SubjectDeleteMarkers makes ExpireUpTo leave the last message of a
	// subject for a subject delete marker (subject_delete_marker_ttl;
	// expire.go rule 3).
	SubjectDeleteMarkers bool
	// Compress makes the file store keep message payloads S2-compressed
	// on disk where that saves space (compression "s2", docs/protocol.md
	// section 3.1; filestore's "Compression"). Nothing a client sees
	// changes: loads, State.Bytes and MaxBytes use the uncompressed
	// message. The memory store ignores it.
	Compress bool
	// MemSizes makes the store count messages as nats-server's memory
	// store does (MemMsgSize) instead of as its file store does
	// (MsgSize), in State.Bytes and against MaxBytes: set for memory
	// streams (stream.Config.StoreConfig). The file store ignores it;
	// the memory store reads it once, in New (without it, it counts as a
	// file store would, the model of one in tests).
	MemSizes bool
}

// State is the observable state of a store (docs/protocol.md section 3.3,
// StreamState). Times are unix nanoseconds; zero when there is no message.
type State struct {
	Msgs        uint64
	Bytes       uint64 // sum of MsgSize over stored messages
	FirstSeq    uint64 // lowest stored sequence; LastSeq+1 when empty after removals
	FirstTime   int64
	LastSeq     uint64 // highest sequence ever assigned; never goes down
	LastTime    int64
	NumSubjects int      // distinct subjects stored
	NumDeleted  int      // interior gaps between FirstSeq and LastSeq
	Deleted     []uint64 // the gaps, ascending, only when asked for
	Lost        *Lost    // data the engine found damaged, or nil
}

// Lost reports stored data found damaged: the sequences that can no
// longer be served and their bytes.
type Lost struct {
	Msgs  []uint64
	Bytes uint64
}

// SubjectState is the per-subject state used by max_msgs_per_subject and
// last_per_subject delivery.
type SubjectState struct {
	Msgs  uint64
	First uint64 // sequence of the first stored message on the subject
	Last  uint64 // sequence of the last stored message on the subject
}

// PurgeRequest selects what Purge removes (docs/protocol.md 6.3):
// Subject filters by subject (wildcards allowed, "" = all); Seq > 0
// removes only sequences below Seq; Keep > 0 keeps the newest Keep
// matching messages. Seq and Keep together are invalid (ErrBadRequest).
type PurgeRequest struct {
	Subject string
	Seq     uint64
	Keep    uint64
}

// Store is a stream's message store.
type Store interface {
	// Append stores m at LastSeq+1 and returns that sequence, applying the
	// limits (ErrMaxMsgs, ErrMaxBytes, ErrMaxMsgsPerSubject, ErrMaxMsgSize
	// with DiscardNew or for the size limit). It returns ErrFenced after an
	// I/O error and ErrClosed after Close.
	Append(m Msg) (uint64, error)
	// SkipTo makes seq the sequence the next Append assigns, so that a
	// mirror stores each message at its origin's sequence (nats-server
	// v2.15.2 SkipMsgs, called by processInboundMirrorMsg). The sequences
	// LastSeq+1 .. seq-1 are never stored: in a store with no message
	// FirstSeq becomes seq and nothing counts as deleted (as Compact past
	// the end); otherwise they are interior gaps, counted in
	// State.NumDeleted and listed in State.Deleted, not in Removals. A
	// skip costs nothing per skipped sequence, except State(true), which
	// lists every gap as nats-server does. LastTime is unchanged.
	// seq = LastSeq+1 is a no-op; seq <= LastSeq or seq = math.MaxUint64
	// is ErrBadRequest (the mirror maps it to a sequence mismatch). Like
	// Append it does not wait for the disk: WaitDurable(seq-1) does, and
	// the skip then survives a crash (DurableSeq may report seq-1). It
	// returns ErrFenced after an I/O error and ErrClosed after Close.
	SkipTo(seq uint64) error
	// WaitDurable blocks until every message through seq is durable under
	// the sync policy. It returns ErrFenced if that can no longer happen.
	WaitDurable(seq uint64) error
	// DurableSeq returns the highest sequence such that every message
	// through it is durable under the sync policy (the file store: made
	// durable by an fsync; the memory store: LastSeq, memory holding
	// nothing more durable). It never exceeds LastSeq and never goes down
	// while the store is open. Consumers must never deliver a message above
	// it: after a crash, a torn tail that was never acknowledged is cut off
	// and its sequences are assigned again, to different messages.
	DurableSeq() uint64
	// Load returns the message at seq, or ErrNotFound (never stored, deleted
	// or removed) or an error wrapping ErrCorrupt.
	Load(seq uint64) (*StoredMsg, error)
	// LoadNext returns the first message with sequence >= start whose
	// subject matches any of filters (wildcards allowed; none or "" or ">"
	// match all). It returns ErrEOF when there is none.
	LoadNext(filters []string, start uint64) (*StoredMsg, error)
	// NumPending returns the number of stored messages with start <= seq
	// <= end (end 0: through LastSeq) whose subject matches any of filters,
	// under LoadNext's filter rules. It reads only the engine's index,
	// never a payload, and is cheap both for the whole stream (start at or
	// below FirstSeq, end 0: deliver all) and for a few new sequences at
	// the end. Lost sequences (State.Lost) are not counted. It counts
	// whether or not a message is durable yet: pass end = DurableSeq() to
	// count only what may be delivered. It returns 0 after Close.
	NumPending(filters []string, start, end uint64) uint64
	// LoadLast returns the last message whose subject matches filter
	// (wildcards allowed), or ErrNotFound.
	LoadLast(filter string) (*StoredMsg, error)
	// SubjectsState returns the state of every stored subject matching
	// filter ("" or ">" for all).
	SubjectsState(filter string) map[string]SubjectState
	// Delete removes the message at seq. It returns ErrNotFound if there is
	// none.
	Delete(seq uint64) error
	// DeleteMany removes the messages at seqs (in any order; a sequence
	// that holds none is skipped) and returns how many it removed. It
	// waits for durability once for all of them, where Delete would
	// wait once per message: retention removes acknowledged or copied
	// messages this way, a batch at a time.
	DeleteMany(seqs []uint64) (uint64, error)
	// Purge removes what req selects and returns the number removed.
	Purge(req PurgeRequest) (uint64, error)
	// Compact removes every message below seq and returns the number
	// removed; FirstSeq becomes at least seq.
	Compact(seq uint64) (uint64, error)
	// ExpireUpTo removes the messages that have expired at time now (unix
	// nanoseconds): by MaxAge, and by their Nats-TTL when Config.MsgTTL is
	// set, under the rules of Expire (expire.go). It returns what it
	// removed, the messages it left for subject delete markers, and the
	// next TTL deadline.
	ExpireUpTo(now int64) (Expiry, error)
	// Removals returns the number of stored messages removed since the
	// store was opened, by any means: Delete, Purge (rollups included),
	// Compact, ExpireUpTo, the limits on Append and UpdateConfig, and a
	// stored message the engine finds corrupt (it becomes lost).
	// It starts at 0 on open and never goes down, so a caller may cache a
	// count: read Removals, then count to an explicit end E; while
	// Removals is unchanged the count stays right and only grows by
	// NumPending(filters, E+1, E2) as messages are appended. After Close it
	// returns the count reached.
	Removals() uint64
	// State returns the current state; Deleted is filled only when
	// withDeleted is true.
	State(withDeleted bool) State
	// UpdateConfig applies new limits, removing what they push out.
	UpdateConfig(cfg Config) error
	// ConsumerStore opens (creating if needed) the durable state of the
	// named consumer.
	ConsumerStore(name string) (ConsumerStore, error)
	// Close flushes and closes the store. Further calls return ErrClosed.
	Close() error
}

// Errors of the store. Limit errors carry nats-server's descriptions
// (docs/protocol.md 6.2; nats-server v2.15.2 server/errors.json): the
// stream layer maps ErrMaxMsgs, ErrMaxBytes and ErrMaxMsgsPerSubject to
// err_code 10077 and ErrMaxMsgSize to 10054, ErrNotFound to 10037.
var (
	ErrNotFound          = errors.New("store: no message found")
	ErrEOF               = errors.New("store: no more messages")
	ErrClosed            = errors.New("store: closed")
	ErrFenced            = errors.New("store: fenced after an I/O error; reopen to recover")
	ErrCorrupt           = errors.New("store: corrupt data")
	ErrBadRequest        = errors.New("store: bad request")
	ErrMaxMsgs           = errors.New("maximum messages exceeded")
	ErrMaxBytes          = errors.New("maximum bytes exceeded")
	ErrMaxMsgsPerSubject = errors.New("maximum messages per subject exceeded")
	ErrMaxMsgSize        = errors.New("message size exceeds maximum allowed")
)

// CorruptError reports damaged stored data: the sequence range First..Last
// (inclusive) and where it was found. It wraps ErrCorrupt.
type CorruptError struct {
	First, Last uint64
	Where       string // file and offset, for the operator
	Reason      string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("store: corrupt data for %s at %s: %s", SeqRange(e.First, e.Last), e.Where, e.Reason)
}

// SeqRange describes the sequences first..last (first <= last) for logs
// and errors: "sequence 5" or "sequences 5-9".
func SeqRange(first, last uint64) string {
	if first == last {
		return fmt.Sprintf("sequence %d", first)
	}
	return fmt.Sprintf("sequences %d-%d", first, last)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// MsgSize is the size a message counts for in a file store's State.Bytes
// and against its MaxBytes: subject, header and payload plus the record
// overhead nats-server's file store counts (30 bytes, 34 with headers;
// docs/protocol.md section 3.3; nats-server v2.15.2 fileStoreMsgSize).
func MsgSize(subject string, header, data []byte) uint64 {
	n := uint64(len(subject) + len(header) + len(data) + 30)
	if len(header) > 0 {
		n += 4
	}
	return n
}

// MemMsgSize is the size a message counts for in a memory store: subject,
// header and payload plus 16 bytes (nats-server v2.15.2 memStoreMsgSize),
// so a memory stream reports and limits bytes as nats-server's does.
func MemMsgSize(subject string, header, data []byte) uint64 {
	return uint64(len(subject) + len(header) + len(data) + 16)
}

// MsgSize returns the size a message counts for under c: MemMsgSize with
// MemSizes, else MsgSize.
func (c Config) MsgSize(subject string, header, data []byte) uint64 {
	if c.MemSizes {
		return MemMsgSize(subject, header, data)
	}
	return MsgSize(subject, header, data)
}
