package streamrun

import (
	"testing"
	"time"
)

// The next expiry pass comes at the next TTL deadline, not up to 250 ms
// after it; a marker that failed is retried after 250 ms.
func TestExpiryWait(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, c := range []struct {
		pass, now, next int64
		want            time.Duration
	}{
		{1000 * ms, 1000 * ms, 0, time.Second},
		{1000 * ms, 1001 * ms, 1050 * ms, 49 * time.Millisecond},
		{1000 * ms, 1001 * ms, 1003 * ms, 10 * time.Millisecond},
		{1000 * ms, 1001 * ms, 5000 * ms, time.Second},
		{1000 * ms, 1001 * ms, 900 * ms, 250 * time.Millisecond},
		{1000 * ms, 1001 * ms, 1000 * ms, 250 * time.Millisecond},
	} {
		if got := expiryWait(c.pass, c.now, c.next); got != c.want {
			t.Errorf("expiryWait(%d, %d, %d) = %v, want %v", c.pass, c.now, c.next, got, c.want)
		}
	}
}
