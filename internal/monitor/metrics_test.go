package monitor

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cairnmq/cairn/internal/server"
)

// scrape fetches /metrics and parses it with Prometheus's text parser.
func scrape(t *testing.T, m *Monitor) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(m.URL() + MetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of family name whose labels
// include want (name=value pairs), failing when there is none.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no family %s", name)
	}
	for _, mt := range f.Metric {
		if hasLabels(mt, want) {
			switch {
			case mt.Gauge != nil:
				return mt.Gauge.GetValue()
			case mt.Counter != nil:
				return mt.Counter.GetValue()
			case mt.Histogram != nil:
				return float64(mt.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("%s has no series with %v", name, want)
	return 0
}

func hasLabels(mt *dto.Metric, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range mt.Label {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// jsRequest sends a $JS.API request on nc and waits for its reply.
func jsRequest(t *testing.T, nc net.Conn, subj, body string) {
	t.Helper()
	fmt.Fprintf(nc, "PUB %s _INBOX.r %d\r\n%s\r\n", subj, len(body), body)
	readUntil(t, nc, "MSG _INBOX.r")
}

// /metrics carries prometheus-nats-exporter's names (its generic /varz
// rule, the /connz sums, /healthz, the JetStream series) with server_id,
// and cairn's own: consumer lag and oldest unacknowledged age, group
// commits, stored bytes against max_bytes, the disk guard.
func TestMetricsNamesAndValues(t *testing.T) {
	s, m := startMonitored(t, func(o *server.Options) { o.JetStream = true })
	nc := rawClient(t, s, "js")
	fmt.Fprint(nc, "SUB _INBOX.r 1\r\n")
	jsRequest(t, nc, "$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s.>"],"storage":"file","max_bytes":1000000}`)
	jsRequest(t, nc, "$JS.API.CONSUMER.CREATE.S.C", `{"stream_name":"S","config":{"durable_name":"C","ack_policy":"explicit"}}`)
	for i := range 5 {
		jsRequest(t, nc, fmt.Sprintf("s.%d", i), "hello")
	}
	next := `{"batch":2}` // two delivered, not acked
	fmt.Fprintf(nc, "SUB _INBOX.d 2\r\nPUB $JS.API.CONSUMER.MSG.NEXT.S.C _INBOX.d %d\r\n%s\r\n", len(next), next)
	readUntil(t, nc, "MSG s.1")

	// A client's in_msgs is counted once its read loop has handed the
	// message on, which may follow the delivery readUntil saw: scrape
	// until the last publish is counted.
	id := []string{"server_id", s.ID()}
	fams := scrape(t, m)
	for deadline := time.Now().Add(10 * time.Second); value(t, fams, "gnatsd_varz_in_msgs", id...) < 8 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		fams = scrape(t, m)
	}
	if v := value(t, fams, "gnatsd_varz_in_msgs", id...); v < 8 {
		t.Errorf("gnatsd_varz_in_msgs %v", v)
	}
	if v := value(t, fams, "gnatsd_varz_jetstream_stats_storage", id...); v <= 0 {
		t.Errorf("gnatsd_varz_jetstream_stats_storage %v", v)
	}
	if v := value(t, fams, "gnatsd_varz_start", id...); v < 1e12 {
		t.Errorf("gnatsd_varz_start %v, want epoch milliseconds", v)
	}
	value(t, fams, "gnatsd_varz_server_name", "value", s.Options().ServerName)
	value(t, fams, "gnatsd_varz_http_req_stats_metrics", id...)
	if v := value(t, fams, "gnatsd_connz_num_connections", id...); v != 1 {
		t.Errorf("gnatsd_connz_num_connections %v", v)
	}
	value(t, fams, "gnatsd_subsz_num_subscriptions", id...)
	value(t, fams, "gnatsd_routez_num_routes", id...)
	if v := value(t, fams, "gnatsd_healthz_status", id...); v != 0 {
		t.Errorf("gnatsd_healthz_status %v, want 0 (ok)", v)
	}
	stream := []string{"server_id", s.ID(), "account", "$G", "stream_name", "S", "is_meta_leader", "true"}
	if v := value(t, fams, "jetstream_stream_total_messages", stream...); v != 5 {
		t.Errorf("jetstream_stream_total_messages %v", v)
	}
	if v := value(t, fams, "jetstream_stream_limit_bytes", stream...); v != 1000000 {
		t.Errorf("jetstream_stream_limit_bytes %v", v)
	}
	cons := append(stream, "consumer_name", "C")
	if v := value(t, fams, "jetstream_consumer_num_pending", cons...); v != 3 {
		t.Errorf("jetstream_consumer_num_pending %v", v)
	}
	if v := value(t, fams, "jetstream_consumer_num_ack_pending", cons...); v != 2 {
		t.Errorf("jetstream_consumer_num_ack_pending %v", v)
	}
	value(t, fams, "jetstream_server_total_streams", id...)
	value(t, fams, "jetstream_account_storage_used", "account", "$G")

	own := []string{"stream", "S", "consumer", "C"}
	if v := value(t, fams, "cairn_consumer_lag_messages", own...); v != 3 {
		t.Errorf("cairn_consumer_lag_messages %v", v)
	}
	if v := value(t, fams, "cairn_consumer_backlog_messages", own...); v != 5 {
		t.Errorf("cairn_consumer_backlog_messages %v", v)
	}
	if v := value(t, fams, "cairn_consumer_oldest_unacked_age_seconds", own...); v <= 0 {
		t.Errorf("cairn_consumer_oldest_unacked_age_seconds %v, want > 0 with two unacked", v)
	}
	if v := value(t, fams, "cairn_stream_max_bytes", "stream", "S"); v != 1000000 {
		t.Errorf("cairn_stream_max_bytes %v", v)
	}
	if v := value(t, fams, "cairn_stream_stored_bytes", "stream", "S"); v <= 0 {
		t.Errorf("cairn_stream_stored_bytes %v", v)
	}
	if v := value(t, fams, "cairn_jetstream_disk_guard_refusing", id...); v != 0 {
		t.Errorf("cairn_jetstream_disk_guard_refusing %v", v)
	}
	if n := value(t, fams, "cairn_store_fsync_duration_seconds", id...); n < 1 {
		t.Errorf("cairn_store_fsync_duration_seconds count %v", n)
	}
	h := fams["cairn_store_group_commit_messages"].Metric[0].Histogram
	if h.GetSampleSum() < 5 {
		t.Errorf("group commits made %v messages durable, want at least the 5 published", h.GetSampleSum())
	}
	value(t, fams, "go_goroutines")
}

// With metrics_prefix, the exporter's families are named with the prefix
// in place of gnatsd and jetstream, as its -prefix=nats (the Helm chart).
func TestMetricsPrefix(t *testing.T) {
	s, err := server.New(server.Options{Host: "127.0.0.1", Port: server.RandomPort, JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Host: "127.0.0.1", Port: server.RandomPort, Server: s, MetricsPrefix: "nats"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Shutdown() })
	fams := scrape(t, m)
	for _, name := range []string{"nats_varz_connections", "nats_connz_total", "nats_healthz_status", "nats_server_total_streams", "nats_account_memory_used"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	for name := range fams {
		if strings.HasPrefix(name, "gnatsd_") || strings.HasPrefix(name, "jetstream_") {
			t.Errorf("%s with prefix nats", name)
		}
	}
}
