package monitor

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/cairnmq/cairn/internal/server"
)

// The payloads of the system account's events (internal/server events.go
// publishes them; docs/monitoring.md "Events"), in nats-server v2.15.2's
// shapes (events.go ConnectEventMsg, DisconnectEventMsg,
// AccountNumConns, ServerStatsMsg; the SHUTDOWN event is a ServerInfo).

// Advisory types of the events (nats-server events.go).
const (
	ConnectEventType    = "io.nats.server.advisory.v1.client_connect"
	DisconnectEventType = "io.nats.server.advisory.v1.client_disconnect"
	AccountNumConnsType = "io.nats.server.advisory.v1.account_connections"
)

// typedEvent heads every advisory: its type, a unique id and when it
// happened.
type typedEvent struct {
	Type string    `json:"type"`
	ID   string    `json:"id"`
	Time time.Time `json:"timestamp"`
}

// ClientInfo describes a client in an advisory (nats-server ClientInfo;
// the fields cairn has).
type ClientInfo struct {
	Start      *time.Time    `json:"start,omitempty"`
	Host       string        `json:"host,omitempty"`
	ID         uint64        `json:"id,omitempty"`
	Account    string        `json:"acc,omitempty"`
	User       string        `json:"user,omitempty"`
	Name       string        `json:"name,omitempty"`
	Lang       string        `json:"lang,omitempty"`
	Version    string        `json:"ver,omitempty"`
	RTT        time.Duration `json:"rtt,omitempty"`
	Stop       *time.Time    `json:"stop,omitempty"`
	NameTag    string        `json:"name_tag,omitempty"`
	Kind       string        `json:"kind,omitempty"`
	ClientType string        `json:"client_type,omitempty"`
}

// connectEventMsg is the CONNECT advisory.
type connectEventMsg struct {
	typedEvent
	Server ServerInfo `json:"server"`
	Client ClientInfo `json:"client"`
}

// disconnectEventMsg is the DISCONNECT advisory: Sent counts what the
// client sent (the server's in), Received what it was sent.
type disconnectEventMsg struct {
	typedEvent
	Server   ServerInfo `json:"server"`
	Client   ClientInfo `json:"client"`
	Sent     DataStats  `json:"sent"`
	Received DataStats  `json:"received"`
	Reason   string     `json:"reason"`
}

// accountNumConns is the SERVER.CONNS event.
type accountNumConns struct {
	typedEvent
	Server ServerInfo `json:"server"`
	AccountStat
}

// sysEvents builds the event payloads for server.ServeSystemEvents.
type sysEvents struct{ m *Monitor }

// eventID is a unique advisory id (nats-server uses a nuid: 22
// characters).
func eventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])[:22]
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v) // plain structs: cannot fail
	return b
}

// Statsz implements server.SystemEvents.
func (e sysEvents) Statsz() []byte {
	return mustJSON(&serverStatsMsg{Server: *e.m.serverInfo(), Stats: e.m.statsz()})
}

// Client implements server.SystemEvents.
func (e sysEvents) Client(ev server.ClientEvent) []byte {
	c := &ev.Conn
	start := c.Start.UTC()
	ci := ClientInfo{Start: &start, Host: c.IP, ID: c.CID, Account: c.Account, User: c.User,
		Name: c.Name, Lang: c.Lang, Version: c.Version, Kind: "Client", ClientType: "nats",
		NameTag: e.m.srv.AccountNameTag(c.Account)} // its JWT's name, or its name (nats-server getNameTag)
	if ev.Connect {
		return mustJSON(&connectEventMsg{
			typedEvent: typedEvent{Type: ConnectEventType, ID: eventID(), Time: time.Now().UTC()},
			Server:     *e.m.serverInfo(), Client: ci,
		})
	}
	stop := c.Stop.UTC()
	ci.Stop, ci.RTT = &stop, c.RTT
	return mustJSON(&disconnectEventMsg{
		typedEvent: typedEvent{Type: DisconnectEventType, ID: eventID(), Time: stop},
		Server:     *e.m.serverInfo(), Client: ci,
		Sent:     DataStats{MsgBytes: MsgBytes{Msgs: c.InMsgs, Bytes: c.InBytes}},
		Received: DataStats{MsgBytes: MsgBytes{Msgs: c.OutMsgs, Bytes: c.OutBytes}},
		Reason:   c.Reason,
	})
}

// AccountConns implements server.SystemEvents: the connection count is
// the event's, the rest the account's now.
func (e sysEvents) AccountConns(account string, conns int) []byte {
	st := AccountStat{Account: account, Name: account, Conns: conns, TotalConns: conns,
		Sent: dataStats(0, 0, 0, 0), Received: dataStats(0, 0, 0, 0)}
	for _, a := range e.m.srv.Accounts() {
		if a.Name == account {
			st.NumSubs = uint32(a.Sublist.NumSubs)
			st.Sent, st.Received = dataStats(a.OutMsgs, a.OutBytes, 0, 0), dataStats(a.InMsgs, a.InBytes, 0, 0)
		}
	}
	return mustJSON(&accountNumConns{
		typedEvent:  typedEvent{Type: AccountNumConnsType, ID: eventID(), Time: time.Now().UTC()},
		Server:      *e.m.serverInfo(),
		AccountStat: st,
	})
}

// Shutdown implements server.SystemEvents.
func (e sysEvents) Shutdown() []byte { return mustJSON(e.m.serverInfo()) }
