package monitor

import (
	"testing"

	"github.com/cairnmq/cairn/internal/server"
)

// /jsz, /varz and statsz report JetStream's configuration with
// nats-server v2.15.2's keys and meanings (docs/monitoring.md): a PubAck
// follows the fsync (sync_always); unknown API keys are ignored (strict
// false). compress_ok is true when both storage limits are configured
// and left out when one is derived from the machine, as nats-server
// reports it: natscli shows it as "Cluster Message Compression", which a
// default cairn showed true though it has no route compression (trial
// 36; trial 34 found it missing with the limits configured).
func TestJszConfigCompressOK(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mem, fs  int64
		compress any
	}{
		{"derived limits", 0, 0, nil},
		{"memory limit only", 1 << 30, 0, nil},
		{"both limits", 1 << 30, 10 << 30, true},
	} {
		_, m := startMonitored(t, func(o *server.Options) {
			o.JetStream = true
			o.MaxMemoryStore, o.MaxFileStore = tc.mem, tc.fs
		})
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
			if cfg["compress_ok"] != tc.compress || cfg["sync_always"] != true || cfg["strict"] != false {
				t.Errorf("%s, %s config %v: want compress_ok %v, sync_always true, strict false", tc.name, name, cfg, tc.compress)
			}
		}
	}
}
