package auth

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/subject"
)

func perms(pubAllow, pubDeny, subAllow, subDeny []string) *Perms {
	p := &config.Permissions{}
	if pubAllow != nil || pubDeny != nil {
		p.Publish = &config.SubjectPermission{Allow: pubAllow, Deny: pubDeny}
	}
	if subAllow != nil || subDeny != nil {
		p.Subscribe = &config.SubjectPermission{Allow: subAllow, Deny: subDeny}
	}
	return NewPerms(p)
}

// Publish: allow list (nil = all), deny beats allow, wildcards in both
// (docs/security.md, "Permissions").
func TestCanPublish(t *testing.T) {
	p := perms([]string{"orders.>", "svc.*"}, []string{"orders.secret.>", "svc.admin"}, nil, nil)
	for subj, want := range map[string]bool{
		"orders.new": true, "orders.secret.x": false, "orders.secret": true, "svc.x": true,
		"svc.admin": false, "svc.a.b": false, "other": false, "orders": false,
	} {
		if got := p.CanPublish([]byte(subj)); got != want {
			t.Errorf("CanPublish(%q) = %v, want %v", subj, got, want)
		}
	}
	denyOnly := perms(nil, []string{">"}, nil, nil)
	if denyOnly.CanPublish([]byte("a")) || !denyOnly.Restricted() {
		t.Error("deny > allows a publish")
	}
	none := perms([]string{}, nil, nil, nil)
	if none.CanPublish([]byte("a")) {
		t.Error("an empty allow list allows a publish")
	}
	var nilPerms *Perms
	if !nilPerms.CanPublish([]byte("a")) || nilPerms.Restricted() || !nilPerms.CanSubscribe(">", "q") {
		t.Error("nil perms restrict")
	}
}

// Subscribe, with queue entries (nats-server v2.15.2 processSubEx
// comment): allow ["foo"] lets any queue subscribe to foo; ["foo v1"]
// only queue v1 and no plain subscription; ["foo", "foo v1"] a plain one
// and queue v1 only. Deny entries with a queue deny that queue; a plain
// deny denies every queue (advisory 2026-18).
func TestCanSubscribe(t *testing.T) {
	cases := []struct {
		allow, deny []string
		subj, queue string
		want        bool
	}{
		{[]string{"foo"}, nil, "foo", "", true},
		{[]string{"foo"}, nil, "foo", "any", true},
		{[]string{"foo v1"}, nil, "foo", "", false},
		{[]string{"foo v1"}, nil, "foo", "v1", true},
		{[]string{"foo v1"}, nil, "foo", "v2", false},
		{[]string{"foo", "foo v1"}, nil, "foo", "", true},
		{[]string{"foo", "foo v1"}, nil, "foo", "v2", false},
		{[]string{"foo v1.*"}, nil, "foo", "v1.blue", true},
		{[]string{"foo v1.*"}, nil, "foo", "v2.blue", false},
		{[]string{"foo.*"}, nil, "foo.bar", "", true},
		{[]string{"foo.*"}, nil, "foo.*", "", true},
		// cairn refuses what nats-server 2.15.2 allows: "foo.>" and ">"
		// reach subjects the allow entries do not cover.
		{[]string{"foo.*"}, nil, "foo.>", "", false},
		{[]string{"*"}, nil, ">", "", false},
		{[]string{">"}, nil, "foo.>", "", true},
		{nil, []string{"foo.*"}, "foo.>", "", false},  // deny matched as nats-server does
		{nil, []string{"foo.bar"}, "foo.*", "", true}, // allowed; deliveries filtered
		{nil, []string{"foo.bar"}, "foo.bar", "q", false},
		{nil, []string{"> *.prod"}, "foo", "blue.prod", false},
		{nil, []string{"> *.prod"}, "foo", "blue.dev", true},
		{nil, []string{"> *.prod"}, "foo", "", true},
		{nil, []string{"foo", "> *.prod"}, "foo", "blue.dev", false},
		{[]string{">"}, []string{"secret.>"}, "secret.a", "", false},
		{[]string{}, nil, "a", "", false},
	}
	for _, tc := range cases {
		p := perms(nil, nil, tc.allow, tc.deny)
		if got := p.CanSubscribe(tc.subj, tc.queue); got != tc.want {
			t.Errorf("allow %q deny %q: CanSubscribe(%q, %q) = %v, want %v", tc.allow, tc.deny, tc.subj, tc.queue, got, tc.want)
		}
	}
}

