package meta

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
)

// excludeTag on a server keeps every stream off it (nats-server v2.15.2
// jsExcludePlacement).
const excludeTag = "!jetstream"

// PlaceRequest is what placing a stream's replicas needs besides the
// state. The proposer fills it: Place is a pure function, so the same
// request on the same state gives the same servers.
type PlaceRequest struct {
	// Replicas is the number of servers wanted (num_replicas, 1 when 0).
	Replicas int
	// Cluster is the cluster to place in: the config's placement.cluster
	// if set, else the cluster of the server the request came from
	// (nats-server's ci.Cluster; for a scale-up, the stream's cluster).
	Cluster string
	// Tags are the config's placement.tags: a server must have each tag,
	// and must not have a tag written "!tag". Compared lowercased and
	// trimmed, as nats-server's tag lists do.
	Tags []string
	// UniqueTag is the jetstream { unique_tag } prefix (lowercased): no
	// two replicas on servers sharing a tag with that prefix, and a
	// server without one is not eligible. Ignored when Tags name a tag
	// with the prefix. Empty: no such rule.
	UniqueTag string
	// Existing are the servers already holding the stream (a scale-up),
	// kept first; if there are at least Replicas of them, the first
	// Replicas are the answer (a scale-down keeps the first: put the
	// leader first).
	Existing []raftnode.ServerID
	// Exclude are servers never chosen (a peer being removed).
	Exclude []raftnode.ServerID
	// Offline are servers known to be down (from the cluster's liveness):
	// still eligible, ranked after every online one, and not counted
	// towards the quorum of online servers the group needs.
	Offline map[raftnode.ServerID]bool
	// Seed breaks ties between equally loaded servers (the proposer draws
	// it; tests fix it).
	Seed uint64
}

// Place chooses the servers of a new stream, or of a stream scaling up,
// as nats-server v2.15.2 selectPeerGroup does: the catalogue's servers
// that are not removed, in req.Cluster, without the "!jetstream" tag,
// matching req.Tags, respecting the unique tag; online before offline,
// then fewest replicas held (State.Load) first, ties broken by req.Seed.
// Storage limits are not checked: the catalogue has no storage figures
// yet. Too few eligible servers, or fewer online than a quorum of
// req.Replicas, give 10005 "no suitable peers for placement" followed by
// nats-server's reasons (", peer offline", ", exclude tag set", ", server
// tag not unique", ", miscellaneous issue" (no cluster named), ",
// jetstream not enabled in cluster", ", tags not matched ['x']", ", tags
// excluded ['x']"; tags sorted, where nats-server's order is its map's).
func Place(s *State, req PlaceRequest) ([]raftnode.ServerID, *jserr.Error) {
	var why placeError
	if req.Cluster == "" {
		why.misc = true // nats-server: no cluster to place in
		return nil, jserr.New(jserr.ClusterNoPeers, jserr.Sub("err", why.String()))
	}
	r := max(req.Replicas, 1)
	if len(req.Existing) >= r {
		return slices.Clone(req.Existing[:r]), nil
	}
	uniq := req.uniqueTag()
	owners := map[string]bool{} // unique tags taken
	if uniq != "" {
		for _, srv := range req.Existing {
			if sv := s.servers[srv]; sv != nil {
				if t, ok := uniqueTag(sv, uniq); ok {
					owners[t] = true
				}
			}
		}
	}
	load := s.Load()
	var cands []candidate
	live := 0
	for _, sv := range s.Servers() {
		if sv.Removed {
			continue
		}
		live++
		if sv.Cluster != req.Cluster || slices.Contains(req.Exclude, sv.Name) || slices.Contains(req.Existing, sv.Name) {
			continue
		}
		if hasTag(sv.Tags, excludeTag) {
			why.excludeTag = true
			continue
		}
		if !why.tagsMatch(sv.Tags, req.Tags) {
			continue
		}
		c := candidate{name: sv.Name, offline: req.Offline[sv.Name], load: load[sv.Name], tie: tieBreak(req.Seed, sv.Name)}
		if uniq != "" {
			var ok bool
			if c.unique, ok = uniqueTag(&sv, uniq); !ok {
				why.uniqueTag = true
				continue
			}
		}
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(boolByte(a.offline), boolByte(b.offline)), cmp.Compare(a.load, b.load), cmp.Compare(a.tie, b.tie), cmp.Compare(a.name, b.name))
	})
	// The best ranked server of each unique tag stays eligible.
	online := 0
	cands = slices.DeleteFunc(cands, func(c candidate) bool {
		if uniq != "" {
			if owners[c.unique] {
				why.uniqueTag = true
				return true
			}
			owners[c.unique] = true
		}
		if !c.offline {
			online++
		}
		return false
	})
	need := r - len(req.Existing)
	missingQuorum := online+len(req.Existing) < r/2+1
	if len(cands) < need || missingQuorum {
		if live == 0 {
			why.noJetStream = true
		} else if len(cands) >= need {
			why.offline = true
		}
		return nil, jserr.New(jserr.ClusterNoPeers, jserr.Sub("err", why.String()))
	}
	out := slices.Clone(req.Existing)
	for _, c := range cands[:need] {
		out = append(out, c.name)
	}
	return out, nil
}

