package monitor

import (
	"testing"

	"github.com/cairnmq/cairn/internal/server"
)

// /jsz, /varz and statsz report JetStream's configuration with
// nats-server v2.15.2's keys and meanings (docs/monitoring.md): streams
// may set s2 compression, so compress_ok is true, as nats-server reports
// it (trial 34 found it missing); a PubAck follows the fsync
// (sync_always); unknown API keys are ignored (strict false).
func TestJszConfigCompressOK(t *testing.T) {
	_, m := startMonitored(t, func(o *server.Options) { o.JetStream = true })
	var jsz struct {
		Config map[string]any `json:"config"`
	}
	getInto(t, m.URL()+"/jsz", &jsz)
	var varz struct {
		JetStream struct {
			Config map[string]any `json:"config"`
		} `json:"jetstream"`
	}
	getInto(t, m.URL()+"/varz", &varz)
	for name, cfg := range map[string]map[string]any{"/jsz": jsz.Config, "/varz": varz.JetStream.Config} {
		if cfg["compress_ok"] != true || cfg["sync_always"] != true || cfg["strict"] != false {
			t.Errorf("%s config %v: want compress_ok true, sync_always true, strict false", name, cfg)
		}
	}
}
