package usage

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A report travels as JSON and comes back as it was sent.
func TestReportRoundTrip(t *testing.T) {
	r := Report{Server: "n1", Accounts: map[string]Usage{"A": {Memory: 10, Store: 20}, "B": {Store: 5}}, Hello: true}
	b := r.Append(nil)
	if want := `{"server":"n1","accounts":{"A":{"memory":10,"storage":20},"B":{"memory":0,"storage":5}},"hello":true}`; string(b) != want {
		t.Fatalf("wire form %s, want %s", b, want)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Server != "n1" || !got.Hello || len(got.Accounts) != 2 || got.Accounts["A"] != (Usage{10, 20}) || got.Accounts["B"] != (Usage{0, 5}) {
		t.Fatalf("decoded %+v from %s", got, b)
	}
	if b := (Report{Server: "n2"}).Append(nil); string(b) != `{"server":"n2"}` {
		t.Fatalf("a report of nothing: %s", b)
	}
	if got, err := Decode(Report{Server: "n2"}.Append(nil)); err != nil || got.Server != "n2" || got.Hello || len(got.Accounts) != 0 {
		t.Fatalf("a report of nothing: %+v, %v", got, err)
	}
}

// A bad report is refused whole, and a table that never takes it keeps
// the sender's last good one: bad input from one peer changes nothing.
func TestDecodeRefusesBadReports(t *testing.T) {
	var many strings.Builder
	many.WriteString(`{"server":"n2","accounts":{`)
	for i := range MaxAccounts + 1 {
		if i > 0 {
			many.WriteByte(',')
		}
		many.WriteString(`"a` + strconv.Itoa(i) + `":{"storage":1}`)
	}
	many.WriteString(`}}`)
	for _, c := range []struct{ name, body string }{
		{"empty", ``},
		{"not JSON", `{"server":`},
		{"a number", `7`},
		{"no server", `{"accounts":{"A":{"storage":1}}}`},
		{"an account without a name", `{"server":"n2","accounts":{"":{"storage":1}}}`},
		{"negative memory", `{"server":"n2","accounts":{"A":{"memory":-1}}}`},
		{"negative storage", `{"server":"n2","accounts":{"A":{"storage":-5}}}`},
		{"more than MaxBytes", `{"server":"n2","accounts":{"A":{"memory":4503599627370497}}}`},
		{"bytes as a string", `{"server":"n2","accounts":{"A":{"storage":"5"}}}`},
		{"too many accounts", many.String()},
		{"too long", `{"server":"n2","pad":"` + strings.Repeat("x", MaxReportBytes) + `"}`},
	} {
		if _, err := Decode([]byte(c.body)); !errors.Is(err, ErrBadReport) {
			t.Errorf("%s: error %v, want ErrBadReport", c.name, err)
		}
	}
	tab := NewTable()
	tab.Apply(Report{Server: "n2", Accounts: map[string]Usage{"A": {Store: 100}}})
	if r, err := Decode([]byte(`{"server":"n2","accounts":{"A":{"storage":-1}}}`)); err == nil {
		tab.Apply(r)
	}
	if got := tab.Others("A"); got != (Usage{Store: 100}) {
		t.Fatalf("after a bad report: %+v, want the last good one's", got)
	}
}

// The table sums each account over the servers' last reports; a new
// report replaces its server's last (an account it no longer names holds
// nothing there), and Apply names the accounts whose sum changed.
func TestTableSums(t *testing.T) {
	tab := NewTable()
	changed := tab.Apply(Report{Server: "n2", Accounts: map[string]Usage{"A": {Memory: 1, Store: 100}, "B": {Store: 7}}})
	wantChanged(t, "n2's first", changed, "A", "B")
	wantChanged(t, "n3's first", tab.Apply(Report{Server: "n3", Accounts: map[string]Usage{"A": {Store: 50}}}), "A")
	if got := tab.Others("A"); got != (Usage{Memory: 1, Store: 150}) {
		t.Fatalf("A: %+v", got)
	}
	wantChanged(t, "the same again", tab.Apply(Report{Server: "n3", Accounts: map[string]Usage{"A": {Store: 50}}}))
	wantChanged(t, "n2 without B, A grown", tab.Apply(Report{Server: "n2", Accounts: map[string]Usage{"A": {Memory: 1, Store: 120}}}), "A", "B")
	if got := tab.Others("A"); got != (Usage{Memory: 1, Store: 170}) {
		t.Fatalf("A: %+v", got)
	}
	if got := tab.Others("B"); got != (Usage{}) {
		t.Fatalf("B, named by no report: %+v", got)
	}
	wantChanged(t, "n2 of nothing", tab.Apply(Report{Server: "n2"}), "A")
	if got := tab.Others("A"); got != (Usage{Store: 50}) || !tab.Known("n2") || tab.Servers() != 2 {
		t.Fatalf("A: %+v; n2 known %v, servers %d", got, tab.Known("n2"), tab.Servers())
	}
	if len(tab.totals) != 1 {
		t.Fatalf("totals kept for accounts holding nothing: %v", tab.totals)
	}
}

// A server that left the cluster leaves the table with its bytes
// (Retain), so the memory a table takes is bounded by the members; a
// report of it that was on its way when it left is not taken again by
// the caller (a member check before Apply).
func TestTableRetain(t *testing.T) {
	tab := NewTable()
	tab.Apply(Report{Server: "n2", Accounts: map[string]Usage{"A": {Store: 100}}})
	tab.Apply(Report{Server: "n3", Accounts: map[string]Usage{"A": {Store: 40}, "C": {Memory: 3}}})
	members := map[string]bool{"n1": true, "n2": true, "n3": true}
	wantChanged(t, "all members", tab.Retain(func(s string) bool { return members[s] }))
	delete(members, "n3")
	wantChanged(t, "n3 removed", tab.Retain(func(s string) bool { return members[s] }), "A", "C")
	if tab.Known("n3") || tab.Servers() != 1 || tab.Others("A") != (Usage{Store: 100}) || tab.Others("C") != (Usage{}) {
		t.Fatalf("after n3 left: known %v, servers %d, A %+v, C %+v", tab.Known("n3"), tab.Servers(), tab.Others("A"), tab.Others("C"))
	}
	if len(tab.totals) != 1 {
		t.Fatalf("totals %v", tab.totals)
	}
}

func wantChanged(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	slices.Sort(got)
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("%s: changed %v, want %v", what, got, want)
	}
}

