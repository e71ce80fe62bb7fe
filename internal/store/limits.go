package store

import (
	"bytes"
	"errors"
	"fmt"
)

// The limit rules both engines share, so that they decide every append,
// removal and expiry identically (docs/protocol.md section 6.2; nats-server
// v2.15.2 memstore.go and filestore.go storeRawMsg, enforceMsgLimit,
// enforceBytesLimit, enforcePerSubjectLimit, expireMsgs, UpdateConfig).
//
// An engine's Append does, in this order:
//
//  1. CheckAppend (size, then discard new), refusing the message with the
//     error it returns; a refused message consumes no sequence.
//  2. Store the message at LastSeq+1.
//  3. EnforceAfterAppend: remove the subject's oldest while the subject is
//     over MaxMsgsPerSubject, then the stream's oldest while the stream is
//     over MaxMsgs or MaxBytes (discard old only).
//
// UpdateConfig runs EnforceAfterUpdate, which applies the stream limits
// first and the per-subject limit second (the order matters: see its
// comment). ExpireUpTo walks the stored messages in sequence order from
// the first and removes each while Expired says so, stopping at the first
// message that has not expired.

// rollupHeader is the header that marks a rollup message (docs/protocol.md
// section 4.2), which discard new per subject always lets through.
const rollupHeader = "Nats-Rollup"

// errNoProgress reports an engine whose removal callback removed nothing,
// a programming error that would otherwise loop for ever.
var errNoProgress = errors.New("store: limit enforcement removed nothing")

// CheckMsgSize returns ErrMaxMsgSize when the header and payload together
// are larger than cfg.MaxMsgSize (the subject does not count). A limit of
// zero or less is no limit.
func CheckMsgSize(cfg Config, header, data []byte) error {
	if cfg.MaxMsgSize > 0 && int64(len(header)+len(data)) > cfg.MaxMsgSize {
		return ErrMaxMsgSize
	}
	return nil
}

// Occupancy is what the admission rule reads of a store just before an
// append: the stream's message and byte counts (State.Msgs, State.Bytes)
// and the number of messages stored on the new message's subject.
type Occupancy struct {
	Msgs        uint64
	Bytes       uint64
	SubjectMsgs uint64
}

// CheckAppend applies every admission rule to m: CheckMsgSize, then
// CheckDiscardNew. oldestSize is as for CheckDiscardNew.
func CheckAppend(cfg Config, occ Occupancy, m Msg, oldestSize func() uint64) error {
	if err := CheckMsgSize(cfg, m.Header, m.Data); err != nil {
		return err
	}
	return CheckDiscardNew(cfg, occ, m, oldestSize)
}

// CheckDiscardNew applies the discard-new rule (docs/protocol.md section 6.2)
// to m, returning nil when m may be stored. It does nothing under
// DiscardOld. Under DiscardNew, when m's subject is at its per-subject
// limit (AtSubjectLimit):
//
//   - with DiscardNewPerSubject, m is refused with ErrMaxMsgsPerSubject
//     unless it carries a Nats-Rollup header;
//   - otherwise m will replace the subject's oldest message, so a full
//     max_msgs does not refuse it, and a full max_bytes refuses it only
//     when that oldest message is smaller than m (both sizes by MsgSize;
//     this is nats-server's exact test, not a recount of the total).
//
// Otherwise m is refused with ErrMaxMsgs when the stream already holds
// MaxMsgs messages, and with ErrMaxBytes when Bytes+MsgSize(m) exceeds
// MaxBytes (sizes by cfg.MsgSize). oldestSize returns the size of the oldest stored message on
// m's subject; it is called only in the max_bytes case at the subject
// limit.
func CheckDiscardNew(cfg Config, occ Occupancy, m Msg, oldestSize func() uint64) error {
	if cfg.Discard != DiscardNew {
		return nil
	}
	replaces := AtSubjectLimit(cfg, occ.SubjectMsgs)
	if replaces && cfg.DiscardNewPerSubject && !hasRollup(m.Header) {
		return ErrMaxMsgsPerSubject
	}
	if cfg.MaxMsgs > 0 && occ.Msgs >= uint64(cfg.MaxMsgs) && !replaces {
		return ErrMaxMsgs
	}
	size := cfg.MsgSize(m.Subject, m.Header, m.Data)
	if cfg.MaxBytes > 0 && occ.Bytes+size > uint64(cfg.MaxBytes) {
		if !replaces || oldestSize() < size {
			return ErrMaxBytes
		}
	}
	return nil
}

// AtSubjectLimit reports whether a subject holding n messages is at (or
// above) MaxMsgsPerSubject, so that one more message on it must push its
// oldest out.
func AtSubjectLimit(cfg Config, n uint64) bool {
	return cfg.MaxMsgsPerSubject > 0 && n >= uint64(cfg.MaxMsgsPerSubject)
}

