package logger

import "testing"

// TestCount: a count of one takes the singular, any other the plural,
// with "y" after a consonant turned into "ies" (trial 38's "1 Raft
// groups").
func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{
		{1, "Raft group", "1 Raft group"},
		{2, "Raft group", "2 Raft groups"},
		{0, "segment", "0 segments"},
		{1, "entry", "1 entry"},
		{3, "entry", "3 entries"},
		{2, "day", "2 days"},
		{-1, "byte", "-1 byte"},
	} {
		if got := Count(c.n, c.noun); got != c.want {
			t.Errorf("Count(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
