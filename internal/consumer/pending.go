package consumer

import (
	"cmp"
	"slices"

	"github.com/cairnmq/cairn/internal/store"
)

// pendingMsg is one delivery awaiting acknowledgement. It holds no
// pointer, so the blocks of a million of them are memory the garbage
// collector never scans.
type pendingMsg struct {
	sseq       uint64 // stream sequence
	cseq       uint64 // consumer sequence of the first delivery (nats-server keeps it for the ack floor and the stored state)
	last       int64  // time of the last delivery or +WPI, or deadline-wait after a delayed NAK (unix ns)
	deadline   int64  // when it is redelivered without an ack (unix ns); for a dead-letter mark, when the move is retried
	deliveries uint32 // number of deliveries so far (1 on the first); stops at math.MaxUint32
	flags      uint32 // pendingQueued, pendingGone, pendingArmed, and a dead-letter reason (pendingDeadShift)
}

// Flags of pendingMsg.
const (
	pendingQueued = 1 << iota // in the redelivery queue
	pendingGone               // acknowledged or dropped: a hole in pendingList
	pendingArmed              // its deadline is in State.deadlines (else it is a first delivery's, see State.firstDue)
)

// A dead-letter mark (store.DeadLetter) is its reason in bits 8 to 15 of
// flags, 0 for none: the delivery is being moved to the dead-letter
// subject, is never redelivered, and acks, NAKs and +WPI leave it alone
// until State.DeadLettered ends it. Its After is in State.marks.
const (
	pendingDeadShift = 8
	pendingDeadMask  = 0xff << pendingDeadShift
)

// dead returns the reason of m's dead-letter mark, 0 when it has none.
func (m *pendingMsg) dead() store.DeadLetterReason {
	return store.DeadLetterReason(m.flags & pendingDeadMask >> pendingDeadShift)
}

// setDead sets the reason of m's dead-letter mark (0 ends it).
func (m *pendingMsg) setDead(r store.DeadLetterReason) {
	m.flags = m.flags&^pendingDeadMask | uint32(r)<<pendingDeadShift
}

func (m *pendingMsg) queued() bool { return m.flags&pendingQueued != 0 }

func (m *pendingMsg) setQueued(q bool) {
	if q {
		m.flags |= pendingQueued
	} else {
		m.flags &^= pendingQueued
	}
}

// count returns the number of deliveries as the API reports it.
func (m *pendingMsg) count() uint64 { return uint64(m.deliveries) }

// redelivered counts one more delivery.
func (m *pendingMsg) redelivered() {
	if m.deliveries < ^uint32(0) {
		m.deliveries++
	}
}

// pendingBlockLen is the number of entries of a pendingBlock (40 KiB).
const pendingBlockLen = 1024

// pendingBlock is a run of pending entries in ascending stream sequence,
// acknowledged ones left as holes.
type pendingBlock struct {
	e    []pendingMsg // len grows to at most pendingBlockLen; cap is that
	head int          // index of the first live entry
	live int
}

// pendingList is the set of pending deliveries, sorted by stream
// sequence, in blocks of pendingBlockLen entries. A consumer delivers new
// messages in stream order, so a new delivery is an append to the last
// block; an ack leaves a hole (pendingGone); a block whose entries are
// all gone is dropped, and once holes outnumber live entries the blocks
// are rewritten without them. Lookups are a binary search over the
// blocks, then in one. It costs 40 bytes per pending delivery where a map
// of pointers cost about 100 (map slot, 48-byte object, growth) and made
// the collector visit every entry; and unlike one growing slice it never
// copies the whole set to grow (at a million entries that copy held 73
// MB at once, and the allocation that starts it is what starts a
// collection cycle).
//
// A *pendingMsg returned by a method stays valid until the next add or
// remove: both may move the entries.
type pendingList struct {
	blocks []*pendingBlock // ascending; every block holds a live entry
	live   int             // entries not gone
	holes  int             // gone entries at or after their block's head
	// spare is an emptied block kept for the next one needed: a consumer
	// that has one delivery pending at a time must not allocate a block
	// for each.
	spare *pendingBlock
}

// minCompact is the number of holes below which a pendingList never
// compacts.
const minCompact = 2 * pendingBlockLen

// pendingPos is the position of an entry: its block and index there.
type pendingPos struct {
	b *pendingBlock
	i int
}

// len returns the number of pending deliveries.
func (p *pendingList) len() int { return p.live }

