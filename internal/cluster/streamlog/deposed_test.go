package streamlog

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/stream"
)

// A leader deposed with a publish in flight whose entry the next leader
// holds answers that publish once the entry commits under the next
// leader (docs/cluster.md, decision 7): its Applier is handed the
// proposer's key with the entry, as on the leader, and the key is not
// forgotten. Before, the deposed leader forgot it (raftnode.ErrNoReply)
// and the client, told nothing, retried a message already stored. The
// leader's appends reach both followers, whose answers do not reach it:
// the entry is on every replica, uncommitted; CheckQuorum deposes the
// leader, the followers elect one of them, which commits the entry, and
// the network heals.
func TestDeposedLeaderAnswersCommittedPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		defer c.run()()
		l := c.waitLeader(-1)
		deadline := time.Now().Add(10 * time.Second)
		for { // its term's first entry committed and applied
			if st, _ := c.reps[l].node.Status(group); st.LeaderReady {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the leader never applied its term's entry")
			}
			time.Sleep(10 * time.Millisecond)
		}
		for i, r := range c.reps {
			if i != l {
				c.net.Cut(r.id, c.reps[l].id)
			}
		}
		at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
		op := &stream.Publish{Entries: []stream.Entry{{Subject: "orders.kept", Data: []byte("kept"), Time: at}}}
		const key = 41
		if err := c.reps[l].log.Propose(op, key); err != nil {
			t.Fatal(err)
		}
		// The entry in the leader's log, uncommitted, and in the followers'
		// (or past it: they may elect a leader between two looks, which
		// they do not before CheckQuorum deposes the leader, an election
		// timeout after their appends).
		for {
			lst, _ := c.reps[l].node.Status(group)
			held := lst.LastIndex > lst.Commit
			for i, r := range c.reps {
				st, _ := r.node.Status(group)
				if i != l && st.LastIndex < lst.LastIndex || st.LastIndex == lst.LastIndex && st.LastTerm != lst.Term {
					held = false
				}
			}
			if held {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the followers never received the entry (the leader's last %d)", lst.LastIndex)
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.waitLeader(l)
		if _, err, ok := c.reps[l].eng.outcome(key); ok {
			t.Fatalf("the deposed leader's publish resolved (%v) before it heard of its entry", err)
		}
		c.net.HealAll()
		var ack []byte
		for {
			a, err, ok := c.reps[l].eng.outcome(key)
			if ok && err != nil {
				t.Fatalf("the deposed leader forgot its publish (%v), which the next leader committed", err)
			}
			if ok {
				ack = a
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no outcome for the deposed leader's publish")
			}
			time.Sleep(10 * time.Millisecond)
		}
		var pa pubAck
		if err := json.Unmarshal(ack, &pa); err != nil || pa.Seq != 1 {
			t.Fatalf("PubAck %s (%v), want sequence 1", ack, err)
		}
		for _, r := range c.reps { // stored once everywhere
			deadline := time.Now().Add(10 * time.Second)
			for r.eng.stored() != 1 {
				if time.Now().After(deadline) {
					t.Fatalf("%s stored %d messages, want the one", r.id, r.eng.stored())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
}

// stored returns the messages the stream holds on this replica.
func (e *engine) stored() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.store.State(false).Msgs
}
