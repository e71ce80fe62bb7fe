package auth

import (
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
)

func TestTimesAllowed(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 1, 1, h, m, 0, 0, time.UTC) }
	day := []jwt.TimeRange{{Start: "09:00:00", End: "17:00:00"}}
	night := []jwt.TimeRange{{Start: "22:00:00", End: "06:00:00"}}
	cases := []struct {
		times []jwt.TimeRange
		now   time.Time
		want  bool
	}{
		{nil, at(3, 0), true},
		{day, at(10, 0), true},
		{day, at(17, 0), false},
		{day, at(8, 59), false},
		{night, at(23, 0), true},
		{night, at(5, 0), true},
		{night, at(12, 0), false},
		{[]jwt.TimeRange{{Start: "xx", End: "yy"}}, at(12, 0), false},
	}
	for i, tc := range cases {
		if got := timesAllowed(tc.times, "UTC", tc.now); got != tc.want {
			t.Errorf("case %d: %v", i, got)
		}
	}
	if timesAllowed(day, "Not/AZone", at(10, 0)) {
		t.Error("an unknown locale allowed")
	}
}

func TestExpiryAndPermissions(t *testing.T) {
	if at, text := expiry(100, 200); at.Unix() != 100 || text != UserExpired {
		t.Fatal(at, text)
	}
	if at, text := expiry(0, 200); at.Unix() != 200 || text != AccountExpired {
		t.Fatal(at, text)
	}
	if at, _ := expiry(0, 0); !at.IsZero() {
		t.Fatal(at)
	}
	p := jwtPermissions(&jwt.Permissions{Resp: &jwt.ResponsePermission{}})
	if p.Publish == nil || p.Publish.Allow == nil || len(p.Publish.Allow) != 0 || p.Response.MaxMsgs != 1 {
		t.Fatalf("%+v", p)
	}
	if jwtPermissions(&jwt.Permissions{}) != nil {
		t.Fatal("empty permissions restrict")
	}
}
