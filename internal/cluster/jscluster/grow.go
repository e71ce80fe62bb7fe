package jscluster

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// Growing the meta group (docs/cluster.md, "Growing the meta group").
// A server without a voters record decides how it enters the meta group
// from what its routed peers' transport hellos said (their catalogue,
// whether they ran a meta group, the servers their routes name) and from
// the meta leader's messages (raftnode Node.Invitation):
//
//   - join: a peer's catalogue does not know this server (a server added
//     to a running cluster), or knows it by another store (a wiped one);
//     or the meta leader is already sending to this server's replica. The
//     replica starts empty; the meta leader, which catalogues every routed
//     server that sent a hello, adds it as a learner, sends it the meta
//     snapshot and promotes it (reconcileMeta), one change at a time.
//   - wait: a peer ran a meta group when it dialed (its catalogue may not
//     have been filled yet): the leader's invitation follows.
//   - bootstrap with the servers the routes name, once every route
//     resolved, every one of them sent its hello, no routed server is
//     outside that set and every peer said its routes name the same set
//     (a cluster whose servers all name each other: every server
//     bootstraps the same voters). A server says so again once its own
//     routes resolved, and that it runs a meta group once it does
//     (Transport.Rehello).
//   - seed: otherwise (each server names a seed, or one other, or this
//     server names none and nobody is routed here yet), the server with
//     the smallest name among itself and the routed servers bootstraps a
//     meta group of itself alone once that view held for seedSettle; the
//     others join it.

// seedSettle is how long the seed rule's view of the cluster (the routed
// servers, their hellos) must hold before the smallest-named server
// bootstraps alone: routes and their gossip settle within it.
const seedSettle = 2 * time.Second

// seedView is the seed rule's view: the routed servers it saw and since
// when.
type seedView struct {
	key   string
	since time.Time
}

// inMeta reports whether this server runs the meta group and was not
// removed from it (the transport's hello: Config.Meta).
func (c *Cluster) inMeta() bool {
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	return started && !c.removedSelf()
}

// routeMembers returns the servers the routes name once every route
// resolved, nil before (the transport's hello: Config.Members).
func (c *Cluster) routeMembers() []string {
	names, complete := c.host.ClusterMembers()
	if !complete {
		return nil
	}
	return names
}

