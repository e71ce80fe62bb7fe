package monitor

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/cairnmq/cairn/internal/subject"
)

// DefaultSubListSize is /subsz's default limit (nats-server
// DefaultSubListSize).
const DefaultSubListSize = 1024

// handleSubsz serves /subsz and /subscriptionsz (nats-server v2.15.2
// monitor.go Subsz).
func (m *Monitor) handleSubsz(w http.ResponseWriter, r *http.Request) {
	q := &query{r: r}
	subs := q.boolean("subs")
	offset := q.integer("offset")
	limit := q.integer("limit")
	test, acc := q.str("test"), q.str("acc")
	if q.bad(w) {
		return
	}
	if test != "" && !subject.ValidLiteral(test) {
		writeText(w, http.StatusBadRequest, fmt.Sprintf("invalid test subject, must be valid publish subject: %s", test))
		return
	}
	writeJSON(w, http.StatusOK, m.subsz(subs, offset, limit, test, acc))
}

func (m *Monitor) subsz(subs bool, offset, limit int, test, acc string) *Subsz {
	offset = max(offset, 0)
	if limit <= 0 {
		limit = DefaultSubListSize
	}
	sz := &Subsz{ID: m.srv.ID(), Now: time.Now().UTC(), SublistStats: &SublistStats{}, Offset: offset, Limit: limit}
	if acc == "" {
		*sz.SublistStats = sublistStats(m.srv.SublistStats())
	} else {
		// One account's index (nats-server: the accounts acc names).
		for _, a := range m.srv.Accounts() {
			if a.Name == acc {
				*sz.SublistStats = sublistStats(a.Sublist)
			}
		}
	}
	if subs {
		list := m.srv.Subscriptions(test)
		if acc != "" {
			list = slices.DeleteFunc(list, func(s server.SubInfo) bool { return s.Account != acc })
		}
		all := subDetails(list, m.srv.AccountNameTag)
		lo, hi := page(len(all), offset, limit)
		sz.Subs = all[lo:hi]
		sz.Total = len(all)
	}
	return sz
}

// sublistStats converts a subject index's counters; the fan-out
// figures are over the cached match results, as nats-server's.
func sublistStats(st server.SublistStats) SublistStats {
	s := SublistStats{
		NumSubs: uint32(st.NumSubs), NumCache: uint32(st.NumCache),
		NumInserts: st.NumInserts, NumRemoves: st.NumRemoves, NumMatches: st.NumMatches,
		MaxFanout: uint32(st.MaxFanout),
	}
	if st.NumCache > 0 {
		s.AvgFanout = float64(st.TotalFanout) / float64(st.NumCache)
	}
	if st.NumMatches > 0 {
		s.CacheHitRate = float64(st.CacheHits) / float64(st.NumMatches)
	}
	return s
}
