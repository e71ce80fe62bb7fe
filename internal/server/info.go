package server

import (
	"encoding/json"
	"runtime"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/jsapi"
)

// NATSVersion is the nats-server version cairn advertises in INFO (and
// in /varz, trace events and the _nats.ver of returned configs). Clients
// switch features on from it (docs/protocol.md section 0, item 1), so it
// must promise no more than cairn implements: 2.12.0 is the newest version
// whose features cairn serves in full (message tracing, batched direct
// gets and priority groups of 2.11; counters, atomic batches, schedules
// and persist_mode async of 2.12). docs/compatibility.md, "INFO
// `version`", explains the choice and lists what 2.14 would add.
const NATSVersion = "2.12.0"

// info is the INFO JSON object, with nats-server v2.15.2's keys, key order
// and omitempty rules (docs/protocol.md section 1.4).
type info struct {
	ID            string   `json:"server_id"`
	Name          string   `json:"server_name"`
	Version       string   `json:"version"`
	Proto         int      `json:"proto"`
	GoVersion     string   `json:"go"`
	Host          string   `json:"host"`
	Port          int      `json:"port"`
	Headers       bool     `json:"headers"`
	AuthRequired  bool     `json:"auth_required,omitempty"`
	TLSRequired   bool     `json:"tls_required,omitempty"`
	TLSVerify     bool     `json:"tls_verify,omitempty"`
	TLSAvailable  bool     `json:"tls_available,omitempty"`
	MaxPayload    int      `json:"max_payload"`
	JetStream     bool     `json:"jetstream,omitempty"`
	CID           uint64   `json:"client_id,omitempty"`
	ClientIP      string   `json:"client_ip,omitempty"`
	Nonce         string   `json:"nonce,omitempty"`
	Cluster       string   `json:"cluster,omitempty"`
	ConnectURLs   []string `json:"connect_urls,omitempty"`
	LameDuckMode  bool     `json:"ldm,omitempty"`
	ConnectInfo   bool     `json:"connect_info,omitempty"`
	RemoteAccount string   `json:"remote_account,omitempty"`
	// IsSystemAccount is acc_is_sys: the client's account is the system
	// account (connect_info INFO only).
	IsSystemAccount bool `json:"acc_is_sys,omitempty"`
	// APILevel is api_lvl, the JetStream API level (jsapi.APILevel),
	// sent whether or not JetStream is on, as nats-server v2.15.2 does;
	// the JavaScript client's object store reads it (batched puts need 4).
	APILevel int `json:"api_lvl,omitempty"`
}

// baseInfo is the INFO of a new connection, with the limits in force.
// With client_advertise, host and port are the advertised ones
// (nats-server setInfoHostPort).
func (s *Server) baseInfo() info {
	lim := s.limits()
	host, port := s.opts.Host, s.port
	if lim.ClientAdvertise != "" {
		if h, p, err := config.AdvertiseHostPort(lim.ClientAdvertise, s.port); err == nil {
			host, port = h, p
		}
	}
	in := info{
		ID:         s.id,
		Name:       s.opts.ServerName,
		Version:    NATSVersion,
		Proto:      1,
		GoVersion:  runtime.Version(),
		Host:       host,
		Port:       port,
		Headers:    true,
		MaxPayload: lim.MaxPayload,
		JetStream:  s.opts.JetStream,
		APILevel:   jsapi.APILevel,
	}
	sec := s.security()
	sec.tls.infoFields(&in)
	// Every INFO says whether clients authenticate, the one after CONNECT
	// and the async ones too, as nats-server's copies of its server info.
	in.AuthRequired = sec.authRequiredInfo()
	s.clusterInfo(&in)
	return in
}

// appendInfo appends "INFO <json> \r\n" to dst; nats-server v2.15.2 puts a
// space before the CRLF.
func appendInfo(dst []byte, in info) []byte {
	js, err := json.Marshal(in)
	if err != nil { // a struct of strings, ints and bools always encodes
		panic(err)
	}
	dst = append(dst, "INFO "...)
	dst = append(dst, js...)
	return append(dst, " \r\n"...)
}

// Version is cairn's own release version, printed by `cairn --version`
// and in the startup log.
const Version = "0.1.0"
