package monitor

import (
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/stream"
)

// The JSON shapes of the endpoints: nats-server v2.15.2's (server/monitor.go,
// events.go, jetstream.go, opts.go), with the same keys, the same
// omitempty rules and the same units (durations in nanoseconds, times in
// RFC 3339 UTC, uptimes as "1d2h3m4s"). docs/monitoring.md lists the
// fields cairn fills differently.

// Varz is /varz.
type Varz struct {
	ID                string            `json:"server_id"`
	Name              string            `json:"server_name"`
	Version           string            `json:"version"`
	Proto             int               `json:"proto"`
	GitCommit         string            `json:"git_commit,omitempty"`
	GoVersion         string            `json:"go"`
	Host              string            `json:"host"`
	Port              int               `json:"port"`
	AuthRequired      bool              `json:"auth_required,omitempty"`
	TLSRequired       bool              `json:"tls_required,omitempty"`
	TLSVerify         bool              `json:"tls_verify,omitempty"`
	IP                string            `json:"ip,omitempty"`
	ClientConnectURLs []string          `json:"connect_urls,omitempty"`
	MaxConn           int               `json:"max_connections"`
	MaxSubs           int               `json:"max_subscriptions,omitempty"`
	PingInterval      time.Duration     `json:"ping_interval"`
	MaxPingsOut       int               `json:"ping_max"`
	HTTPHost          string            `json:"http_host"`
	HTTPPort          int               `json:"http_port"`
	HTTPBasePath      string            `json:"http_base_path"`
	HTTPSPort         int               `json:"https_port"`
	AuthTimeout       float64           `json:"auth_timeout"`
	MaxControlLine    int32             `json:"max_control_line"`
	MaxPayload        int               `json:"max_payload"`
	MaxPending        int64             `json:"max_pending"`
	Cluster           ClusterOptsVarz   `json:"cluster"`
	Gateway           struct{}          `json:"gateway"`
	LeafNode          struct{}          `json:"leaf"`
	MQTT              struct{}          `json:"mqtt"`
	Websocket         struct{}          `json:"websocket"`
	JetStream         JetStreamVarz     `json:"jetstream"`
	TLSTimeout        float64           `json:"tls_timeout"`
	WriteDeadline     time.Duration     `json:"write_deadline"`
	WriteTimeout      string            `json:"write_timeout,omitempty"`
	Start             time.Time         `json:"start"`
	Now               time.Time         `json:"now"`
	Uptime            string            `json:"uptime"`
	Mem               int64             `json:"mem"`
	Cores             int               `json:"cores"`
	MaxProcs          int               `json:"gomaxprocs"`
	MemLimit          int64             `json:"gomemlimit,omitempty"`
	CPU               float64           `json:"cpu"`
	Connections       int               `json:"connections"`
	TotalConnections  uint64            `json:"total_connections"`
	Routes            int               `json:"routes"`
	Remotes           int               `json:"remotes"`
	Leafs             int               `json:"leafnodes"`
	InMsgs            int64             `json:"in_msgs"`
	InBytes           int64             `json:"in_bytes"`
	InClientMsgs      int64             `json:"in_client_msgs"`
	InClientBytes     int64             `json:"in_client_bytes"`
	OutMsgs           int64             `json:"out_msgs"`
	OutBytes          int64             `json:"out_bytes"`
	OutClientMsgs     int64             `json:"out_client_msgs"`
	OutClientBytes    int64             `json:"out_client_bytes"`
	SlowConsumers     int64             `json:"slow_consumers"`
	StaleConnections  int64             `json:"stale_connections"`
	StalledClients    int64             `json:"stalled_clients"`
	Subscriptions     uint32            `json:"subscriptions"`
	HTTPReqStats      map[string]uint64 `json:"http_req_stats"`
	ConfigLoadTime    time.Time         `json:"config_load_time"`
	ConfigDigest      string            `json:"config_digest"`
	// FeatureFlags are nats-server's experimental switches, all off in
	// cairn (server.FeatureFlags).
	FeatureFlags         map[string]bool  `json:"feature_flags,omitempty"`
	Tags                 []string         `json:"tags,omitempty"`
	SystemAccount        string           `json:"system_account,omitempty"`
	SlowConsumersStats   *KindStats       `json:"slow_consumer_stats"`
	StaleConnectionStats *KindStats       `json:"stale_connection_stats,omitempty"`
	DiskIOWaitStats      *DiskIOWaitStats `json:"disk_io_wait_stats"`
}