// The pacer sends at once the first time; then a change after MinGap,
// not before; the same usage only every Refresh; after Ask the same
// usage once MinGap passed; and at once when the clock went back.
func TestPacer(t *testing.T) {
	p := Pacer{MinGap: 250 * time.Millisecond, Refresh: 1500 * time.Millisecond}
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	a := map[string]Usage{"A": {Store: 1}}
	b := map[string]Usage{"A": {Store: 2}}
	steps := []struct {
		at    time.Duration
		local map[string]Usage
		ask   bool
		want  bool
	}{
		{0, a, false, true},                       // the first
		{100 * time.Millisecond, b, false, false}, // changed, within MinGap
		{250 * time.Millisecond, b, false, true},  // changed, MinGap passed
		{600 * time.Millisecond, b, false, false}, // the same
		{1700 * time.Millisecond, b, false, false},
		{1750 * time.Millisecond, b, false, true}, // Refresh passed
		{1800 * time.Millisecond, b, true, false}, // asked, within MinGap
		{2000 * time.Millisecond, b, false, true}, // asked, MinGap passed
		{2300 * time.Millisecond, b, false, false},
		{time.Second, b, false, true}, // the clock went back
		{time.Second + 10*time.Millisecond, nil, false, false},
		{time.Second + 300*time.Millisecond, nil, false, true}, // nothing held now: a change
	}
	for i, s := range steps {
		if s.ask {
			p.Ask()
		}
		if got := p.Due(at(s.at), s.local); got != s.want {
			t.Fatalf("step %d (at %v): due %v, want %v", i, s.at, got, s.want)
		}
	}
}

// Whatever a peer sends, Decode refuses it or returns a report the
// table takes without a negative sum, and a good report of another
// server is untouched by it.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"server":"n2","accounts":{"A":{"memory":1,"storage":2}}}`))
	f.Add([]byte(`{"server":"n2"}`))
	f.Add([]byte(`{"server":"n2","accounts":{"A":{"storage":-1}}}`))
	f.Add([]byte(`{"server":"","accounts":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tab := NewTable()
		tab.Apply(Report{Server: "good", Accounts: map[string]Usage{"A": {Store: 10}}})
		r, err := Decode(b)
		if err != nil {
			return
		}
		if r.Server == "good" {
			return
		}
		tab.Apply(r)
		for name, u := range tab.totals {
			if u.Memory < 0 || u.Store < 0 {
				t.Fatalf("account %q: negative sum %+v", name, u)
			}
		}
		if a := tab.Others("A"); a.Store < 10 {
			t.Fatalf("A %+v: the good report lost", a)
		}
	})
}
