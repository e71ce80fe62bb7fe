package server

import (
	"strconv"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/cairnmq/cairn/internal/config"
)

func replyUser(max int, expires time.Duration) *auth.User {
	return &auth.User{Perms: auth.NewPerms(&config.Permissions{
		Publish:  &config.SubjectPermission{Allow: []string{"open.>"}},
		Response: &config.ResponsePermission{MaxMsgs: max, Expires: expires},
	})}
}

// allow_responses: a reply may be answered max times within expires; a
// reply the user may publish to anyway is not tracked (nats-server
// deliverMsg, responseAllowed).
func TestReplyPerms(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	rp := newReplyPerms(replyUser(2, time.Minute), clock)
	rp.record([]byte("r.1"))
	rp.record([]byte("open.x"))
	if len(rp.grants) != 1 {
		t.Fatalf("grants %v", rp.grants)
	}
	if !rp.allow("r.1") || !rp.allow("r.1") || rp.allow("r.1") {
		t.Fatal("max 2 not applied")
	}
	rp.record([]byte("r.2"))
	now = now.Add(time.Minute + time.Second)
	if rp.allow("r.2") {
		t.Fatal("an expired reply was allowed")
	}
	if newReplyPerms(&auth.User{}, clock) != nil || newReplyPerms(nil, clock) != nil {
		t.Fatal("reply state without allow_responses")
	}
}

// With an unlimited count and age, the table stays bounded.
func TestReplyPermsBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	rp := newReplyPerms(replyUser(-1, -1), func() time.Time { return now })
	for i := range replyMax + 5000 {
		now = now.Add(time.Microsecond)
		rp.record([]byte("r." + strconv.Itoa(i)))
	}
	if n := len(rp.grants); n > replyMax {
		t.Fatalf("%d grants kept, bound %d", n, replyMax)
	}
	if !rp.allow("r." + strconv.Itoa(replyMax+4999)) {
		t.Fatal("the newest reply was dropped")
	}
}
