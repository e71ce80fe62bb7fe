package meta

import (
	"maps"
	"slices"
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// catalogue returns a state with the servers given as name -> (cluster, tags).
func catalogue(t *testing.T, srvs map[string][]string) *State {
	st := NewState()
	for _, name := range slices.Sorted(maps.Keys(srvs)) {
		v := srvs[name]
		mustApply(t, st, &AddServer{Name: raftnode.ServerID(name), Cluster: v[0], Tags: v[1:]})
	}
	return st
}

func wantPlaceErr(t *testing.T, err *jserr.Error, code jserr.ErrCode, desc string) {
	t.Helper()
	if err == nil || err.ErrCode != uint16(code) || err.Description != desc {
		t.Fatalf("error %v, want %d %q", err, code, desc)
	}
}

// Placement answers with nats-server's 10005 texts: an R5 on three
// servers is exactly "no suitable peers for placement" (measured on
// nats-server 2.15.2, docs/cluster.md), with its reasons otherwise.
func TestPlaceErrors(t *testing.T) {
	st := catalogue(t, map[string][]string{"s1": {"C1", "ssd", "az:1"}, "s2": {"C1", "az:2"}, "s3": {"C1", "ssd", "az:1"}, "x1": {"C2"}})
	_, err := Place(st, PlaceRequest{Replicas: 5, Cluster: "C1"})
	wantPlaceErr(t, err, jserr.ClusterNoPeers, "no suitable peers for placement")
	_, err = Place(st, PlaceRequest{Replicas: 3, Cluster: "C1", Tags: []string{"ssd", "!spot"}})
	wantPlaceErr(t, err, jserr.ClusterNoPeers, "no suitable peers for placement, tags not matched ['ssd']")
	_, err = Place(st, PlaceRequest{Replicas: 3, Cluster: "C1", Tags: []string{"!ssd", "!az:2"}})
	wantPlaceErr(t, err, jserr.ClusterNoPeers, "no suitable peers for placement, tags excluded ['az:2', 'ssd']")
	// A tag is named as the request wrote it (nats-server v2.15.2,
	// measured: "tags not matched ['GPU']").
	ssd := catalogue(t, map[string][]string{"s1": {"C1", "ssd"}, "s2": {"C1", "ssd", "az:2"}})
	_, err = Place(ssd, PlaceRequest{Replicas: 1, Cluster: "C1", Tags: []string{"SSD", "GPU"}})
	wantPlaceErr(t, err, jserr.ClusterNoPeers, "no suitable peers for placement, tags not matched ['GPU']")
	_, err = Place(st, PlaceRequest{Replicas: 3, Cluster: "C1", UniqueTag: "az:"})
	wantPlaceErr(t, err, jserr.ClusterNoPeers, "no suitable peers for placement, server tag not unique")
	// Enough servers, but a majority of them offline.
	_, err = Place(st, PlaceRequest{Replicas: 3, Cluster: "C1", Offline: map[raftnode.ServerID]bool{"s1": true, "s2": true}})
	wantPlaceErr(t, err, jserr.ClusterNoPeers, "no suitable peers for placement, peer offline")
	_, err = Place(st, PlaceRequest{Replicas: 1})
	wantPlaceErr(t, err, jserr.ClusterNoPeers, "no suitable peers for placement, miscellaneous issue")
	_, err = Place(NewState(), PlaceRequest{Replicas: 1, Cluster: "C1"})
	wantPlaceErr(t, err, jserr.ClusterNoPeers, "no suitable peers for placement, jetstream not enabled in cluster")
	// The "!jetstream" tag keeps streams off a server.
	ex := catalogue(t, map[string][]string{"s1": {"C1", "!jetstream"}})
	_, err = Place(ex, PlaceRequest{Replicas: 1, Cluster: "C1"})
	wantPlaceErr(t, err, jserr.ClusterNoPeers, "no suitable peers for placement, exclude tag set")
	if err.Code != 400 {
		t.Fatalf("HTTP code %d", err.Code)
	}
}

// The rules that choose: the cluster, tags (case-insensitive), unique
// tags, removed and excluded servers, existing servers first, online
// before offline, then load.
func TestPlaceRules(t *testing.T) {
	st := catalogue(t, map[string][]string{
		"s1": {"C1", "SSD", "az:1"}, "s2": {"C1", "az:1"}, "s3": {"C1", "ssd", "az:2"}, "s4": {"C1", "ssd", "az:3"}, "s5": {"C1", "az:3"}, "x1": {"C2", "ssd"},
	})
	got, err := Place(st, PlaceRequest{Replicas: 3, Cluster: "C1", Tags: []string{"ssd"}})
	if err != nil || !sameSet(got, "s1", "s3", "s4") {
		t.Fatalf("tags: %v %v", got, err)
	}
	got, err = Place(st, PlaceRequest{Replicas: 1, Cluster: "C2"})
	if err != nil || !slices.Equal(got, servers("x1")) {
		t.Fatalf("cluster: %v %v", got, err)
	}
	for seed := range uint64(20) {
		got, err = Place(st, PlaceRequest{Replicas: 3, Cluster: "C1", UniqueTag: "az:", Seed: seed})
		if err != nil || len(got) != 3 || !distinctAZ(st, got) {
			t.Fatalf("unique tag, seed %d: %v %v", seed, got, err)
		}
	}
	// A unique-tag prefix named in the tags switches the rule off.
	if got, err = Place(st, PlaceRequest{Replicas: 2, Cluster: "C1", UniqueTag: "az:", Tags: []string{"az:1"}}); err != nil || !sameSet(got, "s1", "s2") {
		t.Fatalf("unique tag listed: %v %v", got, err)
	}
	// Scale up keeps the existing servers first; a scale-down keeps the first.
	got, err = Place(st, PlaceRequest{Replicas: 3, Cluster: "C1", Existing: servers("s5"), Exclude: servers("s1", "s2")})
	if err != nil || got[0] != "s5" || !sameSet(got, "s5", "s3", "s4") {
		t.Fatalf("scale up: %v %v", got, err)
	}
	if got, _ = Place(st, PlaceRequest{Replicas: 1, Cluster: "C1", Existing: servers("s4", "s2", "s3")}); !slices.Equal(got, servers("s4")) {
		t.Fatalf("scale down: %v", got)
	}
	// Unique tags of existing servers are taken.
	if got, err = Place(st, PlaceRequest{Replicas: 3, Cluster: "C1", UniqueTag: "az:", Existing: servers("s1", "s3")}); err != nil || got[2] != "s4" && got[2] != "s5" {
		t.Fatalf("unique with existing: %v %v", got, err)
	}
	// Removed servers are never chosen.
	mustApply(t, st, &RemoveServer{Name: "s3"})
	if got, err = Place(st, PlaceRequest{Replicas: 3, Cluster: "C1", Tags: []string{"ssd"}}); err == nil {
		t.Fatalf("removed server chosen: %v", got)
	}
	// Offline servers come last, but count when needed and a quorum is online.
	off := map[raftnode.ServerID]bool{"s1": true, "s2": true}
	for seed := range uint64(10) {
		got, err = Place(st, PlaceRequest{Replicas: 3, Cluster: "C1", Offline: off, Seed: seed})
		if err != nil || !sameSet(got[:2], "s4", "s5") || !off[got[2]] {
			t.Fatalf("offline last, seed %d: %v %v", seed, got, err)
		}
	}
}

// Load spreads replicas: the least loaded servers first; ties go by the
// seed, the same way for the same seed, and different seeds reach
// different servers.
func TestPlaceSpreads(t *testing.T) {
	st := testState()
	req := PlaceRequest{Replicas: 1, Cluster: "C1"}
	firsts := map[raftnode.ServerID]bool{}
	for seed := range uint64(40) {
		req.Seed = seed
		a, _ := Place(st, req)
		b, _ := Place(st, req)
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d: %v then %v", seed, a, b)
		}
		firsts[a[0]] = true
	}
	if len(firsts) < 3 {
		t.Fatalf("seeds reach only %v", firsts)
	}
	// Five R3 streams placed one after another on five servers: each
	// server ends with 3 replicas.
	for i := range 5 {
		name := string(rune('A' + i))
		got, err := Place(st, PlaceRequest{Replicas: 3, Cluster: "C1", Seed: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		mustApply(t, st, &AssignStream{Account: "A", Name: name, Config: streamJSON(name, name), Servers: got})
	}
	for s, n := range st.Load() {
		if n != 3 {
			t.Fatalf("load %v (server %s)", st.Load(), s)
		}
	}
}

// A consumer's servers are its stream's: all of them at the stream's
// replica count, else online ones in an order drawn from the seed (every
// replica for some seed), those whose stream replica is fenced (Unfit)
// last, then caught-up ones first; too few online or more
// replicas than the stream: 10023.
func TestPlaceConsumer(t *testing.T) {
	st := testState()
	r := mustApply(t, st, &AssignStream{Account: "A", Name: "S", Config: streamJSON("S"), Servers: servers("s1", "s2", "s3")})
	sa := *r.Stream
	got, err := PlaceConsumer(st, sa, ConsumerPlaceRequest{Replicas: 3, Seed: 1})
	if err != nil || !slices.Equal(got, servers("s1", "s2", "s3")) {
		t.Fatalf("R3: %v %v", got, err)
	}
	chosen := map[raftnode.ServerID]bool{}
	for seed := range uint64(30) {
		got, err = PlaceConsumer(st, sa, ConsumerPlaceRequest{Replicas: 1, Seed: seed})
		if err != nil || len(got) != 1 {
			t.Fatalf("R1, seed %d: %v %v", seed, got, err)
		}
		chosen[got[0]] = true
		again, _ := PlaceConsumer(st, sa, ConsumerPlaceRequest{Replicas: 1, Seed: seed})
		if !slices.Equal(got, again) {
			t.Fatalf("seed %d chose %v, then %v", seed, got, again)
		}
		behind, _ := PlaceConsumer(st, sa, ConsumerPlaceRequest{Replicas: 1, Seed: seed, Behind: map[raftnode.ServerID]bool{"s1": true, "s2": true}})
		if !slices.Equal(behind, servers("s3")) {
			t.Fatalf("R1 prefers the caught-up replica, seed %d: %v", seed, behind)
		}
		unfit, _ := PlaceConsumer(st, sa, ConsumerPlaceRequest{Replicas: 1, Seed: seed, Unfit: map[raftnode.ServerID]bool{"s3": true}, Behind: map[raftnode.ServerID]bool{"s1": true, "s2": true}})
		if len(unfit) != 1 || unfit[0] == "s3" {
			t.Fatalf("R1 avoids the fenced stream replica before a lagging meta replica, seed %d: %v", seed, unfit)
		}
		two, _ := PlaceConsumer(st, sa, ConsumerPlaceRequest{Replicas: 2, Seed: seed, Unfit: map[raftnode.ServerID]bool{"s1": true}})
		if !sameSet(two, "s2", "s3") {
			t.Fatalf("R2 avoids the fenced stream replica, seed %d: %v", seed, two)
		}
	}
	if len(chosen) != 3 {
		t.Fatalf("R1 over 30 seeds chose only %v", chosen)
	}
	for seed := range uint64(10) {
		got, err = PlaceConsumer(st, sa, ConsumerPlaceRequest{Replicas: 1, Offline: map[raftnode.ServerID]bool{"s3": true}, Seed: seed})
		if err != nil || len(got) != 1 || got[0] == "s3" {
			t.Fatalf("R1 avoids offline: %v %v", got, err)
		}
	}
	_, err = PlaceConsumer(st, sa, ConsumerPlaceRequest{Replicas: 5})
	wantPlaceErr(t, err, jserr.InsufficientResources, "insufficient resources")
	_, err = PlaceConsumer(st, sa, ConsumerPlaceRequest{Replicas: 3, Offline: map[raftnode.ServerID]bool{"s1": true, "s2": true}})
	wantPlaceErr(t, err, jserr.InsufficientResources, "insufficient resources")
	_, err = PlaceConsumer(st, sa, ConsumerPlaceRequest{Replicas: 2, Offline: map[raftnode.ServerID]bool{"s1": true, "s2": true}})
	wantPlaceErr(t, err, jserr.InsufficientResources, "insufficient resources")
	// The choice applies.
	got, _ = PlaceConsumer(st, sa, ConsumerPlaceRequest{Replicas: 1})
	mustApply(t, st, &AssignConsumer{Account: "A", Stream: "S", Name: "C", Config: []byte(`{}`), Servers: got})
}

func sameSet(got []raftnode.ServerID, want ...string) bool {
	return len(got) == len(want) && !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(got, raftnode.ServerID(w)) })
}

