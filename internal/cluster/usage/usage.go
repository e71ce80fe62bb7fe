// Package usage is what the servers of a JetStream cluster tell each
// other of the bytes each account's streams hold on them, so that an
// account's max_memory and max_file bound what it stores over the whole
// cluster, every replica counted, when a publish is checked: nats-server
// v2.15.2 does so (jetstream.go sendClusterUsageUpdate,
// remoteUpdateUsage, storageTotals, wouldExceedLimits; an R3 stream of
// an account of 2 MiB is refused once each replica holds about a third
// of it).
//
//   - Report is one server's bytes per account, as it sends them
//     (Append) and as another takes them (Decode, which refuses a bad
//     report whole).
//   - Table is the other servers' last reports, summed per account
//     (Others); a server that leaves the cluster leaves it (Retain).
//   - Pacer says when a server sends its report: soon after what it
//     stores changed, at most every MinGap, and every Refresh anyway.
//
// None does I/O or reads a clock; the cluster layer
// (internal/cluster/jscluster, accountusage.go) carries the reports in
// the system account and hands each account's sum to its engine, whose
// streams check it (internal/jetstream/streamrun Storage).
package usage

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"
)

// Usage is the bytes one account's streams hold on one server, by
// storage type (as the stores count them: streamrun.StoredBytes).
type Usage struct {
	Memory int64 `json:"memory"`
	Store  int64 `json:"storage"`
}

// Report is what one server's streams hold per account. The accounts
// holding nothing there are left out, so a report says all the server
// holds: an account it no longer names holds nothing there. Hello
// marks a server's first report since it started: it knows nobody's
// yet, and the others send theirs without waiting (Pacer.Ask).
//
// On the wire it is JSON, the fields in this order, Accounts and Hello
// left out when empty:
//
//	{"server":"n1","accounts":{"A":{"memory":0,"storage":351155}},"hello":true}
type Report struct {
	Server   string           `json:"server"`
	Accounts map[string]Usage `json:"accounts,omitempty"`
	Hello    bool             `json:"hello,omitempty"`
}

// The bounds of a report Decode takes: a longer one, one naming more
// accounts, or one with more bytes for an account, is refused whole.
// MaxBytes (4 PiB) keeps the sums of a table far from overflowing: it
// would take 2,048 servers holding that much of one account.
const (
	MaxReportBytes = 8 << 20
	MaxAccounts    = 1 << 16
	MaxBytes       = 1 << 52
)

// ErrBadReport is wrapped by every error of Decode.
var ErrBadReport = errors.New("usage: bad report")

// Append appends r's wire form (JSON) to dst.
func (r Report) Append(dst []byte) []byte {
	b, err := json.Marshal(r)
	if err != nil { // a map of strings to two integers always marshals
		panic(err)
	}
	return append(dst, b...)
}

// Decode returns the report b holds. Errors (wrapping ErrBadReport):
// b is longer than MaxReportBytes or is not a report's JSON, names no
// server, more than MaxAccounts accounts, an account without a name or
// a negative number of bytes or more than MaxBytes. A report refused changes nothing: the
// caller drops it and keeps the sender's last good one.
func Decode(b []byte) (Report, error) {
	if len(b) > MaxReportBytes {
		return Report{}, fmt.Errorf("%w: %d bytes, more than %d", ErrBadReport, len(b), MaxReportBytes)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return Report{}, fmt.Errorf("%w: %v", ErrBadReport, err)
	}
	if r.Server == "" {
		return Report{}, fmt.Errorf("%w: no server", ErrBadReport)
	}
	if len(r.Accounts) > MaxAccounts {
		return Report{}, fmt.Errorf("%w: %d accounts, more than %d", ErrBadReport, len(r.Accounts), MaxAccounts)
	}
	for name, u := range r.Accounts {
		if name == "" {
			return Report{}, fmt.Errorf("%w: an account without a name", ErrBadReport)
		}
		if u.Memory < 0 || u.Store < 0 || u.Memory > MaxBytes || u.Store > MaxBytes {
			return Report{}, fmt.Errorf("%w: account %q: bytes %+v out of range", ErrBadReport, name, u)
		}
	}
	return r, nil
}

