package jetstream

import "testing"

// TestPurgeRelation is nats-server v2.15.2 purgeLocked's decision for a
// purge with a subject, per consumer filters (afterPurge).
func TestPurgeRelation(t *testing.T) {
	for _, tc := range []struct {
		filters []string
		subj    string
		want    int
	}{
		{[]string{"FOO.adam"}, "FOO.adam", purgeCovers},
		{[]string{"FOO.adam"}, "FOO.*", purgeCovers},
		{[]string{"FOO.adam", "FOO.eve"}, "FOO.>", purgeCovers},
		{[]string{"FOO.a.*"}, "FOO.>", purgeCovers},
		{nil, "FOO.adam", purgeWider},
		{[]string{"FOO.*"}, "FOO.adam", purgeWider},
		{[]string{">"}, "FOO.adam", purgeWider},
		{[]string{"FOO.adam", "FOO.x"}, "FOO.adam", purgeWider},
		{[]string{"FOO.adam", "BAR.>"}, "FOO.*", purgeWider},
		{[]string{"FOO.eve"}, "FOO.adam", purgeDisjoint},
		{[]string{"FOO.*.x"}, "FOO.a.*", purgeDisjoint}, // they share FOO.a.x, yet neither lies within the other
		{[]string{"BAR.>"}, "FOO.*", purgeDisjoint},
	} {
		c := &cons{filters: tc.filters}
		if got := c.purgeRelation(tc.subj); got != tc.want {
			t.Errorf("filters %q, purge %q: %d, want %d", tc.filters, tc.subj, got, tc.want)
		}
	}
}
