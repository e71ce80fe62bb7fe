package transport_test

import (
	"slices"
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
	want := []string{"a", "b"}
	members.Store(&want)
	meta.Store(true)
	a.tr.Rehello()
	waitFor(t, "b learns a's members and meta group", func() bool {
		inMeta, m, _ := b.tr.PeerMeta(raftnode.ServerID("a"))
		return inMeta && slices.Equal(m, want)
	})
}
