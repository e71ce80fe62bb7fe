package jscluster

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jsapi"
	"github.com/cairnmq/cairn/internal/raftnode"
)

var _ jsapi.StreamInfoGatherer = (*account)(nil)

// STREAM.LIST with the leaders' infos (docs/monitoring.md, "Replicas and
// the meta group"; nats-server v2.15.2 jetstream_cluster.go
// jsClusteredStreamListRequest): the meta leader lists each stream with
// the info of the server that leads it, which alone knows how current
// each replica is. It asks the others in the system account (internal.go),
// as nats-server does, on
//
//	$JSC.SI.<account>.<stream>   the server whose replica leads the stream
//	                             answers with its info (a jetstream.StreamInfo)
//
// The request's body (streamInfoAsk) widens who answers: for STREAM.LIST
// a replica whose group is leaderless (leaderless.go) answers too, after
// leaderlessAnswerDelay, as nats-server v2.15.2's members of a group
// without quorum do (processClusterStreamInfoRequest); for the account
// info's storage any replica answers at once (its bytes are what the
// account's usage counts, whoever leads). Either only if it holds what
// its group committed (raftnode GroupStatus.HoldsCommitted): a replica
// that joined empty and was not promoted yet would report the stream
// without its messages. An empty body is answered by the leader alone
// (hasLeader and waitLeader rely on that).
//
// The meta leader waits at most listInfoWait for all the answers; a
// stream whose leader did not answer is left out of the list and named
// in its "missing", as nats-server's. A stream none of whose servers is
// in reach is not asked: it is listed with what the meta leader holds
// (its replica's info, or the assignment's) and named in "missing" too.

// streamInfoPrefix is the subject prefix of the stream info requests.
const streamInfoPrefix = "$JSC.SI."

// streamInfoSubject is the $JSC.SI subject of stream k.
func streamInfoSubject(k streamKey) string {
	return streamInfoPrefix + k.account + "." + k.name
}

// streamInfoAsk is the optional JSON body of a $JSC.SI request: who
// answers besides the stream's leader. A body that does not decode is
// taken as empty (the leader alone).
type streamInfoAsk struct {
	// Leaderless: a replica of a leaderless group answers too, after
	// leaderlessAnswerDelay (STREAM.LIST).
	Leaderless bool `json:"leaderless,omitempty"`
	// Replica: any replica that holds what its group committed
	// answers, at once (the account's usage).
	Replica bool `json:"replica,omitempty"`
}

// leaderlessAnswerDelay is how long a replica of a leaderless group
// waits before it answers a $JSC.SI request for STREAM.LIST, so that a
// leader elected meanwhile answers first (nats-server v2.15.2 waits
// 500 ms the same way in processClusterStreamInfoRequest).
const leaderlessAnswerDelay = 500 * time.Millisecond

// infoAnswerDelay reports whether this server answers a $JSC.SI request
// ask for its replica r of a stream, and after how long.
func (c *Cluster) infoAnswerDelay(r *replica, ask streamInfoAsk) (time.Duration, bool) {
	switch {
	case r == nil:
		return 0, false
	case r.leads.Load():
		return 0, true
	case !c.stillAssigned(r.mine()):
		return 0, false // a replica that left its assignment (leaderless.go)
	case ask.Replica && c.holdsCommitted(r.sa.Group):
		return 0, true
	case ask.Leaderless && r.log != nil && c.groupLeaderless(r.sa.Group):
		return leaderlessAnswerDelay, true
	}
	return 0, false
}

// onStreamInfo answers $JSC.SI when this server's replica leads the
// stream named, or when the request's body (streamInfoAsk) asks its
// replica too (apart from the publisher's goroutine; at most
// maxInfoAnswers at once, as the consumer infos).
func (c *Cluster) onStreamInfo(subject, reply string, _, data []byte) {
	toks := strings.Split(strings.TrimPrefix(subject, streamInfoPrefix), ".")
	if reply == "" || len(toks) != 2 {
		return
	}
	k := streamKey{toks[0], toks[1]}
	var ask streamInfoAsk
	if len(data) > 0 && json.Unmarshal(data, &ask) != nil {
		ask = streamInfoAsk{}
	}
	delay, ok := c.infoAnswerDelay(c.replicaOf(k), ask)
	if !ok {
		return
	}
	s := &c.sys
	s.mu.Lock()
	if s.busy >= maxInfoAnswers {
		s.mu.Unlock()
		return
	}
	s.busy++
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			s.busy--
			s.mu.Unlock()
		}()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-c.quit:
				return
			}
		}
		acc := c.engineOf(k.account)
		if acc == nil {
			return
		}
		c.announceStream(c.replicaOf(k))
		si, jerr := acc.js.StreamInfo(k.name, jetstream.InfoOptions{})
		if jerr != nil {
			return
		}
		if b, err := json.Marshal(si); err == nil {
			c.publishSystem(reply, "", b)
		}
	}()
}

