package monitor

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/server"
)

// DefaultConnListSize is /connz's default limit (nats-server
// DefaultConnListSize).
const DefaultConnListSize = 1024

// globalAccount is the account of clients without one, named as
// nats-server names its default account.
const globalAccount = "$G"

// connState selects open, closed or all connections.
type connState int

const (
	connOpen connState = iota
	connClosed
	connAll
)

// connzOptions are /connz's query options (nats-server ConnzOptions).
type connzOptions struct {
	sort         string
	auth         bool
	subs, detail bool
	offset       int
	limit        int
	cid          uint64
	state        connState
	user, acc    string
	mqttClient   string
}

func connzQuery(q *query) connzOptions {
	o := connzOptions{sort: q.str("sort"), user: q.str("user"), acc: q.str("acc"), mqttClient: q.str("mqtt_client")}
	o.auth = q.boolean("auth")
	o.subs, o.detail = q.subs()
	o.offset = q.integer("offset")
	o.limit = q.integer("limit")
	o.cid = q.uint64("cid")
	switch s := strings.ToLower(q.str("state")); s {
	case "", "open":
	case "closed":
		o.state = connClosed
	case "any", "all":
		o.state = connAll
	default:
		if q.err == nil {
			q.err = fmt.Errorf("Error decoding state for %s", q.str("state"))
		}
	}
	return o
}

// sortOrders are the valid sort options.
var sortOrders = map[string]bool{
	"": true, "cid": true, "start": true, "subs": true, "pending": true, "msgs_to": true,
	"msgs_from": true, "bytes_to": true, "bytes_from": true, "last": true, "idle": true,
	"uptime": true, "stop": true, "reason": true, "rtt": true,
}

