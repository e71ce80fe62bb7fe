package jscluster

import (
	"slices"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// A store removed under one name is removed under any other while no
// server not removed holds it; a store one name still holds keeps its
// meta replica when another name of it is removed (docs/cluster.md,
// "A server renamed over its store").
func TestStoreRemovedAndRenamedReplica(t *testing.T) {
	inc3 := raftnode.Incarnation{3}
	inc1 := raftnode.Incarnation{1}
	st := meta.NewState()
	st.Apply(&meta.AddServer{Name: "n1", Incarnation: inc1})
	st.Apply(&meta.AddServer{Name: "n3", Incarnation: inc3})
	if storeRemoved(st, inc3) || !renamedReplica(st, metaReplica(inc3)) {
		t.Fatal("n3's store before any removal")
	}
	// Renamed: n3x catalogued with n3's store, then n3 removed.
	renamed := meta.NewState()
	renamed.Apply(&meta.AddServer{Name: "n3", Incarnation: inc3})
	renamed.Apply(&meta.AddServer{Name: "n3x", Incarnation: inc3})
	renamed.Apply(&meta.RemoveServer{Name: "n3"})
	if storeRemoved(renamed, inc3) || !renamedReplica(renamed, metaReplica(inc3)) {
		t.Fatal("the store n3x holds counts as removed with n3")
	}
	// Removed first: n3 removed, nothing else holds its store.
	st.Apply(&meta.RemoveServer{Name: "n3"})
	if !storeRemoved(st, inc3) || renamedReplica(st, metaReplica(inc3)) {
		t.Fatal("n3's removed store not seen as removed")
	}
	if storeRemoved(st, raftnode.Incarnation{9}) || storeRemoved(st, inc1) {
		t.Fatal("an unknown or kept store seen as removed")
	}
}

// The voters record of a renamed store names this server where it named
// the old name, with the same incarnation, sorted.
func TestRenamedRecord(t *testing.T) {
	c := &Cluster{name: "a3"}
	rec := votersFile{Voters: []string{"n1", "n2", "n3"}, Join: true,
		Incarnations: map[string]string{"n1": "01", "n2": "02", "n3": "03"}}
	got := c.renamedRecord(rec, "n3")
	if !slices.Equal(got.Voters, []string{"a3", "n1", "n2"}) || got.Incarnations["a3"] != "03" || got.Incarnations["n3"] != "" || !got.Join {
		t.Fatalf("%+v", got)
	}
}

// A voters record that names one store under two names (a server renamed
// over its store, its old name still catalogued) gives one peer for it:
// raftnode refuses a repeated replica, and a server with a damaged WAL
// joining such a cluster stayed out of the meta group ("bad or repeated
// peer"). The peer is named after this server when it is one of the two.
func TestMetaPeersOfRenamedStore(t *testing.T) {
	a, b := strings.Repeat("0a", 16), strings.Repeat("0b", 16)
	rec := votersFile{Voters: []string{"n1", "n2", "n2x"}, Join: true, Incarnations: map[string]string{"n1": a, "n2": b, "n2x": b}}
	incB, _ := parseIncarnation(b)
	for _, tc := range []struct {
		self raftnode.ServerID
		name raftnode.ServerID // the shared store's peer
	}{{"n1", "n2"}, {"n2x", "n2x"}} {
		peers, voters, replica, err := metaPeersOf(rec, tc.self)
		if err != nil || len(peers) != 2 || len(voters) != 0 {
			t.Fatalf("self %s: peers %v, voters %v, %v", tc.self, peers, voters, err)
		}
		if peers[1].Replica != metaReplica(incB) || peers[1].Server != tc.name {
			t.Fatalf("self %s: the shared store's peer %+v, want %s", tc.self, peers[1], tc.name)
		}
		if tc.self == "n2x" && replica != metaReplica(incB) {
			t.Fatalf("self n2x: replica %d", replica)
		}
	}
	rec.Join = false
	if _, voters, _, _ := metaPeersOf(rec, "n1"); len(voters) != 2 {
		t.Fatalf("voters %v, want two", voters)
	}
}

// A removed server's successor is the one server not removed that runs
// its store; none while the old name is not removed, and none for a
// store two names present (a copied store directory). A replica of the
// old name is renamed only when bound to that store (docs/cluster.md,
// "A server renamed over its store").
func TestSuccessors(t *testing.T) {
	inc3, inc9 := raftnode.Incarnation{3}, raftnode.Incarnation{9}
	st := meta.NewState()
	st.Apply(&meta.AddServer{Name: "n1", Incarnation: raftnode.Incarnation{1}})
	st.Apply(&meta.AddServer{Name: "n3", Incarnation: inc3})
	st.Apply(&meta.AddServer{Name: "n3x", Incarnation: inc3})
	if got := successors(st); len(got) != 0 {
		t.Fatalf("before the removal: %+v", got)
	}
	st.Apply(&meta.RemoveServer{Name: "n3"})
	got := successors(st)
	if len(got) != 1 || got["n3"].Name != "n3x" {
		t.Fatalf("after the removal: %+v", got)
	}
	if !renamedHeld(got, meta.Replica{ID: 2, Server: "n3", Incarnation: inc3}) ||
		renamedHeld(got, meta.Replica{ID: 2, Server: "n3", Incarnation: inc9}) ||
		renamedHeld(got, meta.Replica{ID: 1, Server: "n1", Incarnation: raftnode.Incarnation{1}}) {
		t.Fatal("renamedHeld")
	}
	st.Apply(&meta.AddServer{Name: "n3y", Incarnation: inc3}) // a copy of the store under a third name
	if got := successors(st); len(got) != 0 {
		t.Fatalf("two names of one store: %+v", got)
	}
}
