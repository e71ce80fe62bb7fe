package consumer

import (
	"encoding/json"
	"maps"
	"slices"
	"time"
)

// Config is the ConsumerConfig of the JetStream API (nats-server v2.15.2 ConsumerConfig). Its JSON keys, their order, the omitempty rules and the Go types
// are those of nats-server v2.15.2 (server/consumer.go ConsumerConfig), so
// encoding/json gives the bytes nats-server returns in the "config" of a
// consumer_create_response. Durations are integers in nanoseconds in JSON
// and time.Duration in Go. Decoding ignores unknown keys.
type Config struct {
	Durable         string          `json:"durable_name,omitempty"`
	Name            string          `json:"name,omitempty"`
	Description     string          `json:"description,omitempty"`
	DeliverPolicy   DeliverPolicy   `json:"deliver_policy"`
	OptStartSeq     uint64          `json:"opt_start_seq,omitempty"`
	OptStartTime    *time.Time      `json:"opt_start_time,omitempty"`
	AckPolicy       AckPolicy       `json:"ack_policy"`
	AckWait         time.Duration   `json:"ack_wait,omitempty"`
	MaxDeliver      int             `json:"max_deliver,omitempty"`
	BackOff         []time.Duration `json:"backoff,omitempty"`
	FilterSubject   string          `json:"filter_subject,omitempty"`
	FilterSubjects  []string        `json:"filter_subjects,omitempty"`
	ReplayPolicy    ReplayPolicy    `json:"replay_policy"`
	RateLimit       uint64          `json:"rate_limit_bps,omitempty"` // bits per second
	SampleFrequency string          `json:"sample_freq,omitempty"`
	MaxWaiting      int             `json:"max_waiting,omitempty"`
	MaxAckPending   int             `json:"max_ack_pending,omitempty"`
	FlowControl     bool            `json:"flow_control,omitempty"`
	HeadersOnly     bool            `json:"headers_only,omitempty"`

	// Pull consumers.
	MaxRequestBatch    int           `json:"max_batch,omitempty"`
	MaxRequestExpires  time.Duration `json:"max_expires,omitempty"`
	MaxRequestMaxBytes int           `json:"max_bytes,omitempty"`

	// Push consumers.
	DeliverSubject string        `json:"deliver_subject,omitempty"`
	DeliverGroup   string        `json:"deliver_group,omitempty"`
	Heartbeat      time.Duration `json:"idle_heartbeat,omitempty"`

	InactiveThreshold time.Duration `json:"inactive_threshold,omitempty"`

	Replicas      int  `json:"num_replicas"`
	MemoryStorage bool `json:"mem_storage,omitempty"`

	// Internal to nats-server (mirrors and sources); accepted and kept.
	Direct   bool `json:"direct,omitempty"`
	Sourcing bool `json:"sourcing,omitempty"`

	Metadata   map[string]string `json:"metadata,omitempty"`
	PauseUntil *time.Time        `json:"pause_until,omitempty"`

	PriorityGroups []string       `json:"priority_groups,omitempty"`
	PriorityPolicy PriorityPolicy `json:"priority_policy,omitempty"`
	PinnedTTL      time.Duration  `json:"priority_timeout,omitempty"`
}

// Clone returns a deep copy of c.
func (c *Config) Clone() Config {
	d := *c
	d.BackOff = slices.Clone(c.BackOff)
	d.FilterSubjects = slices.Clone(c.FilterSubjects)
	d.Metadata = maps.Clone(c.Metadata)
	d.PriorityGroups = slices.Clone(c.PriorityGroups)
	if c.OptStartTime != nil {
		t := *c.OptStartTime
		d.OptStartTime = &t
	}
	if c.PauseUntil != nil {
		t := *c.PauseUntil
		d.PauseUntil = &t
	}
	return d
}

// IsPush reports whether c is a push consumer (it has a deliver subject).
func (c *Config) IsPush() bool { return c.DeliverSubject != "" }

// Filters returns the consumer's subject filters: filter_subjects, or
// filter_subject alone, or nil for every subject of the stream.
func (c *Config) Filters() []string {
	if len(c.FilterSubjects) > 0 {
		return c.FilterSubjects
	}
	if c.FilterSubject != "" {
		return []string{c.FilterSubject}
	}
	return nil
}

// SequenceInfo is a consumer sequence with the stream sequence and the
// time of the last activity (nats-server v2.15.2 ConsumerInfo).
type SequenceInfo struct {
	Consumer uint64     `json:"consumer_seq"`
	Stream   uint64     `json:"stream_seq"`
	Last     *time.Time `json:"last_active,omitempty"`
}

