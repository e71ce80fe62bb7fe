package monitor

import (
	"net/http"
	"time"
)

// handleRoutez serves /routez (nats-server v2.15.2 monitor.go Routez):
// the registered routes.
func (m *Monitor) handleRoutez(w http.ResponseWriter, r *http.Request) {
	q := &query{r: r}
	subs, detail := q.subs()
	if q.bad(w) {
		return
	}
	writeJSON(w, http.StatusOK, m.routez(subs, detail))
}

func (m *Monitor) routez(subs, detail bool) *Routez {
	now := time.Now().UTC()
	rz := &Routez{ID: m.srv.ID(), Name: m.srv.Options().ServerName, Now: now, Routes: []*RouteInfo{}}
	for _, r := range m.srv.Routes(subs || detail) {
		ri := &RouteInfo{
			Rid: r.CID, RemoteID: r.RemoteID, RemoteName: r.RemoteName,
			DidSolicit: r.DidSolicit, IsConfigured: r.IsConfigured,
			IP: r.IP, Port: r.Port, Start: r.Start, LastActivity: r.LastActivity,
			RTT: rttString(r.RTT), Uptime: uptime(now.Sub(r.Start)), Idle: uptime(now.Sub(r.LastActivity)),
			Pending: int(r.Pending), InMsgs: r.InMsgs, OutMsgs: r.OutMsgs, InBytes: r.InBytes, OutBytes: r.OutBytes,
			NumSubs: uint32(r.NumSubs), Compression: "off",
		}
		switch {
		case detail:
			ri.SubsDetail = subDetails(r.Subs, nil)
		case subs:
			for _, s := range r.Subs {
				ri.Subs = append(ri.Subs, s.Subject)
			}
		}
		rz.Routes = append(rz.Routes, ri)
	}
	rz.NumRoutes = len(rz.Routes)
	return rz
}
