package transport_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/cairnmq/cairn/internal/cluster/transport"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// TestRehello: a hello says what Config.Meta and Members said when the
// connection was dialed; after Rehello an idle connection is dialed
// again at once and the peer learns what they say now.
func TestRehello(t *testing.T) {
	var members atomic.Pointer[[]string]
	var meta atomic.Bool
	a := startMember(t, "a", cred{}, &Config{
		Members: func() []string {
			if p := members.Load(); p != nil {
				return *p
			}
			return nil
		},
		Meta: meta.Load,
	})
	b := startMember(t, "b", cred{}, &Config{}, a.routeURL(cred{}))
	waitRoutes(t, a, b)
	waitFor(t, "b admits a's hello", func() bool {
		_, _, ok := b.tr.PeerMeta("a")
		return ok
	})
	if inMeta, m, _ := b.tr.PeerMeta("a"); inMeta || m != nil {
		t.Fatalf("first hello: meta %v, members %v", inMeta, m)
	}
	// The hello announces the build's feature level; a peer never heard
	// from has none.
	if l := b.tr.PeerLevel("a"); l != FeatureLevel {
		t.Fatalf("a's feature level %d, want %d", l, FeatureLevel)
	}
	if l := b.tr.PeerLevel("z"); l != 0 {
		t.Fatalf("an unknown peer's feature level %d", l)
	}
	want := []string{"a", "b"}
	members.Store(&want)
	meta.Store(true)
	a.tr.Rehello()
	waitFor(t, "b learns a's members and meta group", func() bool {
		inMeta, m, _ := b.tr.PeerMeta(raftnode.ServerID("a"))
		return inMeta && slices.Equal(m, want)
	})
}

// lines records log lines of one level.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (ls *lines) logf(format string, args ...any) {
	ls.mu.Lock()
	ls.l = append(ls.l, fmt.Sprintf(format, args...))
	ls.mu.Unlock()
}

// count returns how many lines contain sub.
func (ls *lines) count(sub string) int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	n := 0
	for _, l := range ls.l {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

// A peer that closes its connection to dial again at once (Rehello) is
// logged at debug level, both the close and the new connection: a new
// cluster's servers logged two or three such pairs each at [INF] at
// every first start. A peer that goes away is logged at [INF].
func TestRedialLoggedAtDebug(t *testing.T) {
	var info, debug lines
	a := startMember(t, "a", cred{}, &Config{})
	b := startMember(t, "b", cred{}, &Config{Infof: info.logf, Debugf: debug.logf}, a.routeURL(cred{}))
	waitRoutes(t, a, b)
	waitFor(t, "b accepts a's connection", func() bool { return info.count("accepted the Raft connection of a") == 1 })
	a.tr.Rehello()
	waitFor(t, "the close of a's first connection, logged", func() bool {
		return debug.count("Raft connection of a closed") == 1 || info.count("Raft connection of a closed") == 1
	})
	if n := info.count("Raft connection of a closed"); n != 0 {
		t.Fatalf("a's redial logged at [INF]: %d close lines", n)
	}
	if n := debug.count("accepted the Raft connection of a"); n != 1 {
		t.Fatalf("a's new connection: %d accept lines at debug level, want 1", n)
	}
	a.stop()
	waitFor(t, "a's close, gone for good, at [INF]", func() bool { return info.count("Raft connection of a closed") == 1 })
}
