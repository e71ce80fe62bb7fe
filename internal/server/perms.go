package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/auth"
)

// Permissions of client connections (docs/security.md; nats-server v2.15.2
// client.go pubAllowedFullCheck, processSubEx, deliverMsg):
//
//   - a PUB the user may not send gets -ERR 'Permissions Violation for
//     Publish to "<subject>"' and is dropped; the connection stays open.
//     Each connection caches the answers for up to pubCacheMax subjects
//     (its read loop owns the cache), so a publisher pays for the check
//     once per subject.
//   - a SUB the user may not make gets -ERR 'Permissions Violation for
//     Subscription to "<subject>"' (with ` using queue "<queue>"`) and is
//     not made.
//   - a subscription that may receive a denied subject (a wildcard
//     overlapping a deny entry) has its deliveries checked one by one
//     (subscription.deny), so nothing denied is ever delivered, whoever
//     publishes it (a client, JetStream, a peer server).
//   - allow_responses: a message with a reply delivered to such a user
//     lets it publish to that reply, up to the configured count and age
//     (replyPerms).

// pubCacheMax bounds a connection's publish permission cache; when it is
// full, pubCachePrune entries are dropped (nats-server maxPermCacheSize,
// pruneSize).
const (
	pubCacheMax   = 128
	pubCachePrune = 32
)

// sysQueue is the queue group name reserved for the server's own
// subscriptions; a client may not use it (nats-server sysGroup).
const sysQueue = "_sys_"

// mayPublish reports whether c's user may publish to subj: its publish
// permissions, or a reply allow_responses lets it send. It runs on c's
// read loop.
func (c *client) mayPublish(subj []byte) bool {
	u := c.user
	if u == nil || !u.Perms.Restricted() {
		return true
	}
	if ok, hit := c.pubCache[string(subj)]; hit {
		return ok
	}
	ok := u.Perms.CanPublish(subj)
	if !ok {
		if rp := c.replies.Load(); rp != nil {
			return rp.allow(string(subj)) // never cached: it changes with each reply
		}
	}
	if c.pubCache == nil {
		c.pubCache = make(map[string]bool, pubCacheMax)
	}
	if len(c.pubCache) >= pubCacheMax {
		n := 0
		for k := range c.pubCache {
			delete(c.pubCache, k)
			if n++; n >= pubCachePrune {
				break
			}
		}
	}
	c.pubCache[string(subj)] = ok
	return ok
}

// pubViolation refuses a PUB.
func (c *client) pubViolation(subj []byte) {
	c.sendErr(fmt.Sprintf("Permissions Violation for Publish to %q", subj))
	c.log.Errorf("%s - cid:%d - Publish Violation - Subject %q", c.addr, c.cid, subj)
}

// maySubscribe reports whether c's user may subscribe to subj in queue.
func (c *client) maySubscribe(subj, queue []byte) bool {
	if string(queue) == sysQueue {
		return false
	}
	u := c.user
	return u == nil || u.Perms.CanSubscribe(string(subj), string(queue))
}

// subViolation refuses a SUB.
func (c *client) subViolation(subj, queue, sid []byte) {
	if len(queue) > 0 {
		c.sendErr(fmt.Sprintf("Permissions Violation for Subscription to %q using queue %q", subj, queue))
		c.log.Errorf("%s - cid:%d - Subscription Violation - Subject %q, Queue: %q, SID %s", c.addr, c.cid, subj, queue, sid)
		return
	}
	c.sendErr(fmt.Sprintf("Permissions Violation for Subscription to %q", subj))
	c.log.Errorf("%s - cid:%d - Subscription Violation - Subject %q, SID %s", c.addr, c.cid, subj, sid)
}

// denyFilter returns the permissions a new subscription's deliveries must
// be checked against, or nil when nothing it can receive is denied.
func (c *client) denyFilter(subj, queue string) *auth.Perms {
	if u := c.user; u != nil && u.Perms.NeedsFilter(subj, queue) {
		return u.Perms
	}
	return nil
}

// deniedDelivery reports whether sub's permissions deny a delivery on
// subj (its delivery filter, set when it overlaps a deny entry).
func deniedDelivery(sub *subscription, subj []byte) bool {
	d := sub.deny.Load()
	return d != nil && d.DeniedDelivery(subj, sub.queue)
}

// Bounds of a connection's allow_responses table: it is pruned of used
// and expired replies after replyPruneEvery new ones or replyPruneAfter
// (nats-server replyPermLimit, replyPruneTime); beyond replyMax live
// replies (an unlimited count and age), the oldest are dropped, so a
// client receiving requests forever does not grow the server's memory
// forever (nats-server does not bound it).
const (
	replyPruneEvery = 4096
	replyPruneAfter = time.Second
	replyMax        = 1 << 16
)

// replyPerms is a connection's allow_responses state: the reply subjects
// of messages delivered to it, each with when it came and how many times
// the client answered. Publishers' goroutines record replies, the
// client's read loop consumes them; mu guards the table.
type replyPerms struct {
	perms   *auth.Perms
	max     int           // answers per reply; <= 0 unlimited
	expires time.Duration // age of a reply; <= 0 forever
	now     func() time.Time

	mu         sync.Mutex
	grants     map[string]*replyGrant
	sincePrune int
	lastPrune  time.Time
}

type replyGrant struct {
	at time.Time
	n  int
}

// newReplyPerms returns the allow_responses state of a user, or nil when
// it has none.
func newReplyPerms(u *auth.User, now func() time.Time) *replyPerms {
	if u == nil {
		return nil
	}
	max, expires, ok := u.Perms.Responses()
	if !ok {
		return nil
	}
	return &replyPerms{perms: u.Perms, max: max, expires: expires, now: now, grants: map[string]*replyGrant{}, lastPrune: now()}
}

// record notes a reply subject delivered to the client, unless it may
// publish there anyway. Any goroutine may call it.
func (rp *replyPerms) record(reply []byte) {
	if rp.perms.CanPublish(reply) {
		return
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	now := rp.now()
	rp.grants[string(reply)] = &replyGrant{at: now}
	rp.sincePrune++
	if rp.sincePrune > replyPruneEvery || now.Sub(rp.lastPrune) > replyPruneAfter {
		rp.pruneLocked(now)
	}
	if len(rp.grants) > replyMax {
		rp.evictOldestLocked(now)
	}
}

// allow reports whether the client may answer to subj, and counts it.
func (rp *replyPerms) allow(subj string) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	g := rp.grants[subj]
	if g == nil {
		return false
	}
	g.n++
	if (rp.max > 0 && g.n > rp.max) || (rp.expires > 0 && rp.now().Sub(g.at) > rp.expires) {
		delete(rp.grants, subj)
		return false
	}
	return true
}

// pruneLocked drops used-up and expired replies. It scans the table, at
// most once per replyPruneEvery replies or replyPruneAfter.
func (rp *replyPerms) pruneLocked(now time.Time) {
	for k, g := range rp.grants {
		if (rp.max > 0 && g.n >= rp.max) || (rp.expires > 0 && now.Sub(g.at) > rp.expires) {
			delete(rp.grants, k)
		}
	}
	rp.sincePrune, rp.lastPrune = 0, now
}

// evictOldestLocked drops the oldest of a sample of 64 replies (the map's
// order is random): constant work per reply once the table is full.
func (rp *replyPerms) evictOldestLocked(now time.Time) {
	oldest, at, n := "", now, 0
	for k, g := range rp.grants {
		if oldest == "" || g.at.Before(at) {
			oldest, at = k, g.at
		}
		if n++; n >= 64 {
			break
		}
	}
	delete(rp.grants, oldest)
}
