package monitor

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"runtime"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/server"
)

func jsonCompact(v any) ([]byte, error) { return json.Marshal(v) }

// handleAccountz serves /accountz: the accounts, or one account's detail
// with acc (nats-server v2.15.2 monitor.go Accountz).
func (m *Monitor) handleAccountz(w http.ResponseWriter, r *http.Request) {
	az, err := m.accountz(r.URL.Query().Get("acc"))
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, az)
}

// accountz builds /accountz for acc ("" lists the accounts, by name).
func (m *Monitor) accountz(acc string) (*Accountz, error) {
	az := &Accountz{ID: m.srv.ID(), Now: time.Now().UTC(), SystemAccount: m.srv.SystemAccount()}
	accs := m.srv.Accounts()
	if acc == "" {
		az.Accounts = make([]string, 0, len(accs))
		for _, a := range accs {
			az.Accounts = append(az.Accounts, a.Name)
		}
		return az, nil
	}
	i := slices.IndexFunc(accs, func(a server.AccountStats) bool { return a.Name == acc })
	if i < 0 {
		return nil, fmt.Errorf("Account %s does not exist", acc)
	}
	az.Account = m.accountInfo(&accs[i])
	return az, nil
}

// accountInfo is /accountz?acc=<name>. The accounts are made at start and
// never change: update_time is the server's start.
func (m *Monitor) accountInfo(a *server.AccountStats) *AccountInfo {
	sl := sublistStats(a.Sublist)
	exports, imports, _ := m.srv.AccountImportsExports(a.Name)
	return &AccountInfo{
		AccountName: a.Name,
		LastUpdate:  m.srv.Stats().Start,
		IsSystem:    a.System,
		Complete:    true,
		JetStream:   a.JetStream != nil,
		ClientCnt:   a.Connections,
		SubCnt:      sl.NumSubs,
		Exports:     extExports(exports),
		Imports:     extImports(imports),
		NameTag:     m.srv.AccountNameTag(a.Name),
		Sublist:     &sl,
	}
}

// extExports lists exports as nats-server does: services first, then
// streams (nats-server walks two maps, in no fixed order; cairn keeps
// the configured order within each).
func extExports(exports []config.Export) []ExtExport {
	var out []ExtExport
	for _, service := range []bool{true, false} {
		for _, ex := range exports {
			if ex.Service != service {
				continue
			}
			e := ExtExport{Subject: ex.Subject, Type: "stream", ApprovedAccounts: ex.Accounts}
			if ex.Service {
				e.Type, e.ResponseType = "service", responseTypeName(ex.ResponseType)
			}
			out = append(out, e)
		}
	}
	return out
}

// responseTypeName is nats-server's name of a service response type.
func responseTypeName(t string) string {
	switch t {
	case "stream":
		return "Streamed"
	case "chunked":
		return "Chunked"
	}
	return "Singleton"
}

// extImports lists imports as nats-server does: streams first, then
// services.
func extImports(imports []config.Import) []ExtImport {
	var out []ExtImport
	for _, service := range []bool{false, true} {
		for _, im := range imports {
			if im.Service != service {
				continue
			}
			e := ExtImport{Subject: im.Subject, Account: im.Account, LocalSubject: im.LocalSubject(), Type: "stream"}
			if im.Service {
				e.Type, e.To, e.Share = "service", e.LocalSubject, im.Share
			}
			out = append(out, e)
		}
	}
	return out
}

// handleAccountStatz serves /accstatz (nats-server v2.15.2 monitor.go
// AccountStatz): each account's client traffic, listed when it has
// clients or with unused=true. Route traffic is not counted by account
// (docs/monitoring.md).
func (m *Monitor) handleAccountStatz(w http.ResponseWriter, r *http.Request) {
	q := &query{r: r}
	unused := q.boolean("unused")
	if q.bad(w) {
		return
	}
	az := &AccountStatz{ID: m.srv.ID(), Now: time.Now().UTC(), Accounts: []*AccountStat{}}
	for _, a := range m.srv.Accounts() {
		if !unused && a.Connections == 0 {
			continue
		}
		az.Accounts = append(az.Accounts, &AccountStat{
			Account: a.Name, Name: a.Name,
			Conns: a.Connections, TotalConns: a.Connections,
			NumSubs:  uint32(a.Sublist.NumSubs),
			Sent:     dataStats(a.OutMsgs, a.OutBytes, 0, 0),
			Received: dataStats(a.InMsgs, a.InBytes, 0, 0),
		})
	}
	writeJSON(w, http.StatusOK, az)
}

func dataStats(msgs, bytes, routeMsgs, routeBytes int64) DataStats {
	return DataStats{
		MsgBytes: MsgBytes{Msgs: msgs, Bytes: bytes},
		Gateways: &MsgBytes{}, Routes: &MsgBytes{Msgs: routeMsgs, Bytes: routeBytes}, Leafs: &MsgBytes{},
	}
}

// handleLeafz serves /leafz: cairn has no leaf node connections.
func (m *Monitor) handleLeafz(w http.ResponseWriter, r *http.Request) {
	q := &query{r: r}
	q.boolean("subs")
	if q.bad(w) {
		return
	}
	writeJSON(w, http.StatusOK, &Leafz{ID: m.srv.ID(), Now: time.Now().UTC(), Leafs: []struct{}{}})
}

// handleGatewayz serves /gatewayz: cairn has no gateways.
func (m *Monitor) handleGatewayz(w http.ResponseWriter, r *http.Request) {
	q := &query{r: r}
	q.subs()
	q.boolean("accs")
	if q.bad(w) {
		return
	}
	writeJSON(w, http.StatusOK, &Gatewayz{
		ID: m.srv.ID(), Now: time.Now().UTC(),
		OutboundGateways: map[string]struct{}{}, InboundGateways: map[string][]struct{}{},
	})
}

// maxStackBytes bounds the /stacksz dump.
const maxStackBytes = 64 << 20

// handleStacksz serves /stacksz: the stacks of every goroutine, taking no
// lock of the server (so it works when something is stuck).
func (m *Monitor) handleStacksz(w http.ResponseWriter, _ *http.Request) {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= maxStackBytes {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	writeBody(w, http.StatusOK, buf)
}

// handleRoot serves the index page: links to every endpoint.
func (m *Monitor) handleRoot(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != m.opts.BasePath+"/" && r.URL.Path != m.opts.BasePath {
		http.NotFound(w, r)
		return
	}
	links := []struct{ name, path string }{
		{"General", VarzPath}, {"JetStream", JszPath}, {"Connections", ConnzPath},
		{"Accounts", AccountzPath}, {"Account Stats", AccountStatzPath}, {"Subscriptions", SubszPath},
		{"Routes", RoutezPath}, {"LeafNodes", LeafzPath}, {"Gateways", GatewayzPath},
		{"Raft Groups", RaftzPath}, {"Health Probe", HealthzPath}, {"Metrics", MetricsPath}, {"Stacks", StackszPath},
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<html lang=\"en\">\n<head><title>cairn monitoring</title></head>\n<body>\n<h1>cairn v%s</h1>\n<p>NATS protocol of nats-server %s</p>\n",
		html.EscapeString(server.Version), html.EscapeString(server.NATSVersion))
	for _, l := range links {
		fmt.Fprintf(w, "<a href=\".%s\">%s <span class=\"endpoint\">%s</span></a><br/>\n", l.path, l.name, l.path)
	}
	fmt.Fprint(w, "</body>\n</html>\n")
}