// uniqueTag is req.UniqueTag, or "" when req.Tags name a tag with that
// prefix (listed explicitly: no uniqueness rule).
func (req *PlaceRequest) uniqueTag() string {
	for _, t := range req.Tags {
		if req.UniqueTag != "" && strings.HasPrefix(strings.TrimPrefix(t, "!"), req.UniqueTag) {
			return ""
		}
	}
	return req.UniqueTag
}

// Eligible reports whether Place could choose server srv for req,
// leaving aside load, Existing, Exclude and the other servers' unique
// tags: it is in the catalogue, not removed, in req.Cluster, without the
// "!jetstream" tag, matching req.Tags, and holding a tag with the unique
// prefix when that rule applies. A stream's move keeps its servers that
// are (docs/cluster.md, "Moving a stream").
func Eligible(s *State, req PlaceRequest, srv raftnode.ServerID) bool {
	sv := s.servers[srv]
	if sv == nil || sv.Removed || sv.Cluster != req.Cluster || hasTag(sv.Tags, excludeTag) {
		return false
	}
	var why placeError
	if !why.tagsMatch(sv.Tags, req.Tags) {
		return false
	}
	if uniq := req.uniqueTag(); uniq != "" {
		if _, ok := uniqueTag(sv, uniq); !ok {
			return false
		}
	}
	return true
}

// ConsumerPlaceRequest is what placing a consumer's replicas needs
// besides the state and its stream's assignment.
type ConsumerPlaceRequest struct {
	// Replicas is the consumer's replica count
	// (consumer.Config.EffectiveReplicas, computed by the proposer).
	Replicas int
	// Offline are the servers known to be down: they do not count
	// towards the quorum of online servers, and are not chosen when
	// choosing fewer servers than the stream has.
	Offline map[raftnode.ServerID]bool
	// Behind are the servers whose meta replica lags the meta leader
	// (nats-server IsFollowerCaughtUp false): chosen after the others.
	Behind map[raftnode.ServerID]bool
	// Unfit are the servers whose replica of the stream cannot serve it
	// (fenced, reported to the meta leader to be replaced): chosen after
	// every other, as nats-server v2.15.2 prefers the stream's members
	// that hold its data (raftGroup preferMembers); a consumer placed
	// there would not start before the replica's replacement caught up.
	Unfit map[raftnode.ServerID]bool
	// Seed orders the choice (the proposer draws it; tests fix it).
	Seed uint64
}

