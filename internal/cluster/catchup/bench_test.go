package catchup

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
)

// BenchmarkFetch fetches a stream of 1 KiB messages (64 MiB) from a
// memory store over the in-process net: the protocol's own cost (encoding,
// CRCs, checks, the window), without disk or network. b.N fetches.
func BenchmarkFetch(b *testing.B) {
	const n, size = 64 << 10, 1 << 10
	st := memstore.New(store.Config{})
	for i := 1; i <= n; i++ {
		if _, err := st.Append(store.Msg{Subject: fmt.Sprintf("s.%d", i%16), Data: bytes.Repeat([]byte{byte(i)}, size), Time: int64(i)}); err != nil {
			b.Fatal(err)
		}
	}
	nw := newNet()
	mk := func(id raftnode.ServerID) *Service {
		s := New(Config{Send: func(to raftnode.ServerID, frame []byte) error { return nw.send(id, to, frame) }})
		b.Cleanup(s.Close)
		nw.mu.Lock()
		nw.svcs[id] = s
		nw.mu.Unlock()
		return s
	}
	src, dst := mk("a"), mk("b")
	src.Register(1, &source{st: st})
	b.SetBytes(n * size)
	b.ResetTimer()
	for range b.N {
		got := 0
		if err := dst.Fetch(b.Context(), 1, []raftnode.ServerID{"a"}, Want{First: 1, Last: n}, func(*store.StoredMsg) error { got++; return nil }); err != nil || got != n {
			b.Fatal(err, got)
		}
	}
}
