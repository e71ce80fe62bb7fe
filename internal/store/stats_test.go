package store

import "testing"

func TestHistogramBuckets(t *testing.T) {
	h := NewHistogram([]float64{1, 10})
	for _, v := range []float64{0.5, 1, 2, 10, 11, 100} {
		h.Observe(v)
	}
	count, sum, b := h.Snapshot()
	if count != 6 || sum != 124.5 || b[1] != 2 || b[10] != 4 {
		t.Fatalf("count %d sum %v buckets %v", count, sum, b)
	}
	var nilStats *SyncStats
	nilStats.ObserveSync(1, 1, 1) // records nothing, does not panic
}
