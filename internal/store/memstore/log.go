package memstore

import "sort"

// entry is one stored message. Its slices are owned by the store: copied
// in on append, copied out on load.
type entry struct {
	subj string
	hdr  []byte
	data []byte
	time int64
	size uint64 // store.Config.MsgSize of the message
}

// maxNilFill is the longest run of sequences an append past a skip fills
// with removed entries (8 bytes each) rather than starting a new run (a
// run costs about as much as four entries).
const maxNilFill = 4

// run is a stretch of consecutive sequences: msgs[i] is the message at
// sequence base+i, or nil once it was removed.
type run struct {
	base uint64
	msgs []*entry
}

// end returns the sequence after the run's last one.
func (r *run) end() uint64 { return r.base + uint64(len(r.msgs)) }

// msgLog holds the stored messages by sequence, with the sequence
// bookkeeping of the stream state. The messages sit in runs of
// consecutive sequences; a sequence from first to last in no run is a
// gap that costs nothing, so that SkipTo past a billion sequences costs
// one run, not a billion entries.
//
// Invariants: runs are ascending and disjoint, none empty, and the last
// one ends at or below last+1. When count > 0, runs[0].msgs[0] is not
// nil and first == runs[0].base. When count == 0, runs is empty and first
// is last+1 except in a store that never held a message nor skipped,
// where it is the configured first sequence (0 when none was configured).
type msgLog struct {
	runs  []run
	first uint64 // State.FirstSeq
	last  uint64 // State.LastSeq: the highest sequence ever assigned
	count uint64 // stored messages
}

// newLog returns the log of a new store whose first message gets
// sequence firstSeq (0 meaning 1, shown as FirstSeq 0 and LastSeq 0 as
// nats-server does).
func newLog(firstSeq uint64) msgLog {
	if firstSeq == 0 {
		return msgLog{}
	}
	return msgLog{first: firstSeq, last: firstSeq - 1}
}

// runAt returns the index of the last run whose base is at or below seq,
// or -1.
func (l *msgLog) runAt(seq uint64) int {
	n := len(l.runs)
	if n > 0 && l.runs[n-1].base <= seq {
		return n - 1 // the common case: a recent sequence
	}
	return sort.Search(n, func(i int) bool { return l.runs[i].base > seq }) - 1
}

// get returns the message at seq, or nil.
func (l *msgLog) get(seq uint64) *entry {
	k := l.runAt(seq)
	if k < 0 || seq >= l.runs[k].end() {
		return nil
	}
	return l.runs[k].msgs[seq-l.runs[k].base]
}

// has reports whether a message is stored at seq.
func (l *msgLog) has(seq uint64) bool { return l.get(seq) != nil }

// add stores e at last+1 and returns its sequence. After a skip the
// message starts a new run, unless the gap is short enough to fill.
func (l *msgLog) add(e *entry) uint64 {
	l.last++
	seq := l.last
	if l.count == 0 {
		l.first = seq
	}
	k := len(l.runs) - 1
	if k < 0 || seq-l.runs[k].end() > maxNilFill {
		l.runs = append(l.runs, run{base: seq})
		k++
	}
	r := &l.runs[k]
	for r.end() < seq {
		r.msgs = append(r.msgs, nil)
	}
	r.msgs = append(r.msgs, e)
	l.count++
	return seq
}

// skipTo makes seq, above last+1, the next sequence: an empty log starts
// at seq, a log with messages gets a gap.
func (l *msgLog) skipTo(seq uint64) {
	if l.count == 0 {
		l.emptyFrom(seq)
		return
	}
	l.last = seq - 1
}

// remove drops the message at seq, which must be stored, and moves first
// past any removed sequences.
func (l *msgLog) remove(seq uint64) {
	r := &l.runs[l.runAt(seq)]
	r.msgs[seq-r.base] = nil
	l.count--
	if l.count == 0 {
		l.emptyFrom(l.last + 1)
		return
	}
	if seq == l.first {
		l.trimFront()
	}
}

// trimFront drops the removed sequences at the front, and the runs they
// empty, so that the first run starts with a stored message (count > 0).
func (l *msgLog) trimFront() {
	for {
		r := &l.runs[0]
		i := 0
		for i < len(r.msgs) && r.msgs[i] == nil {
			i++
		}
		if i < len(r.msgs) {
			r.msgs = r.msgs[i:]
			r.base += uint64(i)
			l.first = r.base
			return
		}
		l.runs[0] = run{}
		l.runs = l.runs[1:]
	}
}

// emptyFrom removes every message and makes first the given sequence,
// raising last to first-1 when first is past the end.
func (l *msgLog) emptyFrom(first uint64) {
	if first > l.last+1 {
		l.last = first - 1
	}
	l.runs, l.count, l.first = nil, 0, first
}

// next returns the lowest stored sequence >= start, or 0.
func (l *msgLog) next(start uint64) uint64 {
	for k := max(l.runAt(start), 0); k < len(l.runs); k++ {
		r := &l.runs[k]
		i := 0
		if start > r.base {
			i = int(min(start-r.base, uint64(len(r.msgs))))
		}
		for ; i < len(r.msgs); i++ {
			if r.msgs[i] != nil {
				return r.base + uint64(i)
			}
		}
	}
	return 0
}

// prev returns the highest stored sequence, or 0.
func (l *msgLog) prev() uint64 {
	for k := len(l.runs) - 1; k >= 0; k-- {
		r := &l.runs[k]
		for i := len(r.msgs) - 1; i >= 0; i-- {
			if r.msgs[i] != nil {
				return r.base + uint64(i)
			}
		}
	}
	return 0
}

// gaps returns the removed and skipped sequences between first and last,
// ascending. It allocates 8 bytes per gap, as nats-server's deleted list
// does: a huge skip below stored messages makes it huge.
func (l *msgLog) gaps() []uint64 {
	out := make([]uint64, 0, l.numDeleted())
	at := l.first
	for _, r := range l.runs {
		for ; at < r.base; at++ {
			out = append(out, at)
		}
		for i, e := range r.msgs {
			if e == nil {
				out = append(out, r.base+uint64(i))
			}
		}
		at = r.end()
	}
	for ; at <= l.last && l.count > 0; at++ {
		out = append(out, at)
	}
	return out
}

// numDeleted returns the number of removed or skipped sequences between
// first and last.
func (l *msgLog) numDeleted() int {
	if l.count == 0 {
		return 0
	}
	return int(l.last - l.first + 1 - l.count)
}
