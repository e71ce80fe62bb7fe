package stream

import (
	"maps"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

// Config is the StreamConfig of the JetStream API (nats-server v2.15.2 StreamConfig; nats-server v2.15.2 StreamSource; ADR-59). Its JSON keys, their order, the omitempty rules and the Go
// types are those of nats-server v2.15.2 (server/stream.go StreamConfig),
// so encoding/json gives the bytes nats-server returns in the "config" of
// a stream_create_response, escapes included. Durations are integers in
// nanoseconds. Decoding ignores unknown keys (nats-server v2.15.2 item
// 3); the request-only "pedantic" key belongs to the API layer.
type Config struct {
	Name                   string            `json:"name"`
	Description            string            `json:"description,omitempty"`
	Subjects               []string          `json:"subjects,omitempty"`
	Retention              RetentionPolicy   `json:"retention"`
	MaxConsumers           int               `json:"max_consumers"`
	MaxMsgs                int64             `json:"max_msgs"`
	MaxBytes               int64             `json:"max_bytes"`
	MaxAge                 time.Duration     `json:"max_age"`
	MaxMsgsPerSubject      int64             `json:"max_msgs_per_subject"`
	MaxMsgSize             int32             `json:"max_msg_size,omitempty"`
	Discard                DiscardPolicy     `json:"discard"`
	Storage                StorageType       `json:"storage"`
	Replicas               int               `json:"num_replicas"`
	NoAck                  bool              `json:"no_ack,omitempty"`
	DuplicateWindow        time.Duration     `json:"duplicate_window,omitempty"`
	Placement              *Placement        `json:"placement,omitempty"`
	Mirror                 *Source           `json:"mirror,omitempty"`
	Sources                []*Source         `json:"sources,omitempty"`
	Compression            Compression       `json:"compression"`
	FirstSeq               uint64            `json:"first_seq,omitempty"`
	SubjectTransform       *SubjectTransform `json:"subject_transform,omitempty"`
	RePublish              *RePublish        `json:"republish,omitempty"`
	AllowDirect            bool              `json:"allow_direct"`
	MirrorDirect           bool              `json:"mirror_direct"`
	DiscardNewPerSubject   bool              `json:"discard_new_per_subject,omitempty"`
	Sealed                 bool              `json:"sealed"`
	DenyDelete             bool              `json:"deny_delete"`
	DenyPurge              bool              `json:"deny_purge"`
	AllowRollup            bool              `json:"allow_rollup_hdrs"`
	ConsumerLimits         ConsumerLimits    `json:"consumer_limits"`
	AllowMsgTTL            bool              `json:"allow_msg_ttl"`
	SubjectDeleteMarkerTTL time.Duration     `json:"subject_delete_marker_ttl,omitempty"`
	AllowMsgCounter        bool              `json:"allow_msg_counter,omitempty"`
	AllowAtomicPublish     bool              `json:"allow_atomic,omitempty"`
	AllowMsgSchedules      bool              `json:"allow_msg_schedules,omitempty"`
	PersistMode            PersistMode       `json:"persist_mode,omitempty"`
	AllowBatchPublish      bool              `json:"allow_batched,omitempty"`
	Metadata               map[string]string `json:"metadata,omitempty"`
}

// Placement asks for a cluster or server tags. A single server accepts
// cluster and tags and ignores them; preferred is refused (10052).
type Placement struct {
	Cluster   string   `json:"cluster,omitempty"`
	Tags      []string `json:"tags,omitempty"`
	Preferred string   `json:"preferred,omitempty"`
}

// Source is a StreamSource: the origin of a mirror or of one source.
type Source struct {
	Name              string             `json:"name"`
	OptStartSeq       uint64             `json:"opt_start_seq,omitempty"`
	OptStartTime      *time.Time         `json:"opt_start_time,omitempty"`
	FilterSubject     string             `json:"filter_subject,omitempty"`
	SubjectTransforms []SubjectTransform `json:"subject_transforms,omitempty"`
	External          *ExternalStream    `json:"external,omitempty"`
	Consumer          *SourceConsumer    `json:"consumer,omitempty"`
}

// SourceConsumer names the durable consumer a source reads through
// (nats-server 2.14+).
type SourceConsumer struct {
	Name           string `json:"name,omitempty"`
	DeliverSubject string `json:"deliver_subject,omitempty"`
}

// ExternalStream qualifies a source in another account or domain: the API
// prefix (for example "$JS.hub.API") and the deliver prefix.
type ExternalStream struct {
	APIPrefix     string `json:"api"`
	DeliverPrefix string `json:"deliver"`
}

// SubjectTransform maps subjects matching Source to Destination.
type SubjectTransform struct {
	Source      string `json:"src"`
	Destination string `json:"dest"`
}

// RePublish republishes stored messages matching Source to Destination.
type RePublish struct {
	Source      string `json:"src,omitempty"`
	Destination string `json:"dest"`
	HeadersOnly bool   `json:"headers_only,omitempty"`
}

// ConsumerLimits are the defaults and ceilings for the stream's consumers.
// Zero means none; both keys are omitted when zero, so the empty value
// encodes as {}.
type ConsumerLimits struct {
	InactiveThreshold time.Duration `json:"inactive_threshold,omitempty"`
	MaxAckPending     int           `json:"max_ack_pending,omitempty"`
}

// DefaultDuplicateWindow is the duplicate_window a stream gets when it
// sets none (nats-server StreamDefaultDuplicatesWindow).
const DefaultDuplicateWindow = 2 * time.Minute

// SetDefaults fills in what nats-server v2.15.2 fills in (nats-server v2.15.2 defaults, setStreamConfigDefaults and setConsumerConfigDefaults; server/stream.go checkStreamCfgLocked): 0 or < -1 becomes
// -1 for max_msgs, max_bytes, max_msgs_per_subject, max_msg_size and
// max_consumers; num_replicas 0 becomes 1; a zero duplicate_window
// becomes 2 min, or max_age when that is shorter, except on mirrors and
// sourced streams; empty subjects become [name] unless the stream is a
// mirror or sourced; an empty placement is dropped; an empty republish
// source becomes ">". retention, storage, discard and compression default
// through their zero values. SetDefaults never fails: Validate reports
// what is wrong, and reports it as nats-server would for the same input.
func (c *Config) SetDefaults() {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	c.MaxMsgs = unlimited(c.MaxMsgs)
	c.MaxMsgsPerSubject = unlimited(c.MaxMsgsPerSubject)
	c.MaxBytes = unlimited(c.MaxBytes)
	c.MaxMsgSize = int32(unlimited(int64(c.MaxMsgSize)))
	c.MaxConsumers = int(unlimited(int64(c.MaxConsumers)))
	sourced := c.Mirror != nil || len(c.Sources) > 0
	if c.DuplicateWindow == 0 && !sourced {
		c.DuplicateWindow = DefaultDuplicateWindow
		if c.MaxAge > 0 && c.MaxAge < DefaultDuplicateWindow {
			c.DuplicateWindow = c.MaxAge
		}
	}
	if len(c.Subjects) == 0 && !sourced {
		c.Subjects = append(c.Subjects, c.Name)
	}
	if p := c.Placement; p != nil && p.Cluster == "" && p.Tags == nil && p.Preferred == "" {
		c.Placement = nil
	}
	if c.RePublish != nil && c.RePublish.Source == "" {
		c.RePublish.Source = ">"
	}
	c.implicitRePublish()
}

// unlimited maps 0 and anything below -1 to -1 (unlimited).
func unlimited(v int64) int64 {
	if v == 0 || v < -1 {
		return -1
	}
	return v
}

// StoreConfig returns the limits the store enforces and whether it
// compresses payloads on disk (compression "s2"): the API's -1
// (unlimited) becomes 0, the store's "no limit".
func (c *Config) StoreConfig() store.Config {
	discard := store.DiscardOld
	if c.Discard == DiscardNew {
		discard = store.DiscardNew
	}
	return store.Config{
		MaxMsgs:              max(c.MaxMsgs, 0),
		MaxBytes:             max(c.MaxBytes, 0),
		MaxAge:               c.MaxAge,
		MaxMsgsPerSubject:    max(c.MaxMsgsPerSubject, 0),
		MaxMsgSize:           max(int64(c.MaxMsgSize), 0),
		Discard:              discard,
		DiscardNewPerSubject: c.DiscardNewPerSubject,
		FirstSeq:             c.FirstSeq,
		MsgTTL:               c.AllowMsgTTL,
		SubjectDeleteMarkers: c.SubjectDeleteMarkerTTL > 0,
		Compress:             c.Compression == S2Compression,
		MemSizes:             c.Storage == MemoryStorage,
	}
}

// Clone returns a deep copy of c: no slice, map or pointer is shared.
func (c *Config) Clone() Config {
	n := *c
	n.Subjects = slices.Clone(c.Subjects)
	n.Placement = clonePlacement(c.Placement)
	n.Mirror = cloneSource(c.Mirror)
	if c.Sources != nil {
		n.Sources = make([]*Source, len(c.Sources))
		for i, s := range c.Sources {
			n.Sources[i] = cloneSource(s)
		}
	}
	n.SubjectTransform = clonePtr(c.SubjectTransform)
	n.RePublish = clonePtr(c.RePublish)
	n.Metadata = maps.Clone(c.Metadata)
	return n
}

func clonePlacement(p *Placement) *Placement {
	if p == nil {
		return nil
	}
	n := *p
	n.Tags = slices.Clone(p.Tags)
	return &n
}

func cloneSource(s *Source) *Source {
	if s == nil {
		return nil
	}
	n := *s
	n.OptStartTime = clonePtr(s.OptStartTime)
	n.SubjectTransforms = slices.Clone(s.SubjectTransforms)
	n.External = clonePtr(s.External)
	n.Consumer = clonePtr(s.Consumer)
	return &n
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	n := *p
	return &n
}

// Equal reports whether c and o encode to the same JSON. This is the test
// for an identical re-create (nats-server v2.15.2 STREAM.CREATE, jsStreamCreateRequest: the defaulted new
// config must equal the existing one, else 10058). It differs from
// nats-server's reflect.DeepEqual only where the two cannot be told apart
// on the wire, such as a nil and an empty list.
func (c *Config) Equal(o *Config) bool {
	return sameJSON(c, o)
}

// implicitRePublish rewrites a ">" to ">" republish of a stream whose
// only subject is its subject transform's source into a republish of the
// transformed subjects, as nats-server v2.15.2 does outside pedantic mode
// (checkStreamCfgLocked; pedantic mode refuses it, CheckPedantic).
func (c *Config) implicitRePublish() {
	rp, tr := c.RePublish, c.SubjectTransform
	if rp != nil && rp.Source == ">" && rp.Destination == ">" && tr != nil &&
		len(c.Subjects) == 1 && tr.Source == c.Subjects[0] {
		rp.Source, rp.Destination = tr.Destination, tr.Destination
	}
}