// ClusterInfo is the cluster part of a stream's or a consumer's info
// (nats-server v2.15.2 ClusterInfo): on one server only the leader, the
// server itself; in a cluster the cluster's name, the asset's Raft group
// (S-R3F-<id>, C-R3F-<id>), its leader and since when, and the other
// replicas. package jetstream names it jetstream.ClusterInfo.
type ClusterInfo struct {
	Name        string     `json:"name,omitempty"`
	RaftGroup   string     `json:"raft_group,omitempty"`
	Leader      string     `json:"leader,omitempty"`
	LeaderSince *time.Time `json:"leader_since,omitempty"`
	// SystemAcc and TrafficAcc say in which account a replicated
	// group's Raft traffic travels, as nats-server v2.15.2 reports it
	// without account NRG: true and the system account's name (cairn's
	// travels on the servers' own Raft connections, in no user
	// account: docs/compatibility.md); absent for one replica.
	SystemAcc  bool        `json:"system_account,omitempty"`
	TrafficAcc string      `json:"traffic_account,omitempty"`
	Replicas   []*PeerInfo `json:"replicas,omitempty"`
	// Desired is the stream's move in flight, nil when none is.
	Desired *DesiredClusterInfo `json:"desired,omitempty"`
}

// DesiredClusterInfo is where a stream in flight goes, as nats-server
// v2.15.2 shows it during a move (stream.go DesiredClusterInfo,
// docs/cluster.md "Moving a stream"): when the move began, the
// cluster it goes to, its servers there, and the replica count and
// placement a cancel returns it to, and, on the group's leader, what the
// move waits for (Status).
type DesiredClusterInfo struct {
	Created  time.Time                 `json:"created"`
	Name     string                    `json:"name,omitempty"`
	Replicas []*DesiredPeerInfo        `json:"replicas,omitempty"`
	Origin   *DesiredClusterInfoOrigin `json:"origin,omitempty"`
	Status   *DesiredClusterInfoStatus `json:"status,omitempty"`
}

// DesiredClusterInfoStatus is what a move waits for, as its group's
// leader reports it (nats-server v2.15.2 DesiredClusterInfoStatus): a
// type ("meta", "membership", "catchup", "quorum", "blocked", as
// nats-server's MigrationStatusType) and a short line (docs/cluster.md
// "Moving a stream" lists cairn's).
type DesiredClusterInfoStatus struct {
	Description string `json:"description"`
	Type        string `json:"type"`
	Err         string `json:"err,omitempty"`
}

// DesiredPeerInfo is one server of DesiredClusterInfo (nats-server
// v2.15.2 DesiredPeerInfo): its name, whether it is offline, its peer
// ID.
type DesiredPeerInfo struct {
	Name    string `json:"name"`
	Offline bool   `json:"offline,omitempty"`
	Peer    string `json:"peer"`
}

// DesiredClusterInfoOrigin is what a cancelled move returns a stream to
// (nats-server v2.15.2 DesiredClusterInfoOrigin): its replica count and
// its config's placement, as JSON (nil when it had none).
type DesiredClusterInfoOrigin struct {
	Replicas  int             `json:"replicas"`
	Placement json.RawMessage `json:"placement,omitempty"`
}

// PeerInfo is one replica other than the leader in ClusterInfo
// (nats-server v2.15.2 PeerInfo): its server's name, whether it is
// current (caught up), how long since the leader heard from it
// (nanoseconds), how many entries it lags, whether its server is
// offline, and its peer ID.
type PeerInfo struct {
	Name    string        `json:"name"`
	Current bool          `json:"current"`
	Offline bool          `json:"offline,omitempty"`
	Active  time.Duration `json:"active"`
	Lag     uint64        `json:"lag,omitempty"`
	Peer    string        `json:"peer"`
	// Pending: the replica is in the assignment but not yet a voter of
	// the group (being added: a learner catching up), as nats-server
	// v2.15.2 marks a peer of its desired set not in the Raft group yet.
	Pending bool `json:"pending,omitempty"`
}

// Info is the ConsumerInfo of the JetStream API (nats-server v2.15.2 ConsumerInfo), in nats-server v2.15.2's key order. PauseRemaining is nanoseconds
// in JSON.
type Info struct {
	Stream         string        `json:"stream_name"`
	Name           string        `json:"name"`
	Created        time.Time     `json:"created"`
	Config         *Config       `json:"config,omitempty"`
	Delivered      SequenceInfo  `json:"delivered"`
	AckFloor       SequenceInfo  `json:"ack_floor"`
	NumAckPending  int           `json:"num_ack_pending"`
	NumRedelivered int           `json:"num_redelivered"`
	NumWaiting     int           `json:"num_waiting"`
	NumPending     uint64        `json:"num_pending"`
	Cluster        *ClusterInfo  `json:"cluster,omitempty"`
	PushBound      bool          `json:"push_bound,omitempty"`
	Paused         bool          `json:"paused,omitempty"`
	PauseRemaining time.Duration `json:"pause_remaining,omitempty"`
	TimeStamp      time.Time     `json:"ts"`
	// PriorityGroups is the state of the consumer's first priority
	// group (ADR-42), absent without groups.
	PriorityGroups []PriorityGroupState `json:"priority_groups,omitempty"`
}
