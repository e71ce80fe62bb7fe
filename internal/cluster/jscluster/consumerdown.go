package jscluster

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// Scaling a replicated consumer down to one replica (docs/cluster.md,
// "Scaling consumers"), the consumer's version of a stream's
// (scaledown.go):
//
//  1. The meta leader proposes an AssignConsumer naming one server of the
//     consumer's (the stream's kept server on a stream's scale-down to
//     one replica; on the consumer's own update, the first of
//     scaledConsumerServers' order: its group's leader, then live,
//     current replicas, a down one last); that server keeps its replica
//     ID in the group (the assignment is "unsettled":
//     meta.ConsumerAssignment.Unsettled).
//  2. The group's leader removes the other replicas one membership change
//     at a time (stepMembership), each only once the kept replica holds
//     every committed entry; a removed replica stops once it applied its
//     removal, or once the settle gave the consumer another group
//     (retireConsumers).
//  3. The kept replica, leading a group of which it is the only voter,
//     becomes the consumer of one replica (convertConsumer): the engine's
//     consumer stopped, what the group committed applied, its committed
//     state written as the consumer's files (fsynced), the group removed
//     (its tombstone fsynced), its checkpoint removed, the consumer of one
//     replica restored from the files.
//  4. It then asks the meta leader ($SYS.JSC.CONSUMER.SETTLE) to propose
//     a meta.SettleConsumer: the consumer gets a new group whose replica
//     ID 1 can bootstrap a later scale-up.
//
// A restart resumes where the disk says (runsSingle): an unsettled
// assignment whose group is not tombstoned here runs as a replica of its
// group (its checkpoint and the WAL), and step 3 starts over; once the
// tombstone is durable, the files are complete and the consumer of one
// replica restores from them.

// consumerSettleSubject carries consumerSettleMsg from the server that
// converted its replica to the meta leader (no reply; asked again every
// settleRetry while the assignment stays unsettled).
const consumerSettleSubject = "$SYS.JSC.CONSUMER.SETTLE"

// consumerSettleMsg is the body of consumerSettleSubject.
type consumerSettleMsg struct {
	Account string             `json:"account"`
	Stream  string             `json:"stream"`
	Name    string             `json:"name"`
	Group   raftnode.GroupID   `json:"group"`
	Replica raftnode.ReplicaID `json:"replica"`
}

// runsSingle reports whether this server's replica mine of consumer ca
// runs as a consumer of one replica, with the engine's local log: ca has
// one replica and is settled, or its group's tombstone for mine is
// durable here (step 3 done). An unsettled one whose group lives runs as
// a replica of that group until it converts.
func (c *Cluster) runsSingle(ca meta.ConsumerAssignment, mine meta.Replica) bool {
	return len(ca.Replicas) == 1 && (!ca.Unsettled() || c.node.Removed(ca.Group, mine.ID))
}

// convertConsumers runs step 3 for every replica of this server whose
// consumer the meta group scaled down to one replica here and that is
// ready (its group's only voter, leading).
func (c *Cluster) convertConsumers() {
	c.mu.Lock()
	var keys []consumerKey
	for k, cr := range c.creplicas {
		if cr.log != nil && time.Since(cr.convertAt) >= convertRetry {
			keys = append(keys, k)
		}
	}
	c.mu.Unlock()
	for _, k := range keys {
		ca, mine, _, here := c.consumerAssignment(k)
		cr := c.creplicaOf(k)
		if !here || len(ca.Replicas) != 1 || cr == nil || cr.log == nil || cr.ca.Group != ca.Group || cr.mine(c.name) != mine.ID {
			continue
		}
		st, err := c.node.Status(ca.Group)
		if err != nil || !settleReady(st) {
			continue
		}
		c.mu.Lock()
		acc := c.accounts[k.account]
		c.mu.Unlock()
		if acc == nil || acc.js == nil {
			continue
		}
		if err := c.convertConsumer(acc, k, cr, ca); err != nil {
			cr.convertAt = time.Now()
			c.cfg.Logf("jscluster: consumer %s > %s > %s: scaling down to one replica (the consumer stays stopped until a restart completes it): %v", k.account, k.stream, k.name, err)
		}
	}
}

