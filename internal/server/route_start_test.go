package server

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/cairnmq/cairn/internal/logger"
)

// freePorts returns n loopback ports free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// startMeshAtOnce makes three servers whose route lists name all three
// cluster ports, as an operator starts them, and starts them at once. It
// returns nil when a port was taken meanwhile.
func startMeshAtOnce(t *testing.T, logs []*syncWriter) []*Server {
	t.Helper()
	ports := freePorts(t, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	servers := make([]*Server, 3)
	for i := range servers {
		o := clusterTestOptions(t, fmt.Sprintf("n%d", i+1), "C", routes...)
		o.Host, o.Port, o.Cluster.Port = "127.0.0.1", RandomPort, ports[i]
		o.Logger = logger.New(logs[i], false, false)
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = s
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Start()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Logf("port %d taken meanwhile: %v", ports[i], err)
			shutdownAll(servers)
			return nil
		}
	}
	return servers
}

func shutdownAll(servers []*Server) {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Shutdown()
		}()
	}
	wg.Wait()
}

// Three servers started at once, each with all three cluster URLs as
// routes, dial each other at once: every pair first has two connections,
// and a route to self is dialed too. Once the mesh has settled (two routes
// each, no other connection), no route may have closed with a Parse Error:
// the duplicates close as Duplicate Route. Rounds are repeated because the
// dials cross only sometimes.
func TestClusterStartAtOnceNoParseError(t *testing.T) {
	const rounds = 15
	dups, taken := 0, 0
	for round := 0; round < rounds; round++ {
		logs := []*syncWriter{{}, {}, {}}
		servers := startMeshAtOnce(t, logs)
		if servers == nil {
			if taken++; taken > rounds {
				t.Fatal("free ports keep being taken")
			}
			round--
			continue
		}
		waitCond(t, "the mesh to settle", func() bool {
			for _, s := range servers {
				s.cl.mu.Lock()
				n, conns := len(s.cl.routes), len(s.cl.conns)
				s.cl.mu.Unlock()
				if n != 2 || conns != 2 {
					return false
				}
			}
			return true
		})
		shutdownAll(servers)
		for i, l := range logs {
			log := l.String()
			dups += strings.Count(log, "Router connection closed: Duplicate Route - Remote:")
			if strings.Contains(log, "Parse Error") {
				t.Fatalf("round %d: n%d logs a Parse Error:\n%s", round, i+1, log)
			}
		}
	}
	t.Logf("%d rounds, %d duplicate routes closed", rounds, dups)
}
