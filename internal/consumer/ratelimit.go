package consumer

import "time"

// RateLimiter paces a push consumer's deliveries to its rate_limit_bps
// (nats-server v2.15.2 setRateLimit: a token bucket filled at
// rate_limit_bps/8 bytes a second, holding at most burst bytes, the
// stream's max_msg_size or else the server's max_payload). It reads no
// clock: every call takes now (unix nanoseconds). The bucket starts full.
// A message larger than the bucket goes when the bucket is full and
// leaves it in debt, so that it is never held forever (nats-server's
// limiter would never let it through).
type RateLimiter struct {
	perNs  float64 // bytes per nanosecond
	burst  float64
	tokens float64
	last   int64
}

// NewRateLimiter returns a limiter of bps bits per second with a bucket
// of burst bytes (at least 1), full at now.
func NewRateLimiter(bps uint64, burst int, now int64) *RateLimiter {
	b := float64(max(burst, 1))
	return &RateLimiter{perNs: float64(bps) / 8 / 1e9, burst: b, tokens: b, last: now}
}

// Take takes n bytes at now if the bucket holds them (or is full) and
// reports true; otherwise it takes nothing and returns how long until
// it will.
func (l *RateLimiter) Take(n int, now int64) (bool, time.Duration) {
	if now > l.last {
		l.tokens = min(l.burst, l.tokens+float64(now-l.last)*l.perNs)
		l.last = now
	}
	need := min(float64(n), l.burst)
	if l.tokens >= need {
		l.tokens -= float64(n)
		return true, 0
	}
	if l.perNs <= 0 {
		return false, time.Hour
	}
	return false, time.Duration((need-l.tokens)/l.perNs) + 1
}