// helloPeers returns the other servers the routes name and the routed
// servers that sent a hello, sorted.
func (c *Cluster) helloPeers(names []string) []string {
	set := map[string]bool{}
	for _, n := range names {
		if n != string(c.name) {
			set[n] = true
		}
	}
	for _, p := range c.host.ClusterPeers() {
		if p.Name == "" || p.Name == string(c.name) {
			continue
		}
		if _, ok := c.tr.PeerIncarnation(raftnode.ServerID(p.Name)); ok {
			set[p.Name] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// joinOrBootstrap decides how this server, without a record, enters the
// meta group (ok false: not yet); names and complete are the servers the
// routes name (Host.ClusterMembers). The rules are above. newReplica:
// it joins a meta group that ran without it (a real join, logged as
// such by startMeta), not one of a cluster forming (invitedLine).
func (c *Cluster) joinOrBootstrap(names []string, complete bool) (rec votersFile, newReplica, ok bool) {
	self := c.node.Incarnation()
	peers := c.helloPeers(names)
	for _, n := range peers {
		known := c.tr.PeerKnown(raftnode.ServerID(n))
		if len(known) == 0 {
			continue
		}
		k, ok := known[c.name]
		if ok && k == self {
			continue
		}
		if ok {
			c.cfg.Infof("JetStream cluster: %s knows this server by another store: joining the meta group as a new replica", n)
		} else {
			c.cfg.Infof("JetStream cluster: %s runs a meta group without this server: joining it as a new member", n)
		}
		return joinRecord(c.name, self, known), true, true
	}
	if iv, ok := c.node.Invitation(meta.MetaGroup); ok && iv.To == metaReplica(self) {
		if inc, ok := c.tr.PeerIncarnation(iv.From); ok && metaReplica(inc) == iv.Sender {
			line, join := invitedLine(iv.From, c.tr.PeerKnown(iv.From), c.name, self)
			c.cfg.Infof("%s", line)
			return joinRecord(c.name, self, map[raftnode.ServerID]raftnode.Incarnation{iv.From: inc}), join, true
		}
	}
	for _, n := range peers {
		if inMeta, _, _ := c.tr.PeerMeta(raftnode.ServerID(n)); inMeta {
			return votersFile{}, false, false // its leader's invitation follows
		}
	}
	if !complete {
		return votersFile{}, false, false
	}
	incs := map[string]string{string(c.name): self.String()}
	for _, n := range peers {
		inc, ok := c.tr.PeerIncarnation(raftnode.ServerID(n))
		if !ok {
			return votersFile{}, false, false
		}
		incs[n] = inc.String()
	}
	if len(peers) > 0 && c.namesAgree(names, peers) {
		for n := range incs {
			if !slices.Contains(names, n) {
				delete(incs, n)
			}
		}
		return votersFile{Voters: names, Incarnations: incs}, false, true
	}
	rec, ok = c.seedBootstrap(peers, self)
	return rec, false, ok
}

// joinRecord is the record of server self (store self) joining a meta
// group whose members known names.
func joinRecord(name raftnode.ServerID, self raftnode.Incarnation, known map[raftnode.ServerID]raftnode.Incarnation) votersFile {
	rec := votersFile{Join: true, Incarnations: map[string]string{}}
	for m, inc := range known {
		rec.Voters = append(rec.Voters, string(m))
		rec.Incarnations[string(m)] = inc.String()
	}
	if _, ok := known[name]; !ok {
		rec.Voters = append(rec.Voters, string(name))
	}
	rec.Incarnations[string(name)] = self.String()
	slices.Sort(rec.Voters)
	return rec
}

// namesAgree reports whether every server that sent a hello (peers) is
// among names and said its routes name the same set: the servers all
// name each other and bootstrap the same voters. A peer that has not
// said yet (its routes had not all resolved when it dialed) is waited
// for: it says so again once they have (Transport.Rehello).
func (c *Cluster) namesAgree(names, peers []string) bool {
	for _, n := range peers {
		if !slices.Contains(names, n) {
			return false
		}
		if _, members, _ := c.tr.PeerMeta(raftnode.ServerID(n)); !slices.Equal(members, names) {
			return false
		}
	}
	return true
}

// seedBootstrap is the seed rule: this server bootstraps a meta group of
// itself alone when its name is the smallest of peers' and its own, and
// the view (the peers, each of whose routes resolved) held for
// seedSettle. The others join it (joinOrBootstrap).
func (c *Cluster) seedBootstrap(peers []string, self raftnode.Incarnation) (votersFile, bool) {
	for _, n := range peers {
		if n < string(c.name) {
			c.seed = seedView{}
			return votersFile{}, false
		}
		if _, members, _ := c.tr.PeerMeta(raftnode.ServerID(n)); members == nil {
			c.seed = seedView{}
			return votersFile{}, false
		}
	}
	key := strings.Join(peers, ",")
	if c.seed.key != key || c.seed.since.IsZero() {
		c.seed = seedView{key: key, since: time.Now()}
		return votersFile{}, false
	}
	if time.Since(c.seed.since) < seedSettle {
		return votersFile{}, false
	}
	c.cfg.Infof("JetStream cluster: the routes name different servers (%v routed here): this server, the first by name, starts the meta group; the others join it", peers)
	return votersFile{Voters: []string{string(c.name)}, Incarnations: map[string]string{string(c.name): self.String()}}, true
}

// catalogue, on the meta leader, proposes AddServer for itself while the
// catalogue lacks it or holds another incarnation or other tags (a
// server restarted with other server_tags is placed by its new ones), and
// likewise for each server the routes name or that is routed here and
// sent its hello (reconcileMeta then adds its meta replica). A server
// removed (SERVER.REMOVE) is not catalogued again while it comes with
// the store it was removed with, under its name or another
// (storeRemoved); nor is a routed server whose hello shows another meta
// group's catalogue (one without this server).
func (c *Cluster) catalogue() {
	if !c.metaLeader() {
		return
	}
	type ident struct {
		inc  raftnode.Incarnation
		tags []string
	}
	want := map[raftnode.ServerID]ident{c.name: {c.node.Incarnation(), c.cfg.Tags}}
	names, _ := c.host.ClusterMembers()
	for _, n := range c.helloPeers(names) {
		id := raftnode.ServerID(n)
		inc, ok := c.tr.PeerIncarnation(id)
		if !ok {
			continue
		}
		if known := c.tr.PeerKnown(id); len(known) > 0 {
			if _, ok := known[c.name]; !ok {
				continue // another meta group's
			}
		}
		want[id] = ident{inc, c.tr.PeerTags(id)}
	}
	var missing []raftnode.ServerID
	c.meta.View(func(st *meta.State) {
		for n, id := range want {
			sv, ok := st.Server(n)
			switch {
			case ok && sv.Removed && sv.Incarnation == id.inc:
			case !ok && storeRemoved(st, id.inc): // renamed after its removal
			case !ok || sv.Removed || sv.Incarnation != id.inc || !slices.Equal(sv.Tags, id.tags):
				missing = append(missing, n)
			}
		}
	})
	slices.Sort(missing)
	for _, n := range missing {
		op := &meta.AddServer{Name: n, Cluster: c.host.ClusterName(), Incarnation: want[n].inc, Tags: want[n].tags}
		if _, err := c.meta.Propose(op); err != nil {
			return
		}
	}
	c.reconcileMeta()
}

// strangerGrace is how long a routed server may be outside this server's
// meta group before warnStrangers reports it: a server joining is
// catalogued and added within it.
const strangerGrace = 15 * time.Second

// stranger is a routed server outside this server's meta group: since
// when, and whether it was reported.
type stranger struct {
	since    time.Time
	reported bool
}

// warnStrangers logs at [WRN], once per server, each routed server that
// stayed outside this server's meta group for strangerGrace: it runs
// another meta group (it was started on its own, or its routes reached
// this cluster only after it bootstrapped), or no clustered JetStream,
// and neither group serves the other's JetStream. A server joining is
// added by the meta leader well within the grace (docs/cluster.md,
// "Growing the meta group").
func (c *Cluster) warnStrangers() {
	routed := c.host.ClusterPeers()
	c.mu.Lock()
	peers := slices.Clone(c.metaPeers)
	c.mu.Unlock()
	if len(peers) == 0 {
		return // not in a meta group yet
	}
	var names []string
	for _, p := range peers {
		names = append(names, string(p.Server))
	}
	slices.Sort(names)
	names = slices.Compact(names)
	now := time.Now()
	for _, rp := range routed {
		n := rp.Name
		if n == "" || n == string(c.name) || slices.Contains(names, n) {
			if c.strangers != nil {
				delete(c.strangers, n)
			}
			continue
		}
		if c.strangers == nil {
			c.strangers = map[string]stranger{}
		}
		s, ok := c.strangers[n]
		if !ok {
			c.strangers[n] = stranger{since: now}
			continue
		}
		if s.reported || now.Sub(s.since) < strangerGrace {
			continue
		}
		s.reported = true
		c.strangers[n] = s
		c.cfg.Logf("JetStream cluster: server %s is routed here but is not in this server's meta group %v: it runs another meta group or no clustered JetStream; JetStream is not shared with it", n, names)
	}
}