// announceStream flushes this server's routes once after replica r came
// to lead (its stream subscribed to its subjects when it did), so that
// the subscriptions have reached every peer server: the answer to a
// stream create waits for it (waitLeader), so a publish right after the
// create, through any server, finds the stream, as it does in
// nats-server, whose stream leader answers the create itself.
func (c *Cluster) announceStream(r *replica) {
	if r == nil || !r.leads.Load() || r.announced.Load() {
		return
	}
	if c.host.FlushRoutes(announceTimeout) {
		r.announced.Store(true)
	}
}

// engineOf returns the account record of name when its engine runs here.
func (c *Cluster) engineOf(name string) *account {
	c.mu.Lock()
	defer c.mu.Unlock()
	if acc := c.accounts[name]; acc != nil && acc.js != nil {
		return acc
	}
	return nil
}

// worthAsking reports whether another server may lead group g of a
// stream with the servers on, or answer for it: this server's replica
// knows a leader elsewhere; or some server of it has a route from here,
// and this server holds no replica of it (here false), or its replica
// here knows no leader and does not hold what the group committed (it
// joined empty and was not promoted yet: a replica elsewhere that holds
// the stream's data answers a leaderless ask, leaderless.go).
//
// A replica assigned here whose group does not run here yet (being
// created) is as no replica: the others are asked.
func (c *Cluster) worthAsking(g raftnode.GroupID, here bool, servers []raftnode.ServerID) bool {
	if here {
		st, err := c.node.Status(g)
		switch {
		case err != nil:
		case st.Leader != 0:
			return st.LeaderServer != c.name
		case st.HoldsCommitted:
			return false
		}
	}
	return c.inReach(servers)
}

// inReach reports whether a server of servers other than this one is
// online (a route to it, not offline).
func (c *Cluster) inReach(servers []raftnode.ServerID) bool {
	off := c.offline()
	for _, s := range servers {
		if s != c.name && !off[s] {
			return true
		}
	}
	return false
}

// askStreamInfos asks the leaders of the streams ks for their infos
// (listInfoWait at most), and whoever else ask names (streamInfoAsk);
// nil for a stream nobody answered for.
func (c *Cluster) askStreamInfos(ks []streamKey, ask streamInfoAsk) []*jetstream.StreamInfo {
	out := make([]*jetstream.StreamInfo, len(ks))
	if len(ks) == 0 {
		return out
	}
	subjects := make([]string, len(ks))
	for i, k := range ks {
		subjects[i] = streamInfoSubject(k)
	}
	var body []byte
	if ask != (streamInfoAsk{}) {
		body, _ = json.Marshal(ask)
	}
	for i, b := range c.requestAll(subjects, body, listInfoWait) {
		var si jetstream.StreamInfo
		if b != nil && json.Unmarshal(b, &si) == nil && si.Config.Name == ks[i].name {
			out[i] = &si
		}
	}
	return out
}

// StreamInfos implements jsapi.StreamInfoGatherer for STREAM.LIST: the
// info of each stream of names (nil for one the meta group no longer
// holds or whose leader did not answer), the leader's: this server's
// when its replica leads, else asked of the server that leads it (or of
// the replicas of a leaderless group). missing names the streams whose
// leader did not answer in time, and those none of whose servers is in
// reach, which are listed with their config and an empty state, as
// nats-server v2.15.2 lists a stream whose peers are all offline. A
// leaderless stream whose replica here does not hold what its group
// committed (not promoted yet), or whose group does not run here yet, is
// asked of the others like a stream this server holds no replica of; one
// whose replica here was elected and has not applied what its group
// committed is missing (a trial of the test suite saw such a list show
// an R2 stream's 30 messages as 0).
func (a *account) StreamInfos(names []string) (infos []*jetstream.StreamInfo, missing []string) {
	c := a.c
	out := make([]*jetstream.StreamInfo, len(names))
	var ask []streamKey
	var at []int
	for i, name := range names {
		k := streamKey{a.name, name}
		sa, _, ok, here := c.assignment(k)
		if !ok {
			continue
		}
		if r := c.replicaOf(k); r != nil && r.leads.Load() {
			out[i], _ = a.StreamInfo(name, jetstream.InfoOptions{})
			continue
		}
		if c.worthAsking(sa.Group, here && len(sa.Replicas) > 1, meta.Servers(sa.Replicas)) {
			ask = append(ask, k)
			at = append(at, i)
			continue
		}
		if !here || len(sa.Replicas) > 1 && !c.readyHere(sa.Group) {
			// All its servers out of reach (the others', when this
			// server's replica does not hold the stream's data yet), or
			// its replica here was elected and has yet to apply what the
			// group committed: missing, and listed with its config alone
			// only when nobody else can answer (nats-server v2.15.2
			// lists a stream by hand only when all its peers are
			// offline, jsClusteredStreamListRequest).
			missing = append(missing, name)
			if !c.inReach(meta.Servers(sa.Replicas)) {
				out[i] = a.infoOf(sa)
			}
			continue
		}
		out[i], _ = a.StreamInfo(name, jetstream.InfoOptions{})
	}
	for j, si := range c.askStreamInfos(ask, streamInfoAsk{Leaderless: true}) {
		if si == nil {
			missing = append(missing, names[at[j]])
		}
		out[at[j]] = si
	}
	return out, missing
}