// convertConsumer turns this server's replica cr of consumer k, the only
// voter of its group, into the consumer of one replica assigned as ca
// (step 3). An error leaves the consumer stopped, its group's checkpoint
// and log in place: a restart runs it as the group's replica again and
// converts it.
func (c *Cluster) convertConsumer(acc *account, k consumerKey, cr *creplica, ca meta.ConsumerAssignment) error {
	var cfg consumer.Config
	if err := json.Unmarshal(ca.Config, &cfg); err != nil {
		return err
	}
	c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s' scales down to one replica: its group %d ends here", k.account, k.stream, k.name, ca.Group)
	c.mu.Lock()
	delete(c.creplicas, k)
	c.mu.Unlock()
	cr.leads.Store(false)
	created := time.Unix(0, ca.Created)
	state, found, jerr := acc.js.DetachConsumer(k.stream, k.name, created, func() { c.awaitApplied(ca.Group) })
	if jerr != nil {
		return jerr
	}
	if !found {
		return errors.New("its replica does not run here")
	}
	files := c.keepsFiles(k, cfg)
	if files {
		if jerr := acc.js.WriteConsumerState(k.stream, k.name, cfg, created, state); jerr != nil {
			return jerr
		}
	}
	// From here on the files hold the consumer: the group may go. One
	// kept in memory (a memory stream's, whose move or rollback ends its
	// group here: memscale.go) starts from the state in memory, which a
	// restart loses, as it loses the memory stream's messages.
	if err := c.removeGroupWait(ca.Group); err != nil {
		return err
	}
	c.removeCheckpoint(ca.Group)
	if !files {
		c.handBack(k, ca.Created, state) // taken by startSingle below
	}
	if jerr := c.startSingle(acc, k, cfg, created); jerr != nil {
		return jerr
	}
	nr := &creplica{ca: ca}
	nr.leads.Store(true)
	nr.since.Store(c.cfg.Now().UnixNano())
	c.mu.Lock()
	c.creplicas[k] = nr
	c.mu.Unlock()
	c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s' runs as one replica on this server", k.account, k.stream, k.name)
	return nil
}

// awaitApplied waits, at most convertWait, until this server's replica
// of group, whose consumer no longer proposes, has applied every entry
// its log holds (with one voter, each commits once fsynced here).
func (c *Cluster) awaitApplied(group raftnode.GroupID) {
	deadline := time.Now().Add(convertWait)
	var pause backoff
	for time.Now().Before(deadline) {
		st, err := c.node.Status(group)
		if err != nil || (st.Commit >= st.LastIndex && st.Applied >= st.LastIndex) {
			return
		}
		select {
		case <-c.quit:
			return
		case <-time.After(pause.next()):
		}
	}
}

// retireConsumers stops this server's replicas of replicated consumers
// that left their assignment (a scale-down; every replica of a server
// that learned it was removed while down: removedown.go) once their group no longer
// has them: they applied their removal, are fenced, or, but for a
// scale-down to one replica (whose settle gives the consumer another
// group: reconcileConsumer stops them then), have known no leader for
// retireAfter while another voter was heard (votersHeard) or the
// consumer is led elsewhere (ledElsewhere).
func (c *Cluster) retireConsumers() {
	removed := c.removedAnswered.Load() // every replica left (removedown.go)
	c.mu.Lock()
	var keys []consumerKey
	for k, cr := range c.creplicas {
		if cr.log != nil && (cr.mine(c.name) == 0 || removed) {
			keys = append(keys, k)
		}
	}
	c.mu.Unlock()
	for _, k := range keys {
		cr := c.creplicaOf(k)
		if cr == nil {
			continue
		}
		st, err := c.node.Status(cr.ca.Group)
		retire := err != nil || st.Fenced != nil || !st.Member
		if !retire && st.Leader == 0 && len(cr.ca.Replicas) > 1 {
			if cr.leaderless.IsZero() {
				cr.leaderless = time.Now()
			}
			retire = time.Since(cr.leaderless) >= retireAfter && (c.votersHeard(st) || c.ledElsewhere(consumerInfoSubject(k)))
		} else {
			cr.leaderless = time.Time{}
		}
		if !retire {
			continue
		}
		c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s': this server's replica left the group", k.account, k.stream, k.name)
		c.mu.Lock()
		acc := c.accounts[k.account]
		c.mu.Unlock()
		if acc != nil && c.creplicaOf(k) == cr {
			c.stopConsumer(acc, k, cr)
		}
	}
}

