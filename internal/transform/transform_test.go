package transform

import (
	"errors"
	"hash/fnv"
	"strconv"
	"sync"
	"testing"
)

// mapCases are (source, destination, subject) with the mapped subject and
// whether the subject matched, as nats-server v2.15.2 answers them
// (server.NewSubjectTransform and Match, run as an oracle when the table
// was written). When it does not match, Map returns the subject itself.
var mapCases = []struct {
	src, dest, subject, want string
	ok                       bool
}{
	{"foo.*.*", "bar.$2.$1", "foo.a.b", "bar.b.a", true},
	{"foo.*.*", "bar.{{wildcard(2)}}.{{Wildcard(1)}}", "foo.a.b", "bar.b.a", true},
	{"foo.*.*", "bar.$2.$1", "foo.a", "", false},
	{"foo.*.*", "bar.$2.$1", "foo.a.b.c", "", false},
	{"foo.*", "$1.$1.$1", "foo.x", "x.x.x", true},
	{"a.*", "$0.$1", "a.b", "a.b", true},
	{"a.*", "{{wildcard(-1)}}.$1", "a.b", "a.b", true},
	{"a.*", "$foo.$1", "a.b", "$foo.b", true},
	{"a.*", "$.$1", "a.b", "$.b", true},
	{"a.*", "c.d", "a.b", "c.d", true},
	{">", ">", "a..b", "a..b", true},
	{"", ">", "a.*", "a.*", true},
	{">", "x.>", "a.b", "x.a.b", true},
	{"", "x.>", "a.*", "", false},
	{"", "x.>", "a..b", "", false},
	{"a.>", ">", "a.b.c", "b.c", true},
	{"a.>", "z.>", "a", "", false},
	{"a.*.>", "z.$1.>", "a.b.c.d", "z.b.c.d", true},
	{"*x.*", "$1", "q.r", "r", true},
	{"foo", "bar", "foo", "bar", true},
	{"foo", "bar", "foo.bar", "", false},
	{"foo", "{{partition(10)}}.foo", "foo", "3.foo", true},
	{"foo.*", "{{partition(10,1)}}.foo.$1", "foo.xyz", "8.foo.xyz", true},
	{"foo.*", "{{partition(10)}}.foo.$1", "foo.xyz", "6.foo.xyz", true},
	{"foo.*.*", "{{partition(7,1,2)}}", "foo.ab.c", "5", true},
	{"foo.*.*", "{{partition(7,1,2)}}", "foo.a.bc", "5", true},
	{"foo.*.*", "{{partition(7,2,1)}}", "foo.a.bc", "6", true},
	{"foo.*", "{{partition(0,1)}}", "foo.a", "0", true},
	{"foo.*", "{{partition(-3,1)}}", "foo.a", "3826002220", true},
	{"foo.*", "{{partition(1,1)}}", "foo.a", "0", true},
	{"foo", "{{partition(3,1)}}", "foo", "0", true},
	{"*", "{{split(1,-)}}", "a-b-c", "a.b.c", true},
	{"*", "{{split(1,-)}}", "--a--b--", ".a.b", true},
	{"*", "{{split(1,-)}}", "-a", "a", true},
	{"*", "{{split(1,-)}}", "a-", "a", true},
	{"*", "{{split(1,--)}}", "a---b", "a.-b", true},
	{"*", "{{split(1,)}}", "aé", "a.é", true},
	{"*", "{{split(1,x)}}", "abc", "abc", true},
	{"*", "{{splitfromleft(1,2)}}", "abcdef", "ab.cdef", true},
	{"*", "{{splitfromleft(1,6)}}", "abcdef", "abcdef", true},
	{"*", "{{splitfromleft(1,0)}}", "abcdef", "abcdef", true},
	{"*", "{{SplitFromRight(1, 2)}}", "abcdef", "abcd.ef", true},
	{"*", "{{slicefromleft(1,2)}}", "abcde", "ab.cd.e", true},
	{"*", "{{slicefromleft(1,2)}}", "abcdef", "ab.cd.ef", true},
	{"*", "{{slicefromleft(1,1)}}", "abc", "a.b.c", true},
	{"*", "{{slicefromleft(1,5)}}", "abcde", "abcde", true},
	{"*", "{{slicefromright(1,2)}}", "abcde", "a.bc.de", true},
	{"*", "{{slicefromright(1,2)}}", "abcdef", "ab.cd.ef", true},
	{"*", "{{left(1,2)}}.{{right(1,2)}}", "abcde", "ab.de", true},
	{"*", "{{left(1,9)}}.{{right(1,-1)}}", "abcde", "abcde.abcde", true},
	{"*", "{{ wildcard( 1 ) }}", "x", "x", true},
	{"*", "{{random(0)}}", "x", "0", true},
	{"*", "{{random(1)}}", "x", "0", true},
	{"a.*", "b.{{ wildcard(1) }}", "a.b", "b.b", true},
	{"a.*", "{{split(1,.)}}", "a.b", "{{split(1,.)}}", true},
}

