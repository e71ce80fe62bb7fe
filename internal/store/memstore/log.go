package memstore

// entry is one stored message. Its slices are owned by the store: copied
// in on append, copied out on load.
type entry struct {
	subj string
	hdr  []byte
	data []byte
	time int64
	size uint64 // store.MsgSize of the message
}

// msgLog holds the stored messages by sequence, with the sequence
// bookkeeping of the stream state.
//
// Invariants: msgs[i] is the message at sequence base+i, or nil once it
// was removed; len(msgs) == last+1-base. When count > 0, msgs[0] is not
// nil and first == base. When count == 0, msgs is empty, base == last+1,
// and first is last+1 except in a store that never held a message, where
// it is the configured first sequence (0 when none was configured).
type msgLog struct {
	msgs  []*entry
	base  uint64
	first uint64 // State.FirstSeq
	last  uint64 // State.LastSeq: the highest sequence ever assigned
	count uint64 // stored messages
}

// newLog returns the log of a new store whose first message gets
// sequence firstSeq (0 meaning 1, shown as FirstSeq 0 and LastSeq 0 as
// nats-server does).
func newLog(firstSeq uint64) msgLog {
	if firstSeq == 0 {
		return msgLog{base: 1}
	}
	return msgLog{base: firstSeq, first: firstSeq, last: firstSeq - 1}
}

// get returns the message at seq, or nil.
func (l *msgLog) get(seq uint64) *entry {
	if seq < l.base || seq > l.last {
		return nil
	}
	return l.msgs[seq-l.base]
}

// has reports whether a message is stored at seq.
func (l *msgLog) has(seq uint64) bool { return l.get(seq) != nil }

// add stores e at last+1 and returns its sequence.
func (l *msgLog) add(e *entry) uint64 {
	l.last++
	if l.count == 0 {
		l.first = l.last
	}
	l.msgs = append(l.msgs, e)
	l.count++
	return l.last
}

// remove drops the message at seq, which must be stored, and moves first
// past any removed sequences.
func (l *msgLog) remove(seq uint64) {
	l.msgs[seq-l.base] = nil
	l.count--
	if l.count == 0 {
		l.emptyFrom(l.last + 1)
		return
	}
	if seq != l.first {
		return
	}
	i := 0
	for l.msgs[i] == nil {
		i++
	}
	l.msgs = l.msgs[i:]
	l.base += uint64(i)
	l.first = l.base
}

// emptyFrom removes every message and makes first the given sequence,
// raising last to first-1 when first is past the end.
func (l *msgLog) emptyFrom(first uint64) {
	if first > l.last+1 {
		l.last = first - 1
	}
	l.msgs, l.count = nil, 0
	l.base, l.first = l.last+1, first
}

// next returns the lowest stored sequence >= start, or 0.
func (l *msgLog) next(start uint64) uint64 {
	for seq := max(start, l.base); seq <= l.last; seq++ {
		if l.msgs[seq-l.base] != nil {
			return seq
		}
	}
	return 0
}

// prev returns the highest stored sequence, or 0.
func (l *msgLog) prev() uint64 {
	for i := len(l.msgs) - 1; i >= 0; i-- {
		if l.msgs[i] != nil {
			return l.base + uint64(i)
		}
	}
	return 0
}

// gaps returns the removed sequences between first and last, ascending.
func (l *msgLog) gaps() []uint64 {
	var out []uint64
	for i, e := range l.msgs {
		if e == nil {
			out = append(out, l.base+uint64(i))
		}
	}
	return out
}

// numDeleted returns the number of removed sequences between first and
// last.
func (l *msgLog) numDeleted() int {
	if l.count == 0 {
		return 0
	}
	return int(l.last - l.first + 1 - l.count)
}
