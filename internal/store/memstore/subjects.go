package memstore

import (
	"slices"
	"sort"
)

// subjIndex lists the sequences stored on one subject. Removed sequences
// are dropped lazily: seqs may still hold some, recognised because the
// log no longer has them (a sequence is never reused), and seqs is
// rebuilt once they outnumber the live ones, which keeps every operation
// O(1) amortised apart from the binary search of next.
type subjIndex struct {
	seqs []uint64 // ascending; live and lazily dropped sequences
	live uint64   // stored messages on the subject
}

// add records seq, the new highest sequence of the store.
func (x *subjIndex) add(seq uint64) {
	x.seqs = append(x.seqs, seq)
	x.live++
}

// removed records that one of the subject's messages left the log.
func (x *subjIndex) removed(l *msgLog) {
	x.live--
	if uint64(len(x.seqs)) > 2*x.live+16 {
		x.seqs = slices.DeleteFunc(x.seqs, func(seq uint64) bool { return !l.has(seq) })
	}
}

// first returns the lowest stored sequence of the subject (live > 0).
func (x *subjIndex) first(l *msgLog) uint64 {
	for !l.has(x.seqs[0]) {
		x.seqs = x.seqs[1:]
	}
	return x.seqs[0]
}

// last returns the highest stored sequence of the subject (live > 0).
func (x *subjIndex) last(l *msgLog) uint64 {
	for !l.has(x.seqs[len(x.seqs)-1]) {
		x.seqs = x.seqs[:len(x.seqs)-1]
	}
	return x.seqs[len(x.seqs)-1]
}

// next returns the lowest stored sequence >= start of the subject, or 0.
func (x *subjIndex) next(l *msgLog, start uint64) uint64 {
	i := sort.Search(len(x.seqs), func(i int) bool { return x.seqs[i] >= start })
	for ; i < len(x.seqs); i++ {
		if l.has(x.seqs[i]) {
			return x.seqs[i]
		}
	}
	return 0
}

// stored returns the subject's stored sequences, ascending.
func (x *subjIndex) stored(l *msgLog) []uint64 {
	out := make([]uint64, 0, x.live)
	for _, seq := range x.seqs {
		if l.has(seq) {
			out = append(out, seq)
		}
	}
	return out
}
