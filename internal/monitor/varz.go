package monitor

import (
	"math"
	"net/http"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jsapi"
	"github.com/cairnmq/cairn/internal/server"
	"github.com/cairnmq/cairn/internal/stream"
)

// handleVarz serves /varz: the server's settings and counters
// (nats-server v2.15.2 monitor.go Varz).
func (m *Monitor) handleVarz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, m.varz())
}

func (m *Monitor) varz() *Varz {
	s := m.srv
	o := s.Options()
	lim := s.Limits()
	st := s.Stats()
	now := time.Now().UTC()
	cpu, rss := m.cpu.sample(m.startedAt)
	digest, loaded := m.config()
	sec := s.Security()
	v := &Varz{
		ID:                s.ID(),
		Name:              o.ServerName,
		Version:           server.NATSVersion,
		Proto:             1,
		GoVersion:         runtime.Version(),
		Host:              o.Host,
		Port:              s.Addr().Port,
		AuthRequired:      sec.AuthRequired,
		TLSRequired:       sec.TLSRequired,
		TLSVerify:         sec.TLSVerify,
		AuthTimeout:       sec.AuthTimeout.Seconds(),
		TLSTimeout:        sec.TLSTimeout.Seconds(),
		ClientConnectURLs: s.ConnectURLs(),
		MaxConn:           max(lim.MaxConnections, 0),
		PingInterval:      lim.PingInterval,
		MaxPingsOut:       lim.MaxPingsOut,
		HTTPHost:          m.opts.Host,
		HTTPBasePath:      m.opts.BasePath,
		MaxControlLine:    int32(lim.MaxControlLine),
		MaxPayload:        lim.MaxPayload,
		MaxPending:        lim.MaxPending,
		Cluster:           clusterVarz(o, st, s.ClusterSecurity()),
		JetStream:         m.jetStreamVarz(),
		WriteDeadline:     lim.WriteDeadline,
		Start:             st.Start,
		Now:               now,
		Uptime:            uptime(now.Sub(st.Start)),
		Mem:               rss,
		Cores:             runtime.NumCPU(),
		MaxProcs:          runtime.GOMAXPROCS(0),
		CPU:               cpu,
		Connections:       st.Connections,
		TotalConnections:  st.TotalConnections,
		Routes:            st.Routes,
		Remotes:           st.Remotes,
		InMsgs:            st.InMsgs,
		InBytes:           st.InBytes,
		InClientMsgs:      st.InClientMsgs,
		InClientBytes:     st.InClientBytes,
		OutMsgs:           st.OutMsgs,
		OutBytes:          st.OutBytes,
		OutClientMsgs:     st.OutClientMsgs,
		OutClientBytes:    st.OutClientBytes,
		SlowConsumers:     st.SlowConsumers,
		StaleConnections:  st.StaleConnections,
		StalledClients:    st.Stalls,
		Subscriptions:     uint32(st.Subscriptions),
		HTTPReqStats:      m.reqStats(),
		ConfigLoadTime:    loaded,
		ConfigDigest:      digest,
		FeatureFlags:      server.FeatureFlags(),
		Tags:              o.Tags,
		SystemAccount:     s.SystemAccount(),
		SlowConsumersStats: &KindStats{
			Clients: st.SlowClients, Routes: st.SlowRoutes,
		},
		StaleConnectionStats: &KindStats{
			Clients: st.StaleClients, Routes: st.StaleRoutes,
		},
		DiskIOWaitStats: &DiskIOWaitStats{},
	}
	if a := m.Addr(); a != nil && m.opts.TLS != nil {
		v.HTTPSPort = a.Port
	} else if a != nil {
		v.HTTPPort = a.Port
	}
	if ml := debug.SetMemoryLimit(-1); ml < math.MaxInt64 {
		v.MemLimit = ml
	}
	return v
}

// clusterVarz fills /varz cluster: empty without a cluster listener.
func clusterVarz(o server.Options, st server.Stats, sec server.ClusterSecurity) ClusterOptsVarz {
	c := o.Cluster
	if c.Port == 0 {
		return ClusterOptsVarz{}
	}
	// A peer has auth_timeout to send its CONNECT (2 s, or the TLS
	// timeout plus 1 s with TLS, as nats-server's route auth_timeout);
	// cairn keeps one route per peer for every subject, which nats-server
	// calls pool_size -1.
	cv := ClusterOptsVarz{
		Name: st.ClusterName, Host: c.Host, Port: st.ClusterPort, PoolSize: -1,
		AuthTimeout: sec.AuthTimeout.Seconds(), TLSTimeout: sec.TLSTimeout.Seconds(),
		TLSRequired: sec.TLSRequired, TLSVerify: sec.TLSVerify, TLSCertNotAfter: sec.TLSCertNotAfter,
	}
	for _, u := range c.Routes {
		cv.URLs = append(cv.URLs, u.Host)
	}
	return cv
}

