package jscluster

import (
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/cluster/usage"
)

// An account's max_memory and max_file hold over the whole cluster when
// a publish is checked (docs/cluster.md, "Account limits"): each server
// tells the others what each account's streams hold on it, and each
// account's engine counts the others' last reports with its own bytes
// (jetstream.JetStream.SetOthersUsage), as nats-server v2.15.2 sums every
// server's usage of the account ($JSC.ARU.<account>.<server>, one binary
// message per account; cairn's is one JSON message per server, every
// account in it, on a subject of its own between cairn servers):
//
//	$SYS.JSC.ACCOUNT.USAGE   no reply: usage.Report, what the sender's
//	                         streams hold per account; sent when that
//	                         changed, at most every 250 ms, and every
//	                         1.5 s anyway (usage.Pacer)
//
// A report is taken only from a member of the meta group (in its
// catalogue, not removed), and a server's report leaves the table when
// it leaves the meta group (SERVER.REMOVE, a server renamed): its
// streams' replicas are moved or dropped then. A stopped member's last
// report stays, as in nats-server: its replicas still hold those bytes.
// A report that does not decode is dropped alone (logged at most once a
// minute), and the sender's last good one stays. A server's first
// report since it started (Report.Hello: its table is empty) is answered
// by the others' without waiting for the 1.5 s.
//
// One goroutine, the reporter (reportUsage), sends this server's
// reports and takes the others': the subscription's handler, on the
// publisher's goroutine, only copies a report into a bounded queue
// (usageQueue; a report finding it full is dropped, and the next one
// of its server replaces it anyway).
const usageSubject = "$SYS.JSC.ACCOUNT.USAGE"

// usageMinGap and usageRefresh pace the reports (usage.Pacer), as
// nats-server v2.15.2's minUsageUpdateWindow and usageTick.
const (
	usageMinGap  = 250 * time.Millisecond
	usageRefresh = 1500 * time.Millisecond
)

// usageQueue bounds the reports received and not yet taken;
// badUsageLogEvery how often a refused one is logged.
const (
	usageQueue       = 64
	badUsageLogEvery = time.Minute
)

// usageExchange is the cluster layer's part of the exchange. The table
// of the other servers' last reports is changed by the reporter alone
// and read by AddAccount, under mu; in holds the reports received, for
// the reporter; badLogged (when a refused report was last logged) is the
// reporter's.
type usageExchange struct {
	mu        sync.Mutex
	table     *usage.Table
	in        chan []byte
	badLogged time.Time
}

// newUsageExchange returns an exchange with an empty table.
func newUsageExchange() usageExchange {
	return usageExchange{table: usage.NewTable(), in: make(chan []byte, usageQueue)}
}

// reportUsage is the reporter (started with the run goroutine by Start,
// tracked by Cluster.done): it takes the reports received; every
// usageMinGap it drops the reports of servers that left the meta group
// and sends this server's report, when the pacer says so, in the system
// account (not before AttachSystem). It ends when quit closes.
func (c *Cluster) reportUsage() {
	defer c.done.Done()
	p := usage.Pacer{MinGap: usageMinGap, Refresh: usageRefresh}
	t := time.NewTicker(usageMinGap)
	defer t.Stop()
	hello := true
	for {
		select {
		case <-c.quit:
			return
		case b := <-c.aru.in:
			if c.takeUsage(b) {
				p.Ask()
			}
			continue
		case <-t.C:
		}
		c.retainUsage()
		if !c.hasSystem() {
			continue
		}
		if local := c.localUsage(); p.Due(c.cfg.Now(), local) {
			c.publishSystem(usageSubject, "", usage.Report{Server: string(c.name), Accounts: local, Hello: hello}.Append(nil))
			hello = false
		}
	}
}

// onUsage queues another server's report for the reporter (on the
// publisher's goroutine: it copies the report and never blocks).
func (c *Cluster) onUsage(_, _ string, _, data []byte) {
	select {
	case c.aru.in <- append([]byte(nil), data...):
	default:
	}
}

// takeUsage takes report b of another server (reporter): a report that
// does not decode, of this server or of a server not a member of the
// meta group changes nothing. It reports whether b is its server's
// hello (which this server then answers with its own).
func (c *Cluster) takeUsage(b []byte) (hello bool) {
	x := &c.aru
	r, err := usage.Decode(b)
	if err != nil {
		if now := c.cfg.Now(); now.Sub(x.badLogged) >= badUsageLogEvery {
			x.badLogged = now
			c.cfg.Logf("jscluster: a report of account usage dropped: %v", err)
		}
		return false
	}
	if r.Server == string(c.name) || !c.liveMembers()[r.Server] {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	c.pushUsage(x.table.Apply(r))
	return r.Hello
}

// hasSystem reports whether the system account's transport is attached
// (AttachSystem).
func (c *Cluster) hasSystem() bool {
	c.sys.mu.Lock()
	defer c.sys.mu.Unlock()
	return c.sys.tr != nil
}

// localUsage returns what each account's streams hold on this server,
// the accounts holding nothing left out.
func (c *Cluster) localUsage() map[string]usage.Usage {
	c.mu.Lock()
	accs := make([]*account, 0, len(c.accounts))
	for _, a := range c.accounts {
		if a.js != nil {
			accs = append(accs, a)
		}
	}
	c.mu.Unlock()
	out := map[string]usage.Usage{}
	for _, a := range accs {
		if mem, store := a.js.StoredBytes(); mem != 0 || store != 0 {
			out[a.name] = usage.Usage{Memory: mem, Store: store}
		}
	}
	return out
}

// liveMembers returns the meta group's catalogue less the removed
// servers.
func (c *Cluster) liveMembers() map[string]bool {
	out := map[string]bool{}
	c.meta.View(func(st *meta.State) {
		for _, sv := range st.Servers() {
			if !sv.Removed {
				out[string(sv.Name)] = true
			}
		}
	})
	return out
}

// retainUsage drops the reports of servers no longer members
// (reporter).
func (c *Cluster) retainUsage() {
	members := c.liveMembers()
	x := &c.aru
	x.mu.Lock()
	defer x.mu.Unlock()
	c.pushUsage(x.table.Retain(func(s string) bool { return members[s] }))
}

// pushUsage hands each of accounts' new sum of the other servers'
// reports to its engine here (those without one are given theirs by
// AddAccount). The caller holds aru.mu, so that AddAccount's push and the
// reporter's reach an engine in the table's order; it takes Cluster.mu
// inside (engineOf).
func (c *Cluster) pushUsage(accounts []string) {
	for _, name := range accounts {
		if a := c.engineOf(name); a != nil {
			u := c.aru.table.Others(name)
			a.js.SetOthersUsage(u.Memory, u.Store)
		}
	}
}

// pushAccountUsage gives the engine of account name, just added, the
// other servers' reports of it.
func (c *Cluster) pushAccountUsage(name string) {
	x := &c.aru
	x.mu.Lock()
	defer x.mu.Unlock()
	c.pushUsage([]string{name})
}
