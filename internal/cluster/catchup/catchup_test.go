package catchup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
)

// net delivers frames between Services at once, on the sender's
// goroutine (Send never blocks: Receive only queues), and can drop the
// frames from one server or flip a bit in them.
type net struct {
	mu    sync.Mutex
	svcs  map[raftnode.ServerID]*Service
	drop  map[raftnode.ServerID]bool
	flip  map[raftnode.ServerID]bool
	bad   int // frames Receive refused
	sent  int
	bytes int
}

func newNet() *net {
	return &net{svcs: map[raftnode.ServerID]*Service{}, drop: map[raftnode.ServerID]bool{}, flip: map[raftnode.ServerID]bool{}}
}

func (n *net) service(t *testing.T, id raftnode.ServerID) *Service {
	s := New(Config{Send: func(to raftnode.ServerID, frame []byte) error { return n.send(id, to, frame) }, Logf: t.Logf, RequestTimeout: time.Second})
	t.Cleanup(s.Close)
	n.mu.Lock()
	n.svcs[id] = s
	n.mu.Unlock()
	return s
}

func (n *net) send(from, to raftnode.ServerID, frame []byte) error {
	n.mu.Lock()
	s, drop, flip := n.svcs[to], n.drop[from], n.flip[from]
	n.sent++
	n.bytes += len(frame)
	n.mu.Unlock()
	if s == nil {
		return errors.New("unknown peer")
	}
	if drop {
		return nil
	}
	if flip {
		frame = bytes.Clone(frame)
		frame[len(frame)/2] ^= 1
	}
	if err := s.Receive(from, frame); err != nil {
		n.mu.Lock()
		n.bad++
		n.mu.Unlock()
	}
	return nil
}

// source is a memory store as a Source, with removed messages it still
// serves (as filestore.LoadRemoved does), and sequences it lacks.
type source struct {
	st      *memstore.Store
	removed map[uint64]*store.StoredMsg
	lacks   map[uint64]bool
}

func (s *source) Message(seq uint64) (*store.StoredMsg, error) {
	if s.lacks[seq] {
		return nil, store.ErrNotFound
	}
	if m := s.removed[seq]; m != nil {
		return m, nil
	}
	return s.st.Load(seq)
}

// fill makes a source of n messages whose sizes vary (some larger than
// ChunkBytes), with the sequences in dels deleted before the capture and
// those in later removed after it (still served).
func fill(t *testing.T, n int, dels, later []uint64) *source {
	st := memstore.New(store.Config{})
	for i := 1; i <= n; i++ {
		size := 100 + i%7*1000
		if i%997 == 0 && n > 4000 {
			size = ChunkBytes + 10
		}
		m := store.Msg{Subject: fmt.Sprintf("s.%d", i%5), Data: bytes.Repeat([]byte{byte(i)}, size), Time: int64(i)}
		if i%3 == 0 {
			m.Header = []byte("NATS/1.0\r\nA: b\r\n\r\n")
		}
		if _, err := st.Append(m); err != nil {
			t.Fatal(err)
		}
	}
	src := &source{st: st, removed: map[uint64]*store.StoredMsg{}, lacks: map[uint64]bool{}}
	for _, seq := range dels {
		if err := st.Delete(seq); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range later {
		m, err := st.Load(seq)
		if err != nil {
			t.Fatal(err)
		}
		src.removed[seq] = m
		if err := st.Delete(seq); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// want is the Want of a stream of n messages with dels deleted, from first.
func want(n int, first uint64, dels []uint64) Want {
	w := Want{First: first, Last: uint64(n)}
	for _, d := range dels {
		if d >= first {
			if k := len(w.Gaps); k > 0 && w.Gaps[k-1].To+1 == d {
				w.Gaps[k-1].To = d
			} else {
				w.Gaps = append(w.Gaps, Range{From: d, To: d})
			}
		}
	}
	return w
}

// collect is a sink that keeps what it is given.
type collect struct{ got []*store.StoredMsg }

func (c *collect) sink(m *store.StoredMsg) error {
	c.got = append(c.got, m)
	return nil
}

// check requires exactly the wanted messages of w, as src stored them.
func (c *collect) check(t *testing.T, src *source, w Want) {
	t.Helper()
	var exp []uint64
	for seq, gi := w.First, 0; seq <= w.Last; seq++ {
		for gi < len(w.Gaps) && w.Gaps[gi].To < seq {
			gi++
		}
		if gi < len(w.Gaps) && w.Gaps[gi].From <= seq {
			continue
		}
		exp = append(exp, seq)
	}
	if len(c.got) != len(exp) {
		t.Fatalf("got %d messages, want %d", len(c.got), len(exp))
	}
	for i, m := range c.got {
		o, err := src.Message(exp[i])
		if err != nil {
			t.Fatal(err)
		}
		if m.Seq != exp[i] || m.Subject != o.Subject || m.Time != o.Time || !bytes.Equal(m.Header, o.Header) || !bytes.Equal(m.Data, o.Data) {
			t.Fatalf("message %d: %d %q differs from the source's", i, m.Seq, m.Subject)
		}
	}
}

// A fetch brings every wanted sequence in order, byte for byte, skipping
// the gaps, including messages the source removed since (served from
// their records) and messages larger than a chunk, over many chunks and
// requests in flight.
func TestFetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet()
		a, b := n.service(t, "a"), n.service(t, "b")
		var dels []uint64
		for d := uint64(50); d < 3000; d += 2 { // many gaps: requests cut at MaxGaps? no, at Span
			dels = append(dels, d)
		}
		dels = append(dels, 4000, 4001, 4002, 5000)
		src := fill(t, 5000, dels, []uint64{10, 4500})
		a.Register(7, src)
		var c collect
		w := want(5000, 3, dels)
		if err := b.Fetch(t.Context(), 7, []raftnode.ServerID{"a"}, w, c.sink); err != nil {
			t.Fatal(err)
		}
		c.check(t, src, w)
		if n.bad != 0 {
			t.Fatalf("%d frames refused", n.bad)
		}
	})
}

