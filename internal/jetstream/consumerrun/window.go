package consumerrun

// maxUncommitted bounds the deliveries (first deliveries and
// redeliveries) the leader of a replicated consumer has sent whose
// operations have not yet applied from its group's log (the window):
// at the bound it delivers nothing more until entries apply. A leader
// deposed without handing its leadership over (a partition, a crash,
// CheckQuorum on a loaded machine) loses what it delivered and did not
// get committed, and its successor delivers that again as first
// deliveries (docs/cluster.md, "Replicated consumers"); unbounded, a
// SIGKILLed leader's successor delivered 9,287 messages again, and a
// leader under a fast client ran 11,295 deliveries ahead of its log.
// 2,048 is eight rounds of the Deliverer (maxPerRound, 256): on the
// loaded 2-core machine an entry took 5 to 10 ms from its round's first
// delivery to its apply on the leader, so a window of W lets a leader
// deliver about W messages every 7 ms. Measured against no bound
// (docs/cluster.md), 512 (two rounds) cost the consume benchmark about
// 40 % of its rate, 1,024 about 20 %, 2,048 nothing the machine's noise
// showed: the largest bound with no cost seen, still a bound where the
// unbounded leader ran 11,295 ahead. It bounds messages, not bytes: the
// bytes at stake are at most 2,048 of the stream's largest messages.
const maxUncommitted = 2048

// window counts a leading replicated consumer's deliveries against
// maxUncommitted (the consumer's loop and its log's ApplyBatch, under
// Consumer.mu). sent counts the deliveries decided since the replica
// started to lead; done those of them in entries applied since. Each
// round that delivered leaves a mark, the key of its last delivery's
// operation and sent after it; an entry applied with a key at or past a
// mark's (its proposer's tag: the key of its last operation) holds
// every delivery up to the mark, since operations enter the log in the
// order of their keys. open: the last mark is this round's, not yet
// flushed to the log. blocked: a round stopped at the bound, and the
// apply that makes room must wake the loop.
type window struct {
	sent, done uint64
	marks      []windowMark
	open       bool
	blocked    bool
}

// windowMark is the key of a round's last delivery and window.sent
// after it.
type windowMark struct{ key, sent uint64 }

// delivered counts a delivery whose operation was proposed under key.
func (w *window) delivered(key uint64) {
	w.sent++
	if w.open {
		w.marks[len(w.marks)-1] = windowMark{key: key, sent: w.sent}
		return
	}
	w.marks = append(w.marks, windowMark{key: key, sent: w.sent})
	w.open = true
}

// flushed closes the round's mark: the round's operations went to the
// log's batch (proposed, or kept for back-pressure ahead of the next
// round's).
func (w *window) flushed() { w.open = false }

// room returns how many deliveries the leader may still make.
func (w *window) room() int {
	inflight := w.sent - w.done
	if inflight >= maxUncommitted {
		return 0
	}
	return int(maxUncommitted - inflight)
}

// stop notes that a round stopped at the bound (room 0 and more to
// deliver): the apply that makes room wakes the loop (applied).
func (w *window) stop() { w.blocked = true }

// applied counts the deliveries of an entry with key applied (0, an
// entry of another replica's: none). It reports whether the loop must
// be woken: a round stopped at the bound and there is room now.
func (w *window) applied(key uint64) bool {
	n := 0
	for n < len(w.marks) && w.marks[n].key <= key {
		w.done = w.marks[n].sent
		n++
	}
	if n == 0 {
		return false
	}
	w.marks = append(w.marks[:0], w.marks[n:]...)
	if len(w.marks) == 0 {
		w.open = false
	}
	if w.blocked && w.room() > 0 {
		w.blocked = false
		return true
	}
	return false
}

// reset empties the window: the replica starts or stops leading (what
// it proposed under earlier leaderships is not waited for).
func (w *window) reset() { *w = window{marks: w.marks[:0]} }
