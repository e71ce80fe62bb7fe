package vfs

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"slices"
)

// SectorSize is the size in bytes, and the alignment in absolute file
// offsets, of the sectors that Crash tears, scatters and fills with garbage.
const SectorSize = 512

// TailMode says what Crash keeps of a file's unsynced tail (the bytes from
// its low-water mark to its current length; see the package comment).
type TailMode int

// The tail modes; the package comment describes each.
const (
	TailDrop    TailMode = iota // keep nothing unsynced (the durable content)
	TailKeep                    // keep everything (the current content)
	TailPrefix                  // keep a random prefix of the tail
	TailTorn                    // keep a random prefix torn inside a sector
	TailSectors                 // keep a random subset of the tail's sectors
	TailAny                     // one of the five above, drawn per file
)

// CrashOptions says what a power loss keeps of the unsynced writes.
type CrashOptions struct {
	// Rand draws every random choice. Nil means a fixed seed, so the same
	// pre-crash state always gives the same outcome. It is used only
	// during the Crash call.
	Rand *rand.Rand
	// Tail is what each file keeps of its unsynced tail.
	Tail TailMode
	// ZeroFill makes garbage (torn and unwritten sectors) zeros instead of
	// random bytes.
	ZeroFill bool
}

// Crash simulates a power loss: it returns a new CrashFS holding what the
// disk would hold after it, following the package comment, and marks fs
// crashed so that every later operation on fs and its Files fails with
// ErrCrashed. Calling Crash again on the crashed fs draws another outcome
// from the same pre-crash state. It panics if opts.Tail is not one of the
// TailMode constants.
func (fs *CrashFS) Crash(opts CrashOptions) *CrashFS {
	if opts.Tail < TailDrop || opts.Tail > TailAny {
		panic("vfs: Crash with an unknown TailMode")
	}
	if opts.Rand == nil {
		opts.Rand = rand.New(rand.NewPCG(1, 2))
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.mu.crashed = true
	c := &cloner{opts: opts, done: map[*inode]*inode{}}
	out := &CrashFS{}
	out.mu.root = c.clone(fs.mu.root)
	return out
}

// cloner builds the post-crash tree. Each old inode maps to one new inode,
// so an inode reachable by two durable names stays one inode.
type cloner struct {
	opts CrashOptions
	done map[*inode]*inode
}

func (c *cloner) clone(old *inode) *inode {
	if n, ok := c.done[old]; ok {
		return n
	}
	if !old.isDir {
		n := &inode{}
		n.setData(c.content(old))
		c.done[old] = n
		return n
	}
	n := newDir()
	c.done[old] = n
	for _, name := range slices.Sorted(maps.Keys(old.dur)) {
		n.cur[name] = c.clone(old.dur[name])
	}
	n.dur = maps.Clone(n.cur)
	return n
}

// content returns the post-crash content of the file n.
func (c *cloner) content(n *inode) []byte {
	if n.low == len(n.synced) && n.low == len(n.data) {
		return bytes.Clone(n.synced) // nothing unsynced
	}
	mode := c.opts.Tail
	if mode == TailAny {
		mode = TailMode(c.opts.Rand.IntN(int(TailAny)))
	}
	switch {
	case mode == TailDrop:
		return bytes.Clone(n.synced)
	case mode == TailKeep:
		return bytes.Clone(n.data)
	case n.low < len(n.synced) && c.opts.Rand.IntN(2) == 0:
		return bytes.Clone(n.synced) // the truncation was lost
	case n.low == len(n.data):
		return bytes.Clone(n.data) // only a truncation, and it was kept
	}
	return c.tail(mode, bytes.Clone(n.data), n.low)
}

// tail returns what mode keeps of data, whose bytes from low on are
// unsynced; len(data) > low. It may overwrite data.
func (c *cloner) tail(mode TailMode, data []byte, low int) []byte {
	switch mode {
	case TailPrefix:
		return data[:low+c.opts.Rand.IntN(len(data)-low+1)]
	case TailTorn:
		return c.torn(data, low)
	default:
		return c.sectors(data, low)
	}
}

// torn keeps the tail up to a random sector, whose end is garbage from a
// random offset on.
func (c *cloner) torn(data []byte, low int) []byte {
	first, last := low/SectorSize, (len(data)-1)/SectorSize
	lo, hi := sector(first+c.opts.Rand.IntN(last-first+1), low, len(data))
	tear := lo + c.opts.Rand.IntN(hi-lo)
	c.garbage(data[tear:hi])
	return data[:hi]
}

// sectors keeps each sector of the tail with probability 1/2; the others,
// up to the last kept one, become garbage.
func (c *cloner) sectors(data []byte, low int) []byte {
	end := low
	for k := low / SectorSize; k*SectorSize < len(data); k++ {
		lo, hi := sector(k, low, len(data))
		if c.opts.Rand.IntN(2) == 0 {
			c.garbage(data[lo:hi])
		} else {
			end = hi
		}
	}
	return data[:end]
}

// sector returns the bounds of sector k clipped to the tail [low, size).
func sector(k, low, size int) (lo, hi int) {
	return max(low, k*SectorSize), min(size, (k+1)*SectorSize)
}

func (c *cloner) garbage(b []byte) {
	if c.opts.ZeroFill {
		clear(b)
		return
	}
	for i := range b {
		b[i] = byte(c.opts.Rand.Uint32())
	}
}
