package consumer

import "testing"

// TestPurgeRelation is nats-server v2.15.2 purgeLocked's decision for a
// purge with a subject, per consumer filters (jetstream's afterPurge).
func TestPurgeRelation(t *testing.T) {
	for _, tc := range []struct {
		filters []string
		subj    string
		want    int
	}{
		{[]string{"FOO.adam"}, "FOO.adam", PurgeCovers},
		{[]string{"FOO.adam"}, "FOO.*", PurgeCovers},
		{[]string{"FOO.adam", "FOO.eve"}, "FOO.>", PurgeCovers},
		{[]string{"FOO.a.*"}, "FOO.>", PurgeCovers},
		{nil, "FOO.adam", PurgeWider},
		{[]string{"FOO.*"}, "FOO.adam", PurgeWider},
		{[]string{">"}, "FOO.adam", PurgeWider},
		{[]string{"FOO.adam", "FOO.x"}, "FOO.adam", PurgeWider},
		{[]string{"FOO.adam", "BAR.>"}, "FOO.*", PurgeWider},
		{[]string{"FOO.eve"}, "FOO.adam", PurgeDisjoint},
		{[]string{"FOO.*.x"}, "FOO.a.*", PurgeDisjoint}, // they share FOO.a.x, yet neither lies within the other
		{[]string{"BAR.>"}, "FOO.*", PurgeDisjoint},
	} {
		if got := purgeRelation(tc.filters, tc.subj); got != tc.want {
			t.Errorf("filters %q, purge %q: %d, want %d", tc.filters, tc.subj, got, tc.want)
		}
	}
}