func distinctAZ(st *State, got []raftnode.ServerID) bool {
	seen := map[string]bool{}
	for _, s := range got {
		sv, _ := st.Server(s)
		t, ok := uniqueTag(&sv, "az:")
		if !ok || seen[t] {
			return false
		}
		seen[t] = true
	}
	return true
}

// Eligible says whether a server could take a replica under a request:
// the move of a stream keeps its servers that are.
func TestEligible(t *testing.T) {
	st := catalogue(t, map[string][]string{"s1": {"C1", "ssd", "az:1"}, "s2": {"C1", "az:2"}, "x1": {"C2", "ssd", "az:3"}, "s3": {"C1", "ssd", "!jetstream"}})
	for _, c := range []struct {
		srv  string
		req  PlaceRequest
		want bool
	}{
		{"s1", PlaceRequest{Cluster: "C1", Tags: []string{"SSD"}}, true},
		{"s2", PlaceRequest{Cluster: "C1", Tags: []string{"ssd"}}, false},
		{"s2", PlaceRequest{Cluster: "C1", Tags: []string{"!ssd"}}, true},
		{"x1", PlaceRequest{Cluster: "C1", Tags: []string{"ssd"}}, false},
		{"s3", PlaceRequest{Cluster: "C1"}, false},
		{"s1", PlaceRequest{Cluster: "C1", UniqueTag: "rack:"}, false},
		{"s1", PlaceRequest{Cluster: "C1", UniqueTag: "az:"}, true},
		{"nobody", PlaceRequest{Cluster: "C1"}, false},
	} {
		if got := Eligible(st, c.req, raftnode.ServerID(c.srv)); got != c.want {
			t.Errorf("Eligible(%s, %+v) = %v, want %v", c.srv, c.req, got, c.want)
		}
	}
}