// A source that lacks a wanted sequence refuses; one that answers
// nothing times out; one with no replica refuses; a damaged frame is
// refused by the receiver: in each case the fetch goes on with the next
// source from where its sink stopped, and fails with ErrUnavailable when
// none is left.
func TestFetchFailsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet()
		a, b, c, f := n.service(t, "a"), n.service(t, "b"), n.service(t, "c"), n.service(t, "f")
		_ = c
		full := fill(t, 3000, nil, nil)
		lacking := fill(t, 3000, nil, nil)
		lacking.lacks[2000] = true
		a.Register(7, lacking)
		b.Register(7, full)
		var got collect
		w := want(3000, 1, nil)
		n.drop["d"] = true
		d := n.service(t, "d")
		d.Register(7, full)
		n.flip["e"] = true
		e := n.service(t, "e")
		e.Register(7, full)
		// a lacks 2000, d never answers, c holds no replica, e's frames
		// are damaged, b serves the rest.
		err := f.Fetch(t.Context(), 7, []raftnode.ServerID{"a", "d", "c", "e", "b"}, w, got.sink)
		if err != nil {
			t.Fatal(err)
		}
		got.check(t, full, w)
		if n.bad == 0 {
			t.Fatal("no damaged frame was refused")
		}
		var again collect
		err = f.Fetch(t.Context(), 7, []raftnode.ServerID{"a", "c"}, w, again.sink)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("no source left: %v", err)
		}
		if k := len(again.got); k == 0 || k >= 2000 || again.got[k-1].Seq != uint64(k) {
			t.Fatalf("sink took %d messages before the failure (want a prefix short of 2000)", k)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := f.Fetch(ctx, 7, []raftnode.ServerID{"b"}, w, (&collect{}).sink); !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled: %v", err)
		}
	})
}

