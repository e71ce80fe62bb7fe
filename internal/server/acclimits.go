package server

import (
	"time"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/protocol"
)

// Connection, subscription and payload limits of accounts and users
// (docs/security.md, "Limits"; nats-server v2.15.2 client.go
// applyAccountLimits, registerWithAccount, processSubEx, processPub):
//
//   - An account's limits come from its limits block (max_connections,
//     max_subscriptions, max_payload) or from its JWT (conn, subs,
//     payload); a user's from its JWT (subs, payload). -1 is no limit;
//     any other value is used as given.
//   - A client's payload and subscription limits are the smallest of its
//     user's, its account's and the server's (max_payload;
//     max_subscriptions, where 0 is no limit). They are set when it
//     authenticates, so the INFO with connect_info and later async INFOs
//     carry its max_payload; the first INFO carries the server's.
//   - A PUB or HPUB above the client's payload limit gets
//     -ERR 'Maximum Payload Violation' and the connection closes. A SUB
//     beyond its subscription limit gets -ERR 'maximum subscriptions
//     exceeded' and the connection stays open; a limit the client is at
//     with no subscription (0) closes it at CONNECT.
//   - A client that authenticates into an account holding its
//     max_connections clients on this server gets -ERR 'maximum account
//     active connections exceeded' and is closed. nats-server counts the
//     account's clients on the other servers of a cluster too (from the
//     system account's connection events); cairn counts this server's
//     (docs/compatibility.md).

// errAccountConns closes a client whose account holds its maximum of
// connections (nats-server ErrTooManyAccountConnections).
var errAccountConns = &protocol.Error{Text: "maximum account active connections exceeded", Close: true}

// errSubsAtConnect closes a client whose subscription limit leaves it
// none (nats-server applyAccountLimits).
var errSubsAtConnect = &protocol.Error{Text: "maximum subscriptions exceeded", Close: true}

// noLimit is the value of a limit that limits nothing (jwt.NoLimit).
const noLimit = config.NoLimit

// accountLimitsOf returns an account's limits; none for nil.
func accountLimitsOf(l *config.AccountLimits) config.AccountLimits {
	if l == nil {
		return config.AccountLimits{MaxConnections: noLimit, MaxSubscriptions: noLimit, MaxPayload: noLimit}
	}
	return *l
}

// clamp32 is nats-server's clampInt64ToInt32, for a JWT's limits.
func clamp32(n int64) int32 {
	return int32(min(max(n, -1<<31), 1<<31-1))
}

// minLimit lowers *v to limit when limit limits more (nats-server
// minLimit: noLimit limits nothing).
func minLimit(v *int32, limit int32) {
	if limit != noLimit && (*v == noLimit || limit < *v) {
		*v = limit
	}
}

// applyAccountLimits sets the limits of the client authenticated as u in
// its account c.acc, and counts it among the account's connections. It
// returns errAccountConns or errSubsAtConnect, which close the client:
// at a CONNECT when it may hold no subscription at all; after a reload
// (reloaded) also when it holds more than it now may. nats-server
// v2.15.2 closes a client at a reload when it holds as many
// subscriptions as it may, at every reload; cairn keeps a client whose
// subscriptions are within its limit (docs/compatibility.md). It runs
// on the read loop.
func (c *client) applyAccountLimits(u *auth.User, reloaded bool) error {
	pay, subs := int32(noLimit), int32(noLimit)
	if u.Limits != nil {
		pay, subs = u.Limits.Payload, u.Limits.Subs
	}
	lim := c.acc.limits()
	minLimit(&pay, lim.MaxPayload)
	minLimit(&subs, lim.MaxSubscriptions)
	if ms := c.srv.opts.MaxSubs; ms != 0 {
		minLimit(&subs, clamp32(int64(ms)))
	}
	c.accPay, c.msubs = pay, subs
	c.lim = nil // refreshLimits gives the parser the client's payload limit
	c.refreshLimits()
	if err := c.countConnection(); err != nil {
		return err
	}
	if c.subsAtLimit() && (!reloaded || c.msubs == 0 || c.subsOverLimit()) {
		c.setReason(ReasonMaxSubscriptionsExceeded)
		c.log.Errorf("%s - cid:%d - maximum subscriptions exceeded", c.addr, c.cid)
		return errSubsAtConnect
	}
	return nil
}

// countConnection counts the client among its account's connections,
// once (a second CONNECT into another account moves it), refusing it
// when the account holds its max_connections.
func (c *client) countConnection() error {
	if c.counted == c.acc {
		return nil
	}
	c.uncount()
	acc := c.acc
	for {
		n := acc.nconns.Load()
		if max := acc.limits().MaxConnections; max != noLimit && n >= max {
			c.setReason(ReasonMaxAccountConnectionsExceeded)
			c.log.Errorf("%s - cid:%d - maximum account active connections exceeded", c.addr, c.cid)
			return errAccountConns
		}
		if acc.nconns.CompareAndSwap(n, n+1) {
			break
		}
	}
	c.counted = acc
	return nil
}

// uncount removes the client from the connections of the account it was
// counted in. It runs on the read loop, or in teardown after it.
func (c *client) uncount() {
	if c.counted != nil {
		c.counted.nconns.Add(-1)
		c.counted = nil
	}
}

// subsAtLimit reports whether the client holds as many subscriptions as
// it may. It runs on the read loop.
func (c *client) subsAtLimit() bool {
	if c.msubs == noLimit {
		return false
	}
	c.mu.Lock()
	n := len(c.subs)
	c.mu.Unlock()
	return n >= int(c.msubs)
}

// subsOverLimit reports whether the client holds more subscriptions than
// it may. It runs on the read loop.
func (c *client) subsOverLimit() bool {
	if c.msubs == noLimit {
		return false
	}
	c.mu.Lock()
	n := len(c.subs)
	c.mu.Unlock()
	return n > int(c.msubs)
}

// payloadLimit is the client's payload limit with the server's l: the
// max_payload of its INFO and of its parser.
func (c *client) payloadLimit(l *limits) int32 {
	pay := c.accPay
	minLimit(&pay, clamp32(int64(l.MaxPayload)))
	return pay
}

// subsLogEvery paces the log of an account's subscription limit errors
// (nats-server accounts.go defaultMaxSubLimitReportThreshold).
const subsLogEvery = 2 * time.Second

// maxSubsExceeded refuses a SUB beyond the client's limit with
// -ERR 'maximum subscriptions exceeded'; the connection stays open
// (nats-server client.go maxSubsExceeded). The [ERR] log line is written
// at most once every subsLogEvery per account.
func (c *client) maxSubsExceeded() {
	now := time.Now().UnixNano()
	if last := c.acc.lastSubsLog.Load(); now-last >= int64(subsLogEvery) && c.acc.lastSubsLog.CompareAndSwap(last, now) {
		c.log.Errorf("%s - cid:%d - maximum subscriptions exceeded", c.addr, c.cid)
	}
	c.sendErr("maximum subscriptions exceeded")
}
