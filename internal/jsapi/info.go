package jsapi

import (
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// accountInfoResponse is the $JS.API.INFO response (nats-server
// v2.15.2 jsAccountInfoRequest) in nats-server v2.15.2's key order, with
// "domain" when the server has a JetStream domain and without "tiers"
// (cairn has none). nats-server v2.15.2 answers a fresh server with:
//
//	{"type":"io.nats.jetstream.api.v1.account_info_response","memory":0,"storage":0,
//	 "reserved_memory":0,"reserved_storage":0,"streams":0,"consumers":0,
//	 "limits":{"max_memory":-1,"max_storage":-1,"max_streams":-1,"max_consumers":-1,
//	 "max_ack_pending":-1,"memory_max_stream_bytes":-1,"storage_max_stream_bytes":-1,
//	 "max_bytes_required":false},"api":{"level":5,"total":0,"errors":0}}
type accountInfoResponse struct {
	apiResponse
	*accountStats
}

type accountStats struct {
	Memory         uint64        `json:"memory"`
	Store          uint64        `json:"storage"`
	ReservedMemory uint64        `json:"reserved_memory"`
	ReservedStore  uint64        `json:"reserved_storage"`
	Streams        int           `json:"streams"`
	Consumers      int           `json:"consumers"`
	Limits         accountLimits `json:"limits"`
	Domain         string        `json:"domain,omitempty"`
	API            apiStats      `json:"api"`
}

type accountLimits struct {
	MaxMemory            int64 `json:"max_memory"`
	MaxStore             int64 `json:"max_storage"`
	MaxStreams           int   `json:"max_streams"`
	MaxConsumers         int   `json:"max_consumers"`
	MaxAckPending        int   `json:"max_ack_pending"`
	MemoryMaxStreamBytes int64 `json:"memory_max_stream_bytes"`
	StoreMaxStreamBytes  int64 `json:"storage_max_stream_bytes"`
	MaxBytesRequired     bool  `json:"max_bytes_required"`
}

// apiStats counts the API responses sent before this one (nats-server
// counts a response after building it).
type apiStats struct {
	Level  int    `json:"level"`
	Total  uint64 `json:"total"`
	Errors uint64 `json:"errors"`
}

func accountInfo(a *API, r *request) (response, *jserr.Error) {
	resp := &accountInfoResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	ai := a.js.Account()
	st := &accountStats{
		Memory: ai.Memory, Store: ai.Store, Streams: ai.Streams, Consumers: ai.Consumers, Domain: a.js.Domain(),
		Limits: accountLimits{
			MaxMemory: ai.Limits.MaxMemory, MaxStore: ai.Limits.MaxStore,
			MaxStreams: ai.Limits.MaxStreams, MaxConsumers: ai.Limits.MaxConsumers,
			MaxAckPending: -1, MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: -1,
		},
		API: apiStats{Level: APILevel, Total: a.total.Load(), Errors: a.errors.Load()},
	}
	if ac, ok := a.opts.Cluster.(AccountCounter); ok {
		st.Streams, st.Consumers = ac.AccountCounts()
	}
	a.addReservations(st)
	if u, ok := a.opts.Cluster.(ClusterUsage); ok {
		st.Memory, st.Store = u.AccountUsage() // every replica's, as nats-server counts
	}
	resp.accountStats = st
	return resp, nil
}

// addReservations sums max_bytes over the streams that set it, per storage
// type, as nats-server reports reserved_memory and reserved_storage.
func (a *API) addReservations(st *accountStats) {
	for _, name := range a.js.Names("") {
		si, err := a.js.StreamInfo(name, jetstream.InfoOptions{})
		if err != nil || si.Config.MaxBytes <= 0 {
			continue
		}
		if si.Config.Storage == stream.MemoryStorage {
			st.ReservedMemory += uint64(si.Config.MaxBytes)
		} else {
			st.ReservedStore += uint64(si.Config.MaxBytes)
		}
	}
}
