package jscluster

import (
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream"
)

// answeringTransport answers, at once, every request whose subject is not
// "silent" with the subject itself (through onReply, as a reply from the
// cluster would come); the other Transport methods are not used.
type answeringTransport struct {
	jetstream.Transport
	c *Cluster
}

func (t answeringTransport) Publish(subject, reply string, _, _ []byte) bool {
	if subject != "silent" {
		t.c.onReply(reply, "", nil, []byte(subject))
	}
	return true
}

// TestRequestAllKeepsAnswersAfterASilentSubject: a subject that never
// answers must not cost the answers to the subjects after it (CONSUMER.LIST
// listed every consumer after one unreachable one as "missing").
func TestRequestAllKeepsAnswersAfterASilentSubject(t *testing.T) {
	c := &Cluster{}
	c.sys.tr = answeringTransport{c: c}
	c.sys.inbox = "inbox."
	c.sys.waiters = map[string]chan []byte{}
	out := c.requestAll([]string{"a", "silent", "b", "c"}, nil, 50*time.Millisecond)
	want := []string{"a", "", "b", "c"}
	for i, w := range want {
		if string(out[i]) != w {
			t.Fatalf("answer %d = %q, want %q (all: %q)", i, out[i], w, out)
		}
	}
}
