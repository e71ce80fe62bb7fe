package store

import (
	"sync/atomic"
	"time"
)

// Histogram counts observations in fixed buckets without a lock: an
// observation is three atomic adds, so an engine may observe on its I/O
// path. Bounds are the upper bounds of the buckets, ascending; a value
// above the last goes in the implicit +Inf bucket. Sum is in the
// observations' unit.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64 // per bucket, len(bounds)+1 (the last is +Inf)
	sum    atomic.Uint64   // in units of 1/sumScale
	count  atomic.Uint64
}

// sumScale keeps the sum as an integer: observations are counted in
// billionths (nanoseconds for durations in seconds).
const sumScale = 1e9

// NewHistogram returns a Histogram with the given ascending bucket upper
// bounds.
func NewHistogram(bounds []float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe counts v.
func (h *Histogram) Observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(uint64(max(v, 0) * sumScale))
	h.count.Add(1)
}

// Snapshot returns the observations so far: the number, the sum, and the
// cumulative count of each bound (the buckets Prometheus expects).
func (h *Histogram) Snapshot() (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(h.bounds))
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i].Load()
		buckets[b] = cum
	}
	return h.count.Load(), float64(h.sum.Load()) / sumScale, buckets
}

// SyncStats records a file store's group commits: how long each fsync
// took (seconds) and how many messages and bytes it made durable. One
// SyncStats may be shared by every store of a server.
type SyncStats struct {
	Latency *Histogram // seconds per fsync
	Msgs    *Histogram // messages made durable per fsync
	Bytes   *Histogram // bytes written per fsync
}

// NewSyncStats returns empty SyncStats with buckets from 50µs to 5s
// (fsync) and from 1 to 16384 messages and 4 KiB to 64 MiB (batches).
func NewSyncStats() *SyncStats {
	return &SyncStats{
		Latency: NewHistogram([]float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}),
		Msgs:    NewHistogram([]float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}),
		Bytes:   NewHistogram([]float64{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20}),
	}
}

// ObserveSync records one fsync that took d and made msgs messages of
// bytes bytes durable. A nil SyncStats records nothing.
func (s *SyncStats) ObserveSync(d time.Duration, msgs, bytes uint64) {
	if s == nil {
		return
	}
	s.Latency.Observe(d.Seconds())
	s.Msgs.Observe(float64(msgs))
	s.Bytes.Observe(float64(bytes))
}
