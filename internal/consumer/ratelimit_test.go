package consumer

import (
	"testing"
	"time"
)

// 8,000 bits a second is 1,000 bytes a second: after the full bucket
// (500 bytes) is spent, 100 more bytes come 100 ms later; a message
// larger than the bucket goes when the bucket is full and leaves a debt.
func TestRateLimiter(t *testing.T) {
	l := NewRateLimiter(8000, 500, t0)
	for i := range 5 {
		if ok, _ := l.Take(100, t0); !ok {
			t.Fatalf("take %d of the full bucket refused", i+1)
		}
	}
	ok, wait := l.Take(100, t0)
	if ok || wait < 99*time.Millisecond || wait > 101*time.Millisecond {
		t.Fatalf("empty bucket: %v, wait %v; want a refusal for 100 ms", ok, wait)
	}
	if ok, _ := l.Take(100, t0+int64(100*time.Millisecond)); !ok {
		t.Fatal("100 ms later 100 bytes were refused")
	}
	now := t0 + int64(2*time.Second) // full again
	if ok, _ := l.Take(2000, now); !ok {
		t.Fatal("a message larger than the bucket was refused with the bucket full")
	}
	if ok, wait := l.Take(1, now+int64(time.Second)); ok || wait < time.Second/2 {
		t.Fatalf("after a 2,000-byte message the debt was not kept: %v %v", ok, wait)
	}
}