// jetStreamVarz fills /varz jetstream: empty when JetStream is off; the
// usage summed over the accounts with JetStream.
func (m *Monitor) jetStreamVarz() JetStreamVarz {
	accs := m.jsAccounts()
	if len(accs) == 0 {
		return JetStreamVarz{}
	}
	var all []jetstream.StreamDetail
	for _, a := range accs {
		all = append(all, a.JetStream.Details(false)...)
	}
	cfg := m.jsConfig(accs[0].JetStream)
	stats := m.jsStats(accs, all)
	return JetStreamVarz{Config: &cfg, Stats: &stats, Meta: m.metaClusterInfo(), Limits: jsLimits(accs[0].JetStream)}
}

// jsConfig is the server's JetStream configuration as nats-server
// reports it, read from one account's engine (the accounts share it):
// store_dir is the jetstream directory under -sd; sync_always says a
// PubAck follows the fsync (cairn's default), with the sync_interval of
// 2m nats-server v2.15.2 reports for `sync_interval: always` (opts.go);
// with ack_before_sync_interval, sync_interval is that interval;
// compress_ok is true only when both storage limits are configured, as
// nats-server v2.15.2 reports it (EnableJetStream builds a config
// without it when it derives a limit from the machine,
// dynJetStreamConfig): natscli shows the key as "Cluster Message
// Compression", which a default server must not claim (trial 36; cairn
// has no route compression, and its streams may set s2 compression
// either way); unique_tag is the jetstream block's (lowercased). strict
// is false: unknown keys in API requests are ignored
// (docs/compatibility.md).
func (m *Monitor) jsConfig(js *jetstream.JetStream) JetStreamConfig {
	o := m.srv.Options()
	mem, file := js.StorageLimits()
	always, interval := js.SyncPolicy()
	if always {
		interval = int64(syncAlwaysInterval)
	}
	return JetStreamConfig{
		MaxMemory:    mem,
		MaxStore:     file,
		StoreDir:     filepath.Join(js.StoreDir(), "jetstream"),
		SyncAlways:   always,
		SyncInterval: time.Duration(interval),
		Domain:       js.Domain(),
		CompressOK:   o.MaxMemoryStore > 0 && o.MaxFileStore > 0,
		UniqueTag:    o.JetStreamUniqueTag,
	}
}

// syncAlwaysInterval is the sync_interval nats-server v2.15.2 reports
// with sync_always (its defaultSyncInterval).
const syncAlwaysInterval = 2 * time.Minute

// jsLimits is /varz and /jsz limits: the server's JetStream limits
// (nats-server v2.15.2 JSLimitOpts), of which cairn has
// default_max_consumers.
func jsLimits(js *jetstream.JetStream) *JSLimitOpts {
	return &JSLimitOpts{DefaultMaxConsumers: js.DefaultMaxConsumers()}
}

// jsStats is the server's JetStream usage: the accounts with JetStream
// (accs), their API counters, and details, the streams of them all
// (usage); ha_assets, the Raft groups it runs a replica of.
func (m *Monitor) jsStats(accs []server.AccountStats, details []jetstream.StreamDetail) JetStreamStats {
	st := usage(details)
	st.Accounts = len(accs)
	st.HAAssets = m.srv.JetStreamHAAssets()
	st.API.Level = jsapi.APILevel
	for _, a := range accs {
		st.API.Total += a.APITotal
		st.API.Errors += a.APIErrors
	}
	return st
}

// usage sums the bytes stored and the max_bytes reserved by streams, by
// storage type.
func usage(details []jetstream.StreamDetail) JetStreamStats {
	var st JetStreamStats
	for _, d := range details {
		cfg := &d.Info.Config
		mem := cfg.Storage == stream.MemoryStorage
		if mem {
			st.Memory += d.Info.State.Bytes
		} else {
			st.Store += d.Info.State.Bytes
		}
		if cfg.MaxBytes > 0 && mem {
			st.ReservedMemory += uint64(cfg.MaxBytes)
		} else if cfg.MaxBytes > 0 {
			st.ReservedStore += uint64(cfg.MaxBytes)
		}
	}
	return st
}
