package jscluster

import (
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// A group of two replicas that lost one for good (docs/cluster.md, "A
// stream of two replicas"). A stream or consumer of two replicas
// commits only what both hold, so when the server of one is removed
// while it is down (SERVER.REMOVE, STREAM.PEER.REMOVE), or its replica
// is replaced because its store changed, the survivor can never be
// elected again (it needs the lost one's vote) and no leader can carry
// the assignment's change out: the stream stayed leaderless for good.
// nats-server v2.15.2 shrinks such a group and adds the new peer.
//
// Here the survivor, still in the assignment, makes itself the group's
// only voter (raftnode Node.ForceOut) once its group has had no leader
// for forceOutAfter, its configuration is exactly it and the other
// voter, that voter is no longer in the assignment, and it has not been
// heard within the contact window. It holds every committed entry (both
// voters held each), so nothing acknowledged is lost. It then leads
// alone and adds the assignment's new replica the usual way
// (reconcileMembership: a learner caught up, then promoted). The lost
// replica's server, if it comes back, finds its replica out of the
// assignment and retires it. The same holds for a group scaled down to
// the survivor alone whose other voter went down first (a scale-down to
// one replica, a move of a stream or consumer of one replica rolled
// back: singlestream.go): its removal, proposed by the survivor as
// leader, never committed, and the survivor then converts as usual.
// The stream's conversion waits for its consumers here to leave their
// groups (consumersInGroups), so one forced out later keeps its state.

// forceOutAfter is how long a replica of a group of two whose other
// voter left the assignment waits without a leader before it forces it
// out, and then between two asks. The group is leaderless only once
// the other has been silent for an election timeout already, and the
// force loses nothing, so the wait is short: a stream a trial saw
// unavailable 17 s after `nats stream cluster peer-remove` with a 10 s
// wait (nats-server v2.15.2: 0.2 s; after a SERVER.REMOVE about 10 s).
const forceOutAfter = 2 * time.Second

// forceLostVoters runs forceLostVoter for every replicated stream and
// consumer this server holds a replica of in the assignment.
func (c *Cluster) forceLostVoters() {
	type job struct {
		group raftnode.GroupID
		want  []meta.Replica
		since *time.Time
		label string
	}
	var jobs []job
	c.mu.Lock()
	for k, r := range c.replicas {
		if r.log != nil && r.mine() != 0 {
			// An assignment of this replica alone too: a scale-down
			// to one replica, or a move of a stream of one replica
			// rolled back (singlestream.go), whose other voter is
			// down.
			jobs = append(jobs, job{r.sa.Group, r.sa.Replicas, &r.forceSince, "stream '" + k.account + " > " + k.name + "'"})
		}
	}
	for k, cr := range c.creplicas {
		if cr.log != nil && cr.mine(c.name) != 0 { // as for a stream, scaled down to this replica too
			jobs = append(jobs, job{cr.ca.Group, cr.ca.Replicas, &cr.forceSince, "consumer '" + k.account + " > " + k.stream + " > " + k.name + "'"})
		}
	}
	c.mu.Unlock()
	for _, j := range jobs {
		c.forceLostVoter(j.group, j.want, j.since, j.label)
	}
}

// forceLostVoter forces the lost voter of group out (ForceOut) once
// lostVoter has named it for forceOutAfter in a row; *since is when it
// was first named (zero: not now), the run goroutine's.
func (c *Cluster) forceLostVoter(group raftnode.GroupID, want []meta.Replica, since *time.Time, label string) {
	st, err := c.node.Status(group)
	gone, ok := raftnode.ReplicaID(0), false
	if err == nil {
		gone, ok = lostVoter(st, want, c.node.ContactWindow())
	}
	now := time.Now()
	switch {
	case !ok:
		*since = time.Time{}
	case since.IsZero():
		*since = now
	case now.Sub(*since) >= forceOutAfter:
		*since = now
		if err := c.node.ForceOut(group, gone); err == nil {
			c.cfg.Logf("JetStream cluster: %s group %d: no leader for %v, and its other voter (replica %d) left the assignment: forcing this replica to lead alone (nothing committed is lost in a group of two)", label, group, forceOutAfter, gone)
		}
	}
}

// lostVoter returns the other voter of a group of two, as this replica
// (status st) applied its configuration, when that voter can be forced
// out: the replica is a live member that knows no leader, the group's
// voters are it and the other alone (learners change no quorum), the other is not
// among want (the assignment) and was not heard within window. ok is
// false otherwise.
func lostVoter(st raftnode.GroupStatus, want []meta.Replica, window time.Duration) (gone raftnode.ReplicaID, ok bool) {
	if st.Fenced != nil || !st.Member || st.Role == raftnode.Leader || st.Leader != 0 {
		return 0, false
	}
	if len(st.Voters) != 2 || !slices.Contains(st.Voters, st.Replica) {
		return 0, false
	}
	gone = st.Voters[0]
	if gone == st.Replica {
		gone = st.Voters[1]
	}
	if slices.ContainsFunc(want, func(x meta.Replica) bool { return x.ID == gone }) {
		return 0, false
	}
	for _, p := range st.Peers {
		if p.Replica == gone && p.Heard && p.Ago <= window {
			return 0, false
		}
	}
	return gone, true
}