func TestMap(t *testing.T) {
	for _, c := range mapCases {
		tr, err := New(c.src, c.dest)
		if err != nil {
			t.Errorf("New(%q, %q): %v", c.src, c.dest, err)
			continue
		}
		want := c.want
		if !c.ok {
			want = c.subject
		}
		got, ok := tr.Map(c.subject)
		if got != want || ok != c.ok {
			t.Errorf("New(%q, %q).Map(%q) = %q, %v; want %q, %v", c.src, c.dest, c.subject, got, ok, want, c.ok)
		}
	}
}

// errorCases are (source, destination) that New or Validate refuse, with
// nats-server v2.15.2's texts: newErr from NewSubjectTransform ("" when it
// accepts), validateErr from ValidateMapping.
var errorCases = []struct {
	src, dest, newErr, validateErr string
}{
	{"a.*", "b.*", "invalid subject", "invalid subject"},
	{"a.*", "b.>", "invalid subject", "invalid subject"},
	{"a.>", "b.c", "invalid subject", "invalid subject"},
	{"a.*", "b..c", "invalid subject", "invalid mapping destination: invalid transform"},
	{"a.*", "b c", "", "invalid mapping destination: invalid transform"},
	{"a.*", "{{foo(1)}}", "invalid mapping destination: unknown function in {{foo(1)}}", "invalid mapping destination: unknown function in {{foo(1)}}"},
	{"a.*", "{{split(1,a b)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{split(1,a b)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{split(1,a b)}}"},
	{"a.*", "{{split(1)}}", "invalid mapping destination: not enough arguments passed to the function in {{split(1)}}", "invalid mapping destination: not enough arguments passed to the function in {{split(1)}}"},
	{"a.*", "{{split(1,-,x)}}", "invalid mapping destination: too many arguments passed to the function in {{split(1,-,x)}}", "invalid mapping destination: too many arguments passed to the function in {{split(1,-,x)}}"},
	{"a.*", "{{random(1,2)}}", "invalid mapping destination: not enough arguments passed to the function in {{random(1,2)}}", "invalid mapping destination: not enough arguments passed to the function in {{random(1,2)}}"},
	{"a.*", "{{random()}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{random()}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{random()}}"},
	{"a.*", "{{random(2147483648)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{random(2147483648)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{random(2147483648)}}"},
	{"a.*", "{{partition(2147483648,1)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{partition(2147483648,1)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{partition(2147483648,1)}}"},
	{"a.*", "{{partition(3,x)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{partition(3,x)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{partition(3,x)}}"},
	{"a.*", "{{wildcard()}}", "invalid mapping destination: not enough arguments passed to the function in {{wildcard()}}", "invalid mapping destination: not enough arguments passed to the function in {{wildcard()}}"},
	{"a.*", "{{wildcard(1,2)}}", "invalid mapping destination: too many arguments passed to the function in {{wildcard(1,2)}}", "invalid mapping destination: too many arguments passed to the function in {{wildcard(1,2)}}"},
	{"a.*", "{{wildcard(x)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{wildcard(x)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{wildcard(x)}}"},
	{"a.*", "{{wildcard(2)}}", "invalid mapping destination: wildcard index out of range in {{wildcard(2)}}: [2]", "invalid mapping destination: wildcard index out of range in {{wildcard(2)}}: [2]"},
	{"a.*", "$2", "invalid mapping destination: wildcard index out of range in $2: [2]", "invalid mapping destination: wildcard index out of range in $2: [2]"},
	{"a.*", "{{partition(3,1,2)}}", "invalid mapping destination: wildcard index out of range in {{partition(3,1,2)}}: [2]", "invalid mapping destination: wildcard index out of range in {{partition(3,1,2)}}: [2]"},
	{"a.*", "{{left(1)}}", "invalid mapping destination: not enough arguments passed to the function in {{left(1)}}", "invalid mapping destination: not enough arguments passed to the function in {{left(1)}}"},
	{"a.*", "{{left(1,2,3)}}", "invalid mapping destination: too many arguments passed to the function in {{left(1,2,3)}}", "invalid mapping destination: too many arguments passed to the function in {{left(1,2,3)}}"},
	{"a.*", "{{left(x,2)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{left(x,2)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{left(x,2)}}"},
	{"a.*", "{{left(1,2147483648)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{left(1,2147483648)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{left(1,2147483648)}}"},
	{"a", "$1", "invalid mapping destination: wildcard index out of range in $1", "invalid mapping destination: wildcard index out of range in $1"},
	{"a", "{{left(1,1)}}", "invalid mapping destination: wildcard index out of range in {{left(1,1)}}", "invalid mapping destination: wildcard index out of range in {{left(1,1)}}"},
	{"a", "{{wildcard(1)}}", "invalid mapping destination: wildcard index out of range in {{wildcard(1)}}", "invalid mapping destination: wildcard index out of range in {{wildcard(1)}}"},
	{"a.*", "x.>.y", "invalid subject", "invalid mapping destination: invalid transform in y"},
	{"a.*", "x.>.", "invalid subject", "invalid mapping destination: invalid transform"},
	{"a..b", "x", "invalid subject", "invalid subject"},
	{"a.>.b", "x", "invalid subject", "invalid subject"},
	{"a.*", "x.{{foo}}", "invalid mapping destination: unknown function in {{foo}}", "invalid mapping destination: unknown function in {{foo}}"},
	{"a.*", "{{wildcard(1)}}{{left(1,1)}}", "invalid mapping destination: too many arguments passed to the function in {{wildcard(1)}}{{left(1,1)}}", "invalid mapping destination: too many arguments passed to the function in {{wildcard(1)}}{{left(1,1)}}"},
}

