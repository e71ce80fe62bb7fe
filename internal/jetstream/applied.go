package jetstream

// StreamAppliedIndex returns the index of the last operation of its log
// the stream named name has applied (streamrun.Stream.AppliedIndex; a
// replicated stream's Raft index), and false when the stream does not
// run here. A replicated stream applies on its own goroutine, behind the
// log that hands it the operations; the cluster layer compares the two
// to tell a replica catching up (docs/monitoring.md, "/healthz").
func (js *JetStream) StreamAppliedIndex(name string) (uint64, bool) {
	r, err := js.lookup(name)
	if err != nil {
		return 0, false
	}
	return r.AppliedIndex(), true
}

// StreamBarrier waits until the stream named name has applied every
// operation its log handed it before the call (streamrun.Stream.Barrier:
// a replicated stream applies on its own goroutine, behind its log), and
// reports false when the stream does not run here or stopped. After a
// linearizable read of the stream's group (raftnode ReadIndex), the
// stream's state then reflects every entry committed before the read.
func (js *JetStream) StreamBarrier(name string) bool {
	r, err := js.lookup(name)
	if err != nil {
		return false
	}
	return r.Barrier()
}
