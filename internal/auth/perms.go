package auth

import (
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/subject"
	"github.com/cairnmq/cairn/internal/sublist"
)

// Perms are one user's permissions, compiled from config.Permissions:
// what it may publish, what it may subscribe to, and which subscriptions
// must have their deliveries filtered. A Perms is immutable and shared by
// every connection of the user; all methods are safe for concurrent use.
// A nil *Perms allows everything.
type Perms struct {
	pubAllow *sublist.Sublist[int] // nil: every subject
	pubDeny  *sublist.Sublist[int] // nil: none
	subAllow []entry               // nil: every subject and queue
	subDeny  []entry
	// deliverDeny holds subDeny for the filter applied at delivery to a
	// subscription that overlaps a deny entry (DeniedDelivery); nil when
	// subDeny is empty.
	deliverDeny *sublist.Sublist[int]
	resp        *config.ResponsePermission
	listed      *config.Permissions // Listed's answer
}

// entry is a subscribe permission entry: a subject pattern and an
// optional queue group (itself a pattern when it has wildcards).
type entry struct {
	subject, queue string
}

// NewPerms compiles p; nil gives nil (everything allowed). The entries
// were checked by config (config.CheckPermissionSubjects); an entry that
// is not valid anyway is dropped.
func NewPerms(p *config.Permissions) *Perms {
	if p == nil {
		return nil
	}
	ps := &Perms{resp: p.Response, listed: &config.Permissions{
		Publish: &config.SubjectPermission{}, Subscribe: &config.SubjectPermission{}, Response: p.Response}}
	if pub := p.Publish; pub != nil {
		if pub.Allow != nil {
			ps.pubAllow = subjectList(pub.Allow)
		}
		if len(pub.Deny) > 0 {
			ps.pubDeny = subjectList(pub.Deny)
		}
		ps.listed.Publish.Allow, ps.listed.Publish.Deny = publishListed(pub.Allow), publishListed(pub.Deny)
	}
	if sub := p.Subscribe; sub != nil {
		if sub.Allow != nil {
			ps.subAllow = entries(sub.Allow)
		}
		ps.subDeny = entries(sub.Deny)
		ps.listed.Subscribe.Allow, ps.listed.Subscribe.Deny = subscribeListed(ps.subAllow), subscribeListed(ps.subDeny)
		if len(ps.subDeny) > 0 {
			ps.deliverDeny = sublist.New[int]()
			for i, e := range ps.subDeny {
				_ = ps.deliverDeny.Insert(e.subject, e.queue, i)
			}
		}
	}
	return ps
}

// Listed returns the permissions in force as nats-server v2.15.2 lists
// them in $SYS.REQ.USER.INFO (client.go publicPermissions): Publish and
// Subscribe always set, their Allow and Deny nil when empty, publish
// entries as subjects, subscribe entries as "subject" or "subject queue",
// in the configured order; Response as configured. nil for nil. The
// result is shared: callers must not modify it.
func (p *Perms) Listed() *config.Permissions {
	if p == nil {
		return nil
	}
	return p.listed
}

