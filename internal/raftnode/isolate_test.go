package raftnode

import "testing"

// An isolated node takes no frame and sends none, but still steps the
// messages it had taken and applies what they commit: Settled once it
// did. What the others commit afterwards never reaches it, so a
// checkpoint taken then covers every entry its WAL holds as committed
// (a clean stop's restart applies nothing again).
func TestIsolateSettles(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.addGroup(1, 0)
	c.elect(0, 1)
	c.propose(0, 1, "a")
	c.tick(2)
	s3 := c.nodes[2].n
	if s3.Settled() {
		t.Fatal("Settled before Isolate")
	}
	// "b" appended and committed by s1 and s2; s1's appends to s3 (the
	// entry, then its commit) wait in s3's inbox when it is isolated.
	p, err := c.nodes[0].n.Propose(1, []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c.nodes[0].n.RunRound()
		c.nodes[1].n.RunRound()
		c.net.DeliverAll()
	}
	if _, err := p.Result(); err != nil {
		t.Fatalf("b: %v", err)
	}
	_, b := p.Position()
	if st := c.status(2, 1); st.Commit >= b {
		t.Fatalf("s3 learned the commit of b too early: %+v", st)
	}
	s3.Isolate()
	if s3.Settled() {
		t.Fatal("Settled with frames taken before Isolate not yet stepped")
	}
	s3.RunRound()
	if n := c.net.InFlight(); n != 0 {
		t.Fatalf("the isolated node sent %d frames", n)
	}
	if !s3.Settled() {
		t.Fatalf("not Settled once its inbox was stepped: %+v", c.status(2, 1))
	}
	st := c.status(2, 1)
	if st.Commit != b || st.Applied != b || c.nodes[2].sms[1].applied != b {
		t.Fatalf("the isolated node at commit %d applied %d (state machine %d), want %d: the frames it had taken", st.Commit, st.Applied, c.nodes[2].sms[1].applied, b)
	}
	// What s1 and s2 commit now does not reach it.
	c.propose(0, 1, "c")
	c.tick(10)
	if got := c.status(1, 1).Applied; got <= b {
		t.Fatalf("s2 applied %d: the others no longer commit", got)
	}
	if st := c.status(2, 1); st.Commit != b || st.Applied != b || !s3.Settled() {
		t.Fatalf("the isolated node moved on: %+v", st)
	}
}
