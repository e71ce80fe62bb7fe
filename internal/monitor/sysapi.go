package monitor

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairnmq/cairn/internal/server"
)

// The system account's request API (docs/monitoring.md), the
// answers `nats server ls|info|report|check` read: SysRequest answers
// $SYS.REQ.SERVER.PING, $SYS.REQ.SERVER.PING.<X> and
// $SYS.REQ.SERVER.<id>.<X> with the same data as the HTTP endpoints, in
// nats-server v2.15.2's envelope (events.go ServerAPIResponse,
// ServerStatsMsg). ServeSystemRequests has the server subscribe those
// subjects in its system account and answer them with SysRequest
// (internal/server sysreq.go), with or without an HTTP listener.

// ServeSystemRequests makes the server answer the $SYS requests of its
// system account's users with SysRequest, and publish the system
// account's events (events.go) with the statsz heartbeat every
// server.StatszInterval, until it shuts down. It returns
// server.ErrNoSystemAccount when the server has none
// (no_system_account), server.ErrAlreadyServing when called twice.
func (m *Monitor) ServeSystemRequests() error {
	if err := m.srv.ServeSystemRequests(m.SysRequest); err != nil {
		return err
	}
	return m.srv.ServeSystemEvents(sysEvents{m}, m.opts.StatszInterval)
}

// ServerInfo identifies the answering server in every reply
// (nats-server ServerInfo).
type ServerInfo struct {
	Name    string   `json:"name"`
	Host    string   `json:"host"`
	ID      string   `json:"id"`
	Cluster string   `json:"cluster,omitempty"`
	Domain  string   `json:"domain,omitempty"`
	Version string   `json:"ver"`
	Tags    []string `json:"tags,omitempty"`
	// FeatureFlags are nats-server's experimental switches, all off in
	// cairn (server.FeatureFlags).
	FeatureFlags map[string]bool `json:"feature_flags,omitempty"`
	JetStream    bool            `json:"jetstream"`
	// Flags are nats-server v2.15.2's ServerCapability bits (events.go):
	// 1 JetStream enabled, 2 binary stream snapshots, 4 Raft traffic
	// outside the system account. Those two describe nats-server's Raft
	// protocol to its peers; cairn's Raft is not nats-server's, so it
	// sets 1 alone, with JetStream (nats-server sends 7 or 3).
	Flags uint64    `json:"flags"`
	Seq   uint64    `json:"seq"`
	Time  time.Time `json:"time"`
}

// jetStreamEnabled is nats-server's ServerCapability bit for JetStream
// (JetStreamEnabled); cairn sets neither BinaryStreamSnapshot (2) nor
// AccountNRG (4).
const jetStreamEnabled = 1

// APIError is the error of a reply: an HTTP-like code and a description.
type APIError struct {
	Code        int    `json:"code"`
	Description string `json:"description,omitempty"`
}

// serverAPIResponse is the envelope of every reply but STATSZ.
type serverAPIResponse struct {
	Server *ServerInfo `json:"server"`
	Data   any         `json:"data,omitempty"`
	Error  *APIError   `json:"error,omitempty"`
}

// serverStatsMsg is the reply to PING and PING.STATSZ.
type serverStatsMsg struct {
	Server ServerInfo  `json:"server"`
	Stats  ServerStats `json:"statsz"`
}

// ServerStats is statsz (nats-server ServerStats): what `nats server ls`
// shows.
type ServerStats struct {
	Start               time.Time      `json:"start"`
	Mem                 int64          `json:"mem"`
	Cores               int            `json:"cores"`
	CPU                 float64        `json:"cpu"`
	Connections         int            `json:"connections"`
	TotalConnections    uint64         `json:"total_connections"`
	ActiveAccounts      int            `json:"active_accounts"`
	NumSubs             uint32         `json:"subscriptions"`
	Sent                DataStats      `json:"sent"`
	SentToClients       DataStats      `json:"sent_to_clients"`
	Received            DataStats      `json:"received"`
	ReceivedFromClients DataStats      `json:"received_from_clients"`
	SlowConsumers       int64          `json:"slow_consumers"`
	SlowConsumersStats  *KindStats     `json:"slow_consumer_stats,omitempty"`
	StaleConnections    int64          `json:"stale_connections,omitempty"`
	StaleConnectionStat *KindStats     `json:"stale_connection_stats,omitempty"`
	StalledClients      int64          `json:"stalled_clients,omitempty"`
	Routes              []*RouteStat   `json:"routes,omitempty"`
	ActiveServers       int            `json:"active_servers,omitempty"`
	JetStream           *JetStreamVarz `json:"jetstream,omitempty"`
	MemLimit            int64          `json:"gomemlimit,omitempty"`
	MaxProcs            int            `json:"gomaxprocs,omitempty"`
}