// ClusterOptsVarz is /varz cluster.
type ClusterOptsVarz struct {
	Name        string   `json:"name,omitempty"`
	Host        string   `json:"addr,omitempty"`
	Port        int      `json:"cluster_port,omitempty"`
	AuthTimeout float64  `json:"auth_timeout,omitempty"`
	URLs        []string `json:"urls,omitempty"`
	TLSTimeout  float64  `json:"tls_timeout,omitempty"`
	TLSRequired bool     `json:"tls_required,omitempty"`
	TLSVerify   bool     `json:"tls_verify,omitempty"`
	PoolSize    int      `json:"pool_size,omitempty"`
	// TLSCertNotAfter is when the cluster certificate expires.
	TLSCertNotAfter time.Time `json:"tls_cert_not_after,omitzero"`
}

// KindStats counts events by connection kind (slow_consumer_stats,
// stale_connection_stats).
type KindStats struct {
	Clients  uint64 `json:"clients"`
	Routes   uint64 `json:"routes"`
	Gateways uint64 `json:"gateways"`
	Leafs    uint64 `json:"leafs"`
}

// DiskIOWaitStats is nats-server's disk I/O semaphore contention; cairn
// has no such semaphore, so it is always zero.
type DiskIOWaitStats struct {
	Waiters     int64  `json:"waiters"`
	Waits       uint64 `json:"waits"`
	WaitTime    uint64 `json:"wait_time"`
	MaxWaitTime uint64 `json:"max_wait_time"`
}

// JetStreamVarz is /varz jetstream.
type JetStreamVarz struct {
	Config *JetStreamConfig `json:"config,omitempty"`
	Stats  *JetStreamStats  `json:"stats,omitempty"`
	// Meta is the meta group of a JetStream cluster (/jsz meta_cluster);
	// statsz sends it whole only from the meta leader (statszMeta).
	Meta   *MetaClusterInfo `json:"meta,omitempty"`
	Limits *JSLimitOpts     `json:"limits,omitempty"`
}

// JetStreamConfig is the server's JetStream configuration (max_memory and
// max_storage in bytes, sync_interval in nanoseconds). CompressOK says
// streams may set compression (s2): true when both limits are
// configured, else left out, as nats-server v2.15.2 reports it (it
// leaves the key out when it derives a limit from the machine).
type JetStreamConfig struct {
	MaxMemory    int64         `json:"max_memory"`
	MaxStore     int64         `json:"max_storage"`
	StoreDir     string        `json:"store_dir,omitempty"`
	SyncInterval time.Duration `json:"sync_interval,omitempty"`
	SyncAlways   bool          `json:"sync_always,omitempty"`
	Domain       string        `json:"domain,omitempty"`
	CompressOK   bool          `json:"compress_ok,omitempty"`
	UniqueTag    string        `json:"unique_tag,omitempty"`
	// Strict is always sent (nats-server omits it when false): cairn's
	// is false (docs/compatibility.md, "Unknown JSON keys in API
	// requests").
	Strict bool `json:"strict"`
}

// JetStreamStats are the JetStream usage counters (bytes, and the API
// counters).
type JetStreamStats struct {
	Memory         uint64            `json:"memory"`
	Store          uint64            `json:"storage"`
	ReservedMemory uint64            `json:"reserved_memory"`
	ReservedStore  uint64            `json:"reserved_storage"`
	Accounts       int               `json:"accounts"`
	HAAssets       int               `json:"ha_assets"`
	API            JetStreamAPIStats `json:"api"`
}

// JetStreamAPIStats counts $JS.API requests.
type JetStreamAPIStats struct {
	Level    int    `json:"level"`
	Total    uint64 `json:"total"`
	Errors   uint64 `json:"errors"`
	Inflight uint64 `json:"inflight,omitempty"`
}

// JSLimitOpts are the server's JetStream limits.
type JSLimitOpts struct {
	MaxRequestBatch     int           `json:"max_request_batch,omitempty"`
	MaxAckPending       int           `json:"max_ack_pending,omitempty"`
	MaxHAAssets         int           `json:"max_ha_assets,omitempty"`
	Duplicates          time.Duration `json:"max_duplicate_window,omitempty"`
	DefaultMaxConsumers int           `json:"default_max_consumers,omitempty"`
}

// Connz is /connz.
type Connz struct {
	ID       string      `json:"server_id"`
	Now      time.Time   `json:"now"`
	NumConns int         `json:"num_connections"`
	Total    int         `json:"total"`
	Offset   int         `json:"offset"`
	Limit    int         `json:"limit"`
	Conns    []*ConnInfo `json:"connections"`
}