// publishListed lists publish entries: their subjects (a queue written
// after one is dropped, as the check drops it), nil for none.
func publishListed(list []string) []string {
	var out []string
	for _, s := range list {
		if f := strings.Fields(s); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}

// subscribeListed lists subscribe entries, nil for none.
func subscribeListed(list []entry) []string {
	var out []string
	for _, e := range list {
		if e.queue != "" {
			out = append(out, e.subject+" "+e.queue)
		} else {
			out = append(out, e.subject)
		}
	}
	return out
}

// subjectList indexes publish permission subjects; a queue group written
// after a publish subject (meaningless) is dropped, the subject kept.
func subjectList(list []string) *sublist.Sublist[int] {
	sl := sublist.New[int]()
	for i, s := range list {
		if f := strings.Fields(s); len(f) > 0 {
			_ = sl.Insert(f[0], "", i)
		}
	}
	return sl
}

// entries splits "subject [queue]" permission entries.
func entries(list []string) []entry {
	out := make([]entry, 0, len(list))
	for _, s := range list {
		f := strings.Fields(s)
		switch {
		case len(f) == 1 && subject.ValidSubject(f[0]):
			out = append(out, entry{subject: f[0]})
		case len(f) == 2 && subject.ValidSubject(f[0]) && subject.ValidQueue(f[1]):
			out = append(out, entry{subject: f[0], queue: f[1]})
		}
	}
	return out
}

// Restricted reports whether p limits publishing at all: a connection
// without publish restrictions skips the check (and its cache).
func (p *Perms) Restricted() bool {
	return p != nil && (p.pubAllow != nil || p.pubDeny != nil)
}

// CanPublish reports whether the user may publish to subj: an allow entry
// matches it (or there is no allow list) and no deny entry does; deny
// beats allow (nats-server v2.15.2 pubAllowedFullCheck). subj is matched
// as nats-server matches it, a wildcard token in it matching only a
// wildcard of an entry. Replies allowed by allow_responses are the
// caller's to check (Responses).
func (p *Perms) CanPublish(subj []byte) bool {
	if p == nil {
		return true
	}
	if p.pubAllow != nil && !p.pubAllow.HasInterest(subj) {
		return false
	}
	return p.pubDeny == nil || !p.pubDeny.HasInterest(subj)
}

// CanSubscribe reports whether the user may subscribe to subj, in queue
// group queue when queue is not "" (nats-server v2.15.2
// canSubscribeInternal):
//
//   - allow: a plain subscription needs a plain allow entry covering
//     subj; a queue subscription too, but when queue allow entries cover
//     subj, queue must be one of their queues (a queue entry's queue may
//     be a pattern: "v1.*" allows "v1.blue").
//   - deny: a plain deny entry matching subj denies every subscription to
//     it; a queue deny entry matching subj denies the queue groups it
//     names. Deny beats allow.
//
// "Covering" is set containment: every subject subj can match is matched
// by the entry (subject.SubsetOf). nats-server instead matches subj
// against the entry as if subj were a published subject, so an allow
// "foo.*" lets it subscribe to "foo.>" and then receive "foo.a.b", which
// the entry does not allow; cairn refuses that subscription
// (docs/security.md, docs/compatibility.md). A deny entry "matches" subj
// the way nats-server matches it (subject.Match: "foo.*" matches the
// subscription "foo.>"), which denies more, never less.
func (p *Perms) CanSubscribe(subj, queue string) bool {
	if p == nil {
		return true
	}
	if p.subAllow != nil && !p.allowedSub(subj, queue) {
		return false
	}
	return !p.deniedSub(subj, queue)
}

// allowedSub applies the allow list.
func (p *Perms) allowedSub(subj, queue string) bool {
	plain, queued, queueOK := false, false, false
	for _, e := range p.subAllow {
		if !subject.SubsetOf(subj, e.subject) {
			continue
		}
		if e.queue == "" {
			plain = true
			continue
		}
		queued = true
		queueOK = queueOK || queueMatches(queue, e.queue)
	}
	if queue != "" && queued {
		return queueOK
	}
	return plain
}

// deniedSub applies the deny list at subscribe time. A plain deny
// matching subj denies whatever the queue; a queue deny only its queues
// (the two combine: nats-server advisory 2026-18 was a queue deny
// overriding a plain one).
func (p *Perms) deniedSub(subj, queue string) bool {
	for _, e := range p.subDeny {
		if !subject.Match(subj, e.subject) {
			continue
		}
		if e.queue == "" || (queue != "" && queueMatches(queue, e.queue)) {
			return true
		}
	}
	return false
}

// queueMatches reports whether the queue group queue is named by the
// permission's queue q: the same name, or a name q matches as a pattern
// (nats-server v2.15.2 queueMatches).
func queueMatches(queue, q string) bool {
	return queue == q || (strings.ContainsAny(q, "*>") && subject.SubsetOf(queue, q))
}

// NeedsFilter reports whether deliveries to a subscription to subj (in
// queue) must be checked one by one with DeniedDelivery: it may receive a
// subject a deny entry names without being denied itself (a wildcard
// subscription overlapping a deny entry, or a queue subscription where
// queue deny entries exist). nats-server v2.15.2 loadMsgDenyFilterIfNeeded;
// cairn decides per subscription, not per connection.
func (p *Perms) NeedsFilter(subj, queue string) bool {
	if p == nil || len(p.subDeny) == 0 {
		return false
	}
	if !subject.IsLiteral(subj) || queue != "" {
		for _, e := range p.subDeny {
			if subject.Overlap(subj, e.subject) {
				return true
			}
		}
	}
	return false
}

// DeniedDelivery reports whether a message on the subject subj (the
// subject the subscriber sees) may not be delivered to a subscription in
// queue group queue ("" for a plain one): a plain deny entry matches subj,
// or a queue deny entry matches subj and names queue (nats-server v2.15.2
// checkDenySub; advisories CVE-2022-29946 and 2026-17: deny filters
// delivery, not only the SUB).
func (p *Perms) DeniedDelivery(subj []byte, queue string) bool {
	if p == nil || p.deliverDeny == nil {
		return false
	}
	r := p.deliverDeny.Match(subj)
	if len(r.Plain) > 0 {
		return true
	}
	if queue == "" {
		return false
	}
	for _, q := range r.Queues {
		if queueMatches(queue, q.Name) {
			return true
		}
	}
	return false
}

// Responses returns the allow_responses limits: how many replies, for how
// long; ok is false when the user has none.
func (p *Perms) Responses() (maxMsgs int, expires time.Duration, ok bool) {
	if p == nil || p.resp == nil {
		return 0, 0, false
	}
	return p.resp.MaxMsgs, p.resp.Expires, true
}