// OverSubjectLimit reports whether a subject holding n messages must lose
// its oldest one. The per-subject limit applies under both discard
// policies.
func OverSubjectLimit(cfg Config, n uint64) bool {
	return cfg.MaxMsgsPerSubject > 0 && n > uint64(cfg.MaxMsgsPerSubject)
}

// OverStreamLimits reports whether a stream holding msgs messages of
// bytes bytes must lose its oldest message: only under DiscardOld, when
// it is over MaxMsgs or MaxBytes. Under DiscardNew the stream limits only
// refuse appends; they never remove, not even after UpdateConfig lowered
// them.
func OverStreamLimits(cfg Config, msgs, bytes uint64) bool {
	if cfg.Discard != DiscardOld {
		return false
	}
	return cfg.MaxMsgs > 0 && msgs > uint64(cfg.MaxMsgs) ||
		cfg.MaxBytes > 0 && bytes > uint64(cfg.MaxBytes)
}

// Expired reports whether a message stored with time msgTime has passed
// MaxAge at time now: msgTime <= now-MaxAge, the boundary included. With
// no MaxAge nothing expires.
func Expired(cfg Config, msgTime, now int64) bool {
	return cfg.MaxAge > 0 && msgTime <= now-int64(cfg.MaxAge)
}

// Enforcer is the view of a store that the enforcement functions work on.
// An engine implements it over its locked state.
type Enforcer interface {
	// Totals returns the stream's message and byte counts.
	Totals() (msgs, bytes uint64)
	// SubjectMsgs returns the number of messages stored on subject.
	SubjectMsgs(subject string) uint64
	// SubjectsOver returns the subjects holding more than n messages.
	SubjectsOver(n uint64) []string
	// RemoveOldest removes the stream's lowest stored sequence.
	RemoveOldest() error
	// RemoveSubjectOldest removes the lowest stored sequence on subject.
	RemoveSubjectOldest(subject string) error
}

// EnforceAfterAppend removes what the limits push out once a message on
// subject was stored: the subject's oldest messages while it is over
// MaxMsgsPerSubject, then the stream's oldest while OverStreamLimits.
func EnforceAfterAppend(cfg Config, subject string, e Enforcer) error {
	if err := enforceSubject(cfg, subject, e); err != nil {
		return err
	}
	return enforceStream(cfg, e)
}

// EnforceAfterUpdate removes what the limits of a new configuration push
// out: first the stream's oldest while OverStreamLimits, then, for every
// subject over MaxMsgsPerSubject, that subject's oldest. This is
// nats-server's order; it differs from EnforceAfterAppend's and can
// remove different messages (a1 b2 b3 with MaxMsgs 2 and
// MaxMsgsPerSubject 1 leaves only b3).
func EnforceAfterUpdate(cfg Config, e Enforcer) error {
	if err := enforceStream(cfg, e); err != nil {
		return err
	}
	if cfg.MaxMsgsPerSubject <= 0 {
		return nil
	}
	for _, subj := range e.SubjectsOver(uint64(cfg.MaxMsgsPerSubject)) {
		if err := enforceSubject(cfg, subj, e); err != nil {
			return err
		}
	}
	return nil
}

// enforceSubject removes subject's oldest messages while it is over the
// per-subject limit.
func enforceSubject(cfg Config, subject string, e Enforcer) error {
	for n := e.SubjectMsgs(subject); OverSubjectLimit(cfg, n); {
		if err := e.RemoveSubjectOldest(subject); err != nil {
			return err
		}
		next := e.SubjectMsgs(subject)
		if next >= n {
			return fmt.Errorf("%w: subject %q", errNoProgress, subject)
		}
		n = next
	}
	return nil
}

// enforceStream removes the stream's oldest messages while it is over
// MaxMsgs or MaxBytes under discard old.
func enforceStream(cfg Config, e Enforcer) error {
	for msgs, size := e.Totals(); OverStreamLimits(cfg, msgs, size); {
		if err := e.RemoveOldest(); err != nil {
			return err
		}
		next, nsize := e.Totals()
		if next >= msgs {
			return errNoProgress
		}
		msgs, size = next, nsize
	}
	return nil
}

// hasRollup reports whether the NATS header block hdr holds a Nats-Rollup
// header with a non-empty value. Like nats-server's sliceHeader, the key
// is matched case-sensitively at the start of a header line after the
// first (status) line.
func hasRollup(hdr []byte) bool {
	_, fields, _ := bytes.Cut(hdr, []byte("\r\n"))
	for line := range bytes.SplitSeq(fields, []byte("\r\n")) {
		key, value, ok := bytes.Cut(line, []byte(":"))
		if ok && string(key) == rollupHeader && len(bytes.TrimLeft(value, " ")) > 0 {
			return true
		}
	}
	return false
}
