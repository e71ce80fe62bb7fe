package jetstream

import "time"

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

// StreamBarrier waits, at most until deadline, until the stream named
// name has applied every operation its log handed it before the call and
// counts it durable (streamrun.Stream.DurableBarrier: a replicated
// stream applies on its own goroutine, behind its log, and its consumers
// count messages once its ack goroutine saw them fsynced). It reports
// false when the stream does not run here, stopped, or had not got there
// by the deadline (its state may then be behind). After a linearizable
// read of the stream's group (raftnode ReadIndex), the stream's state,
// its consumers' pending counts included, then reflects every entry
// committed before the read.
func (js *JetStream) StreamBarrier(name string, deadline time.Time) bool {
	r, err := js.lookup(name)
	if err != nil {
		return false
	}
	return r.DurableBarrier(deadline)
}
