package server

import (
	"strings"
	"testing"
)

// shadowCluster is a cluster with no routes whose account B imports the
// stream ev.> of A as is and the stream ev.> of C under the prefix c.
func shadowCluster() (*Server, *cluster) {
	cl := newCluster(&ClusterOptions{Host: "127.0.0.1", Port: RandomPort, Name: "T"})
	s := &Server{cl: cl}
	s.shadowImports(&account{name: "B"}, []*streamImport{
		{exporter: "A", from: "ev.>", local: "ev.>"},
		{exporter: "C", from: "ev.>", local: "c.ev.>"},
	})
	return s, cl
}

// announcedIn is what the peers are told account acc's interest is, one
// RS+ line a subject and queue group, sorted.
func announcedIn(cl *cluster, acc string) string {
	in := cl.interest[acc]
	if in == nil {
		return ""
	}
	return strings.TrimSuffix(strings.ReplaceAll(string(in.AppendAll(nil)), "\r\n", "|"), "|")
}

// An announced subscription of an account that imports streams is also
// announced in each exporter whose import it overlaps, on nats-server's
// shadow subject (mapped back through a prefix), with its queue group and
// weight; it is withdrawn with the subscription, and moves when the
// imports change (a reload).
func TestShadowInterest(t *testing.T) {
	s, cl := shadowCluster()
	add := func(acc, subj, queue string) {
		cl.mu.Lock()
		cl.addInterestLocked(acc, subj, queue)
		cl.mu.Unlock()
	}
	remove := func(acc, subj, queue string) {
		cl.mu.Lock()
		cl.removeInterestLocked(acc, subj, queue)
		cl.mu.Unlock()
	}
	want := func(what, acc, lines string) {
		t.Helper()
		if got := announcedIn(cl, acc); got != lines {
			t.Fatalf("%s: %s announces %q, want %q", what, acc, got, lines)
		}
	}
	add("B", "ev.x", "")
	add("B", "c.ev.y", "")
	add("B", "other", "")
	add("B", "ev.q", "g")
	add("B", "ev.q", "g")
	want("subscribed", "B", "RS+ B c.ev.y|RS+ B ev.q g 2|RS+ B ev.x|RS+ B other")
	want("subscribed", "A", "RS+ A ev.q g 2|RS+ A ev.x")
	want("subscribed", "C", "RS+ C ev.y")

	remove("B", "ev.x", "")
	remove("B", "ev.q", "g")
	want("unsubscribed", "A", "RS+ A ev.q g 1")
	remove("A", "ev.q", "g") // A's own interest in what B shadows is A's to count
	want("another account's removal", "A", "RS+ A ev.q g 1")

	// A reload: B now imports only C's ev.> as is.
	s.shadowImports(&account{name: "B"}, []*streamImport{{exporter: "C", from: "ev.>", local: "ev.>"}})
	want("imports changed", "A", "")
	want("imports changed", "C", "RS+ C ev.q g 1")
	s.shadowImports(&account{name: "B"}, nil)
	want("imports removed", "C", "")
	want("imports removed", "B", "RS+ B c.ev.y|RS+ B ev.q g 1|RS+ B other")
}
