package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A server removed (SERVER.REMOVE) while it was down, then restarted on
// its store: its meta log ends before its removal and the others no
// longer talk to it, so before, it stayed a meta candidate for good,
// said nothing, reported "no meta leader" in /healthz, and kept its
// stale replica of a stream of two, which answered the stream's info to
// its clients with the old state (a trial). It asks the others, learns
// it was removed (docs/cluster.md, "Removing a server"): /healthz says
// so, its replicas of the stream and the durable retire, and no client
// of any server gets the stale stream info.
func TestJetStreamClusterRemovedWhileDownLearnsIt(t *testing.T) {
	servers, opts, lost, _ := testLostVoterOfTwo(t, "$JS.API.SERVER.REMOVE")
	restartLost(t, servers, opts, lost, func() {
		back := servers[leaderIndex(servers, lost)]
		eventually(t, lost+" reports its removal", func() error {
			ps := back.JetStreamClusterHealth()
			if len(ps) == 0 || !strings.Contains(ps[0].Text, "removed from the meta group") {
				return fmt.Errorf("health %+v", ps)
			}
			return nil
		})
	})
	for i := range servers {
		nc := connect(t, servers[i].ClientURL(), nats.UserInfo("app", "app"))
		for range 5 {
			m, err := nc.Request("$JS.API.STREAM.INFO.X2", nil, 2*time.Second)
			if err != nil {
				continue // a removed server may leave it unanswered
			}
			var si struct {
				State struct {
					Msgs uint64 `json:"messages"`
				} `json:"state"`
				Error *struct{} `json:"error"`
			}
			if err := json.Unmarshal(m.Data, &si); err != nil {
				t.Fatalf("stream info through %s: %v %s", servers[i].Name(), err, m.Data)
			}
			if si.Error == nil && si.State.Msgs != 21 {
				t.Fatalf("stream info through %s: %d messages, want 21: %s", servers[i].Name(), si.State.Msgs, m.Data)
			}
		}
	}
}
