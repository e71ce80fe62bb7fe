package vfs

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCrashProperty runs random operations on a few files of one durable
// directory, with random crashes, against a model of what was synced. After
// each crash: the directory holds exactly the names durable at the crash;
// every file keeps every byte it had synced, unless an unsynced truncation
// cut them (then it holds either its durable content, or the bytes below
// its low-water mark followed by at most its unsynced tail's length).
func TestCrashProperty(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := newPropRun(t, rand.New(rand.NewPCG(seed, 99)))
			for range 150 {
				p.step()
			}
			p.crash()
		})
	}
}

// mfile is the model of one inode: what was synced and what is current.
type mfile struct {
	synced, cur []byte
	low         int // smallest length since the last Sync
}

type propRun struct {
	t       *testing.T
	rnd     *rand.Rand
	fs      *CrashFS
	names   map[string]*mfile // current entries of /d, by base name
	durable map[string]*mfile // durable entries of /d, by base name
	open    map[*mfile]File
}

func newPropRun(t *testing.T, rnd *rand.Rand) *propRun {
	p := &propRun{t: t, rnd: rnd, fs: NewCrashFS()}
	must(t, p.fs.MkdirAll("/d"))
	must(t, p.fs.SyncDir("/"))
	p.reset(map[string]*mfile{})
	return p
}

func (p *propRun) reset(durable map[string]*mfile) {
	p.names, p.durable = durable, maps.Clone(durable)
	p.open = map[*mfile]File{}
}

func (p *propRun) step() {
	name := string(rune('a' + p.rnd.IntN(4)))
	m := p.names[name]
	switch k := p.rnd.IntN(20); {
	case k < 3 || m == nil:
		p.create(name)
	case k < 9:
		p.write(m)
	case k < 12:
		must(p.t, p.file(m).Sync())
		m.synced, m.low = bytes.Clone(m.cur), len(m.cur)
	case k < 14:
		p.truncate(m)
	case k < 16:
		must(p.t, p.fs.SyncDir("/d"))
		p.durable = maps.Clone(p.names)
	case k < 18:
		p.rename(name, string(rune('a'+p.rnd.IntN(4))))
	case k < 19:
		must(p.t, p.fs.Remove("/d/"+name))
		delete(p.names, name)
	default:
		p.crash()
	}
}

func (p *propRun) create(name string) {
	m := p.names[name]
	if m == nil {
		m = &mfile{}
		p.names[name] = m
	}
	m.cur, m.low = nil, 0
	p.open[m] = mustCreate(p.t, p.fs, "/d/"+name)
}

func (p *propRun) write(m *mfile) {
	b := make([]byte, 1+p.rnd.IntN(1500))
	for i := range b {
		b[i] = byte(p.rnd.Uint32())
	}
	write(p.t, p.file(m), string(b))
	m.cur = append(m.cur, b...)
}

func (p *propRun) truncate(m *mfile) {
	size := p.rnd.IntN(len(m.cur) + 100)
	must(p.t, p.file(m).Truncate(int64(size)))
	if size < len(m.cur) {
		m.cur, m.low = m.cur[:size:size], min(m.low, size)
	} else {
		m.cur = append(m.cur, make([]byte, size-len(m.cur))...)
	}
}

func (p *propRun) rename(from, to string) {
	must(p.t, p.fs.Rename("/d/"+from, "/d/"+to))
	m := p.names[from]
	delete(p.names, from)
	p.names[to] = m
}

// file returns an open File of m (which has a current name).
func (p *propRun) file(m *mfile) File {
	if f := p.open[m]; f != nil {
		return f
	}
	for name, n := range p.names {
		if n == m {
			p.open[m] = mustOpenAppend(p.t, p.fs, "/d/"+name)
		}
	}
	return p.open[m]
}

// crash crashes with random options, checks the outcome against the model
// and continues on the new FS, whose model is what it holds.
func (p *propRun) crash() {
	opts := CrashOptions{Rand: p.rnd, Tail: TailMode(p.rnd.IntN(int(TailAny) + 1)), ZeroFill: p.rnd.IntN(2) == 0}
	p.fs = p.fs.Crash(opts)
	wantDir(p.t, p.fs, "/d", slices.Sorted(maps.Keys(p.durable))...)
	next := map[string]*mfile{}
	seen := map[*mfile]*mfile{}
	for name, m := range p.durable {
		got := readFile(p.t, p.fs, "/d/"+name)
		p.check(name, m, got, opts.Tail)
		if seen[m] == nil {
			seen[m] = &mfile{synced: got, cur: bytes.Clone(got), low: len(got)}
		}
		next[name] = seen[m]
	}
	p.reset(next)
}

func (p *propRun) check(name string, m *mfile, got []byte, mode TailMode) {
	ok := bytes.Equal(got, m.synced) ||
		bytes.HasPrefix(got, m.synced[:m.low]) && len(got) <= len(m.cur)
	if m.low == len(m.synced) {
		ok = bytes.HasPrefix(got, m.synced) && len(got) <= max(len(m.cur), len(m.synced))
	}
	switch mode {
	case TailDrop:
		ok = bytes.Equal(got, m.synced)
	case TailKeep:
		ok = bytes.Equal(got, m.cur)
	}
	if !ok {
		p.t.Fatalf("%s after crash (tail %d): %d bytes; synced %d, low %d, current %d",
			name, mode, len(got), len(m.synced), m.low, len(m.cur))
	}
}