// blockOf returns the index of the last block whose first entry is at or
// below sseq, or -1.
func (p *pendingList) blockOf(sseq uint64) int {
	i, ok := slices.BinarySearchFunc(p.blocks, sseq, func(b *pendingBlock, s uint64) int { return cmp.Compare(b.e[0].sseq, s) })
	if ok {
		return i
	}
	return i - 1
}

// search returns the position of the first entry (live or gone) whose
// stream sequence is at or above sseq; b is nil when there is none.
func (p *pendingList) search(sseq uint64) pendingPos {
	k := max(p.blockOf(sseq), 0)
	for ; k < len(p.blocks); k++ {
		b := p.blocks[k]
		e := b.e[b.head:]
		i, _ := slices.BinarySearchFunc(e, sseq, func(m pendingMsg, s uint64) int { return cmp.Compare(m.sseq, s) })
		if i < len(e) {
			return pendingPos{b, b.head + i}
		}
	}
	return pendingPos{}
}

// find returns the position of sseq's live entry; b is nil when sseq is
// not pending.
func (p *pendingList) find(sseq uint64) (pendingPos, int) {
	k := p.blockOf(sseq)
	if k < 0 {
		return pendingPos{}, -1
	}
	b := p.blocks[k]
	i, ok := slices.BinarySearchFunc(b.e, sseq, func(m pendingMsg, s uint64) int { return cmp.Compare(m.sseq, s) })
	if !ok || b.e[i].flags&pendingGone != 0 {
		return pendingPos{}, -1
	}
	return pendingPos{b, i}, k
}

// get returns sseq's pending delivery, or nil.
func (p *pendingList) get(sseq uint64) *pendingMsg {
	if pos, _ := p.find(sseq); pos.b != nil {
		return &pos.b.e[pos.i]
	}
	return nil
}

// add records m and returns it. A consumer delivers new messages in
// stream order, so m's sseq is above every other and add is an append;
// any other sseq is inserted in its place (replacing a pending entry of
// the same sseq) by rewriting the blocks, a path only a caller breaking
// that order takes.
func (p *pendingList) add(m pendingMsg) *pendingMsg {
	m.flags &^= pendingGone
	n := len(p.blocks)
	if n == 0 || p.last().sseq < m.sseq {
		if n == 0 || len(p.blocks[n-1].e) == pendingBlockLen {
			p.blocks = append(p.blocks, p.newBlock())
			n++
		}
		b := p.blocks[n-1]
		b.e = append(b.e, m)
		b.live++
		p.live++
		return &b.e[len(b.e)-1]
	}
	all := make([]pendingMsg, 0, p.live+1)
	p.each(func(e *pendingMsg) bool {
		if e.sseq != m.sseq {
			all = append(all, *e)
		}
		return true
	})
	i, _ := slices.BinarySearchFunc(all, m.sseq, func(e pendingMsg, s uint64) int { return cmp.Compare(e.sseq, s) })
	p.rebuild(slices.Insert(all, i, m))
	return p.get(m.sseq)
}

// newBlock returns the spare block or a new one.
func (p *pendingList) newBlock() *pendingBlock {
	if b := p.spare; b != nil {
		p.spare = nil
		return b
	}
	return &pendingBlock{e: make([]pendingMsg, 0, pendingBlockLen)}
}

// last returns the entry with the highest stream sequence (gone or not);
// the list must hold a block.
func (p *pendingList) last() *pendingMsg {
	b := p.blocks[len(p.blocks)-1]
	return &b.e[len(b.e)-1]
}

// rebuild replaces the blocks with dense ones holding all, which is in
// ascending order and has no gone entry.
func (p *pendingList) rebuild(all []pendingMsg) {
	p.blocks = p.blocks[:0]
	for len(all) > 0 {
		n := min(len(all), pendingBlockLen)
		b := &pendingBlock{e: make([]pendingMsg, n, pendingBlockLen), live: n}
		copy(b.e, all[:n])
		p.blocks = append(p.blocks, b)
		all = all[n:]
	}
	p.live, p.holes = 0, 0
	for _, b := range p.blocks {
		p.live += b.live
	}
}

// remove drops sseq's pending delivery and returns it; false when sseq
// was not pending.
func (p *pendingList) remove(sseq uint64) (pendingMsg, bool) {
	pos, k := p.find(sseq)
	if pos.b == nil {
		return pendingMsg{}, false
	}
	m := pos.b.e[pos.i]
	p.kill(pos)
	p.settle(k, k+1)
	return m, true
}

// kill marks the live entry at pos gone.
func (p *pendingList) kill(pos pendingPos) {
	pos.b.e[pos.i].flags |= pendingGone
	pos.b.live--
	p.live--
	p.holes++
}

