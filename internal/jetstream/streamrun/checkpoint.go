package streamrun

import "github.com/cairnmq/cairn/internal/stream"

// What a replica of a replicated stream needs from its runtime to
// checkpoint and to restart from a checkpoint (docs/cluster.md,
// "Checkpoints"; the checkpointing itself is internal/cluster/streamckpt).

// AppliedIndex returns the log index of the last operation the apply
// goroutine applied (Applier.Apply's index: raft's for a replicated log),
// or the checkpoint's index after Restore; 0 before any. Read with the
// apply goroutine held (Held), it is the index the stream's state
// reflects.
func (r *Stream) AppliedIndex() uint64 { return r.applied.Load() }

// Held runs fn while the apply goroutine waits, once it has applied
// everything queued before: nothing changes the stream's state or its
// store during fn (Hold). It returns false, without running fn, when the
// stream has stopped. (A barrier queued before Stop is still reached: the
// apply goroutine drains the queue before it ends.)
func (r *Stream) Held(fn func()) bool {
	busy, done := make(chan struct{}), make(chan struct{})
	if !r.in.pushOp(item{req: &request{kind: reqBarrier, done: busy, release: done}}) {
		return false
	}
	<-busy
	defer close(done)
	fn()
	return true
}

// Checkpoint returns a copy of the state machine's own state
// (stream.Stream.Checkpoint; encode it with its Append once released) and
// the index it reflects (AppliedIndex). Call it while the apply goroutine
// is held (Held), or before Serve.
func (r *Stream) Checkpoint() (*stream.Checkpoint, uint64) {
	return r.st.Checkpoint(), r.applied.Load()
}

// Restore readies a stream whose store was rolled back to a checkpoint's
// position, from the state bytes and the index of that checkpoint, in
// place of Open: the state machine takes the bytes
// (stream.Stream.RestoreCheckpoint; the config given to New should be
// stream.CheckpointConfig's), AppliedIndex becomes index, and nothing is
// read from or removed in the store (Open's removal of a cut-short atomic
// batch and its clock-driven expiry of the duplicate window would make
// this replica differ from the others; a checkpoint is taken between
// operations, so no batch is cut short in it). Its consumers are restored
// next, then Serve. The error wraps stream.ErrBadCheckpoint.
func (r *Stream) Restore(state []byte, index uint64) error {
	if err := r.st.RestoreCheckpoint(state); err != nil {
		return err
	}
	cfg := r.st.Config()
	r.mu.Lock()
	r.cfg = cfg.Clone()
	r.mu.Unlock()
	r.setDeadLetter(&cfg)
	r.setCopyFactor(&cfg)
	r.applied.Store(index)
	r.durable.Store(r.store.State(false).LastSeq) // rolled back to a durable position
	r.syncUsage()
	return nil
}

// RestoreHeld replaces the state of a running replica by a snapshot's
// (docs/cluster.md, "Stream snapshots"), its apply goroutine held
// (call it from Held's fn) and its store already holding the snapshot's
// messages, made durable: as Restore (the state machine takes the state
// bytes, AppliedIndex becomes index), and the runtime's view of the
// config follows it as after an applied update (the open batches it no
// longer allows end). Removals the install made in the store are not
// taken for a limit's. The error wraps stream.ErrBadCheckpoint.
func (r *Stream) RestoreHeld(state []byte, index uint64) error {
	if err := r.Restore(state, index); err != nil {
		return err
	}
	cfg := r.st.Config()
	r.batchesAfterUpdate(&cfg)
	r.seenRemovals = r.store.Removals()
	return nil
}
