package transport_test

import (
	"context"
	"errors"
	"fmt"
	. "github.com/cairnmq/cairn/internal/cluster/transport"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// quiet drops log lines (benchmarks print theirs always).
func quiet(string, ...any) {}

// counter is a raftnode.Receiver that counts frames and bytes.
type counter struct{ frames, bytes atomic.Int64 }

func (c *counter) Receive(_ raftnode.ServerID, f []byte) error {
	c.frames.Add(1)
	c.bytes.Add(int64(len(f)))
	return nil
}

// BenchmarkSend: frames from one server to another over the transport on
// loopback, as fast as the queue takes them (a full queue is retried).
//
//	go test -run '^$' -bench BenchmarkSend ./internal/cluster/transport/
func BenchmarkSend(b *testing.B) {
	for _, size := range []int{256, 4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("frame=%d", size), func(b *testing.B) {
			a := startBenchMember(b, "a")
			c := startBenchMember(b, "b", a.routeURL(cred{}))
			var got counter
			c.tr.Attach(&got)
			frame := make([]byte, size)
			for a.tr.Send("b", frame) != nil {
				runtime.Gosched()
			}
			for got.frames.Load() < 1 {
				runtime.Gosched()
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				for {
					err := a.tr.Send("b", frame)
					if err == nil {
						break
					}
					if !errors.Is(err, ErrQueueFull) {
						b.Fatal(err)
					}
					runtime.Gosched()
				}
			}
			for got.frames.Load() < int64(b.N)+1 {
				runtime.Gosched()
			}
		})
	}
}

// startBenchMember starts a server and its transport for a benchmark,
// waiting for its routes.
func startBenchMember(b *testing.B, name string, routes ...string) *member {
	b.Helper()
	m := startMember(b, name, cred{}, &Config{Logf: quiet}, routes...)
	if len(routes) > 0 {
		deadline := time.Now().Add(20 * time.Second)
		for m.srv.NumRoutes() < len(routes) {
			if time.Now().After(deadline) {
				b.Fatal("no route")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return m
}

// BenchmarkPropose: proposals to one R3 group whose three replicas run on
// three servers joined by the transport on loopback, each proposer
// waiting for its answer (compare BenchmarkPropose of internal/raftnode,
// over the in-memory network).
//
//	go test -run '^$' -bench BenchmarkPropose -benchtime 2000x ./internal/cluster/transport/
func BenchmarkPropose(b *testing.B) {
	for _, proposers := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("proposers=%d", proposers), func(b *testing.B) {
			root := b.TempDir()
			var ss []*raftServer
			for i := range 3 {
				var routes []string
				if i > 0 {
					routes = []string{ss[0].routeURL(cred{})}
				}
				name := fmt.Sprintf("n%d", i+1)
				ss = append(ss, &raftServer{member: startMember(b, name, cred{}, &Config{Logf: quiet}, routes...), dir: filepath.Join(root, name)})
			}
			defer func() {
				for _, s := range ss {
					stopServer(s)
				}
			}()
			deadline := time.Now().Add(30 * time.Second)
			for ss[0].srv.NumRoutes() < 2 || ss[1].srv.NumRoutes() < 2 || ss[2].srv.NumRoutes() < 2 {
				if time.Now().After(deadline) {
					b.Fatal("no mesh")
				}
				time.Sleep(5 * time.Millisecond)
			}
			for i, s := range ss {
				openNode(b, s, i)
			}
			l := -1
			for l = leaderOf(ss); l < 0; l = leaderOf(ss) {
				if time.Now().After(deadline) {
					b.Fatal("no leader")
				}
				time.Sleep(5 * time.Millisecond)
			}
			data := make([]byte, 128)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range proposers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						p, err := ss[l].node.Propose(group, data)
						if err != nil {
							b.Error(err)
							return
						}
						if _, err := p.Wait(context.Background()); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proposals/s")
		})
	}
}
