package server

import "github.com/cairnmq/cairn/internal/subject"

// Shadow interest across routes (nats-server v2.15.2 client.go
// addShadowSubscriptions, addShadowSub). A stream import of subject S
// from account A into account B is an internal subscription to S in A on
// every server (imports.go); that subscription is not announced to the
// peers. Instead, each announced subscription of B whose subject
// overlaps the import's local subject is announced in A as well, on the
// subject nats-server gives its shadow subscription
// (streamImport.exporterSubject), with the same queue group. So A's
// messages cross a route to this server only while something here can
// take them into B: a push consumer of A delivering into an import that
// nothing on any server subscribes sees no interest and goes after its
// inactive_threshold, as in nats-server (an external source's consumer
// left by a stream leader that was killed; docs/external-sourcing.md).
//
// The cluster counts each account's announced subscriptions per
// (subject, queue) (direct) with the shadows announced for them, and
// keeps each account's stream imports (shadowImports): a reload that
// changes an account's imports moves the shadows of its subscriptions
// to the new imports. Everything here is guarded by cluster.mu, and the
// RS+ and RS- lines go out through cluster.lineBuf with the others
// (interest.go).

// subKey is a subject and queue group of an account's interest.
type subKey struct{ subject, queue string }

// shadow is one subscription's interest announced in an exporting
// account.
type shadow struct{ acc, subject, queue string }

// directSubs are an account's announced subscriptions, by subject and
// queue group.
type directSubs map[subKey]directInterest

// directInterest is an account's announced subscriptions on one subject
// and queue group: how many, and the shadows each of them announces.
type directInterest struct {
	n       int
	shadows []shadow
}

// addInterestLocked counts one more announced subscription of acc on
// subj (queue group queue, or plain) and appends its line and its
// shadows' lines to cluster.lineBuf. cluster.mu is held.
func (cl *cluster) addInterestLocked(acc, subj, queue string) {
	k := subKey{subj, queue}
	byKey := cl.direct[acc]
	if byKey == nil {
		byKey = make(directSubs)
		cl.direct[acc] = byKey // kept once empty: an account's subscriptions come and go
	}
	d, ok := byKey[k]
	if !ok {
		d.shadows = cl.shadowsOfLocked(acc, subj, queue)
	}
	d.n++
	byKey[k] = d
	cl.lineBuf = cl.interestOfLocked(acc).Add(cl.lineBuf, subj, queue)
	for _, sh := range d.shadows {
		cl.lineBuf = cl.interestOfLocked(sh.acc).Add(cl.lineBuf, sh.subject, sh.queue)
	}
}

// removeInterestLocked undoes addInterestLocked; removing what was never
// added changes nothing (the counts of acc may hold shadows of another
// account's subscriptions). cluster.mu is held.
func (cl *cluster) removeInterestLocked(acc, subj, queue string) {
	k := subKey{subj, queue}
	byKey := cl.direct[acc]
	d, ok := byKey[k]
	if !ok {
		return
	}
	cl.lineBuf = cl.interestOfLocked(acc).Remove(cl.lineBuf, subj, queue)
	for _, sh := range d.shadows {
		cl.lineBuf = cl.interestOfLocked(sh.acc).Remove(cl.lineBuf, sh.subject, sh.queue)
	}
	if d.n--; d.n == 0 {
		delete(byKey, k)
	} else {
		byKey[k] = d
	}
}

// shadowsOfLocked returns the shadows of a subscription of acc on subj:
// one in the exporter of each stream import of acc whose local subject
// subj overlaps. cluster.mu is held.
func (cl *cluster) shadowsOfLocked(acc, subj, queue string) []shadow {
	var out []shadow
	for _, si := range cl.imports[acc] {
		if si.exporter != acc && subject.Overlap(subj, si.local) {
			out = append(out, shadow{si.exporter, si.exporterSubject(subj), queue})
		}
	}
	return out
}

// shadowImports makes imps the stream imports of acc that its announced
// subscriptions are shadowed for (installImports; nil when they are
// removed): the shadows of the subscriptions acc has are withdrawn and
// announced again for imps.
func (s *Server) shadowImports(acc *account, imps []*streamImport) {
	cl := s.cl
	if cl == nil {
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.lineBuf = cl.lineBuf[:0]
	direct := cl.direct[acc.name]
	for _, d := range direct {
		cl.shadowLinesLocked(d, false)
	}
	if len(imps) == 0 {
		delete(cl.imports, acc.name)
	} else {
		cl.imports[acc.name] = imps
	}
	for k, d := range direct {
		d.shadows = cl.shadowsOfLocked(acc.name, k.subject, k.queue)
		direct[k] = d
		cl.shadowLinesLocked(d, true)
	}
	s.sendInterestLocked()
}

// shadowLinesLocked announces (add) or withdraws the shadows of d's
// subscriptions, appending the lines to cluster.lineBuf. cluster.mu is
// held.
func (cl *cluster) shadowLinesLocked(d directInterest, add bool) {
	for range d.n {
		for _, sh := range d.shadows {
			in := cl.interestOfLocked(sh.acc)
			if add {
				cl.lineBuf = in.Add(cl.lineBuf, sh.subject, sh.queue)
			} else {
				cl.lineBuf = in.Remove(cl.lineBuf, sh.subject, sh.queue)
			}
		}
	}
}
