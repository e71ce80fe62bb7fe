package config

import (
	"strings"
	"testing"
)

// The monitoring keys set the listener without a warning (they are
// served), as nats-server reads them: http as host:port or a port,
// http_port and its alias monitor_port, http_base_path,
// max_closed_clients; metrics_prefix is cairn's own.
func TestMonitoringKeys(t *testing.T) {
	cases := []struct {
		text string
		want Monitor
	}{
		{"http_port: 8222", Monitor{Port: 8222}},
		{"monitor_port: 8223", Monitor{Port: 8223}},
		{"http: 127.0.0.1:8224", Monitor{Host: "127.0.0.1", Port: 8224}},
		{"http: 8225", Monitor{Port: 8225}},
		{"http_port: -1\nhttp_base_path: /nats", Monitor{Port: -1, BasePath: "/nats"}},
		{"max_closed_clients: 5", Monitor{MaxClosedClients: 5}},
		{"metrics_prefix: nats", Monitor{MetricsPrefix: "nats"}},
	}
	for _, tc := range cases {
		c, warns := mustLoad(t, tc.text)
		if c.Monitor != tc.want || len(warns) != 0 {
			t.Errorf("%q: got %+v, warnings %v; want %+v and none", tc.text, c.Monitor, warns, tc.want)
		}
	}
}

func TestMetricsPrefixInvalid(t *testing.T) {
	for _, bad := range []string{`"9x"`, `"a-b"`, `"a b"`} {
		_, _, err := loadText(t, "metrics_prefix: "+bad)
		if err == nil || !strings.Contains(err.Error(), "invalid metrics_prefix") {
			t.Errorf("metrics_prefix: %s: err %v, want invalid metrics_prefix", bad, err)
		}
	}
}

func TestLogFormatInvalid(t *testing.T) {
	_, _, err := loadText(t, "log_format: xml")
	if err == nil || !strings.Contains(err.Error(), `invalid log_format "xml"`) {
		t.Errorf("log_format: xml: err %v", err)
	}
}

// http_auth (cairn's own) sets the monitoring endpoints' credentials; a
// user without a password, a password without a user, a block asking for
// nothing and an unknown key are errors at their line.
func TestHTTPAuthBlock(t *testing.T) {
	c, warns := mustLoad(t, "http_port: 8222\nhttp_auth { user: mon, password: \"s3cret\", token: tok, healthz_no_auth: true }")
	want := MonitorAuth{User: "mon", Password: "s3cret", Token: "tok", HealthzNoAuth: true}
	if c.Monitor.Auth != want || !c.Monitor.Auth.Enabled() || len(warns) != 0 {
		t.Fatalf("http_auth: %+v (warnings %v), want %+v", c.Monitor.Auth, warns, want)
	}
	if c, _ := mustLoad(t, "http_auth { token: tok }"); c.Monitor.Auth != (MonitorAuth{Token: "tok"}) {
		t.Fatalf("token only: %+v", c.Monitor.Auth)
	}
	if (MonitorAuth{HealthzNoAuth: true}).Enabled() {
		t.Fatal("a block asking for nothing is enabled")
	}
	for text, msg := range map[string]string{
		"http_auth { user: mon }":             `user "mon" has no password`,
		"http_auth { password: x }":           "a password needs a user",
		"http_auth { healthz_no_auth: true }": "set user and password, or token",
		"http_auth { token: t, realm: x }":    "realm",
		"http_auth: tok":                      "Expected map to define http_auth",
	} {
		_, _, err := loadText(t, text)
		if err == nil || !strings.Contains(err.Error(), msg) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: err %v, want %q", text, err, msg)
		}
	}
}
