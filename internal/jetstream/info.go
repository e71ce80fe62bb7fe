package jetstream

import (
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/subject"
)

// StreamInfo is the stream info of the JetStream API (nats-server v2.15.2 StreamInfo and StreamState), in nats-server v2.15.2's key order.
type StreamInfo struct {
	Config    stream.Config `json:"config"`
	Created   time.Time     `json:"created"`
	State     StreamState   `json:"state"`
	Domain    string        `json:"domain,omitempty"` // the JetStream domain; nats-server leaves it out of create answers
	Cluster   *ClusterInfo  `json:"cluster,omitempty"`
	Mirror    *SourceInfo   `json:"mirror,omitempty"`
	Sources   []*SourceInfo `json:"sources,omitempty"`
	TimeStamp time.Time     `json:"ts"`
}

// ClusterInfo is the cluster part of a stream's or a consumer's info
// (consumer.ClusterInfo).
type ClusterInfo = consumer.ClusterInfo

// PeerInfo is one replica other than the leader in ClusterInfo
// (consumer.PeerInfo).
type PeerInfo = consumer.PeerInfo

// StreamState is the state part of StreamInfo (nats-server v2.15.2 StreamInfo and StreamState).
// Times are RFC 3339 in JSON; the zero time when there is no message.
type StreamState struct {
	Msgs        uint64            `json:"messages"`
	Bytes       uint64            `json:"bytes"`
	FirstSeq    uint64            `json:"first_seq"`
	FirstTime   time.Time         `json:"first_ts"`
	LastSeq     uint64            `json:"last_seq"`
	LastTime    time.Time         `json:"last_ts"`
	NumSubjects int               `json:"num_subjects,omitempty"`
	Subjects    map[string]uint64 `json:"subjects,omitempty"`
	NumDeleted  int               `json:"num_deleted,omitempty"`
	Deleted     []uint64          `json:"deleted,omitempty"`
	Lost        *LostData         `json:"lost,omitempty"`
	Consumers   int               `json:"consumer_count"`
}

// LostData reports messages the store found damaged.
type LostData struct {
	Msgs  []uint64 `json:"msgs"`
	Bytes uint64   `json:"bytes"`
}

// InfoOptions selects the optional parts of a stream info request.
type InfoOptions struct {
	DeletedDetails bool   // list the deleted sequences
	SubjectsFilter string // count messages per subject matching this filter
}

// info gathers the stream's info.
func (r *streamEntry) info(opts InfoOptions) *StreamInfo {
	st := r.Store().State(opts.DeletedDetails)
	info := &StreamInfo{
		Config:    r.js.withServerMetadata(r.Config()),
		Created:   r.Created().UTC(),
		State:     toState(st, r.subjectCounts(opts.SubjectsFilter)),
		Domain:    r.js.cfg.Domain,
		Cluster:   r.js.clusterInfo(r.Name()),
		TimeStamp: r.js.now().UTC(),
	}
	info.State.Consumers = r.numConsumers()
	if f := r.js.cfg.ConsumerCount; f != nil {
		if n, ok := f(r.Name()); ok {
			info.State.Consumers = n
		}
	}
	info.Mirror, info.Sources = r.srcs.Infos()
	return info
}

// clusterInfo returns the cluster part of a stream's info: the cluster
// layer's (Config.ClusterInfo) or, on one server, this server as leader.
func (js *JetStream) clusterInfo(stream string) *ClusterInfo {
	if f := js.cfg.ClusterInfo; f != nil {
		return f(stream)
	}
	return &ClusterInfo{Leader: js.cfg.ServerName}
}

func (r *streamEntry) numConsumers() int {
	r.cons.mu.Lock()
	defer r.cons.mu.Unlock()
	return len(r.cons.byName)
}

func (r *streamEntry) subjectCounts(filter string) map[string]uint64 {
	if filter == "" || !subject.ValidSubject(filter) {
		return nil
	}
	counts := map[string]uint64{}
	for subj, ss := range r.Store().SubjectsState(filter) {
		counts[subj] = ss.Msgs
	}
	return counts
}

func toState(st store.State, subjects map[string]uint64) StreamState {
	s := StreamState{
		Msgs: st.Msgs, Bytes: st.Bytes, FirstSeq: st.FirstSeq, LastSeq: st.LastSeq,
		FirstTime: unixTime(st.FirstTime), LastTime: unixTime(st.LastTime),
		NumSubjects: st.NumSubjects, NumDeleted: st.NumDeleted, Deleted: st.Deleted,
	}
	if len(subjects) > 0 {
		s.Subjects = subjects
	}
	if st.Lost != nil {
		s.Lost = &LostData{Msgs: st.Lost.Msgs, Bytes: st.Lost.Bytes}
	}
	return s
}

// unixTime converts unix nanoseconds to a UTC time; 0 is the zero time
// ("0001-01-01T00:00:00Z" in JSON, as nats-server shows an empty stream).
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// Domain returns the JetStream domain ("" for none).
func (js *JetStream) Domain() string { return js.cfg.Domain }

// withServerMetadata adds the advertised server version and API level to
// a config returned to a client (nats-server setDynamicStreamMetadata).
func (js *JetStream) withServerMetadata(c stream.Config) stream.Config {
	return c.WithServerMetadata(js.cfg.Version, js.cfg.APILevel)
}

// WithServerMetadata returns c with this server's version and API level
// in its metadata (_nats.ver, _nats.level), as every stream config
// nats-server v2.15.2 returns to a client has them
// (setDynamicStreamMetadata): for the cluster layer, whose answer to a
// create is built from the meta group's copy of the config.
func (js *JetStream) WithServerMetadata(c stream.Config) stream.Config {
	return js.withServerMetadata(c)
}

// ServerName returns the name of the server this engine runs on
// (Config.ServerName).
func (js *JetStream) ServerName() string { return js.cfg.ServerName }
