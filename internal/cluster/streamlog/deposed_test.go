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
// leader's appends reach one follower, whose answers do not reach it,
// and nothing reaches the other: the entry is on a majority, uncommitted;
// then the leader is cut off, CheckQuorum deposes it, the follower
// holding the entry is elected and commits it; the network heals.
func TestDeposedLeaderAnswersCommittedPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		defer c.run()()
		l := c.waitLeader(-1)
		f1, f2 := (l+1)%3, (l+2)%3
		c.net.Cut(c.reps[f1].id, c.reps[l].id)
		c.net.Partition(c.reps[l].id, c.reps[f2].id)
		at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
		op := &stream.Publish{Entries: []stream.Entry{{Subject: "orders.kept", Data: []byte("kept"), Time: at}}}
		const key = 41
		if err := c.reps[l].log.Propose(op, key); err != nil {
			t.Fatal(err)
		}
		lead, _ := c.reps[l].node.Status(group)
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, _ := c.reps[f1].node.Status(group)
			if st.LastIndex >= lead.LastIndex+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never received the entry (last %d)", c.reps[f1].id, st.LastIndex)
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.net.Partition(c.reps[l].id, c.reps[f1].id)
		if nl := c.waitLeader(l); nl != f1 {
			t.Fatalf("new leader %s, want %s (the only one holding the entry)", c.reps[nl].id, c.reps[f1].id)
		}
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
