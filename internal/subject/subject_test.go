package subject

import "testing"

// Validation cases follow docs/protocol.md section 1.7 (tokens, wildcards,
// whitespace) and nats-server v2.15.2 server/sublist_test.go.
var validCases = []struct {
	s              string
	subject, exact bool // ValidSubject, ValidLiteral
}{
	{"foo", true, true},
	{"foo.bar", true, true},
	{"foo.bar.baz", true, true},
	{"$JS.API.INFO", true, true},
	{"_INBOX.abc123", true, true},
	{"ünï.cødé", true, true},
	{"foo*", true, true},
	{"f>o", true, true},
	{"foo.*bar", true, true},
	{"foo.>bar", true, true},
	{"*", true, false},
	{">", true, false},
	{"foo.*", true, false},
	{"*.bar", true, false},
	{"foo.>", true, false},
	{"*.>", true, false},
	{"foo.*.bar.>", true, false},
	{"", false, false},
	{".", false, false},
	{".foo", false, false},
	{"foo.", false, false},
	{"foo..bar", false, false},
	{">.foo", false, false},
	{"foo.>.bar", false, false},
	{"foo.>.>", false, false},
	{"foo bar", false, false},
	{"foo\tbar", false, false},
	{"foo\rbar", false, false},
	{"foo\nbar", false, false},
	{"foo\fbar", false, false},
	{" ", false, false},
	{"foo. ", false, false},
	{"foo.\t.bar", false, false},
}

func TestValidSubject(t *testing.T) {
	for _, c := range validCases {
		if got := ValidSubject(c.s); got != c.subject {
			t.Errorf("ValidSubject(%q) = %v, want %v", c.s, got, c.subject)
		}
		if got := ValidSubjectBytes([]byte(c.s)); got != c.subject {
			t.Errorf("ValidSubjectBytes(%q) = %v, want %v", c.s, got, c.subject)
		}
		if got := ValidLiteral(c.s); got != c.exact {
			t.Errorf("ValidLiteral(%q) = %v, want %v", c.s, got, c.exact)
		}
		if got := ValidLiteralBytes([]byte(c.s)); got != c.exact {
			t.Errorf("ValidLiteralBytes(%q) = %v, want %v", c.s, got, c.exact)
		}
		if c.subject && IsLiteral(c.s) != c.exact {
			t.Errorf("IsLiteral(%q) = %v, want %v", c.s, !c.exact, c.exact)
		}
	}
}

func TestIsLiteral(t *testing.T) {
	cases := []struct {
		s    string
		want bool
	}{
		{"", true}, {"a..b", true}, {"foo*", true}, {"f>o", true},
		{"*", false}, {">", false}, {"foo..*", false}, {"*.a", false},
		{"a.>.b", false}, {"a.*", false},
	}
	for _, c := range cases {
		if got := IsLiteral(c.s); got != c.want {
			t.Errorf("IsLiteral(%q) = %v, want %v", c.s, got, c.want)
		}
		if got := IsLiteralBytes([]byte(c.s)); got != c.want {
			t.Errorf("IsLiteralBytes(%q) = %v, want %v", c.s, got, c.want)
		}
	}
}

// Queue names: nats-server v2.15.2 accepts any whitespace-free SUB argument.
func TestValidQueue(t *testing.T) {
	cases := []struct {
		q    string
		want bool
	}{
		{"workers", true}, {"a.b", true}, {"*", true}, {">", true},
		{"a..b", true}, {"_sys_", true}, {"ü", true},
		{"", false}, {"a b", false}, {"a\tb", false}, {"a\r", false},
		{"\nb", false}, {"a\fb", false},
	}
	for _, c := range cases {
		if got := ValidQueue(c.q); got != c.want {
			t.Errorf("ValidQueue(%q) = %v, want %v", c.q, got, c.want)
		}
		if got := ValidQueueBytes([]byte(c.q)); got != c.want {
			t.Errorf("ValidQueueBytes(%q) = %v, want %v", c.q, got, c.want)
		}
	}
}

func TestTokens(t *testing.T) {
	cases := []struct {
		s    string
		want int
	}{
		{"", 0}, {"a", 1}, {"a.b", 2}, {"a.b.>", 3}, {"a..", 3}, {".", 2},
	}
	for _, c := range cases {
		if got := Tokens(c.s); got != c.want {
			t.Errorf("Tokens(%q) = %d, want %d", c.s, got, c.want)
		}
	}
}

func TestTokenAt(t *testing.T) {
	cases := []struct {
		s    string
		i    int
		want string
	}{
		{"a.bb.ccc", 0, "a"}, {"a.bb.ccc", 1, "bb"}, {"a.bb.ccc", 2, "ccc"},
		{"a.bb.ccc", 3, ""}, {"a.bb.ccc", -1, ""}, {"", 0, ""},
		{"foo", 0, "foo"}, {"foo", 1, ""}, {"a..b", 1, ""}, {"a..b", 2, "b"},
	}
	for _, c := range cases {
		if got := TokenAt(c.s, c.i); got != c.want {
			t.Errorf("TokenAt(%q, %d) = %q, want %q", c.s, c.i, got, c.want)
		}
	}
}

func TestNoAllocs(t *testing.T) {
	b := []byte("foo.bar.baz.>")
	n := testing.AllocsPerRun(100, func() {
		_ = ValidSubjectBytes(b)
		_ = ValidLiteralBytes(b)
		_ = IsLiteralBytes(b)
		_ = Match("foo.bar.baz.qux", "foo.*.baz.>")
		_ = SubsetOf("foo.bar.>", "foo.>")
		_ = Overlap("foo.*.x", "*.bar.>")
		_ = TokenAt("foo.bar.baz", 2)
	})
	if n != 0 {
		t.Fatalf("allocs = %v, want 0", n)
	}
}
