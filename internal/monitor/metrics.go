package monitor

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/server"
	"github.com/cairnmq/cairn/internal/store"
)

// /metrics serves Prometheus's text format, built at each scrape from the
// same snapshots as the JSON endpoints (docs/monitoring.md):
//
//  1. The families prometheus-nats-exporter derives from the JSON, with
//     its names, so that existing dashboards and alerts work unchanged:
//     every number of /varz, /subsz and /routez becomes a gauge
//     <ns>_<endpoint>_<path joined by _> (the exporter's generic rule,
//     applied to cairn's own JSON so the names cannot drift from it), the
//     /connz sums, the /healthz status, and the JetStream server, account,
//     stream and consumer series of its jsz collector. <ns> is gnatsd and
//     the JetStream namespace jetstream, as the exporter's defaults; with
//     MetricsPrefix both are the prefix (the Helm chart's -prefix=nats).
//     Every series carries server_id, the server's id (the exporter's
//     -use_internal_server_id, as the Helm chart runs it).
//  2. cairn's own, under cairn_: consumer lag and oldest unacknowledged
//     age, fsync latency and group-commit sizes, stored bytes against
//     max_bytes, and the disk guard.
//  3. Go runtime metrics (go_*). Not process_*: client_golang's process
//     collector reads /proc/self/fd and /proc/net/netstat at every scrape,
//     which costs more than everything else together with many
//     connections; gnatsd_varz_cpu and gnatsd_varz_mem give CPU and RSS.

// metricsHandler returns the /metrics handler of m.
func (m *Monitor) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&natsCollector{m: m}, collectors.NewGoCollector())
	// Uncompressed: gzip took about half the CPU of a scrape, on the same
	// cores as the publish path; the text is some 50 KB.
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, DisableCompression: true})
}

func (m *Monitor) handleMetrics(w http.ResponseWriter, r *http.Request) {
	m.metrics.ServeHTTP(w, r)
}

// natsCollector produces families 1 and 2. It is unchecked (Describe
// sends nothing): the generic families follow the JSON's keys.
type natsCollector struct{ m *Monitor }

// Describe sends nothing: the collector is unchecked.
func (c *natsCollector) Describe(chan<- *prometheus.Desc) {}

// Collect builds every series of families 1 and 2 from fresh snapshots.
func (c *natsCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	ns, jns := "gnatsd", "jetstream"
	if p := m.opts.MetricsPrefix; p != "" {
		ns, jns = p, p
	}
	id := m.srv.ID()
	e := &emitter{ch: ch, id: id}
	e.generic(ns, "varz", m.varz())
	e.generic(ns, "subsz", m.subsz(false, 0, 0, "", ""))
	e.generic(ns, "routez", m.routez(false, false))
	c.connz(e, ns)
	c.healthz(e, ns)
	if accs := m.jsAccounts(); len(accs) > 0 {
		details := make([][]jetstream.StreamDetail, len(accs))
		for i, a := range accs {
			details[i] = a.JetStream.Details(true)
		}
		c.jetstream(e, jns, accs, details)
		c.cairn(e, accs, details)
	} else {
		e.gauge(jns+"_server_jetstream_disabled", "JetStream disabled or not", 1, c.serverLabels()...)
	}
}

// emitter sends const metrics.
type emitter struct {
	ch chan<- prometheus.Metric
	id string
}

// labels alternate names and values.
func (e *emitter) metric(name, help string, typ prometheus.ValueType, v float64, labels ...string) {
	names := make([]string, 0, len(labels)/2+1)
	values := make([]string, 0, len(labels)/2+1)
	names, values = append(names, "server_id"), append(values, e.id)
	for i := 0; i+1 < len(labels); i += 2 {
		names, values = append(names, labels[i]), append(values, labels[i+1])
	}
	desc := prometheus.NewDesc(name, help, names, nil)
	e.ch <- prometheus.MustNewConstMetric(desc, typ, v, values...)
}

func (e *emitter) gauge(name, help string, v float64, labels ...string) {
	e.metric(name, help, prometheus.GaugeValue, v, labels...)
}

func (e *emitter) counter(name, help string, v float64, labels ...string) {
	e.metric(name, help, prometheus.CounterValue, v, labels...)
}

// labelKeys are the string fields the exporter turns into gauges: times
// as epoch milliseconds, the others as an info gauge with a value label.
var labelKeys = map[string]bool{
	"server_id": true, "server_name": true, "version": true, "domain": true,
	"leader": true, "name": true, "start": true, "config_load_time": true,
}