// Table holds the last report of each other server and their sum per
// account. The zero value is not ready: use NewTable. It is not safe for
// concurrent use (its owner locks it).
type Table struct {
	servers map[string]map[string]Usage // server -> its last report's accounts
	totals  map[string]Usage            // account -> sum over servers; none holding nothing
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{servers: map[string]map[string]Usage{}, totals: map[string]Usage{}}
}

// Known reports whether the table holds a report of server.
func (t *Table) Known(server string) bool {
	_, ok := t.servers[server]
	return ok
}

// Servers returns how many servers the table holds a report of.
func (t *Table) Servers() int { return len(t.servers) }

// Apply makes r, a report Decode took, its server's last, replacing the
// one before, and returns the accounts whose sum changed, in no order.
// The table keeps r.Accounts: the caller must not change it after.
func (t *Table) Apply(r Report) (changed []string) {
	old := t.servers[r.Server]
	accounts := r.Accounts
	if accounts == nil {
		accounts = map[string]Usage{}
	}
	t.servers[r.Server] = accounts
	return t.change(old, accounts)
}

// Retain drops the reports of the servers keep refuses (those no longer
// members of the cluster) and returns the accounts whose sum changed.
func (t *Table) Retain(keep func(server string) bool) (changed []string) {
	for server, old := range t.servers {
		if keep(server) {
			continue
		}
		delete(t.servers, server)
		changed = append(changed, t.change(old, nil)...)
	}
	return changed
}

// Others returns what account's streams hold on the servers of the
// table: the sum of their last reports.
func (t *Table) Others(account string) Usage { return t.totals[account] }

// change moves the totals from a server's report old to its report now
// (either nil for none) and returns the accounts whose usage there
// differs.
func (t *Table) change(old, now map[string]Usage) (changed []string) {
	for name, u := range old {
		if n, ok := now[name]; ok && n == u {
			continue
		}
		t.add(name, Usage{-u.Memory, -u.Store})
		changed = append(changed, name)
	}
	for name, u := range now {
		if o, ok := old[name]; ok && o == u {
			continue
		}
		t.add(name, u)
		if _, ok := old[name]; !ok {
			changed = append(changed, name)
		}
	}
	return changed
}

// add adds d to account's total, dropping a total that comes to nothing.
func (t *Table) add(account string, d Usage) {
	u := t.totals[account]
	u.Memory += d.Memory
	u.Store += d.Store
	if u == (Usage{}) {
		delete(t.totals, account)
		return
	}
	t.totals[account] = u
}

// Pacer decides when a server sends its report, from what its accounts
// hold now and the time: when that differs from what it last sent, once
// MinGap has passed since; every Refresh whatever it holds (a server
// that started meanwhile, or missed a report, learns it); and, after
// Ask, as soon as MinGap allows. nats-server v2.15.2 sends its usage on
// each change, at most every 250 ms, and every 1.5 s
// (minUsageUpdateWindow, usageTick). The zero value with MinGap and
// Refresh set is ready; it is not safe for concurrent use.
type Pacer struct {
	MinGap, Refresh time.Duration

	last  time.Time        // when a report was last sent; zero: never
	sent  map[string]Usage // what it held
	asked bool
}

// Ask makes the next report go as soon as MinGap allows, changed or not:
// a server that has just started (Report.Hello) wants this one's.
func (p *Pacer) Ask() { p.asked = true }

// Due reports whether local, what this server's accounts hold at now,
// is to be sent; when it is, the pacer takes it as sent (and keeps
// local: the caller must not change it after).
func (p *Pacer) Due(now time.Time, local map[string]Usage) bool {
	if !p.last.IsZero() {
		since := now.Sub(p.last) // negative: the clock went back, send
		if since >= 0 && since < p.Refresh && (since < p.MinGap || !p.asked && maps.Equal(local, p.sent)) {
			return false
		}
	}
	p.last, p.sent, p.asked = now, local, false
	return true
}