// settle tidies blocks lo..hi-1 after removals: it moves their heads to
// their first live entry, drops those left without one (and their holes)
// and compacts the list once holes outnumber live entries, so that the
// memory follows the pending set down.
func (p *pendingList) settle(lo, hi int) {
	keep := p.blocks[:lo]
	for _, b := range p.blocks[lo:hi] {
		if b.live == 0 {
			p.holes -= len(b.e) - b.head
			if p.spare == nil {
				b.e, b.head = b.e[:0], 0
				p.spare = b
			}
			continue
		}
		for b.head < len(b.e) && b.e[b.head].flags&pendingGone != 0 {
			b.head++
			p.holes--
		}
		keep = append(keep, b)
	}
	if len(keep) < hi {
		p.blocks = append(keep, p.blocks[hi:]...)
		clear(p.blocks[len(p.blocks):cap(p.blocks)])
	}
	if p.holes >= minCompact && p.holes > p.live {
		p.compact()
	}
}

// compact rewrites the blocks without their holes.
func (p *pendingList) compact() {
	var blocks []*pendingBlock
	var cur *pendingBlock
	p.each(func(m *pendingMsg) bool {
		if cur == nil || len(cur.e) == pendingBlockLen {
			cur = &pendingBlock{e: make([]pendingMsg, 0, pendingBlockLen)}
			blocks = append(blocks, cur)
		}
		cur.e = append(cur.e, *m)
		cur.live++
		return true
	})
	p.blocks, p.holes = blocks, 0
}

// lowest returns the live entry with the lowest stream sequence, or nil.
func (p *pendingList) lowest() *pendingMsg {
	for _, b := range p.blocks {
		if b.head < len(b.e) {
			return &b.e[b.head]
		}
	}
	return nil
}

// each calls fn for every pending delivery in stream order; fn returns
// false to stop. fn must not add or remove entries.
func (p *pendingList) each(fn func(m *pendingMsg) bool) {
	for _, b := range p.blocks {
		for i := b.head; i < len(b.e); i++ {
			if b.e[i].flags&pendingGone == 0 && !fn(&b.e[i]) {
				return
			}
		}
	}
}

// firstFrom returns the first live entry at or after pos whose flags
// hold none of skip, and its position; nil when there is none. A pos
// whose block was dropped or rewritten is looked up again from sseq.
func (p *pendingList) firstFrom(pos pendingPos, sseq uint64, skip uint32) (*pendingMsg, pendingPos) {
	k := -1
	if pos.b != nil && pos.i < len(pos.b.e) && pos.b.e[pos.i].sseq == sseq {
		if j := p.blockOf(sseq); j >= 0 && p.blocks[j] == pos.b {
			k = j
		}
	}
	if k < 0 {
		pos = p.search(sseq)
		if pos.b == nil {
			return nil, pendingPos{}
		}
		k = p.blockOf(pos.b.e[pos.i].sseq)
	}
	for i := pos.i; k < len(p.blocks); k, i = k+1, 0 {
		b := p.blocks[k]
		for i = max(i, b.head); i < len(b.e); i++ {
			if b.e[i].flags&(pendingGone|skip) == 0 {
				return &b.e[i], pendingPos{b, i}
			}
		}
	}
	return nil, pendingPos{}
}

// removeUpTo drops every pending delivery at or below sseq, except those
// whose flags hold one of keep, and returns the stream sequences it
// dropped, in order, and whether it kept one.
func (p *pendingList) removeUpTo(sseq uint64, keep uint32) (out []uint64, kept bool) {
	hi := 0
	for _, b := range p.blocks {
		if b.e[0].sseq > sseq {
			break
		}
		hi++
		for i := b.head; i < len(b.e) && b.e[i].sseq <= sseq; i++ {
			switch f := b.e[i].flags; {
			case f&pendingGone != 0:
			case f&keep != 0:
				kept = true
			default:
				out = append(out, b.e[i].sseq)
				p.kill(pendingPos{b, i})
			}
		}
	}
	p.settle(0, hi)
	return out, kept
}

// removeIf drops every pending delivery for which drop returns true and
// returns how many it dropped. Entries drop sees are in stream order.
func (p *pendingList) removeIf(drop func(m *pendingMsg) bool) int {
	n := 0
	for _, b := range p.blocks {
		for i := b.head; i < len(b.e); i++ {
			if m := &b.e[i]; m.flags&pendingGone == 0 && drop(m) {
				p.kill(pendingPos{b, i})
				n++
			}
		}
	}
	p.settle(0, len(p.blocks))
	return n
}
