package filestore

import (
	"fmt"
	"sync"

	"github.com/cairnmq/cairn/internal/vfs"
)

// readAhead reads the segment files for recovery one ahead of the scan, in
// a goroutine of its own, so that reading the disk and verifying records
// overlap. Two buffers circulate between them. The goroutine lives only
// during Open: stop ends it and closes the files it opened that were not
// taken.
type readAhead struct {
	out  chan segRead
	free chan []byte
	done chan struct{}
	wg   sync.WaitGroup
}

// segRead is one segment file read: its content and open file. The last
// file is opened for appending.
type segRead struct {
	data []byte
	f    vfs.File
	err  error
}

// startReadAhead starts reading paths, in order.
func startReadAhead(fs vfs.FS, paths []string) *readAhead {
	ra := &readAhead{out: make(chan segRead, 1), free: make(chan []byte, 2), done: make(chan struct{})}
	ra.free <- nil
	ra.free <- nil
	ra.wg.Add(1)
	go ra.run(fs, paths)
	return ra
}

func (ra *readAhead) run(fs vfs.FS, paths []string) {
	defer ra.wg.Done()
	for k, p := range paths {
		var buf []byte
		select {
		case buf = <-ra.free:
		case <-ra.done:
			return
		}
		rd := readSegment(fs, p, k == len(paths)-1, buf)
		select {
		case ra.out <- rd:
		case <-ra.done:
			if rd.f != nil {
				rd.f.Close()
			}
			return
		}
		if rd.err != nil {
			return
		}
	}
}

// next returns the next file read.
func (ra *readAhead) next() segRead { return <-ra.out }

// release gives a buffer back once its content is no longer needed.
func (ra *readAhead) release(buf []byte) { ra.free <- buf }

// stop ends the reading goroutine and closes any file read but not taken.
func (ra *readAhead) stop() {
	close(ra.done)
	ra.wg.Wait()
	select {
	case rd := <-ra.out:
		if rd.f != nil {
			rd.f.Close()
		}
	default:
	}
}

// readSegment opens a segment file (for appending when it is the last)
// and reads its whole content into buf, grown as needed.
func readSegment(fs vfs.FS, name string, last bool, buf []byte) segRead {
	open := fs.Open
	if last {
		open = fs.OpenAppend
	}
	f, err := open(name)
	if err != nil {
		return segRead{err: err}
	}
	size, err := f.Size()
	if err == nil && size > 1<<32 {
		err = fmt.Errorf("%s: segment larger than 4 GiB", name)
	}
	if err == nil {
		if int64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		err = readFull(f, buf, 0)
	}
	if err != nil {
		f.Close()
		return segRead{err: err}
	}
	return segRead{data: buf, f: f}
}