// skipFQN are the flattened names the exporter leaves out.
var skipFQN = map[string]bool{
	"leaf": true, "trusted_operators_claim": true, "cluster_tls_timeout": true,
	"cluster_cluster_port": true, "cluster_auth_timeout": true, "gateway_port": true,
	"gateway_auth_timeout": true, "gateway_tls_timeout": true, "gateway_connect_retries": true,
}

// generic applies the exporter's rule to v's JSON: each number at any
// depth of objects becomes <ns>_<endpoint>_<path joined by _>; arrays are
// skipped.
func (e *emitter) generic(ns, endpoint string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	var obj map[string]any
	if json.Unmarshal(b, &obj) != nil {
		return
	}
	e.flatten(ns+"_"+endpoint, obj, nil)
}

func (e *emitter) flatten(base string, obj map[string]any, path []string) {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := append(append([]string(nil), path...), k)
		fqn := fqName(p)
		if skipFQN[fqn] {
			continue
		}
		name := base + "_" + fqn
		switch v := obj[k].(type) {
		case float64:
			e.gauge(name, fqn, v)
		case bool:
			// the exporter skips booleans
		case string:
			if !labelKeys[k] {
				continue
			}
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				e.gauge(name, fqn, float64(t.UnixMilli()))
			} else {
				e.gauge(name, fqn, 1, "value", v)
			}
		case map[string]any:
			e.flatten(base, v, p)
		}
	}
}

// fqName joins a JSON path as the exporter does: "_" between keys, "/"
// turned into "_", no doubled or trailing "_".
func fqName(path []string) string {
	fqn := strings.Trim(strings.ReplaceAll(strings.Join(path, "_"), "/", "_"), "_")
	for strings.Contains(fqn, "__") {
		fqn = strings.ReplaceAll(fqn, "__", "_")
	}
	return fqn
}

// connz emits the exporter's /connz sums over the open connections.
func (c *natsCollector) connz(e *emitter, ns string) {
	conns := c.m.srv.Connections(false)
	var pending, subs, inB, outB, inM, outM float64
	for _, ci := range conns {
		pending += float64(ci.Pending)
		subs += float64(ci.NumSubs)
		inB += float64(ci.InBytes)
		outB += float64(ci.OutBytes)
		inM += float64(ci.InMsgs)
		outM += float64(ci.OutMsgs)
	}
	n := float64(len(conns))
	p := ns + "_connz_"
	e.gauge(p+"num_connections", "num_connections", min(n, DefaultConnListSize))
	e.gauge(p+"total", "total", n)
	e.gauge(p+"offset", "offset", 0)
	e.gauge(p+"limit", "limit", DefaultConnListSize)
	e.gauge(p+"pending_bytes", "pending_bytes", pending)
	e.gauge(p+"subscriptions", "subscriptions", subs)
	e.counter(p+"in_bytes", "in_bytes", inB)
	e.counter(p+"out_bytes", "out_bytes", outB)
	e.counter(p+"in_msgs", "in_msgs", inM)
	e.counter(p+"out_msgs", "out_msgs", outM)
}

// healthz emits the exporter's /healthz status: 0 when ok (status), and 1
// on the series whose value label is the status (status_value).
func (c *natsCollector) healthz(e *emitter, ns string) {
	hs := c.m.healthz(healthzOptions{})
	status := 1.0
	if hs.Status == "ok" {
		status = 0
	}
	e.gauge(ns+"_healthz_status", "status", status)
	e.gauge(ns+"_healthz_status_value", "status", 1-status, "value", hs.Status)
}

// serverLabels are the jsz collector's server labels after server_id, as
// prometheus-nats-exporter derives them from /jsz: the meta group's
// cluster name and leader, and whether this server is that leader (a
// server without a meta group is its own meta leader).
func (c *natsCollector) serverLabels() []string {
	name := c.m.srv.Options().ServerName
	cluster, leader, isLeader := "", "", "true"
	if mi := c.m.srv.JetStreamMeta(); mi != nil {
		cluster, leader, isLeader = mi.Name, mi.Leader, strconv.FormatBool(mi.Leader == name)
	}
	return []string{"server_name", name, "cluster", cluster, "domain", "", "meta_leader", leader, "is_meta_leader", isLeader}
}

// leaderLabels are the exporter's leader labels of a stream or consumer
// whose cluster part is ci: its leader, and whether this server is that
// leader (one without a cluster part leads itself).
func (c *natsCollector) leaderLabels(ci *jetstream.ClusterInfo) (leader, isLeader string) {
	if ci == nil {
		return "", "true"
	}
	return ci.Leader, strconv.FormatBool(ci.Leader == c.m.srv.Options().ServerName)
}