// A subscription that overlaps a deny entry without being denied gets
// its deliveries filtered (CVE-2022-29946, advisory 2026-17).
func TestDeliveryFilter(t *testing.T) {
	p := perms(nil, nil, nil, []string{"foo.bar", "*.baz", "q.> *.prod"})
	cases := []struct {
		subj, queue string
		filter      bool
		deliver     map[string]bool
	}{
		{"foo.*", "", true, map[string]bool{"foo.bar": false, "foo.x": true, "foo.baz": false}},
		{">", "", true, map[string]bool{"a.baz": false, "a.b": true, "q.x": true}},
		{"foo.x", "", false, nil},
		{"a.b", "", false, nil},
		{">", "blue.prod", true, map[string]bool{"q.x": false, "a.b": true}},
		{"q.*", "blue.dev", true, map[string]bool{"q.x": true}},
	}
	for _, tc := range cases {
		if !p.CanSubscribe(tc.subj, tc.queue) {
			t.Fatalf("CanSubscribe(%q, %q) false", tc.subj, tc.queue)
		}
		if got := p.NeedsFilter(tc.subj, tc.queue); got != tc.filter {
			t.Errorf("NeedsFilter(%q, %q) = %v", tc.subj, tc.queue, got)
		}
		for subj, want := range tc.deliver {
			if got := !p.DeniedDelivery([]byte(subj), tc.queue); got != want {
				t.Errorf("sub %q queue %q: deliver %q = %v, want %v", tc.subj, tc.queue, subj, got, want)
			}
		}
	}
}

func TestResponses(t *testing.T) {
	p := NewPerms(&config.Permissions{Response: &config.ResponsePermission{MaxMsgs: 2, Expires: time.Second}})
	if m, e, ok := p.Responses(); !ok || m != 2 || e != time.Second {
		t.Fatalf("Responses() = %d %v %v", m, e, ok)
	}
	if _, _, ok := perms(nil, nil, nil, nil).Responses(); ok {
		t.Fatal("responses without allow_responses")
	}
}

// ---- property test against a brute-force model ----

// universe is every literal subject of 1 to 4 tokens over a, b and z (z
// appears in no pattern): enough to tell patterns of up to 3 tokens over
// a, b, * and > apart.
var universe = func() []string {
	toks := []string{"a", "b", "z"}
	var out []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		for _, t := range toks {
			s := t
			if prefix != "" {
				s = prefix + "." + t
			}
			out = append(out, s)
			if n > 1 {
				gen(s, n-1)
			}
		}
	}
	gen("", 4)
	return out
}()

func randPattern(r *rand.Rand) string {
	n := 1 + r.IntN(3)
	toks := make([]string, n)
	for i := range toks {
		toks[i] = []string{"a", "b", "*", "a", "b", "*", ">"}[r.IntN(7)]
		if toks[i] == ">" {
			return strings.Join(toks[:i+1], ".")
		}
	}
	return strings.Join(toks, ".")
}

var queues = []string{"", "q1", "v.1", "v.2"}

func randEntry(r *rand.Rand) string {
	s := randPattern(r)
	switch r.IntN(4) {
	case 0:
		return s + " " + []string{"q1", "v.*", "v.1", "*.prod"}[r.IntN(4)]
	}
	return s
}

func randList(r *rand.Rand, max int) []string {
	if r.IntN(3) == 0 {
		return nil
	}
	out := []string{}
	for range r.IntN(max + 1) {
		out = append(out, randEntry(r))
	}
	return out
}

// matchesEntry: the literal subject lit, received in queue group q, is
// named by a permission entry ("subject [queue]"); a queue entry names
// only its queue groups.
func matchesEntry(lit, q, e string) (named, plain bool) {
	f := strings.Fields(e)
	if len(f) == 0 || !subject.Match(lit, f[0]) { // (an entry of only whitespace, such as "\v", names nothing)
		return false, false
	}
	if len(f) == 1 {
		return true, true
	}
	return q != "" && queueMatches(q, f[1]), false
}

// covers reports, by enumeration, whether every subject of pattern sub is
// matched by pattern super.
func covers(sub, super string) bool {
	for _, l := range universe {
		if subject.Match(l, sub) && !subject.Match(l, super) {
			return false
		}
	}
	return true
}

// bruteCanSubscribe is the decision CanSubscribe documents, computed by
// enumeration for the allow list.
func bruteCanSubscribe(allow, deny []string, subj, q string) bool {
	if allow != nil {
		plain, queued, queueOK := false, false, false
		for _, e := range allow {
			f := strings.Fields(e)
			if !covers(subj, f[0]) {
				continue
			}
			if len(f) == 1 {
				plain = true
			} else {
				queued = true
				queueOK = queueOK || queueMatches(q, f[1])
			}
		}
		if (q != "" && queued && !queueOK) || (!(q != "" && queued) && !plain) {
			return false
		}
	}
	for _, e := range deny {
		f := strings.Fields(e)
		if subject.Match(subj, f[0]) && (len(f) == 1 || (q != "" && queueMatches(q, f[1]))) {
			return false
		}
	}
	return true
}

// TestSubscribePermissionProperty checks, over random permissions,
// subscriptions and queue groups, that (1) CanSubscribe decides as the
// brute-force model does and (2) whatever an allowed subscription would
// be delivered, after the delivery filter, is a subject an allow entry
// names for it and no deny entry names: nothing denied is ever delivered
// and nothing outside the allow list is (the class of bug of nats-server's
// 2026 permission advisories).
func TestSubscribePermissionProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 4000 {
		allow, deny := randList(r, 3), randList(r, 3)
		p := perms(nil, nil, allow, deny)
		subj, q := randPattern(r), queues[r.IntN(len(queues))]
		got := p.CanSubscribe(subj, q)
		if want := bruteCanSubscribe(allow, deny, subj, q); got != want {
			t.Fatalf("case %d: allow %q deny %q: CanSubscribe(%q, %q) = %v, model says %v", i, allow, deny, subj, q, got, want)
		}
		if !got {
			continue
		}
		checkDeliveries(t, p, allow, deny, subj, q)
	}
}

