package stream

// dedupe is the Nats-Msg-Id window (the Nats-* publish headers of nats-server v2.15.2's processJetStreamMsg row 5;
// nats-server ddmap, ddarr and purgeMsgIds): the ids stored within
// duplicate_window with the sequence and time of their message. An id is
// a duplicate while it is in the window, whatever the time of the new
// entry; ids leave only through expire, so that a replayed log decides
// the same way (docs/engine.md, "What decides what").
type dedupe struct {
	ids   map[string]dedupeEntry // id -> its newest stored message
	queue []dedupeRecord         // ids in the order they were stored
	head  int                    // queue[:head] are already expired
}

// dedupeEntry is the message an id was first stored with.
type dedupeEntry struct {
	seq  uint64
	time int64 // unix nanoseconds
}

// dedupeRecord is one id in storage order.
type dedupeRecord struct {
	id string
	dedupeEntry
}

// lookup returns the sequence stored under id, if any.
func (d *dedupe) lookup(id string) (uint64, bool) {
	e, ok := d.ids[id]
	return e.seq, ok
}

// add records id for the message seq stored at time t.
func (d *dedupe) add(id string, seq uint64, t int64) {
	if d.ids == nil {
		d.ids = make(map[string]dedupeEntry)
	}
	e := dedupeEntry{seq: seq, time: t}
	d.ids[id] = e
	d.queue = append(d.queue, dedupeRecord{id: id, dedupeEntry: e})
}

// expire forgets the ids stored at least window before now, walking in
// storage order and stopping at the first id still inside the window.
func (d *dedupe) expire(now int64, window int64) {
	for d.head < len(d.queue) {
		r := d.queue[d.head]
		if now-r.time < window {
			break
		}
		if e, ok := d.ids[r.id]; ok && e.seq == r.seq {
			delete(d.ids, r.id)
		}
		d.head++
	}
	d.compact()
}

// compact drops the expired prefix of the queue once it is most of it.
func (d *dedupe) compact() {
	switch {
	case d.head == len(d.queue):
		d.queue, d.head = d.queue[:0], 0
	case d.head > len(d.queue)/2:
		d.queue = append(d.queue[:0], d.queue[d.head:]...)
		d.head = 0
	}
}

// oldest returns the time of the oldest id still in the window.
func (d *dedupe) oldest() (int64, bool) {
	if d.head == len(d.queue) {
		return 0, false
	}
	return d.queue[d.head].time, true
}

// size returns the number of ids in the window.
func (d *dedupe) size() int { return len(d.ids) }

// reset forgets every id.
func (d *dedupe) reset() { *d = dedupe{} }