// eventFilter selects the servers that answer (nats-server
// EventFilterOptions): a server that does not match stays silent.
type eventFilter struct {
	Name       string   `json:"server_name,omitempty"`
	Cluster    string   `json:"cluster,omitempty"`
	Host       string   `json:"host,omitempty"`
	ExactMatch bool     `json:"exact_match,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	Domain     string   `json:"domain,omitempty"`
}

// The request bodies: each endpoint's options in nats-server's JSON names,
// with the filter.
type (
	connzRequest struct {
		Sort          string `json:"sort"`
		Auth          bool   `json:"auth"`
		Subscriptions bool   `json:"subscriptions"`
		SubsDetail    bool   `json:"subscriptions_detail"`
		Offset        int    `json:"offset"`
		Limit         int    `json:"limit"`
		CID           uint64 `json:"cid"`
		MQTTClient    string `json:"mqtt_client"`
		State         int    `json:"state"`
		User          string `json:"user"`
		Account       string `json:"acc"`
		FilterSubject string `json:"filter_subject"`
		eventFilter
	}
	routezRequest struct {
		Subscriptions bool `json:"subscriptions"`
		SubsDetail    bool `json:"subscriptions_detail"`
		eventFilter
	}
	subszRequest struct {
		Offset        int    `json:"offset"`
		Limit         int    `json:"limit"`
		Subscriptions bool   `json:"subscriptions"`
		Account       string `json:"account,omitempty"`
		Test          string `json:"test,omitempty"`
		eventFilter
	}
	jszRequest struct {
		Account          string `json:"account,omitempty"`
		Accounts         bool   `json:"accounts,omitempty"`
		Streams          bool   `json:"streams,omitempty"`
		Consumer         bool   `json:"consumer,omitempty"`
		DirectConsumer   bool   `json:"direct_consumer,omitempty"`
		Config           bool   `json:"config,omitempty"`
		LeaderOnly       bool   `json:"leader_only,omitempty"`
		Offset           int    `json:"offset,omitempty"`
		Limit            int    `json:"limit,omitempty"`
		RaftGroups       bool   `json:"raft,omitempty"`
		StreamLeaderOnly bool   `json:"stream_leader_only,omitempty"`
		eventFilter
	}
	healthzRequest struct {
		JSEnabled     bool   `json:"js-enabled,omitempty"`
		JSEnabledOnly bool   `json:"js-enabled-only,omitempty"`
		JSServerOnly  bool   `json:"js-server-only,omitempty"`
		JSMetaOnly    bool   `json:"js-meta-only,omitempty"`
		Account       string `json:"account,omitempty"`
		Stream        string `json:"stream,omitempty"`
		Consumer      string `json:"consumer,omitempty"`
		Details       bool   `json:"details,omitempty"`
		eventFilter
	}
	accountzRequest struct {
		Account string `json:"account"`
		eventFilter
	}
	raftzRequest struct {
		Account string `json:"account"`
		Group   string `json:"group"`
		eventFilter
	}
	filterOnly struct{ eventFilter }
)

// SysRequest answers a request on subject with body (JSON options, or
// empty): the reply to send, or ok false when this server stays silent
// (a filter it does not match, another server's id, an unknown subject).
// A body that is not JSON gets an error reply with code 400, as in
// nats-server; an endpoint's own error (a bad sort option) code 500.
func (m *Monitor) SysRequest(subject string, body []byte) (reply []byte, ok bool) {
	if acc, kind, ok := sysAccountSubject(subject); ok {
		return m.accountRequest(acc, kind, body)
	}
	if strings.HasPrefix(subject, "$SYS.REQ.USER.") && strings.HasSuffix(subject, ".INFO") {
		return m.userInfo(body)
	}
	const prefix = "$SYS.REQ.SERVER."
	rest, found := strings.CutPrefix(subject, prefix)
	if !found {
		return nil, false
	}
	target, kind, _ := strings.Cut(rest, ".")
	switch {
	case rest == "PING":
		kind = "STATSZ"
	case target != "PING" && target != m.srv.ID():
		return nil, false
	}
	if kind == "STATSZ" {
		return m.statszReply(body)
	}
	if kind == "IDZ" {
		b, _ := json.Marshal(struct {
			Name string `json:"name"`
			Host string `json:"host"`
			ID   string `json:"id"`
		}{m.srv.Options().ServerName, m.srv.Options().Host, m.srv.ID()})
		return b, true
	}
	req, build := m.sysEndpoint(kind)
	if build == nil {
		req, build = m.controlEndpoint(kind, body, target == m.srv.ID())
	}
	if build == nil {
		return nil, false
	}
	resp := &serverAPIResponse{Server: m.serverInfo()}
	if len(body) > 0 {
		if err := json.Unmarshal(body, req); err != nil {
			resp.Error = &APIError{Code: http.StatusBadRequest, Description: err.Error()}
			return marshalReply(resp)
		}
		if !m.matches(filterOf(req)) {
			return nil, false
		}
	}
	data, err := build(req)
	if errors.Is(err, errSkip) {
		return nil, false // nats-server errSkipZreq: stay silent
	}
	if err != nil {
		resp.Error = &APIError{Code: http.StatusInternalServerError, Description: err.Error()}
	} else {
		resp.Data = data
	}
	return marshalReply(resp)
}

func marshalReply(v any) ([]byte, bool) {
	b, err := json.Marshal(v)
	return b, err == nil
}

// sysEndpoint returns the request body of an endpoint and the function
// that answers it; nil for an unknown endpoint.
func (m *Monitor) sysEndpoint(kind string) (any, func(any) (any, error)) {
	switch kind {
	case "VARZ":
		return &filterOnly{}, func(any) (any, error) { return m.varz(), nil }
	case "CONNZ":
		return &connzRequest{}, func(r any) (any, error) { return m.connz(r.(*connzRequest).options()) }
	case "ROUTEZ":
		return &routezRequest{}, func(r any) (any, error) {
			q := r.(*routezRequest)
			return m.routez(q.Subscriptions, q.SubsDetail), nil
		}
	case "SUBSZ":
		return &subszRequest{}, func(r any) (any, error) {
			q := r.(*subszRequest)
			return m.subsz(q.Subscriptions, q.Offset, q.Limit, q.Test, q.Account), nil
		}
	case "JSZ":
		return &jszRequest{}, func(r any) (any, error) { return m.jszChecked(r.(*jszRequest).options()) }
	case "HEALTHZ":
		return &healthzRequest{}, func(r any) (any, error) { return m.healthz(r.(*healthzRequest).options()), nil }
	case "ACCOUNTZ":
		return &accountzRequest{}, func(r any) (any, error) { return m.accountz(r.(*accountzRequest).Account) }
	case "LEAFZ":
		return &filterOnly{}, func(any) (any, error) {
			return &Leafz{ID: m.srv.ID(), Now: time.Now().UTC(), Leafs: []struct{}{}}, nil
		}
	case "RAFTZ":
		return &raftzRequest{}, func(r any) (any, error) {
			q := r.(*raftzRequest)
			rz, _ := m.raftz(q.Account, q.Group)
			if rz == nil {
				rz = &RaftzStatus{} // nats-server answers {} without Raft groups
			}
			return rz, nil
		}
	case "IPQUEUESZ":
		// No internal queues: empty, as nats-server's answer is without
		// them.
		return &filterOnly{}, func(any) (any, error) { return map[string]struct{}{}, nil }
	case "GATEWAYZ":
		return &filterOnly{}, func(any) (any, error) {
			return &Gatewayz{ID: m.srv.ID(), Now: time.Now().UTC(),
				OutboundGateways: map[string]struct{}{}, InboundGateways: map[string][]struct{}{}}, nil
		}
	}
	return nil, nil
}

func (q *connzRequest) options() connzOptions {
	o := connzOptions{sort: q.Sort, auth: q.Auth, subs: q.Subscriptions, detail: q.SubsDetail,
		offset: q.Offset, limit: q.Limit, cid: q.CID, user: q.User, acc: q.Account, mqttClient: q.MQTTClient}
	switch q.State {
	case 1:
		o.state = connClosed
	case 2:
		o.state = connAll
	}
	return o
}

func (q *jszRequest) options() jszOptions {
	return jszOptions{acc: q.Account, accounts: q.Accounts, streams: q.Streams, consumers: q.Consumer,
		directConsumer: q.DirectConsumer, config: q.Config, leaderOnly: q.LeaderOnly, streamLeader: q.StreamLeaderOnly,
		raft: q.RaftGroups, offset: q.Offset, limit: q.Limit}
}

func (q *healthzRequest) options() healthzOptions {
	return healthzOptions{jsEnabledOnly: q.JSEnabled || q.JSEnabledOnly, jsServerOnly: q.JSServerOnly,
		jsMetaOnly: q.JSMetaOnly, account: q.Account, stream: q.Stream, consumer: q.Consumer, details: q.Details}
}

// filterOf returns the filter embedded in a request body.
func filterOf(req any) *eventFilter {
	switch q := req.(type) {
	case *connzRequest:
		return &q.eventFilter
	case *routezRequest:
		return &q.eventFilter
	case *subszRequest:
		return &q.eventFilter
	case *jszRequest:
		return &q.eventFilter
	case *healthzRequest:
		return &q.eventFilter
	case *accountzRequest:
		return &q.eventFilter
	case *raftzRequest:
		return &q.eventFilter
	case *filterOnly:
		return &q.eventFilter
	case *profilezRequest:
		return &q.eventFilter
	}
	return &eventFilter{}
}

// matches reports whether this server answers a request with filter f
// (nats-server filterRequest: names, hosts and clusters contain the
// filter's, or equal it with exact_match; every tag, compared
// lowercased and trimmed as the server's server_tags are; the domain).
// cairn does not filter by domain: a filter naming one does not match.
func (m *Monitor) matches(f *eventFilter) bool {
	o := m.srv.Options()
	cluster := m.srv.Stats().ClusterName
	eq := func(have, want string) bool {
		if want == "" {
			return true
		}
		if f.ExactMatch {
			return have == want
		}
		return strings.Contains(have, want)
	}
	return eq(o.ServerName, f.Name) && eq(o.Host, f.Host) && eq(cluster, f.Cluster) && hasTags(o.Tags, f.Tags) && f.Domain == ""
}

// sysSeq numbers the replies, as ServerInfo.seq does.
var sysSeq atomic.Uint64

// serverInfo identifies this server in a reply.
func (m *Monitor) serverInfo() *ServerInfo {
	o := m.srv.Options()
	si := &ServerInfo{
		Name: o.ServerName, Host: o.Host, ID: m.srv.ID(), Cluster: m.srv.Stats().ClusterName,
		Version: server.NATSVersion, JetStream: m.srv.Options().JetStream, FeatureFlags: server.FeatureFlags(),
		Tags: o.Tags, Seq: sysSeq.Add(1), Time: time.Now().UTC(),
	}
	if si.JetStream {
		si.Flags |= jetStreamEnabled
	}
	return si
}

// statszReply answers PING and PING.STATSZ.
func (m *Monitor) statszReply(body []byte) ([]byte, bool) {
	if len(body) > 0 {
		var f filterOnly
		if err := json.Unmarshal(body, &f); err != nil {
			return marshalReply(&serverAPIResponse{Server: &ServerInfo{},
				Error: &APIError{Code: http.StatusBadRequest, Description: err.Error()}})
		}
		if !m.matches(&f.eventFilter) {
			return nil, false
		}
	}
	return marshalReply(&serverStatsMsg{Server: *m.serverInfo(), Stats: m.statsz()})
}

// statsz builds the server's statistics (nats-server ServerStats): the
// routes one by one (routeStats; sent and received count everything, with
// no part per kind, as nats-server v2.15.2 sends them), the slow and stale
// connections by kind when there were some, and the JetStream config
// without the store directory and the meta group (statszMeta), as
// nats-server sends them.
func (m *Monitor) statsz() ServerStats {
	st := m.srv.Stats()
	cpu, rss := m.cpu.sample(m.startedAt)
	ss := ServerStats{
		Start: st.Start, Mem: rss, Cores: runtime.NumCPU(), CPU: cpu,
		Connections: st.Connections, TotalConnections: st.TotalConnections, ActiveAccounts: m.activeAccounts(),
		NumSubs:             uint32(st.Subscriptions),
		Sent:                DataStats{MsgBytes: MsgBytes{Msgs: st.OutMsgs, Bytes: st.OutBytes}},
		SentToClients:       DataStats{MsgBytes: MsgBytes{Msgs: st.OutClientMsgs, Bytes: st.OutClientBytes}},
		Received:            DataStats{MsgBytes: MsgBytes{Msgs: st.InMsgs, Bytes: st.InBytes}},
		ReceivedFromClients: DataStats{MsgBytes: MsgBytes{Msgs: st.InClientMsgs, Bytes: st.InClientBytes}},
		SlowConsumers:       st.SlowConsumers,
		StaleConnections:    st.StaleConnections,
		StalledClients:      st.Stalls,
		ActiveServers:       st.Routes + 1,
		MaxProcs:            runtime.GOMAXPROCS(0),
	}
	ss.Routes = m.routeStats() // the route traffic, route by route (not in sent and received)
	if st.SlowConsumers > 0 {
		ss.SlowConsumersStats = &KindStats{Clients: st.SlowClients, Routes: st.SlowRoutes}
	}
	if st.StaleConnections > 0 {
		ss.StaleConnectionStat = &KindStats{Clients: st.StaleClients, Routes: st.StaleRoutes}
	}
	if js := m.jetStreamVarz(); js.Config != nil {
		cfg := *js.Config
		cfg.StoreDir = ""
		js.Config = &cfg
		js.Meta = m.statszMeta()
		ss.JetStream = &js
	}
	return ss
}

// RouteStat is one route of statsz (nats-server v2.15.2 events.go
// RouteStat): its connection id, the peer's server name, the messages
// and bytes sent to and received from it, and the bytes queued for it;
// `nats server ls` counts them in its Routes column.
type RouteStat struct {
	ID       uint64    `json:"rid"`
	Name     string    `json:"name,omitempty"`
	Sent     DataStats `json:"sent"`
	Received DataStats `json:"received"`
	Pending  int       `json:"pending"`
}

// routeStats lists the routes for statsz, by connection id; nil without
// routes (the key is then left out, as nats-server leaves it out).
func (m *Monitor) routeStats() []*RouteStat {
	var out []*RouteStat
	for _, r := range m.srv.Routes(false) {
		out = append(out, &RouteStat{
			ID: r.CID, Name: r.RemoteName, Pending: int(r.Pending),
			Sent:     DataStats{MsgBytes: MsgBytes{Msgs: r.OutMsgs, Bytes: r.OutBytes}},
			Received: DataStats{MsgBytes: MsgBytes{Msgs: r.InMsgs, Bytes: r.InBytes}},
		})
	}
	slices.SortFunc(out, func(a, b *RouteStat) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// activeAccounts counts the accounts with client connections (nats-server
// statsz active_accounts).
func (m *Monitor) activeAccounts() int {
	n := 0
	for _, a := range m.srv.Accounts() {
		if a.Connections > 0 {
			n++
		}
	}
	return n
}

// hasTags reports whether tags (lowercased) hold every one of want
// (nats-server jwt.TagList.Contains: lowercased and trimmed).
func hasTags(tags, want []string) bool {
	for _, t := range want {
		if !slices.Contains(tags, strings.ToLower(strings.TrimSpace(t))) {
			return false
		}
	}
	return true
}
