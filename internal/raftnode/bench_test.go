package raftnode

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/vfs"
)

// Benchmarks on the real file system (fsync included): three nodes in one
// process over the in-memory network, proposals of 128 bytes from C
// concurrent proposers each waiting for its answer (the path of a PubAck:
// fsynced on a majority, applied on the leader).
//
//	go test -run '^$' -bench BenchmarkPropose -benchtime 3000x ./internal/raftnode/
//
// Reported: proposals/s, fsyncs per proposal on the leader's server
// (group commit: one fsync serves every proposal of a round, of every
// group), and for several groups the same with proposals spread over them.

// countFS counts the fsyncs of files (not directories).
type countFS struct {
	vfs.FS
	syncs *atomic.Int64
}

func (c countFS) Create(name string) (vfs.File, error) {
	f, err := c.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return countFile{f, c.syncs}, nil
}

func (c countFS) OpenAppend(name string) (vfs.File, error) {
	f, err := c.FS.OpenAppend(name)
	if err != nil {
		return nil, err
	}
	return countFile{f, c.syncs}, nil
}

type countFile struct {
	vfs.File
	syncs *atomic.Int64
}

func (f countFile) Sync() error {
	f.syncs.Add(1)
	return f.File.Sync()
}

// nopSM applies without keeping anything.
type nopSM struct{ applied uint64 }

func (sm *nopSM) Apply(ents []Entry) error {
	sm.applied = ents[len(ents)-1].Index
	return nil
}
func (sm *nopSM) Applied() uint64              { return 0 }
func (sm *nopSM) Snapshot() ([]byte, error)    { return nil, nil }
func (sm *nopSM) Restore(uint64, []byte) error { return nil }

func BenchmarkPropose(b *testing.B) {
	for _, groups := range []int{1, 16} {
		for _, clients := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("groups=%d/clients=%d", groups, clients), func(b *testing.B) {
				benchPropose(b, groups, clients)
			})
		}
	}
}

func benchPropose(b *testing.B, groups, clients int) {
	dir := b.TempDir()
	net := NewMemNetwork(1, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { net.Run(stop) })
	var nodes []*Node
	syncs := make([]*atomic.Int64, 3)
	for i := range 3 {
		id := serverName(i)
		syncs[i] = &atomic.Int64{}
		n, err := Open(Config{
			FS: countFS{vfs.OS(), syncs[i]}, Dir: filepath.Join(dir, string(id)), Server: id,
			Transport: net.Transport(id), TickInterval: 20 * time.Millisecond,
		})
		if err != nil {
			b.Fatal(err)
		}
		net.Attach(id, n)
		nodes = append(nodes, n)
	}
	var peers []Peer
	for i := range 3 {
		peers = append(peers, Peer{Replica: ReplicaID(i + 1), Server: serverName(i)})
	}
	for g := 1; g <= groups; g++ {
		for i, n := range nodes {
			if err := n.AddGroup(GroupConfig{ID: GroupID(g), Replica: ReplicaID(i + 1), Incarnation: n.Incarnation(), Peers: peers}, &nopSM{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, n := range nodes {
		n.Start()
	}
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
		close(stop)
		wg.Wait()
	}()
	for g := 1; g <= groups; g++ {
		_ = nodes[0].Campaign(GroupID(g))
		for k := 1; ; k++ {
			if s, _ := nodes[0].Status(GroupID(g)); s.Role == Leader {
				break
			}
			if k%100 == 0 { // another server won the election: it hands over
				for _, n := range nodes[1:] {
					_ = n.TransferLeader(GroupID(g), 1)
				}
			}
			time.Sleep(time.Millisecond) // a benchmark's setup, not a test's wait
		}
	}
	data := make([]byte, 128)
	var next atomic.Int64
	before := syncs[0].Load()
	b.ResetTimer()
	start := time.Now()
	var cwg sync.WaitGroup
	for c := range clients {
		cwg.Go(func() {
			for {
				k := next.Add(1)
				if k > int64(b.N) {
					return
				}
				g := GroupID(1 + (int(k)+c)%groups)
				p, err := nodes[0].Propose(g, data)
				if err == nil {
					_, err = p.Wait(context.Background())
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	cwg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
	b.ReportMetric(float64(syncs[0].Load()-before)/float64(b.N), "fsyncs/proposal")
}

// BenchmarkIdleGroups measures what 1,000 idle R3 groups cost per tick
// (100 ms in production) on three nodes: the bytes and frames sent, and
// the CPU time of ticking and running the rounds (ns/op is one tick of all
// three nodes), with quiescence and without.
//
//	go test -run '^$' -bench BenchmarkIdleGroups -benchtime 200x ./internal/raftnode/
func BenchmarkIdleGroups(b *testing.B) {
	for _, quiet := range []bool{true, false} {
		b.Run(fmt.Sprintf("quiescence=%v", quiet), func(b *testing.B) {
			c := newTestCluster(b, 3, func(cfg *Config) { cfg.DisableQuiescence = !quiet })
			for g := GroupID(1); g <= 1000; g++ {
				for i, tn := range c.nodes {
					if err := tn.n.AddGroup(GroupConfig{ID: g, Replica: ReplicaID(i + 1), Incarnation: tn.n.Incarnation(), Peers: c.peers(0)}, &nopSM{}); err != nil {
						b.Fatal(err)
					}
				}
			}
			c.stabilize()
			for g := GroupID(1); g <= 1000; g++ {
				_ = c.nodes[int(g)%3].n.Campaign(g)
			}
			c.stabilize()
			c.tick(5)
			var bytes, frames int
			b.ResetTimer()
			for range b.N {
				for _, tn := range c.nodes {
					tn.n.Tick()
				}
				for _, tn := range c.nodes {
					tn.n.RunRound()
				}
				c.net.mu.Lock()
				for _, f := range c.net.inflight {
					bytes += len(f.frame)
				}
				frames += len(c.net.inflight)
				c.net.mu.Unlock()
				c.stabilize()
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "bytes/tick")
			b.ReportMetric(float64(frames)/float64(b.N), "frames/tick")
		})
	}
}
