package route

import (
	"encoding/json"
	"errors"
)

// Proto is the route protocol level cairn announces in INFO proto: 3,
// nats-server's MsgTraceProto (accounts in RS+, RS-, RMSG and HMSG, as
// RouteProtoV2, and a peer that traces messages, so that a nats-server
// peer forwards trace-only messages to it; internal/server msgtrace.go).
const Proto = 3

// Info is the INFO object of a route, with nats-server v2.15.2's keys, key
// order and omitempty rules (server.go Info). A server sends it first on an
// accepted route and right after CONNECT on a dialed one; it forwards the
// INFO of a new peer to its other peers (gossip), and those dial the peer
// unless they already have a route to its server_id.
type Info struct {
	ID            string   `json:"server_id"`
	Name          string   `json:"server_name"`
	Version       string   `json:"version"`
	Proto         int      `json:"proto"`
	GoVersion     string   `json:"go"`
	Host          string   `json:"host"` // the cluster listener's host, or the advertised one
	Port          int      `json:"port"` // the cluster listener's port, or the advertised one
	Headers       bool     `json:"headers"`
	AuthRequired  bool     `json:"auth_required,omitempty"`
	TLSRequired   bool     `json:"tls_required,omitempty"` // the cluster port speaks TLS only (handshake first)
	TLSVerify     bool     `json:"tls_verify,omitempty"`   // peers' certificates are verified: with TLSRequired
	MaxPayload    int      `json:"max_payload"`
	JetStream     bool     `json:"jetstream,omitempty"`
	IP            string   `json:"ip,omitempty"` // "nats-route://host:port/": where peers dial this server
	Nonce         string   `json:"nonce,omitempty"`
	Cluster       string   `json:"cluster,omitempty"`
	Dynamic       bool     `json:"cluster_dynamic,omitempty"`
	ConnectURLs   []string `json:"connect_urls,omitempty"` // the sender's client URLs, host:port
	WSConnectURLs []string `json:"ws_connect_urls,omitempty"`
	LameDuckMode  bool     `json:"ldm,omitempty"`
	Compression   string   `json:"compression,omitempty"`
	RoutePoolSize int      `json:"route_pool_size,omitempty"`
	RoutePoolIdx  int      `json:"route_pool_idx,omitempty"`
	RouteAccount  string   `json:"route_account,omitempty"`
	GossipMode    byte     `json:"gossip_mode,omitempty"`
}

// Connect is the CONNECT object a dialing server sends first (nats-server
// v2.15.2 route.go connectInfo). Name is the dialer's server_id. Lang is
// never sent by a server: a CONNECT carrying it comes from a client that
// dialed the cluster port by mistake.
type Connect struct {
	Echo     bool   `json:"echo"`
	Verbose  bool   `json:"verbose"`
	Pedantic bool   `json:"pedantic"`
	User     string `json:"user,omitempty"`
	Pass     string `json:"pass,omitempty"`
	TLS      bool   `json:"tls_required"`
	Headers  bool   `json:"headers"`
	Name     string `json:"name"`
	Cluster  string `json:"cluster"`
	Dynamic  bool   `json:"cluster_dynamic,omitempty"`
	Lang     string `json:"lang,omitempty"`
	Gateway  string `json:"gateway,omitempty"`
}

// ErrBadJSON wraps the decoding error of an INFO or CONNECT argument.
// nats-server closes the route without -ERR in that case.
var ErrBadJSON = errors.New("route: malformed INFO or CONNECT")

// ParseInfo decodes an INFO argument. It returns an error wrapping
// ErrBadJSON when arg is not a JSON object of the right shape.
func ParseInfo(arg []byte) (*Info, error) {
	in := new(Info)
	if err := json.Unmarshal(arg, in); err != nil {
		return nil, errors.Join(ErrBadJSON, err)
	}
	return in, nil
}

// ParseConnect decodes a CONNECT argument. It returns an error wrapping
// ErrBadJSON when arg is not a JSON object of the right shape.
func ParseConnect(arg []byte) (*Connect, error) {
	c := new(Connect)
	if err := json.Unmarshal(arg, c); err != nil {
		return nil, errors.Join(ErrBadJSON, err)
	}
	return c, nil
}
