package monitor

import (
	"net/http"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream"
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

// handleJsz serves /jsz (nats-server v2.15.2 monitor.go Jsz). cairn's
// JetStream is not clustered: this server leads every stream and
// consumer it has, so leader-only and stream-leader-only select
// everything.
func (m *Monitor) handleJsz(w http.ResponseWriter, r *http.Request) {
	q := &query{r: r}
	o := jszQuery(q)
	if q.bad(w) {
		return
	}
	writeJSON(w, http.StatusOK, m.jsz(o))
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
	js := m.srv.JetStream()
	if js == nil {
		ji.Disabled = true
		return ji
	}
	details := js.Details(o.consumers)
	ji.JetStreamStats = m.jsStats(details)
	ji.Config = m.jsConfig()
	ji.Limits = &JSLimitOpts{}
	ji.Total = 1
	for _, d := range details {
		ji.Streams++
		ji.Consumers += d.Info.State.Consumers
		ji.Messages += d.Info.State.Msgs
		ji.Bytes += d.Info.State.Bytes
	}
	if o.raft {
		ji.StreamsLeader, ji.ConsumersLeader = ji.Streams, ji.Consumers
	}
	// One account, $G: selected by acc=$G, or by accounts when the
	// window of offset and limit (sorted by name) includes it.
	lo, hi := page(1, o.offset, o.limit)
	if o.acc == globalAccount || (o.acc == "" && o.accounts && o.limit > 0 && hi > lo) {
		ji.AccountDetails = []*AccountDetail{m.accountDetail(js, details, ji.JetStreamStats, o)}
	}
	return ji
}

// accountDetail is the $G account's part of /jsz.
func (m *Monitor) accountDetail(js *jetstream.JetStream, details []jetstream.StreamDetail, st JetStreamStats, o jszOptions) *AccountDetail {
	ai := js.Account()
	ad := &AccountDetail{Name: globalAccount, ID: globalAccount, JetStreamStats: JetStreamStats{
		Memory: st.Memory, Store: st.Store,
		// nats-server reports the account's limits here: -1 (none) as an
		// unsigned number.
		ReservedMemory: uint64(ai.Limits.MaxMemory), ReservedStore: uint64(ai.Limits.MaxStore),
		API: JetStreamAPIStats{Total: st.API.Total, Errors: st.API.Errors},
	}}
	if !o.streams {
		return ad
	}
	ad.Streams = []StreamDetail{}
	for _, d := range details {
		si := d.Info
		sd := StreamDetail{
			Name: si.Config.Name, Created: si.Created, Cluster: si.Cluster,
			State: si.State, Mirror: si.Mirror, Sources: si.Sources,
		}
		if o.config {
			cfg := si.Config
			sd.Config = &cfg
		}
		for _, ci := range d.Consumers {
			sd.Consumer = append(sd.Consumer, consumerDetail(ci, o.config))
		}
		ad.Streams = append(ad.Streams, sd)
	}
	return ad
}

// consumerDetail is a consumer's info as /jsz shows it: its config only
// when asked for, no cluster part (nats-server's single-server info).
func consumerDetail(ci *consumer.Info, withConfig bool) *consumer.Info {
	c := *ci
	c.Cluster = nil
	if !withConfig {
		c.Config = nil
	}
	return &c
}
