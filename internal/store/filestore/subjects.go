package filestore

// subjInfo is the state of one stored subject. first is exact; last is a
// bound (>= the true last) while lastStale.
type subjInfo struct {
	id        uint32
	msgs      uint64
	first     uint64
	last      uint64
	lastStale bool
}

// subjects maps stored subjects to small ids, which the per-slot index
// keeps instead of the subject. A subject's entry (and id) lives while it
// has stored messages; dead slots may still carry a freed id.
type subjects struct {
	byName map[string]*subjInfo
	names  []string // id -> subject; "" when free
	free   []uint32
	gen    uint64 // bumped when a subject is added or dropped
}

func newSubjects() subjects {
	return subjects{byName: make(map[string]*subjInfo)}
}

// get returns the info of subj, or nil.
func (x *subjects) get(subj string) *subjInfo { return x.byName[subj] }

// getBytes is get for a subject held in a byte slice; it allocates only
// when the subject is new to the map.
func (x *subjects) getBytes(subj []byte) *subjInfo { return x.byName[string(subj)] }

// add returns the info of subj, creating it (with a fresh id) if needed.
func (x *subjects) add(subj string) *subjInfo {
	if info := x.byName[subj]; info != nil {
		return info
	}
	info := &subjInfo{id: x.newID(subj)}
	x.byName[subj] = info
	x.gen++
	return info
}

// newID assigns an id to subj.
func (x *subjects) newID(subj string) uint32 {
	if n := len(x.free); n > 0 {
		id := x.free[n-1]
		x.free = x.free[:n-1]
		x.names[id] = subj
		return id
	}
	x.names = append(x.names, subj)
	return uint32(len(x.names) - 1)
}

// drop forgets a subject that has no stored message left.
func (x *subjects) drop(info *subjInfo) {
	subj := x.names[info.id]
	delete(x.byName, subj)
	x.names[info.id] = ""
	x.free = append(x.free, info.id)
	x.gen++
}

// name returns the subject of a live id.
func (x *subjects) name(id uint32) string { return x.names[id] }

// reset forgets every subject.
func (x *subjects) reset() {
	gen := x.gen
	*x = newSubjects()
	x.gen = gen + 1
}
