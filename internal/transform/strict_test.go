package transform

import (
	"errors"
	"testing"
)

// An import mapping is refused as nats-server v2.15.2's
// NewSubjectTransformStrict refuses it: a function other than the
// wildcard one, or fewer wildcard references than the source has '*'.
func TestNewStrict(t *testing.T) {
	cases := []struct {
		src, to string
		is      error
		text    string
	}{
		{"a.*.*", "b.*.*", nil, ""},
		{"a.*.*", "b.$2.$1", nil, ""},
		{"a.*", "b.{{wildcard(1)}}", nil, ""},
		{"a.>", "b.>", nil, ""},
		{"a.*.*", "b.*", ErrNotUsingAllWildcards, "invalid mapping destination: not using all of the token wildcard(s) in b.$1"},
		{"a.*", "b.{{partition(2,1)}}", ErrNotSupportedForImport, "invalid mapping destination: the only mapping function allowed for import transforms is {{Wildcard()}} in {{partition(2,1)}}"},
		{"a.>", "b.*", ErrBadSubject, "invalid subject"},
	}
	for _, c := range cases {
		_, err := NewStrict(c.src, Tokenize(c.to))
		if !errors.Is(err, c.is) || (err != nil && err.Error() != c.text) {
			t.Errorf("NewStrict(%q, %q) = %v, want %q", c.src, Tokenize(c.to), err, c.text)
		}
	}
	if _, err := New("a.*.*", Tokenize("b.*")); err != nil {
		t.Errorf("New is not strict: %v", err)
	}
}