// A source whose server dies in the middle of a fetch (its frames stop:
// a SIGKILLed stream leader) fails over to the next source as soon as
// PeerGone reports it, not after the request timeout (10 s), and the
// fetch ends with every message; a later fetch skips the gone server
// until a frame from it arrives (Heard). Without PeerGone the fetch
// waited the whole timeout (a trial's 10 s stall of a stream move).
func TestFetchPeerGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet()
		mk := func(id raftnode.ServerID) *Service {
			s := New(Config{Send: func(to raftnode.ServerID, frame []byte) error { return n.send(id, to, frame) }, Logf: t.Logf})
			t.Cleanup(s.Close)
			n.mu.Lock()
			n.svcs[id] = s
			n.mu.Unlock()
			return s
		}
		a, b, f := mk("a"), mk("b"), mk("f")
		full := fill(t, 3000, nil, nil)
		a.Register(7, full)
		b.Register(7, full)
		w := want(3000, 1, nil)
		var (
			got    collect
			diedAt time.Time
		)
		err := f.Fetch(t.Context(), 7, []raftnode.ServerID{"a", "b"}, w, func(m *store.StoredMsg) error {
			if m.Seq == 100 { // a dies: nothing more from it
				n.mu.Lock()
				n.drop["a"] = true
				n.mu.Unlock()
				go func() {
					time.Sleep(300 * time.Millisecond) // fake time: the transport notices a moment later
					diedAt = time.Now()
					f.PeerGone("a")
				}()
			}
			return got.sink(m)
		})
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(diedAt); diedAt.IsZero() || took > time.Second {
			t.Fatalf("the fetch ended %v after its source was gone, want at once", took)
		}
		got.check(t, full, w)
		// Marked gone: skipped at once, even as the only source.
		start := time.Now()
		if err := f.Fetch(t.Context(), 7, []raftnode.ServerID{"a"}, w, (&collect{}).sink); !errors.Is(err, ErrUnavailable) || time.Since(start) > 0 {
			t.Fatalf("a gone server asked: %v after %v", err, time.Since(start))
		}
		// A frame from it: asked again.
		n.mu.Lock()
		n.drop["a"] = false
		n.mu.Unlock()
		f.Heard("a")
		var again collect
		if err := f.Fetch(t.Context(), 7, []raftnode.ServerID{"a"}, w, again.sink); err != nil {
			t.Fatal(err)
		}
		again.check(t, full, w)
	})
}

// A sink's error ends the fetch with it.
func TestFetchSinkError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet()
		a, b := n.service(t, "a"), n.service(t, "b")
		a.Register(7, fill(t, 100, nil, nil))
		boom := errors.New("disk full")
		k := 0
		err := b.Fetch(t.Context(), 7, []raftnode.ServerID{"a"}, want(100, 1, nil), func(*store.StoredMsg) error {
			if k++; k == 50 {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Fatalf("got %v", err)
		}
	})
}

// Frames round-trip; every truncation and every flipped bit of them is
// refused.
func TestWire(t *testing.T) {
	h := header{group: 9, fetch: 1 << 40, request: 3}
	frames := [][]byte{
		(&request{header: withKind(h, kindRequest), first: 5, last: 100, max: 77, gaps: []Range{{6, 7}, {50, 100}}}).encode(),
		(&chunk{header: withKind(h, kindChunk), first: 5, through: 9, msgs: []*store.StoredMsg{
			{Seq: 5, Time: -3, Subject: "a.b", Header: []byte("NATS/1.0\r\n\r\n"), Data: []byte("x")}, {Seq: 9, Subject: "c"}}}).encode(),
		(&refusal{header: withKind(h, kindRefusal), code: refuseMissing, seq: 12, text: "gone"}).encode(),
	}
	for i, f := range frames {
		v, err := decode(f)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		var again []byte
		switch x := v.(type) {
		case *request:
			again = x.encode()
		case *chunk:
			again = x.encode()
		case *refusal:
			again = x.encode()
		}
		if !bytes.Equal(again, f) {
			t.Fatalf("frame %d does not round-trip", i)
		}
		for k := range f {
			if _, err := decode(f[:k]); !errors.Is(err, ErrBadFrame) {
				t.Fatalf("frame %d cut at %d: %v", i, k, err)
			}
			for bit := range 8 {
				g := bytes.Clone(f)
				g[k] ^= 1 << bit
				if _, err := decode(g); !errors.Is(err, ErrBadFrame) && !(k == 0 && bit == 0) {
					t.Fatalf("frame %d, bit %d of byte %d flipped: %v", i, bit, k, err)
				}
			}
		}
	}
}

func withKind(h header, k byte) header {
	h.kind = k
	return h
}

// FuzzDecode: no input makes the decoder panic or accept a frame whose
// CRC fails.
func FuzzDecode(f *testing.F) {
	f.Add((&request{header: header{kind: kindRequest, group: 1}, first: 1, last: 2}).encode())
	f.Add((&chunk{header: header{kind: kindChunk}, first: 1, through: 1, msgs: []*store.StoredMsg{{Seq: 1, Subject: "a"}}}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decode(b)
	})
}
