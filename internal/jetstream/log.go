package jetstream

import "github.com/cairnmq/cairn/internal/stream"

// Log orders the operations of one stream (docs/engine.md). The stream's
// apply goroutine proposes operations; the log hands each one it
// commits to the stream's Applier, in log order. On one server the log is
// local (localLog): it commits an operation the moment it is proposed.
// A replicated stream puts a Raft log behind the same interface.
type Log interface {
	// Propose appends op to the log under the proposer's key (a number
	// the proposer chose, increasing with each proposal; 0 when nobody
	// waits for the outcome). Once op is committed the log calls its
	// Applier with op and, on the node that proposed it, key. It returns
	// an error when op will never be applied (a replicated log that lost
	// its leadership); then its key is never handed back. Propose must not
	// keep op after it returns, since the proposer reuses it: a log that
	// commits later encodes it (stream.AppendOp) first.
	Propose(op stream.Op, key uint64) error
}

// Applier applies the committed operations of one stream, in log order,
// on one goroutine.
type Applier interface {
	// Apply applies op, committed at index (1, 2, ...); key is the key
	// it was proposed under on this node, 0 when another node proposed
	// it or nobody waits.
	Apply(index uint64, op stream.Op, key uint64)
}

// NewLogFunc makes the log of the stream named name, which hands what it
// commits to a (Config.NewLog). It is called once per stream start.
type NewLogFunc func(name string, a Applier) Log

// defaultNewLog makes the log of a stream when Config.NewLog is nil. The
// package's tests replace it with a log that applies every operation
// through its byte form (log_test.go).
var defaultNewLog NewLogFunc = NewLocalLog

// localLog is a stream's log on one server: Propose commits op at the
// next index and applies it before returning, on the proposer's
// goroutine (the stream's apply goroutine), so that a single server runs
// the proposer and apply steps a replica will, in the same order.
// Durability is the store's: a reply waits for store.WaitDurable, as a
// replica's will wait for the log's commit.
type localLog struct {
	a     Applier
	index uint64
}

// NewLocalLog returns the log of a stream on one server (the default of
// Config.NewLog).
func NewLocalLog(_ string, a Applier) Log { return &localLog{a: a} }

// Propose applies op at once.
func (l *localLog) Propose(op stream.Op, key uint64) error {
	l.index++
	l.a.Apply(l.index, op, key)
	return nil
}
