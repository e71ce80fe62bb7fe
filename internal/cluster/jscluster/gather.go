package jscluster

import (
	"encoding/json"
	"strings"

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
// and waits at most listInfoWait for all the answers; a stream whose
// leader did not answer is listed with what the meta leader holds (its
// replica's info, or the assignment's). A stream whose group has no
// leader, or whose servers are all out of reach, is not asked.

// streamInfoPrefix is the subject prefix of the stream info requests.
const streamInfoPrefix = "$JSC.SI."

// streamInfoSubject is the $JSC.SI subject of stream k.
func streamInfoSubject(k streamKey) string {
	return streamInfoPrefix + k.account + "." + k.name
}

// onStreamInfo answers $JSC.SI when this server's replica leads the
// stream named (apart from the publisher's goroutine; at most
// maxInfoAnswers at once, as the consumer infos).
func (c *Cluster) onStreamInfo(subject, reply string, _, _ []byte) {
	toks := strings.Split(strings.TrimPrefix(subject, streamInfoPrefix), ".")
	if reply == "" || len(toks) != 2 {
		return
	}
	k := streamKey{toks[0], toks[1]}
	if r := c.replicaOf(k); r == nil || !r.leads.Load() {
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
// stream with the servers on: this server's replica knows a leader
// elsewhere, or (holding no replica) some server of it has a route from
// here.
func (c *Cluster) worthAsking(g raftnode.GroupID, here bool, servers []raftnode.ServerID) bool {
	if here {
		st, err := c.node.Status(g)
		return err == nil && st.Leader != 0 && st.LeaderServer != c.name
	}
	off := c.offline()
	for _, s := range servers {
		if s != c.name && !off[s] {
			return true
		}
	}
	return false
}

// askStreamInfos asks the leaders of the streams ks for their infos
// (listInfoWait at most); nil for a stream whose leader did not answer.
func (c *Cluster) askStreamInfos(ks []streamKey) []*jetstream.StreamInfo {
	out := make([]*jetstream.StreamInfo, len(ks))
	if len(ks) == 0 {
		return out
	}
	subjects := make([]string, len(ks))
	for i, k := range ks {
		subjects[i] = streamInfoSubject(k)
	}
	for i, b := range c.requestAll(subjects, nil, listInfoWait) {
		var si jetstream.StreamInfo
		if b != nil && json.Unmarshal(b, &si) == nil && si.Config.Name == ks[i].name {
			out[i] = &si
		}
	}
	return out
}

// StreamInfos implements jsapi.StreamInfoGatherer for STREAM.LIST: the
// info of each stream of names (nil for one the meta group no longer
// holds), the leader's: this server's when its replica leads, else asked
// of the server that leads it; a stream whose leader did not answer is
// listed with what this server holds (StreamInfo).
func (a *account) StreamInfos(names []string) []*jetstream.StreamInfo {
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
		}
	}
	for j, si := range c.askStreamInfos(ask) {
		out[at[j]] = si
	}
	for i, name := range names {
		if out[i] == nil {
			out[i], _ = a.StreamInfo(name, jetstream.InfoOptions{})
		}
	}
	return out
}
