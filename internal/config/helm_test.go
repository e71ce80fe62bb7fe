package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The configurations the official NATS Helm chart writes (testdata/helm,
// rendered from the chart's templates: JSON with bare $SERVER_NAME, sizes
// such as 10Gi and include lines) load, with a warning for each setting
// cairn accepts and does not act on.
func TestHelmChartConfigs(t *testing.T) {
	t.Setenv("SERVER_NAME", "nats-0")
	t.Run("default", func(t *testing.T) {
		c, warns := loadHelm(t, "default.conf")
		if c.ServerName != "nats-0" || c.Port != 4222 || c.Monitor.Port != 8222 || c.Process.PidFile != "/var/run/nats/nats.pid" ||
			c.Process.LameDuckDuration != 30*time.Second || c.Process.LameDuckGracePeriod != 10*time.Second || c.JetStream.Enabled {
			t.Errorf("got %+v", *c)
		}
		wantWarnings(t, warns) // http_port and the lame duck timings are served')
	})
	t.Run("jetstream", func(t *testing.T) {
		c, _ := loadHelm(t, "jetstream.conf")
		js := c.JetStream
		if !js.Enabled || js.StoreDir != "/data" || js.MaxFileStore != 10<<30 || js.MaxMemoryStore != 0 {
			t.Errorf("got %+v", js)
		}
	})
	t.Run("include", func(t *testing.T) {
		c, _ := loadHelm(t, "include.conf")
		if c.Limits.MaxPending != 128<<20 || c.Limits.PingInterval != 30*time.Second || c.Limits.MaxPayload != 2<<20 ||
			c.JetStream.MaxMemoryStore != 2<<30 {
			t.Errorf("got %+v", *c)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		c, _ := loadHelm(t, "cluster.conf")
		want := Cluster{Name: "nats", Port: 6222, NoAdvertise: true,
			Routes: "nats://nats-0.nats-headless:6222,nats://nats-1.nats-headless:6222,nats://nats-2.nats-headless:6222"}
		if !reflect.DeepEqual(c.Cluster, want) {
			t.Errorf("cluster %+v, want %+v", c.Cluster, want)
		}
	})
	t.Run("server name unset", func(t *testing.T) {
		t.Setenv("SERVER_NAME", "")
		c, _ := loadHelm(t, "default.conf")
		if c.ServerName != "" {
			t.Errorf("server_name %q", c.ServerName)
		}
	})
}

func loadHelm(t *testing.T, name string) (*Config, []Problem) {
	t.Helper()
	c, warns, err := Load(filepath.Join("testdata", "helm", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c, warns
}

func wantWarnings(t *testing.T, warns []Problem, want ...string) {
	t.Helper()
	if len(warns) != len(want) {
		t.Fatalf("warnings %v, want %d", warns, len(want))
	}
	for i, w := range want {
		if !strings.Contains(warns[i].Error(), w) {
			t.Errorf("warning %d is %q, want it to contain %q", i, warns[i].Error(), w)
		}
	}
}
