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