// askConsumerSettles, for every consumer this server runs as its only
// replica whose assignment is still unsettled, asks the meta leader for
// the SettleConsumer (step 4), every settleRetry.
func (c *Cluster) askConsumerSettles() {
	c.mu.Lock()
	var msgs []consumerSettleMsg
	for k, cr := range c.creplicas {
		if cr.log == nil && cr.ca.Unsettled() && cr.ca.Replicas[0].Server == c.name && time.Since(cr.convertAt) >= settleRetry {
			cr.convertAt = time.Now()
			msgs = append(msgs, consumerSettleMsg{Account: k.account, Stream: k.stream, Name: k.name, Group: cr.ca.Group, Replica: cr.ca.Replicas[0].ID})
		}
	}
	c.mu.Unlock()
	for _, m := range msgs {
		body, _ := json.Marshal(m)
		c.publishSystem(consumerSettleSubject, "", body)
	}
}

// onConsumerSettle, on the meta leader, proposes the SettleConsumer a
// consumerSettleMsg asks for when the assignment is the one it names,
// apart from the publisher's goroutine.
func (c *Cluster) onConsumerSettle(_, _ string, _, data []byte) {
	var m consumerSettleMsg
	if err := json.Unmarshal(data, &m); err != nil || m.Stream == "" || m.Account == "" || m.Name == "" || !c.metaLeader() {
		return
	}
	ca, _, assigned, _ := c.consumerAssignment(consumerKey{m.Account, m.Stream, m.Name})
	if !assigned || !ca.Unsettled() || ca.Group != m.Group || ca.Replicas[0].ID != m.Replica {
		return
	}
	go func() {
		op := &meta.SettleConsumer{Account: m.Account, Stream: m.Stream, Name: m.Name, Group: m.Group, Replica: m.Replica}
		if _, jerr := c.propose(op); jerr == nil {
			c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s' settled as one replica", m.Account, m.Stream, m.Name)
		}
	}()
}

// consumerMember reports whether the consumer replica cr is still in its
// group's configuration as it last applied it (and not fenced).
func (c *Cluster) consumerMember(cr *creplica) bool {
	st, err := c.node.Status(cr.ca.Group)
	return err == nil && st.Fenced == nil && st.Member
}

// consumersToOne, on the meta leader scaling stream k down to one
// replica on server keep, proposes for each replicated consumer of
// shrink an AssignConsumer naming keep alone (its num_replicas, when
// set, becoming 1, as nats-server v2.15.2 remaps it), then waits, at
// most proposeTimeout, until every consumer of the stream runs alone on
// keep, settled (steps 1 to 4 above; the consumers of one replica
// singlesToKeep moves there meanwhile too). Errors: 10008 when the meta
// group cannot decide or the consumers are not through in time (the
// client's retry finds them further on).
func (c *Cluster) consumersToOne(a *account, k streamKey, keep raftnode.ServerID, shrink []meta.ConsumerAssignment) *jserr.Error {
	for _, ca := range shrink {
		op := &meta.AssignConsumer{Account: a.name, Stream: k.name, Name: ca.Name, Action: meta.Update,
			Config: withReplicas(ca.Config, 1), Created: ca.Created, Servers: []raftnode.ServerID{keep}}
		if _, jerr := c.propose(op); jerr != nil {
			return jerr
		}
		c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s' scales down to one replica on %s with its stream", a.name, k.name, ca.Name, keep)
	}
	deadline := time.Now().Add(proposeTimeout)
	var pause backoff
	for !c.consumersAlone(k, keep) {
		if time.Now().After(deadline) {
			return jserr.New(jserr.ClusterNotAvail)
		}
		select {
		case <-c.quit:
			return jserr.New(jserr.ClusterNotAvail)
		case <-time.After(pause.next()):
		}
	}
	return nil
}

// consumersAlone reports whether every consumer of stream k has one
// replica, on server, settled.
func (c *Cluster) consumersAlone(k streamKey, server raftnode.ServerID) bool {
	ok := true
	c.meta.View(func(st *meta.State) {
		for _, ca := range st.Consumers(k.account, k.name) {
			if len(ca.Replicas) != 1 || ca.Replicas[0].Server != server || ca.Unsettled() {
				ok = false
			}
		}
	})
	return ok
}

// withReplicas returns consumer config JSON config with a num_replicas
// other than 0 set to n (nats-server v2.15.2 remapConsumerAssignments);
// config itself when it needs no change or does not decode.
func withReplicas(config []byte, n int) []byte {
	var cc consumer.Config
	if json.Unmarshal(config, &cc) != nil || cc.Replicas == 0 || cc.Replicas == n {
		return config
	}
	cc.Replicas = n
	b, err := json.Marshal(&cc)
	if err != nil {
		return config
	}
	return b
}
