package server

import (
	"bytes"
	"testing"
)

func appendN(o *outbound, b []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.commitLocked(append(o.tailLocked(len(b)), b...))
}

func TestOutboundKeepsOrderAcrossChunks(t *testing.T) {
	o := newOutbound(1 << 30)
	var want bytes.Buffer
	for i := 0; i < 5000; i++ {
		frame := bytes.Repeat([]byte{byte('a' + i%26)}, 1+i%700)
		want.Write(frame)
		appendN(o, frame)
	}
	var got bytes.Buffer
	var batch [][]byte
	for more := true; more; {
		batch, more, _, _ = o.take(batch)
		n := 0
		for _, b := range batch {
			got.Write(b)
			n += len(b)
		}
		if n > maxWriteBatch+chunkSize {
			t.Fatalf("batch of %d bytes exceeds the write batch bound", n)
		}
		o.written(batch, int64(n))
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatal("bytes taken differ from bytes appended")
	}
	if o.pending.Load() != 0 {
		t.Fatalf("pending %d after everything was written", o.pending.Load())
	}
}

func TestOutboundLargeFrameGetsOwnChunk(t *testing.T) {
	o := newOutbound(1 << 30)
	big := bytes.Repeat([]byte("x"), chunkSize*3)
	appendN(o, []byte("small"))
	appendN(o, big)
	if len(o.chunks) != 2 || len(o.chunks[1]) != len(big) {
		t.Fatalf("chunks %d, want the large frame alone in the second", len(o.chunks))
	}
}

func TestOutboundLimitAndStall(t *testing.T) {
	o := newOutbound(4000)
	frame := bytes.Repeat([]byte("y"), 1000)
	for i := 0; i < 3; i++ {
		if !appendN(o, frame) {
			t.Fatalf("append %d reported over the limit early", i)
		}
	}
	if o.stall != nil {
		t.Fatal("stalled at 3000 of 4000 bytes; the threshold is three quarters")
	}
	appendN(o, frame[:1])
	ch, full := o.stallState()
	if ch == nil || full {
		t.Fatalf("stall %v full %v after passing three quarters", ch != nil, full)
	}
	if appendN(o, frame) {
		t.Fatal("append past the limit was accepted")
	}
	batch, _, _, _ := o.take(nil)
	o.written(batch, 4001+1000)
	select {
	case <-ch:
	default:
		t.Fatal("stalled producers not released after the writer caught up")
	}
}

func TestOutboundClosedDropsAndReleases(t *testing.T) {
	o := newOutbound(100)
	appendN(o, bytes.Repeat([]byte("z"), 90))
	ch, _ := o.stallState()
	o.markClosed()
	if _, _, _, closed := o.take(nil); !closed {
		t.Fatal("take after markClosed does not report closed")
	}
	select {
	case <-ch:
	default:
		t.Fatal("markClosed did not release stalled producers")
	}
}

// A route's outbound is never over its limit, and a write that timed out
// part way puts the unwritten rest back first, so the bytes still leave
// in order (nats-server v2.15.2 keeps a route that wrote something).
func TestOutboundRouteRequeue(t *testing.T) {
	o := newOutbound(1000)
	o.route = true
	var want bytes.Buffer
	for i := 0; i < 1000; i++ { // about 250 KB: four chunks
		frame := bytes.Repeat([]byte{byte('a' + i%26)}, 1+i%500)
		want.Write(frame)
		if !appendN(o, frame) {
			t.Fatalf("append %d reported a route over its limit", i)
		}
	}
	var got bytes.Buffer
	var batch [][]byte
	partial := true
	for more := true; more; {
		batch, more, _, _ = o.take(batch)
		n := 0
		for _, b := range batch {
			n += len(b)
		}
		if partial && len(batch) > 1 {
			// Written: the first chunk and 100 bytes of the second.
			k := len(batch[0]) + 100
			got.Write(batch[0])
			got.Write(batch[1][:100])
			o.requeue(batch, int64(k))
			partial, more = false, true
			if p := o.pending.Load(); p != int64(want.Len()-got.Len()) {
				t.Fatalf("pending %d after the partial write, want %d", p, want.Len()-got.Len())
			}
			continue
		}
		for _, b := range batch {
			got.Write(b)
		}
		o.written(batch, int64(n))
	}
	if partial {
		t.Fatal("no batch of two chunks to write in part")
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatal("bytes written differ from bytes appended")
	}
	if o.pending.Load() != 0 {
		t.Fatalf("pending %d after everything was written", o.pending.Load())
	}
}
