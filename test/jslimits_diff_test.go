package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// binTarget is a server binary started from a configuration file.
type binTarget struct {
	name, url, mon string
}

// startBinConf starts bin from the configuration text conf, whose
// "{store}" becomes a fresh directory, and returns its client and
// monitoring URLs (from its log, which nats-server and cairn write
// alike).
func startBinConf(t *testing.T, name, bin, conf string) binTarget {
	t.Helper()
	dir := t.TempDir()
	conf = regexp.MustCompile(`\{store\}`).ReplaceAllLiteralString(conf, filepath.Join(dir, "store"))
	path := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, bin, nil, "-c", path)
	tg := binTarget{name: name, url: p.clientURL(t)}
	if m := p.waitLog(t, regexp.MustCompile(`Starting http monitor on (\S+)`)); m != nil {
		tg.mon = "http://" + m[1]
	}
	return tg
}

// jsVarz is what /varz says of JetStream's settings.
type jsVarz struct {
	JetStream struct {
		Config map[string]any `json:"config"`
		Limits map[string]any `json:"limits"`
	} `json:"jetstream"`
	FeatureFlags map[string]bool `json:"feature_flags"`
}

func readJSVarz(t *testing.T, mon string) jsVarz {
	t.Helper()
	var v jsVarz
	_, body := httpGet(t, mon+"/varz")
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	return v
}

// TestJetStreamDefaultMaxConsumersDifferential: cairn and nats-server
// v2.15.2 started from the same file cap a stream's consumers at
// jetstream { limits { default_max_consumers } } when neither the stream
// nor the account sets max_consumers (10026 beyond it), a stream's own
// max_consumers overrides it, and /varz reports it in
// jetstream.limits, 1000 when unset, with nats-server's
// feature_flags, config.sync_interval and config.strict keys
// (docs/monitoring.md).
func TestJetStreamDefaultMaxConsumersDifferential(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("compares cairn with nats-server itself")
	}
	diffRequireNatsServer(t)
	bins := map[string]string{"cairn": buildCairn(t), "nats-server": natsServerBinary(t)}
	const capped = "listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\njetstream { store_dir: \"{store}\", limits { default_max_consumers: 2 } }\n"
	const plain = "listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\njetstream { store_dir: \"{store}\" }\n"
	for _, name := range []string{"cairn", "nats-server"} {
		tg := startBinConf(t, name, bins[name], capped)
		js, err := jetstream.New(connect(t, tg.url))
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range []jetstream.StreamConfig{{Name: "S", Subjects: []string{"s"}}, {Name: "T", Subjects: []string{"t"}, MaxConsumers: 3}} {
			if _, err := js.CreateStream(ctx2(t), sc); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		for i := 1; i <= 3; i++ {
			_, errS := js.CreateConsumer(ctx2(t), "S", jetstream.ConsumerConfig{Durable: fmt.Sprintf("c%d", i)})
			_, errT := js.CreateConsumer(ctx2(t), "T", jetstream.ConsumerConfig{Durable: fmt.Sprintf("c%d", i)})
			if errT != nil {
				t.Errorf("%s: consumer %d of T (max_consumers 3): %v", name, i, errT)
			}
			if i <= 2 && errS != nil {
				t.Errorf("%s: consumer %d of S: %v", name, i, errS)
			}
			if i == 3 {
				wantAPIError(t, errS, 400, 10026, "maximum consumers limit reached")
			}
		}
		// An ephemeral counts too.
		_, err = js.CreateConsumer(ctx2(t), "S", jetstream.ConsumerConfig{})
		wantAPIError(t, err, 400, 10026, "maximum consumers limit reached")

		v := readJSVarz(t, tg.mon)
		if got := v.JetStream.Limits["default_max_consumers"]; got != float64(2) {
			t.Errorf("%s: /varz jetstream.limits %v", name, v.JetStream.Limits)
		}
		// sync_interval is 2m: nats-server's default, and what it
		// reports for sync_interval: always (cairn's policy).
		if got := v.JetStream.Config["sync_interval"]; got != float64(120e9) {
			t.Errorf("%s: /varz jetstream.config.sync_interval %v", name, got)
		}
		if _, ok := v.JetStream.Config["strict"]; !ok {
			t.Errorf("%s: /varz jetstream.config has no strict: %v", name, v.JetStream.Config)
		}
		for _, f := range []string{"js_ack_fc_v2", "js_api_reply_v2", "js_raft_delete_range", "js_snapshot_sources"} {
			if _, ok := v.FeatureFlags[f]; !ok {
				t.Errorf("%s: /varz feature_flags %v lacks %s", name, v.FeatureFlags, f)
			}
		}

		tg = startBinConf(t, name, bins[name], plain)
		if got := readJSVarz(t, tg.mon).JetStream.Limits["default_max_consumers"]; got != float64(1000) {
			t.Errorf("%s: default_max_consumers %v without a limits block", name, got)
		}
	}
}