// ConnInfo is one connection of /connz.
type ConnInfo struct {
	Cid            uint64      `json:"cid"`
	Kind           string      `json:"kind,omitempty"`
	Type           string      `json:"type,omitempty"`
	IP             string      `json:"ip"`
	Port           int         `json:"port"`
	Start          time.Time   `json:"start"`
	LastActivity   time.Time   `json:"last_activity"`
	Stop           *time.Time  `json:"stop,omitempty"`
	Reason         string      `json:"reason,omitempty"`
	RTT            string      `json:"rtt,omitempty"`
	Uptime         string      `json:"uptime"`
	Idle           string      `json:"idle"`
	Pending        int         `json:"pending_bytes"`
	InMsgs         int64       `json:"in_msgs"`
	OutMsgs        int64       `json:"out_msgs"`
	InBytes        int64       `json:"in_bytes"`
	OutBytes       int64       `json:"out_bytes"`
	Stalls         int64       `json:"stalls,omitempty"`
	NumSubs        uint32      `json:"subscriptions"`
	Name           string      `json:"name,omitempty"`
	Lang           string      `json:"lang,omitempty"`
	Version        string      `json:"version,omitempty"`
	AuthorizedUser string      `json:"authorized_user,omitempty"`
	Account        string      `json:"account,omitempty"`
	Subs           []string    `json:"subscriptions_list,omitempty"`
	SubsDetail     []SubDetail `json:"subscriptions_list_detail,omitempty"`
	JWT            string      `json:"jwt,omitempty"`
	IssuerKey      string      `json:"issuer_key,omitempty"`
	NameTag        string      `json:"name_tag,omitempty"`
	Tags           []string    `json:"tags,omitempty"`

	rtt int64 // for sorting
}

// SubDetail is one subscription.
type SubDetail struct {
	Account    string `json:"account,omitempty"`
	AccountTag string `json:"account_tag,omitempty"`
	Subject    string `json:"subject"`
	Queue      string `json:"qgroup,omitempty"`
	Sid        string `json:"sid"`
	Msgs       int64  `json:"msgs"`
	Max        int64  `json:"max,omitempty"`
	Cid        uint64 `json:"cid"`
}

// Routez is /routez.
type Routez struct {
	ID        string       `json:"server_id"`
	Name      string       `json:"server_name"`
	Now       time.Time    `json:"now"`
	NumRoutes int          `json:"num_routes"`
	Routes    []*RouteInfo `json:"routes"`
}

// RouteInfo is one route of /routez.
type RouteInfo struct {
	Rid          uint64      `json:"rid"`
	RemoteID     string      `json:"remote_id"`
	RemoteName   string      `json:"remote_name"`
	DidSolicit   bool        `json:"did_solicit"`
	IsConfigured bool        `json:"is_configured"`
	IP           string      `json:"ip"`
	Port         int         `json:"port"`
	Start        time.Time   `json:"start"`
	LastActivity time.Time   `json:"last_activity"`
	RTT          string      `json:"rtt,omitempty"`
	Uptime       string      `json:"uptime"`
	Idle         string      `json:"idle"`
	Pending      int         `json:"pending_size"`
	InMsgs       int64       `json:"in_msgs"`
	OutMsgs      int64       `json:"out_msgs"`
	InBytes      int64       `json:"in_bytes"`
	OutBytes     int64       `json:"out_bytes"`
	NumSubs      uint32      `json:"subscriptions"`
	Subs         []string    `json:"subscriptions_list,omitempty"`
	SubsDetail   []SubDetail `json:"subscriptions_list_detail,omitempty"`
	Account      string      `json:"account,omitempty"`
	Compression  string      `json:"compression,omitempty"`
}

// SublistStats are the subject index's counters.
type SublistStats struct {
	NumSubs      uint32  `json:"num_subscriptions"`
	NumCache     uint32  `json:"num_cache"`
	NumInserts   uint64  `json:"num_inserts"`
	NumRemoves   uint64  `json:"num_removes"`
	NumMatches   uint64  `json:"num_matches"`
	CacheHitRate float64 `json:"cache_hit_rate"`
	MaxFanout    uint32  `json:"max_fanout"`
	AvgFanout    float64 `json:"avg_fanout"`
}