// PlaceConsumer chooses the servers of a new consumer among its stream's
// servers, as nats-server v2.15.2 createGroupForConsumer does: all of
// them when req.Replicas equals their number; else req.Replicas of the
// online ones in an order drawn from req.Seed (nats-server shuffles),
// those whose stream replica is not unfit (req.Unfit) first, then those
// whose meta replica is caught up. More replicas than the
// stream has, or fewer online servers than a quorum of req.Replicas (or
// than req.Replicas, when choosing), give 10023 "insufficient
// resources", the error nats-server answers then.
func PlaceConsumer(s *State, stream StreamAssignment, req ConsumerPlaceRequest) ([]raftnode.ServerID, *jserr.Error) {
	peers := Servers(stream.Replicas)
	r := max(req.Replicas, 1)
	if r > len(peers) {
		return nil, jserr.New(jserr.InsufficientResources)
	}
	var active []candidate
	for _, p := range peers {
		if sv := s.servers[p]; !req.Offline[p] && sv != nil && !sv.Removed {
			active = append(active, candidate{name: p, offline: req.Behind[p], unfit: req.Unfit[p], tie: tieBreak(req.Seed, p)})
		}
	}
	if len(active) < r/2+1 {
		return nil, jserr.New(jserr.InsufficientResources)
	}
	if r == len(peers) {
		return peers, nil
	}
	if len(active) < r {
		return nil, jserr.New(jserr.InsufficientResources)
	}
	slices.SortFunc(active, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(boolByte(a.unfit), boolByte(b.unfit)), cmp.Compare(boolByte(a.offline), boolByte(b.offline)), cmp.Compare(a.tie, b.tie), cmp.Compare(a.name, b.name))
	})
	out := make([]raftnode.ServerID, r)
	for i := range out {
		out[i] = active[i].name
	}
	return out, nil
}

type candidate struct {
	name    raftnode.ServerID
	offline bool // for a consumer: its meta replica lags
	unfit   bool // for a consumer: its stream replica is fenced
	load    int
	tie     uint64
	unique  string // its tag with the unique prefix
}

// tieBreak orders equally ranked servers by a hash of the seed and the
// name: a different order per seed, the same for the same seed.
func tieBreak(seed uint64, name raftnode.ServerID) uint64 {
	h := fnv.New64a()
	h.Write(binary.LittleEndian.AppendUint64(nil, seed))
	h.Write([]byte(name))
	return h.Sum64()
}

func normTag(t string) string { return strings.ToLower(strings.TrimSpace(t)) }

func hasTag(tags []string, t string) bool {
	t = normTag(t)
	return slices.ContainsFunc(tags, func(x string) bool { return normTag(x) == t })
}

// uniqueTag returns the server's first tag with the prefix.
func uniqueTag(sv *Server, prefix string) (string, bool) {
	for _, t := range sv.Tags {
		if t = normTag(t); strings.HasPrefix(t, prefix) {
			return t, true
		}
	}
	return "", false
}

// placeError collects why servers were passed over (nats-server's
// selectPeerError).
type placeError struct {
	offline, excludeTag, uniqueTag, misc, noJetStream bool
	missing, excluded                                 []string
}

// tagsMatch reports whether the server's tags satisfy want, noting the
// first tag that fails.
func (e *placeError) tagsMatch(have, want []string) bool {
	for _, t := range want {
		tag, exclude := strings.CutPrefix(t, "!")
		switch has := hasTag(have, tag); {
		case exclude && has:
			if !slices.Contains(e.excluded, tag) {
				e.excluded = append(e.excluded, tag)
			}
			return false
		case !exclude && !has:
			if !slices.Contains(e.missing, tag) {
				e.missing = append(e.missing, tag)
			}
			return false
		}
	}
	return true
}

// String is nats-server's selectPeerError.Error.
func (e *placeError) String() string {
	var b strings.Builder
	b.WriteString("no suitable peers for placement")
	for _, r := range []struct {
		on   bool
		text string
	}{{e.offline, "peer offline"}, {e.excludeTag, "exclude tag set"}, {e.uniqueTag, "server tag not unique"}, {e.misc, "miscellaneous issue"}, {e.noJetStream, "jetstream not enabled in cluster"}} {
		if r.on {
			b.WriteString(", " + r.text)
		}
	}
	for _, l := range []struct {
		tags []string
		text string
	}{{e.missing, "tags not matched"}, {e.excluded, "tags excluded"}} {
		if len(l.tags) == 0 {
			continue
		}
		tags := slices.Sorted(slices.Values(l.tags))
		b.WriteString(", " + l.text + " [")
		for i, t := range tags {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("'" + t + "'")
		}
		b.WriteString("]")
	}
	return b.String()
}