// jetstream emits the exporter's jsz series (its jsz=all, with configs):
// the server's totals, then each account with JetStream (accs, whose
// streams are details[i]) and its streams and consumers.
func (c *natsCollector) jetstream(e *emitter, jns string, accs []server.AccountStats, details [][]jetstream.StreamDetail) {
	srv := c.serverLabels()
	cfg := c.m.jsConfig(accs[0].JetStream)
	var streams int
	var consumers, msgs, bytes float64
	for _, ds := range details {
		streams += len(ds)
		for _, d := range ds {
			consumers += float64(d.Info.State.Consumers)
			msgs += float64(d.Info.State.Msgs)
			bytes += float64(d.Info.State.Bytes)
		}
	}
	e.gauge(jns+"_server_jetstream_disabled", "JetStream disabled or not", 0, srv...)
	e.gauge(jns+"_server_max_memory", "JetStream Max Memory", float64(cfg.MaxMemory), srv...)
	e.gauge(jns+"_server_max_storage", "JetStream Max Storage", float64(cfg.MaxStore), srv...)
	e.gauge(jns+"_server_total_streams", "Total number of streams in JetStream", float64(streams), srv...)
	e.gauge(jns+"_server_total_consumers", "Total number of consumers in JetStream", consumers, srv...)
	e.gauge(jns+"_server_total_messages", "Total number of stored messages in JetStream", msgs, srv...)
	e.gauge(jns+"_server_total_message_bytes", "Total number of bytes stored in JetStream", bytes, srv...)

	for i, a := range accs {
		ai := a.JetStream.Account()
		st := c.m.accountUsage(a.Name, details[i])
		acc := append(append([]string(nil), srv...), "account", a.Name, "account_name", a.Name, "account_id", a.Name)
		e.gauge(jns+"_account_max_storage", "JetStream max storage in bytes", float64(uint64(ai.Limits.MaxStore)), acc...)
		e.gauge(jns+"_account_max_memory", "JetStream max memory in bytes", float64(uint64(ai.Limits.MaxMemory)), acc...)
		e.gauge(jns+"_account_storage_used", "Total storage used in bytes", float64(st.Store), acc...)
		e.gauge(jns+"_account_memory_used", "Total memory used in bytes", float64(st.Memory), acc...)
		for _, d := range details[i] {
			c.stream(e, jns, acc, d)
		}
	}
}

func (c *natsCollector) stream(e *emitter, jns string, acc []string, d jetstream.StreamDetail) {
	si := d.Info
	leader, isLeader := c.leaderLabels(si.Cluster)
	group := ""
	if si.Cluster != nil {
		group = si.Cluster.RaftGroup
	}
	sl := append(append([]string(nil), acc...), "stream_name", si.Config.Name, "stream_leader", leader, "is_stream_leader", isLeader, "stream_raft_group", group)
	p := jns + "_stream_"
	e.gauge(p+"total_messages", "Total number of messages from a stream", float64(si.State.Msgs), sl...)
	e.gauge(p+"total_bytes", "Total stored bytes from a stream", float64(si.State.Bytes), sl...)
	e.gauge(p+"first_seq", "First sequence from a stream", float64(si.State.FirstSeq), sl...)
	e.gauge(p+"last_seq", "Last sequence from a stream", float64(si.State.LastSeq), sl...)
	e.gauge(p+"consumer_count", "Total number of consumers from a stream", float64(si.State.Consumers), sl...)
	e.gauge(p+"subject_count", "Total number of subjects in a stream", float64(si.State.NumSubjects), sl...)
	e.gauge(p+"limit_bytes", "The maximum configured storage limit (in bytes) of a stream", float64(si.Config.MaxBytes), sl...)
	e.gauge(p+"limit_messages", "The maximum configured message limit of a stream", float64(si.Config.MaxMsgs), sl...)
	for _, src := range si.Sources {
		l := append(append([]string(nil), sl...), "source_name", src.Name, "source_api", "", "source_deliver", "")
		e.gauge(p+"source_lag", "Number of messages a stream source is behind", float64(src.Lag), l...)
		e.gauge(p+"source_active_duration_ns", "Duration since the stream source was active", float64(src.Active), l...)
	}
	if mi := si.Mirror; mi != nil {
		l := append(append([]string(nil), sl...), "mirror_name", mi.Name, "mirror_api", "", "mirror_deliver", "")
		e.gauge(p+"mirror_lag", "Number of messages a stream mirror is behind", float64(mi.Lag), l...)
		e.gauge(p+"mirror_active_duration_ns", "Duration since the stream mirror was active", float64(mi.Active), l...)
	}
	for _, ci := range d.Consumers {
		desc := ""
		if ci.Config != nil {
			desc = ci.Config.Description
		}
		cleader, cIsLeader := c.leaderLabels(ci.Cluster)
		cl := append(append([]string(nil), sl...), "consumer_name", ci.Name, "consumer_leader", cleader, "is_consumer_leader", cIsLeader, "consumer_desc", desc)
		q := jns + "_consumer_"
		if ci.Delivered.Last != nil {
			e.gauge(q+"last_delivery_seconds", "Seconds since the last delivery", ci.TimeStamp.Sub(*ci.Delivered.Last).Seconds(), cl...)
		}
		if ci.AckFloor.Last != nil {
			e.gauge(q+"last_ack_seconds", "Seconds since the last acknowledgement", ci.TimeStamp.Sub(*ci.AckFloor.Last).Seconds(), cl...)
		}
		e.gauge(q+"delivered_consumer_seq", "Latest sequence number of a stream consumer", float64(ci.Delivered.Consumer), cl...)
		e.gauge(q+"delivered_stream_seq", "Latest sequence number of a stream", float64(ci.Delivered.Stream), cl...)
		e.gauge(q+"num_ack_pending", "Number of pending acks from a consumer", float64(ci.NumAckPending), cl...)
		e.gauge(q+"num_redelivered", "Number of redelivered messages from a consumer", float64(ci.NumRedelivered), cl...)
		e.gauge(q+"num_waiting", "Number of inflight fetch requests from a pull consumer", float64(ci.NumWaiting), cl...)
		e.gauge(q+"num_pending", "Number of pending messages from a consumer", float64(ci.NumPending), cl...)
		e.gauge(q+"ack_floor_stream_seq", "Number of ack floor stream seq from a consumer", float64(ci.AckFloor.Stream), cl...)
		e.gauge(q+"ack_floor_consumer_seq", "Number of ack floor consumer seq from a consumer", float64(ci.AckFloor.Consumer), cl...)
	}
}