// Subsz is /subsz.
type Subsz struct {
	ID  string    `json:"server_id"`
	Now time.Time `json:"now"`
	*SublistStats
	Total  int         `json:"total"`
	Offset int         `json:"offset"`
	Limit  int         `json:"limit"`
	Subs   []SubDetail `json:"subscriptions_list,omitempty"`
}

// JSInfo is /jsz.
type JSInfo struct {
	JetStreamStats
	ID              string           `json:"server_id"`
	Now             time.Time        `json:"now"`
	Disabled        bool             `json:"disabled,omitempty"`
	Config          JetStreamConfig  `json:"config"`
	Limits          *JSLimitOpts     `json:"limits,omitempty"`
	Streams         int              `json:"streams"`
	StreamsLeader   int              `json:"streams_leader,omitempty"`
	Consumers       int              `json:"consumers"`
	ConsumersLeader int              `json:"consumers_leader,omitempty"`
	Messages        uint64           `json:"messages"`
	Bytes           uint64           `json:"bytes"`
	Meta            *MetaClusterInfo `json:"meta_cluster,omitempty"`
	AccountDetails  []*AccountDetail `json:"account_details,omitempty"`
	Total           int              `json:"total"`
}

// MetaClusterInfo is /jsz's meta_cluster (nats-server v2.15.2
// MetaClusterInfo): the JetStream cluster's meta group as this server
// sees it (jscluster.MetaInfo). nats-server's pending counts are 0 here
// (cairn queues no meta requests for later) and its snapshot statistics
// are left out.
type MetaClusterInfo struct {
	Name            string                `json:"name,omitempty"`
	Leader          string                `json:"leader,omitempty"`
	Peer            string                `json:"peer,omitempty"`
	Replicas        []*jetstream.PeerInfo `json:"replicas,omitempty"`
	Size            int                   `json:"cluster_size"`
	QuorumNeeded    int                   `json:"quorum_needed"`
	Pending         int                   `json:"pending"`
	PendingRequests int                   `json:"pending_requests"`
	PendingInfos    int                   `json:"pending_infos"`
	// Snapshot is this server's checkpoint of the meta group.
	Snapshot *MetaSnapshotStats `json:"snapshot"`
}

// MetaSnapshotStats is /jsz meta_cluster.snapshot (nats-server v2.15.2
// MetaSnapshotStats), from the meta group's checkpoint
// (meta.CheckpointStats; docs/monitoring.md, "Replicas and the meta
// group"): the entries applied since the checkpoint and the bytes of
// their operations (what a restart applies again), when the last
// checkpoint written since the start began (UTC) and how long it took
// in nanoseconds; before the first, last_time is the zero time and
// last_duration absent, as nats-server sends them before its first
// snapshot.
type MetaSnapshotStats struct {
	PendingEntries uint64        `json:"pending_entries"`
	PendingSize    uint64        `json:"pending_size"`
	LastTime       time.Time     `json:"last_time"`
	LastDuration   time.Duration `json:"last_duration,omitempty"`
}

// AccountDetail is one account of /jsz.
type AccountDetail struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	JetStreamStats
	Streams []StreamDetail `json:"stream_detail,omitempty"`
}

// StreamDetail is one stream of /jsz.
type StreamDetail struct {
	Name               string                  `json:"name"`
	Created            time.Time               `json:"created"`
	Cluster            *jetstream.ClusterInfo  `json:"cluster,omitempty"`
	Config             *stream.Config          `json:"config,omitempty"`
	State              jetstream.StreamState   `json:"state"`
	Consumer           []*consumer.Info        `json:"consumer_detail,omitempty"`
	Mirror             *jetstream.SourceInfo   `json:"mirror,omitempty"`
	Sources            []*jetstream.SourceInfo `json:"sources,omitempty"`
	RaftGroup          string                  `json:"stream_raft_group,omitempty"`
	ConsumerRaftGroups []*RaftGroupDetail      `json:"consumer_raft_groups,omitempty"`
}

// RaftGroupDetail names a consumer's Raft group.
type RaftGroupDetail struct {
	Name      string `json:"name"`
	RaftGroup string `json:"raft_group,omitempty"`
}

// HealthStatus is /healthz.
type HealthStatus struct {
	Status     string        `json:"status"`
	StatusCode int           `json:"status_code,omitempty"`
	Error      string        `json:"error,omitempty"`
	Errors     []HealthError `json:"errors,omitempty"`
}

