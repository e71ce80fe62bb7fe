package stream

import (
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
)

// BatchLimits are the limits a server puts on batch publishing, with
// nats-server v2.15.2's defaults (stream.go streamDefaultMax*; ADR-50
// "The server will operate under limits to safeguard itself").
type BatchLimits struct {
	Timeout        time.Duration // a batch with no message for this long is abandoned (10 s)
	AtomicMaxSize  int           // messages in an atomic batch, the EOB marker not counted (1000; 10199 beyond)
	AtomicInflight int           // atomic batches open on one stream (50; 10210 beyond)
	AtomicTotal    int           // atomic batches open on the server (1000; 10210 beyond)
	FastInflight   int           // fast batches open on one stream (1000; 10211 beyond)
	FastTotal      int           // fast batches open on the server (50,000; 10211 beyond)
	// StagedBytes bounds the header and payload bytes of the open atomic
	// batches of the server, which cairn holds in memory until their
	// commit (nats-server stages a file stream's batch on disk). A
	// message that would pass it abandons its batch with 10176, the
	// answer nats-server gives when staging fails. Default 256 MiB.
	StagedBytes int64
	// APILevel is the server's JetStream API level, which a batch
	// message's Nats-Required-Api-Level must not exceed (10185).
	APILevel int
}

// Defaults of BatchLimits.
const (
	DefaultBatchTimeout          = 10 * time.Second
	DefaultAtomicMaxSize         = 1000
	DefaultAtomicInflight        = 50
	DefaultAtomicTotal           = 1000
	DefaultFastInflight          = 1000
	DefaultFastTotal             = 50_000
	DefaultStagedBytes           = 256 << 20
	maxBatchIDLen                = 64 // bytes of a batch id (10179, 10207)
	maxFastAckMessages    uint16 = 500
)

// WithDefaults returns l with every zero field set to its default.
func (l BatchLimits) WithDefaults() BatchLimits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultBatchTimeout
	}
	def(&l.AtomicMaxSize, DefaultAtomicMaxSize)
	def(&l.AtomicInflight, DefaultAtomicInflight)
	def(&l.AtomicTotal, DefaultAtomicTotal)
	def(&l.FastInflight, DefaultFastInflight)
	def(&l.FastTotal, DefaultFastTotal)
	if l.StagedBytes <= 0 {
		l.StagedBytes = DefaultStagedBytes
	}
	return l
}

// BatchInflight counts what the batches of all the streams of a server
// hold against the server-wide BatchLimits: open atomic and fast batches
// and staged bytes. It is safe for concurrent use; every stream's
// AtomicBatches and FastBatches share one.
type BatchInflight struct {
	mu     sync.Mutex
	atomic int
	fast   int
	staged int64
}

// acquire takes one of limit slots in *n.
func (b *BatchInflight) acquire(n *int, limit int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if *n+1 > limit {
		return false
	}
	*n++
	return true
}

func (b *BatchInflight) release(n *int) {
	b.mu.Lock()
	*n--
	b.mu.Unlock()
}

// stage adds size staged bytes if they stay within limit.
func (b *BatchInflight) stage(size, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.staged+size > limit {
		return false
	}
	b.staged += size
	return true
}

func (b *BatchInflight) unstage(size int64) {
	b.mu.Lock()
	b.staged -= size
	b.mu.Unlock()
}

// Open returns the numbers of open atomic and fast batches and the
// staged bytes.
func (b *BatchInflight) Open() (atomic, fast int, staged int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.atomic, b.fast, b.staged
}

// BatchPolicy is what the batch state machines read of a stream's
// config (Stream.BatchPolicy), plus whether the server is out of
// storage, which the runner decides.
type BatchPolicy struct {
	Sealed       bool
	AllowAtomic  bool
	AllowBatched bool
	NoAck        bool
	MaxMsgSize   int32
	// Insufficient: the storage limit is reached or the disk is nearly
	// full (10023), checked after sealed as nats-server does.
	Insufficient bool
	// MaxEntryBytes is the largest operation, in byte form (AppendOp),
	// the stream's log carries: a replicated stream's largest raft
	// entry (streamrun's EntryLimiter; docs/cluster.md, "Entries larger
	// than a frame"); 0 for none (one server's log). A message that
	// would not fit alone in a Publish is refused with 10054 (sizeErr),
	// an atomic batch whose BatchCommit would not fit with 10199
	// (AtomicBatches.Stage). The runner sets it.
	MaxEntryBytes int
	// FileStorage: the stream stores in files, whose records nats-server
	// bounds at 32 MiB (10077 "message too large", sizeErr).
	FileStorage bool
}

// BatchPolicy returns the parts of the config the batch state machines
// read.
func (s *Stream) BatchPolicy() BatchPolicy {
	return BatchPolicy{
		Sealed: s.cfg.Sealed, AllowAtomic: s.cfg.AllowAtomicPublish, AllowBatched: s.cfg.AllowBatchPublish,
		NoAck: s.cfg.NoAck, MaxMsgSize: s.cfg.MaxMsgSize, FileStorage: s.cfg.Storage == FileStorage,
	}
}

// messageErr runs the checks every batch message (atomic or fast) meets
// first, nil when it passes them: sealed 10053, insufficient storage
// 10023 (after sealed, as nats-server checks), then its size (sizeErr).
func (p BatchPolicy) messageErr(e *Entry) *jserr.Error {
	switch {
	case p.Sealed:
		return jserr.New(jserr.StreamSealed)
	case p.Insufficient:
		return jserr.New(jserr.InsufficientResources)
	}
	return p.sizeErr(e)
}

// overMaxMsgSize reports whether e's header and payload pass the
// stream's max_msg_size.
func (p BatchPolicy) overMaxMsgSize(e *Entry) bool {
	return p.MaxMsgSize > 0 && int64(len(e.Header))+int64(len(e.Data)) > int64(p.MaxMsgSize)
}

// sizeErr is the answer to a batch message on its size, nil when none:
// 10054 over max_msg_size; in a replicated stream (MaxEntryBytes set),
// ProposalSizeError's 10077 for a file stream's record over 32 MiB, then
// 10054 for a message that alone in a Publish exceeds MaxEntryBytes (a
// memory stream's, as a file stream's record passes 32 MiB long before).
func (p BatchPolicy) sizeErr(e *Entry) *jserr.Error {
	if p.MaxEntryBytes == 0 {
		if p.overMaxMsgSize(e) {
			return jserr.New(jserr.StreamMessageExceedsMaximum)
		}
		return nil
	}
	if err := p.ProposalSizeError(e); err != nil {
		return err
	}
	if PublishSize(1, EntrySize(e)) > p.MaxEntryBytes {
		return jserr.New(jserr.StreamMessageExceedsMaximum)
	}
	return nil
}

// ProposalSizeError is a replicated stream's answer to a publish on its
// size before it is proposed, nil when none, as nats-server v2.15.2's
// clustered path answers it (jetstream_cluster.go
// processClusteredInboundMsg, then jetstream_batching.go
// checkMsgHeadersPreClusteredProposal, for every clustered publish,
// batches included): 10054 over max_msg_size, then for a file stream
// 10077 "message too large" for a record over 32 MiB (nats-server's
// rlBadThresh). A message refused so is never replicated.
func (p BatchPolicy) ProposalSizeError(e *Entry) *jserr.Error {
	switch {
	case p.overMaxMsgSize(e):
		return jserr.New(jserr.StreamMessageExceedsMaximum)
	case p.FileStorage && entryRecordSize(e) > fileRecordLimit:
		return errFileRecordTooLarge()
	}
	return nil
}