func checkDeliveries(t *testing.T, p *Perms, allow, deny []string, subj, q string) {
	t.Helper()
	filter := p.NeedsFilter(subj, q)
	for _, lit := range universe {
		if !subject.Match(lit, subj) || (filter && p.DeniedDelivery([]byte(lit), q)) {
			continue
		}
		if allow != nil {
			ok := false
			for _, e := range allow {
				if named, _ := matchesEntry(lit, q, e); named {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("allow %q deny %q: sub %q queue %q receives %q, which no allow entry names", allow, deny, subj, q, lit)
			}
		}
		for _, e := range deny {
			if named, _ := matchesEntry(lit, q, e); named {
				t.Fatalf("allow %q deny %q: sub %q queue %q receives %q, denied by %q", allow, deny, subj, q, lit, e)
			}
		}
	}
}

// TestPublishPermissionProperty: CanPublish of a literal subject is
// "some allow entry matches (or no list) and no deny entry does".
func TestPublishPermissionProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		var allow, deny []string
		if r.IntN(3) > 0 {
			allow = []string{}
			for range r.IntN(4) {
				allow = append(allow, randPattern(r))
			}
		}
		for range r.IntN(3) {
			deny = append(deny, randPattern(r))
		}
		p := perms(allow, deny, nil, nil)
		for _, lit := range universe {
			want := allow == nil
			for _, a := range allow {
				want = want || subject.Match(lit, a)
			}
			for _, d := range deny {
				want = want && !subject.Match(lit, d)
			}
			if got := p.CanPublish([]byte(lit)); got != want {
				t.Fatalf("allow %q deny %q: CanPublish(%q) = %v, want %v", allow, deny, lit, got, want)
			}
		}
	}
}

// FuzzSubscribePermissions feeds arbitrary entries and subscriptions:
// nothing panics, and whatever is allowed keeps the delivery property.
func FuzzSubscribePermissions(f *testing.F) {
	f.Add("foo.* q1\n>", "foo.bar\n> *.prod", "foo.>", "q1")
	f.Add("*", "", ">", "")
	f.Fuzz(func(t *testing.T, allowText, denyText, subj, q string) {
		split := func(s string) []string {
			var out []string
			for _, l := range strings.Split(s, "\n") {
				if config.CheckPermissionSubjects([]string{l}, true) == nil {
					out = append(out, l)
				}
			}
			return out
		}
		allow, deny := split(allowText), split(denyText)
		if allowText == "" {
			allow = nil
		}
		p := perms(nil, nil, allow, deny)
		if !subject.ValidSubject(subj) || (q != "" && !subject.ValidQueue(q)) {
			_ = p.CanSubscribe(subj, q)
			return
		}
		if len(subj) > 40 || len(allow)+len(deny) > 8 {
			return
		}
		if p.CanSubscribe(subj, q) {
			checkDeliveries(t, p, allow, deny, subj, q)
		}
		_ = p.DeniedDelivery([]byte(subj), q)
	})
}

func ExamplePerms_CanSubscribe() {
	p := NewPerms(&config.Permissions{Subscribe: &config.SubjectPermission{Allow: []string{"orders.*"}}})
	fmt.Println(p.CanSubscribe("orders.new", ""), p.CanSubscribe("orders.>", ""))
	// Output: true false
}

// Listed gives the permissions as nats-server's $SYS.REQ.USER.INFO lists
// them: both lists always present, empty ones nil, a queue written after
// a publish subject dropped, subscribe queue entries with one space.
func TestPermsListed(t *testing.T) {
	if NewPerms(nil).Listed() != nil {
		t.Fatal("no permissions listed as some")
	}
	p := NewPerms(&config.Permissions{
		Publish:   &config.SubjectPermission{Allow: []string{}, Deny: []string{"a.b  q"}},
		Subscribe: &config.SubjectPermission{Allow: []string{"x.*   workers", "y"}},
		Response:  &config.ResponsePermission{MaxMsgs: 2, Expires: time.Minute},
	})
	got := fmt.Sprintf("%q %q %q %q %+v", p.Listed().Publish.Allow, p.Listed().Publish.Deny,
		p.Listed().Subscribe.Allow, p.Listed().Subscribe.Deny, *p.Listed().Response)
	if want := `[] ["a.b"] ["x.* workers" "y"] [] {MaxMsgs:2 Expires:1m0s}`; got != want {
		t.Fatalf("Listed: %s, want %s", got, want)
	}
	if l := perms(nil, nil, nil, []string{"z"}).Listed(); l.Publish == nil || l.Publish.Allow != nil || l.Subscribe.Deny[0] != "z" {
		t.Fatalf("Listed: %+v", l)
	}
}