// cairn emits cairn's own series: per stream and consumer, labelled with
// the account (two accounts may have streams of the same name); the disk
// guard and the group-commit histograms once for the server (the
// accounts' engines share the store directory and the statistics).
func (c *natsCollector) cairn(e *emitter, accs []server.AccountStats, details [][]jetstream.StreamDetail) {
	for i, a := range accs {
		for _, d := range details[i] {
			name := d.Info.Config.Name
			sl := []string{"account", a.Name, "stream", name}
			e.gauge("cairn_stream_stored_bytes", "Bytes the stream stores, as counted against max_bytes.", float64(d.Info.State.Bytes), sl...)
			e.gauge("cairn_stream_max_bytes", "The stream's max_bytes; -1 for no limit.", float64(d.Info.Config.MaxBytes), sl...)
			oldest := a.JetStream.OldestUnacked(name)
			for _, ci := range d.Consumers {
				l := []string{"account", a.Name, "stream", name, "consumer", ci.Name}
				e.gauge("cairn_consumer_lag_messages", "Stored messages the consumer has not delivered yet (num_pending).", float64(ci.NumPending), l...)
				e.gauge("cairn_consumer_backlog_messages", "Messages not yet delivered or awaiting their ack (num_pending + num_ack_pending, KEDA's lag).", float64(ci.NumPending)+float64(ci.NumAckPending), l...)
				e.gauge("cairn_consumer_oldest_unacked_age_seconds", "How long the delivery awaiting its ack longest has waited since it was delivered; 0 when none awaits.", oldest[ci.Name].Seconds(), l...)
			}
		}
	}
	js := accs[0].JetStream
	refusing := 0.0
	if js.DiskLow() {
		refusing = 1
	}
	e.gauge("cairn_jetstream_disk_guard_refusing", "1 while the disk guard refuses publishes to file streams for lack of free space.", refusing)
	ss := js.SyncStats()
	e.histogram("cairn_store_fsync_duration_seconds", "Time each group commit's fsync took.", ss.Latency)
	e.histogram("cairn_store_group_commit_messages", "Messages each group commit (one fsync) made durable.", ss.Msgs)
	e.histogram("cairn_store_group_commit_bytes", "Bytes each group commit (one fsync) wrote.", ss.Bytes)
}

func (e *emitter) histogram(name, help string, h *store.Histogram) {
	count, sum, buckets := h.Snapshot()
	desc := prometheus.NewDesc(name, help, []string{"server_id"}, nil)
	e.ch <- prometheus.MustNewConstHistogram(desc, count, sum, buckets, e.id)
}