func TestErrors(t *testing.T) {
	for _, c := range errorCases {
		_, err := New(c.src, c.dest)
		if got := errText(err); got != c.newErr {
			t.Errorf("New(%q, %q) = %q; want %q", c.src, c.dest, got, c.newErr)
		}
		if got := errText(Validate(c.src, c.dest)); got != c.validateErr {
			t.Errorf("Validate(%q, %q) = %q; want %q", c.src, c.dest, got, c.validateErr)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestErrorIdentity checks that the errors carry their kind for
// errors.Is, under the nats-server text.
func TestErrorIdentity(t *testing.T) {
	cases := []struct {
		src, dest string
		is        error
	}{
		{"a.*", "b.*", ErrBadSubject},
		{"a.*", "{{foo(1)}}", ErrUnknownFunction},
		{"a.*", "$2", ErrIndexOutOfRange},
		{"a.*", "{{left(1)}}", ErrNotEnoughArgs},
		{"a.*", "{{left(1,2,3)}}", ErrTooManyArgs},
		{"a.*", "{{left(x,2)}}", ErrInvalidArg},
		{"a.*", "x..y", ErrDestinationSubject},
		{"a.*", "x y", ErrDestinationSubject},
	}
	for _, c := range cases {
		err := Validate(c.src, c.dest)
		if !errors.Is(err, c.is) {
			t.Errorf("Validate(%q, %q) = %v, not %v", c.src, c.dest, err, c.is)
		}
		if c.is != ErrBadSubject && !errors.Is(err, ErrInvalidDestination) {
			t.Errorf("Validate(%q, %q) = %v, not an ErrInvalidDestination", c.src, c.dest, err)
		}
	}
	var de *DestinationError
	if err := Validate("a.*", "$2"); !errors.As(err, &de) || de.Token != "$2: [2]" {
		t.Errorf("Validate(a.*, $2) = %#v; want a DestinationError for token %q", err, "$2: [2]")
	}
}

// TestEmptyDestination checks the transform nats-server does not make:
// the subject stays as it is, and only matching subjects are reported as
// matched (what a source's filter needs).
func TestEmptyDestination(t *testing.T) {
	for _, c := range []struct {
		src, subject string
		ok           bool
	}{
		{"", "a.b", true},
		{">", "a.b", true},
		{"a.*", "a.b", true},
		{"a.*", "b.b", false},
		{"a.*", "a.b.c", false},
	} {
		tr, err := New(c.src, "")
		if err != nil {
			t.Fatalf("New(%q, \"\"): %v", c.src, err)
		}
		if got, ok := tr.Map(c.subject); got != c.subject || ok != c.ok {
			t.Errorf("New(%q, \"\").Map(%q) = %q, %v; want %q, %v", c.src, c.subject, got, ok, c.subject, c.ok)
		}
	}
	if err := Validate("a.*", ""); err != nil {
		t.Errorf("Validate with an empty destination: %v", err)
	}
	if _, err := New("a..b", ""); !errors.Is(err, ErrBadSubject) {
		t.Errorf("New(a..b, \"\") = %v; want ErrBadSubject", err)
	}
}

// TestRandom checks that {{random(n)}} gives numbers in [0, n) and, over
// many calls, more than one of them.
func TestRandom(t *testing.T) {
	tr, err := New("a.*", "r.{{random(4)}}.$1")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 200 {
		got, ok := tr.Map("a.x")
		if !ok {
			t.Fatalf("Map(a.x) did not match")
		}
		seen[got] = true
	}
	for s := range seen {
		switch s {
		case "r.0.x", "r.1.x", "r.2.x", "r.3.x":
		default:
			t.Errorf("Map(a.x) = %q, outside r.[0-3].x", s)
		}
	}
	if len(seen) < 2 {
		t.Errorf("200 random mappings gave only %v", seen)
	}
}

// TestPartitionIsFNV1a checks the partition number against hash/fnv's
// FNV-1a for many subjects, so that a subject lands in the partition
// nats-server puts it in.
func TestPartitionIsFNV1a(t *testing.T) {
	whole, err := New("p.*.*", "{{partition(13)}}")
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := New("p.*.*", "{{partition(13,2,1)}}")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		a, b := strconv.Itoa(i), strconv.Itoa(i*7919)
		subj := "p." + a + "." + b
		if got, want := mustMap(t, whole, subj), fnvMod(subj, 13); got != want {
			t.Fatalf("partition(13) of %q = %s; want %s", subj, got, want)
		}
		if got, want := mustMap(t, tokens, subj), fnvMod(b+a, 13); got != want {
			t.Fatalf("partition(13,2,1) of %q = %s; want %s", subj, got, want)
		}
	}
}

func fnvMod(key string, n uint32) string {
	h := fnv.New32a()
	h.Write([]byte(key))
	return strconv.FormatUint(uint64(h.Sum32()%n), 10)
}

func mustMap(t *testing.T, tr *Transform, subject string) string {
	t.Helper()
	got, ok := tr.Map(subject)
	if !ok {
		t.Fatalf("Map(%q) did not match", subject)
	}
	return got
}

// TestConcurrentMap maps from several goroutines at once (run with
// -race).
func TestConcurrentMap(t *testing.T) {
	tr, err := New("orders.*.*", "{{partition(8,1)}}.$2.{{split(1,-)}}")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				subj := "orders.eu-" + strconv.Itoa(g) + "." + strconv.Itoa(i)
				want := fnvMod("eu-"+strconv.Itoa(g), 8) + "." + strconv.Itoa(i) + ".eu." + strconv.Itoa(g)
				if got := mustMap(t, tr, subj); got != want {
					t.Errorf("Map(%q) = %q; want %q", subj, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestMapAllocations checks the publish-path cost: nothing allocated for a
// subject that does not match, for the identity or a constant destination,
// and one allocation (the result) otherwise.
func TestMapAllocations(t *testing.T) {
	cases := []struct {
		src, dest, subject string
		allocs             float64
	}{
		{"orders.*", "x.$1", "other.a", 0},
		{">", ">", "orders.a", 0},
		{"orders.*", "all", "orders.a", 0},
		{"orders.*.*", "{{partition(8,1)}}.$2.$1", "orders.eu.42", 1},
		{"orders.*.>", "o.{{split(1,-)}}.{{slicefromright(1,2)}}.>", "orders.a-b-c.x.y.z", 1},
	}
	for _, c := range cases {
		tr, err := New(c.src, c.dest)
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { tr.Map(c.subject) }); n != c.allocs {
			t.Errorf("New(%q, %q).Map(%q) allocates %v times; want %v", c.src, c.dest, c.subject, n, c.allocs)
		}
	}
}
