package monitor

import (
	"net/http"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/server"
)

// jsInfoOpts are the options of the stream infos /jsz reads: no deleted
// sequences, no per-subject counts.
var jsInfoOpts = jetstream.InfoOptions{}

// jszOptions are /jsz's query options (nats-server JSzOptions).
type jszOptions struct {
	acc                       string
	accounts, streams         bool
	consumers, directConsumer bool
	config                    bool
	leaderOnly, streamLeader  bool
	raft                      bool
	offset, limit             int
}

func jszQuery(q *query) jszOptions {
	return jszOptions{
		acc:            q.str("acc"),
		accounts:       q.boolean("accounts"),
		streams:        q.boolean("streams"),
		consumers:      q.boolean("consumers"),
		directConsumer: q.boolean("direct-consumers"),
		config:         q.boolean("config"),
		offset:         q.integer("offset"),
		limit:          q.integer("limit"),
		leaderOnly:     q.boolean("leader-only"),
		raft:           q.boolean("raft"),
		streamLeader:   q.boolean("stream-leader-only"),
	}
}

// handleJsz serves /jsz (nats-server v2.15.2 monitor.go Jsz): the totals
// over every account with JetStream, the details of the accounts asked
// for and, in a JetStream cluster, the meta group (meta_cluster). With
// leader-only, a server that does not lead the meta group (or has no
// JetStream) answers 400 "filtered response: not leader" (jszLeaderOnly).
func (m *Monitor) handleJsz(w http.ResponseWriter, r *http.Request) {
	q := &query{r: r}
	o := jszQuery(q)
	if q.bad(w) {
		return
	}
	ji, err := m.jszChecked(o)
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ji)
}

func (m *Monitor) jsz(o jszOptions) *JSInfo {
	o.offset = max(o.offset, 0)
	if o.limit == 0 {
		o.limit = 1024
	}
	if o.consumers {
		o.streams = true
	}
	if o.streams && o.acc == "" {
		o.accounts = true
	}
	ji := &JSInfo{ID: m.srv.ID(), Now: time.Now().UTC()}
	accs := m.jsAccounts()
	if len(accs) == 0 {
		ji.Disabled = true
		return ji
	}
	// The accounts listed (nats-server Jsz): the one acc names when it
	// has JetStream; else, with accounts, the window of offset and limit
	// of the accounts sorted by name; else none.
	listed := map[string]bool{}
	switch i := slices.IndexFunc(accs, func(a server.AccountStats) bool { return a.Name == o.acc }); {
	case i >= 0:
		listed[o.acc] = true
	case o.accounts && o.limit > 0:
		lo, hi := page(len(accs), o.offset, o.limit)
		for _, a := range accs[lo:hi] {
			listed[a.Name] = true
		}
	}
	ji.Meta = m.metaClusterInfo()
	ji.Config = m.jsConfig(accs[0].JetStream)
	ji.Limits = jsLimits(accs[0].JetStream)
	ji.Total = len(accs)
	var all []jetstream.StreamDetail
	for _, a := range accs {
		// The consumers too for their leaders' count (raft).
		details := a.JetStream.Details(o.consumers && listed[a.Name] || o.raft)
		all = append(all, details...)
		for _, d := range details {
			ji.Streams++
			ji.Consumers += d.Info.State.Consumers
			ji.Messages += d.Info.State.Msgs
			ji.Bytes += d.Info.State.Bytes
		}
		if listed[a.Name] {
			ji.AccountDetails = append(ji.AccountDetails, m.accountDetail(a, details, o))
		}
	}
	ji.JetStreamStats = m.jsStats(accs, all)
	if o.raft {
		ji.StreamsLeader, ji.ConsumersLeader = m.leaderCounts(all)
	}
	return ji
}

// jsAccounts returns the accounts with JetStream, sorted by name.
func (m *Monitor) jsAccounts() []server.AccountStats {
	return slices.DeleteFunc(m.srv.Accounts(), func(a server.AccountStats) bool { return a.JetStream == nil })
}

// accountDetail is an account's part of /jsz: its usage, its limits
// (reserved_*, as nats-server reports them) and its API counters.
func (m *Monitor) accountDetail(a server.AccountStats, details []jetstream.StreamDetail, o jszOptions) *AccountDetail {
	ai := a.JetStream.Account()
	st := m.accountUsage(a.Name, details)
	ad := &AccountDetail{Name: a.Name, ID: a.Name, JetStreamStats: JetStreamStats{
		Memory: st.Memory, Store: st.Store,
		// nats-server reports the account's limits here: -1 (none) as an
		// unsigned number.
		ReservedMemory: uint64(ai.Limits.MaxMemory), ReservedStore: uint64(ai.Limits.MaxStore),
		API: JetStreamAPIStats{Total: a.APITotal, Errors: a.APIErrors},
	}}
	if !o.streams {
		return ad
	}
	ad.Streams = []StreamDetail{}
	for _, d := range details {
		si := d.Info
		if o.streamLeader && !m.leads(si.Cluster) {
			continue
		}
		sd := StreamDetail{
			Name: si.Config.Name, Created: si.Created, Cluster: si.Cluster,
			State: si.State, Mirror: si.Mirror, Sources: si.Sources,
		}
		if o.config {
			cfg := si.Config
			sd.Config = &cfg
		}
		if o.raft && si.Cluster != nil && si.Cluster.RaftGroup != "" {
			sd.RaftGroup, sd.ConsumerRaftGroups = si.Cluster.RaftGroup, []*RaftGroupDetail{}
		}
		for _, ci := range d.Consumers {
			if !o.consumers {
				break
			}
			sd.Consumer = append(sd.Consumer, consumerDetail(ci, o.config))
			if sd.ConsumerRaftGroups != nil && ci.Cluster != nil && ci.Cluster.RaftGroup != "" {
				sd.ConsumerRaftGroups = append(sd.ConsumerRaftGroups, &RaftGroupDetail{Name: ci.Name, RaftGroup: ci.Cluster.RaftGroup})
			}
		}
		ad.Streams = append(ad.Streams, sd)
	}
	return ad
}

// consumerDetail is a consumer's info as /jsz shows it: its config only
// when asked for; its cluster part as the engine gives it (in a cluster
// only, as nats-server's consumer info).
func consumerDetail(ci *consumer.Info, withConfig bool) *consumer.Info {
	c := *ci
	if !withConfig {
		c.Config = nil
	}
	return &c
}
