package filestore

import (
	"container/list"
	"io"
	"sync"

	"github.com/cairnmq/cairn/internal/vfs"
)

// chunkSize is the unit of the read cache: aligned 64 KiB ranges of a
// segment file.
const chunkSize = 64 << 10

// chunkCache keeps recently read chunks of segment files in LRU order: a
// whole chunk never changes once written (the files are only appended
// to), nor does the last chunk of a sealed segment. The partial last chunk
// of the active segment is never cached: its bytes are in the segment's
// image until the chunk is full (segment.trimImage). A nil cache reads
// through.
type chunkCache struct {
	max int // chunks
	mu  struct {
		sync.Mutex
		items map[chunkKey]*list.Element
		lru   list.List // of *chunkEntry, most recent first
	}
}

type chunkKey struct {
	seg *segment
	idx int64
}

type chunkEntry struct {
	key  chunkKey
	data []byte
}

// newChunkCache returns a cache of at most bytes bytes, or nil when bytes
// is not positive.
func newChunkCache(bytes int64) *chunkCache {
	if bytes <= 0 {
		return nil
	}
	c := &chunkCache{max: int(max(bytes/chunkSize, 1))}
	c.mu.items = make(map[chunkKey]*list.Element)
	return c
}

// read returns a new buffer holding n bytes of g's file f from offset off;
// final says g is sealed and all written. A read that follows the segment's previous one
// (a scan) goes through whole chunks; a random one reads just its bytes
// unless they are cached.
func (c *chunkCache) read(g *segment, f vfs.File, off int64, n int, final bool) ([]byte, error) {
	out := make([]byte, n)
	if c == nil || n > chunkSize || !c.cachedOrScan(g, off, n) {
		return out, readFull(f, out, off)
	}
	for done := 0; done < n; {
		pos := off + int64(done)
		idx := pos / chunkSize
		data, err := c.chunk(g, f, idx, final)
		if err != nil {
			return nil, err
		}
		within := int(pos - idx*chunkSize)
		if within >= len(data) {
			return nil, io.ErrUnexpectedEOF
		}
		done += copy(out[done:], data[within:])
	}
	return out, nil
}

// scanGap is how far past the end of a segment's previous read a read may
// start and still count as part of a scan.
const scanGap = 4 << 10

// cachedOrScan reports whether [off, off+n) of g is cached or follows
// closely the segment's previous read, and records this read.
func (c *chunkCache) cachedOrScan(g *segment, off int64, n int) bool {
	first, last := off/chunkSize, (off+int64(n)-1)/chunkSize
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := g.lastEnd
	g.lastEnd = off + int64(n)
	if off >= prev && off-prev <= scanGap {
		return true
	}
	_, ok1 := c.mu.items[chunkKey{g, first}]
	_, ok2 := c.mu.items[chunkKey{g, last}]
	return ok1 && ok2
}

// chunk returns chunk idx of g, from the cache or the file, and caches
// it when it is whole or g is sealed and all written (final).
func (c *chunkCache) chunk(g *segment, f vfs.File, idx int64, final bool) ([]byte, error) {
	key := chunkKey{g, idx}
	c.mu.Lock()
	if e, ok := c.mu.items[key]; ok {
		c.mu.lru.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*chunkEntry).data, nil
	}
	c.mu.Unlock()
	buf := make([]byte, chunkSize)
	k, err := f.ReadAt(buf, idx*chunkSize)
	if err != nil && (err != io.EOF || k == 0) {
		return nil, err
	}
	if k == chunkSize || final {
		c.insert(key, buf[:k])
	}
	return buf[:k], nil
}

// insert adds a chunk, evicting the least recently used ones.
func (c *chunkCache) insert(key chunkKey, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.items[key]; ok {
		return
	}
	c.mu.items[key] = c.mu.lru.PushFront(&chunkEntry{key: key, data: data})
	for c.mu.lru.Len() > c.max {
		e := c.mu.lru.Back()
		c.mu.lru.Remove(e)
		delete(c.mu.items, e.Value.(*chunkEntry).key)
	}
}

// dropSegment forgets every chunk of g.
func (c *chunkCache) dropSegment(g *segment) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, e := range c.mu.items {
		if key.seg == g {
			c.mu.lru.Remove(e)
			delete(c.mu.items, key)
		}
	}
}

// readFull reads len(b) bytes of f at off.
func readFull(f vfs.File, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