// HealthError is one problem of /healthz?details=true; Type is
// CONNECTION, BAD_REQUEST, JETSTREAM, ACCOUNT, STREAM or CONSUMER.
type HealthError struct {
	Type     string `json:"type"`
	Account  string `json:"account,omitempty"`
	Stream   string `json:"stream,omitempty"`
	Consumer string `json:"consumer,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Accountz is /accountz.
type Accountz struct {
	ID            string       `json:"server_id"`
	Now           time.Time    `json:"now"`
	SystemAccount string       `json:"system_account,omitempty"`
	Accounts      []string     `json:"accounts,omitempty"`
	Account       *AccountInfo `json:"account_detail,omitempty"`
}

// AccountInfo is /accountz?acc=<name>.
type AccountInfo struct {
	AccountName string        `json:"account_name"`
	LastUpdate  time.Time     `json:"update_time,omitempty"`
	IsSystem    bool          `json:"is_system,omitempty"`
	Expired     bool          `json:"expired"`
	Complete    bool          `json:"complete"`
	JetStream   bool          `json:"jetstream_enabled"`
	LeafCnt     int           `json:"leafnode_connections"`
	ClientCnt   int           `json:"client_connections"`
	SubCnt      uint32        `json:"subscriptions"`
	Exports     []ExtExport   `json:"exports,omitempty"`
	Imports     []ExtImport   `json:"imports,omitempty"`
	NameTag     string        `json:"name_tag,omitempty"`
	Sublist     *SublistStats `json:"sublist_stats,omitempty"`
}

// ExtExport is one export of /accountz?acc=<name> (nats-server v2.15.2
// monitor.go ExtExport, the fields cairn has): the subject, "service" or
// "stream", a service's response type ("Singleton", "Streamed",
// "Chunked") and, for a private export, the accounts that may import it.
type ExtExport struct {
	Subject          string   `json:"subject,omitempty"`
	Type             string   `json:"type,omitempty"`
	ResponseType     string   `json:"response_type,omitempty"`
	ApprovedAccounts []string `json:"approved_accounts,omitempty"`
}

// ExtImport is one import of /accountz?acc=<name> (nats-server v2.15.2
// monitor.go ExtImport and jwt.Import): Subject is the subject in the
// exporting account, LocalSubject (and To, its deprecated copy, for a
// service) the subject in this one. cairn checks imports at start, so
// none is invalid, and tracks no latency.
type ExtImport struct {
	Subject      string `json:"subject,omitempty"`
	Account      string `json:"account,omitempty"`
	To           string `json:"to,omitempty"`
	LocalSubject string `json:"local_subject,omitempty"`
	Type         string `json:"type,omitempty"`
	Invalid      bool   `json:"invalid"`
	Share        bool   `json:"share"`
	Tracking     bool   `json:"tracking"`
}

// AccountStatz is /accstatz.
type AccountStatz struct {
	ID       string         `json:"server_id"`
	Now      time.Time      `json:"now"`
	Accounts []*AccountStat `json:"account_statz"`
}

// AccountStat is one account of /accstatz.
type AccountStat struct {
	Account       string    `json:"acc"`
	Name          string    `json:"name"`
	Conns         int       `json:"conns"`
	LeafNodes     int       `json:"leafnodes"`
	TotalConns    int       `json:"total_conns"`
	NumSubs       uint32    `json:"num_subscriptions"`
	Sent          DataStats `json:"sent"`
	Received      DataStats `json:"received"`
	SlowConsumers int64     `json:"slow_consumers"`
}

// MsgBytes counts messages and bytes.
type MsgBytes struct {
	Msgs  int64 `json:"msgs"`
	Bytes int64 `json:"bytes"`
}

// DataStats counts traffic, in total and by connection kind.
type DataStats struct {
	MsgBytes
	Gateways *MsgBytes `json:"gateways,omitempty"`
	Routes   *MsgBytes `json:"routes,omitempty"`
	Leafs    *MsgBytes `json:"leafs,omitempty"`
}

// Leafz is /leafz: cairn has no leaf nodes.
type Leafz struct {
	ID       string     `json:"server_id"`
	Now      time.Time  `json:"now"`
	NumLeafs int        `json:"leafnodes"`
	Leafs    []struct{} `json:"leafs"`
}

// Gatewayz is /gatewayz: cairn has no gateways.
type Gatewayz struct {
	ID               string                `json:"server_id"`
	Now              time.Time             `json:"now"`
	OutboundGateways map[string]struct{}   `json:"outbound_gateways"`
	InboundGateways  map[string][]struct{} `json:"inbound_gateways"`
}