// handleConnz serves /connz (nats-server v2.15.2 monitor.go Connz).
func (m *Monitor) handleConnz(w http.ResponseWriter, r *http.Request) {
	q := &query{r: r}
	o := connzQuery(q)
	if q.bad(w) {
		return
	}
	c, err := m.connz(o)
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (m *Monitor) connz(o connzOptions) (*Connz, error) {
	if !sortOrders[o.sort] {
		return nil, fmt.Errorf("invalid sorting option: %s", o.sort)
	}
	if o.sort == "stop" && o.state != connClosed {
		return nil, fmt.Errorf("sort by stop only valid on closed connections")
	}
	if o.sort == "reason" && o.state != connClosed {
		return nil, fmt.Errorf("sort by reason only valid on closed connections")
	}
	o.offset = max(o.offset, 0)
	if o.limit <= 0 {
		o.limit = DefaultConnListSize
	}
	if o.cid > 0 {
		o.limit = 1
	}
	now := time.Now().UTC()
	cz := &Connz{ID: m.srv.ID(), Now: now, Offset: o.offset, Limit: o.limit, Conns: []*ConnInfo{}}
	list := m.connList(o)
	cz.Total = len(list)
	if o.cid > 0 {
		list = slices.DeleteFunc(list, func(ci server.ConnInfo) bool { return ci.CID != o.cid })
		cz.Total = len(list)
	}
	conns := make([]*ConnInfo, 0, len(list))
	for i := range list {
		conns = append(conns, connInfo(&list[i], now, o, m.srv.AccountNameTag))
	}
	sortConns(conns, o.sort, now)
	lo, hi := page(len(conns), o.offset, o.limit)
	cz.Conns = conns[lo:hi]
	cz.NumConns = len(cz.Conns)
	return cz, nil
}

// connList returns the connections the state and user filters select.
func (m *Monitor) connList(o connzOptions) []server.ConnInfo {
	var list []server.ConnInfo
	withSubs := o.subs || o.detail
	if o.state == connOpen || o.state == connAll {
		list = append(list, m.srv.Connections(withSubs)...)
	}
	if o.state == connClosed || o.state == connAll {
		list = append(list, m.srv.ClosedConnections()...)
	}
	return slices.DeleteFunc(list, func(ci server.ConnInfo) bool {
		// No client is MQTT: an mqtt_client filter matches nothing.
		return o.acc != "" && ci.Account != o.acc || o.user != "" && ci.User != o.user || o.mqttClient != ""
	})
}

// connInfo converts a snapshot to /connz's shape; tag gives an account's
// name tag (Server.AccountNameTag).
func connInfo(c *server.ConnInfo, now time.Time, o connzOptions, tag func(string) string) *ConnInfo {
	ci := &ConnInfo{
		Cid: c.CID, Kind: "Client", Type: "nats", IP: c.IP, Port: c.Port,
		Start: c.Start, LastActivity: c.LastActivity,
		RTT: rttString(c.RTT), Pending: int(c.Pending),
		InMsgs: c.InMsgs, OutMsgs: c.OutMsgs, InBytes: c.InBytes, OutBytes: c.OutBytes,
		Stalls: c.Stalls, NumSubs: uint32(c.NumSubs),
		Name: c.Name, Lang: c.Lang, Version: c.Version, rtt: int64(c.RTT),
	}
	end := now
	if !c.Stop.IsZero() {
		stop := c.Stop
		ci.Stop, ci.Reason, end = &stop, c.Reason, stop
	}
	ci.Uptime = uptime(end.Sub(c.Start))
	ci.Idle = uptime(end.Sub(c.LastActivity))
	switch {
	case o.detail:
		// nats-server names the account in a closed connection's list.
		var withAccount func(string) string
		if !c.Stop.IsZero() {
			withAccount = tag
		}
		ci.SubsDetail = subDetails(c.Subs, withAccount)
	case o.subs:
		for _, s := range c.Subs {
			ci.Subs = append(ci.Subs, s.Subject)
		}
	}
	if o.auth {
		// nats-server names the account unless it is $G; name_tag is the
		// account's (its JWT's name), jwt, issuer_key and tags the user
		// JWT's (monitor.go Connz).
		ci.AuthorizedUser, ci.NameTag = c.User, tag(c.Account)
		if c.Account != globalAccount {
			ci.Account = c.Account
		}
		ci.JWT, ci.IssuerKey, ci.Tags = c.JWT, c.IssuerKey, c.Tags
	}
	return ci
}

// subDetails converts subscriptions; withAccount, when not nil, adds the
// account and its name tag (Server.AccountNameTag), as /subsz lists them.
func subDetails(subs []server.SubInfo, withAccount func(string) string) []SubDetail {
	out := make([]SubDetail, 0, len(subs))
	for _, s := range subs {
		d := SubDetail{Subject: s.Subject, Queue: s.Queue, Sid: s.Sid, Msgs: s.Msgs, Max: s.Max, Cid: s.CID}
		if withAccount != nil {
			d.Account, d.AccountTag = s.Account, withAccount(s.Account)
		}
		out = append(out, d)
	}
	return out
}

// sortConns sorts as nats-server does: by cid (and start) ascending,
// uptime and reason ascending, everything else descending.
func sortConns(c []*ConnInfo, by string, now time.Time) {
	desc := func(f func(*ConnInfo) int64) {
		slices.SortStableFunc(c, func(a, b *ConnInfo) int { return cmp.Compare(f(b), f(a)) })
	}
	up := func(ci *ConnInfo) time.Duration {
		if ci.Stop != nil {
			return ci.Stop.Sub(ci.Start)
		}
		return now.Sub(ci.Start)
	}
	switch by {
	case "", "cid", "start":
		slices.SortStableFunc(c, func(a, b *ConnInfo) int { return cmp.Compare(a.Cid, b.Cid) })
	case "subs":
		desc(func(ci *ConnInfo) int64 { return int64(ci.NumSubs) })
	case "pending":
		desc(func(ci *ConnInfo) int64 { return int64(ci.Pending) })
	case "msgs_to":
		desc(func(ci *ConnInfo) int64 { return ci.OutMsgs })
	case "msgs_from":
		desc(func(ci *ConnInfo) int64 { return ci.InMsgs })
	case "bytes_to":
		desc(func(ci *ConnInfo) int64 { return ci.OutBytes })
	case "bytes_from":
		desc(func(ci *ConnInfo) int64 { return ci.InBytes })
	case "last":
		desc(func(ci *ConnInfo) int64 { return ci.LastActivity.UnixNano() })
	case "idle":
		desc(func(ci *ConnInfo) int64 { return int64(now.Sub(ci.LastActivity)) })
	case "uptime":
		slices.SortStableFunc(c, func(a, b *ConnInfo) int { return cmp.Compare(up(a), up(b)) })
	case "stop":
		desc(func(ci *ConnInfo) int64 { return ci.Stop.UnixNano() })
	case "reason":
		slices.SortStableFunc(c, func(a, b *ConnInfo) int { return cmp.Compare(a.Reason, b.Reason) })
	case "rtt":
		desc(func(ci *ConnInfo) int64 { return ci.rtt })
	}
}
