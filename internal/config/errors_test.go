package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// problemTexts loads text and returns its error's lines with the file
// name replaced by "F", or fails if it loads.
func problemTexts(t *testing.T, text string) []string {
	t.Helper()
	dir := t.TempDir()
	p := writeConf(t, dir, "cairn.conf", text)
	_, _, err := Load(p)
	if err == nil {
		t.Fatalf("%q loaded without error", text)
	}
	return strings.Split(strings.ReplaceAll(err.Error(), p, "F"), "\n")
}

func wantLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Every error names the file, line and column of its key, with
// nats-server's texts (server/errors.go, server/opts.go), and all of a
// file's errors are reported together, in file order (nats-server prints
// them in map order). A type error inside the jetstream block is reported
// at the block's key, as nats-server does (it stops reading the block
// there; cairn goes on and reports baz too).
func TestErrorsNameFileLineColumn(t *testing.T) {
	got := problemTexts(t, "port: 4222\nfoo: 1\n  bar { x: 1 }\nport: \"abc\"\njetstream {\n\tstore_dir: 5\n  baz: 1\n}\n")
	wantLines(t, got,
		`F:2:1: unknown field "foo"`,
		`F:3:3: unknown field "bar"`,
		`F:4:1: interface conversion: interface {} is string, not int64`,
		`F:5:1: interface conversion: interface {} is int64, not string`,
		`F:7:3: unknown field "baz"`,
	)
}

// conf's columns are 0-based on the first line only (1-based on the
// others); cairn prints them as they are, as nats-server v2.15.2 does.
func TestFirstLineColumnIsZeroBased(t *testing.T) {
	wantLines(t, problemTexts(t, "foo: 1"), `F:1:0: unknown field "foo"`)
	wantLines(t, problemTexts(t, `{"port": 1, "foo": 2}`), `F:1:13: unknown field "foo"`)
}

func TestErrorTexts(t *testing.T) {
	cases := []struct{ text, want string }{
		{"leafnodes { port: 7422 }", `F:1:0: field "leafnodes" is not supported by cairn`},
		{"\nws: {port: 8080}", `F:2:1: field "ws" is not supported by cairn`},
		{"gateway {}", `F:1:0: field "gateway" is not supported by cairn`},
		{"mqtt {}", `F:1:0: field "mqtt" is not supported by cairn`},
		{"authorization { token: s3cr3t, user: a }", `F:1:0: Cannot have a user/pass and token`},
		{"tls { cert_file: a }", `F:1:0: missing 'key_file' in TLS configuration`},
		{"accounts { $G {} }", `F:1:11: "$G" is a Reserved Account`},
		{"jetstream { domain: \"a.b\" }", `F:1:12: invalid domain name: may not contain ., * or >`},
		{"jetstream { domain: \"a b\" }", `F:1:12: invalid domain name: derived "$JS.a b.API" is not a valid subject`},
		{"jetstream { domain: 1 }", `F:1:0: interface conversion: interface {} is int64, not string`},
		{"cluster { routes: 5 }", `F:1:10: interface conversion: interface {} is int64, not []interface {}`},
		{"jetstream { enabled: 5 }", `F:1:0: interface conversion: interface {} is int64, not bool`},
		{"jetstream { strict: 5 }", `F:1:12: Expected 'true' or 'false' for bool value, got '%!s(int64=5)'`},
		{"jetstream { key: s3cr3t }", `F:1:12: field "key" is not supported by cairn yet`},
		{"max_subscriptions: \"10\"", `F:1:0: interface conversion: interface {} is string, not int64`},
		{"no_header_support: true", `F:1:0: field "no_header_support" is not supported by cairn yet`},
		{"cluster { routes: [\"nats://:6222\"] }", `F:1:20: error parsing route url ["nats://:6222"]`},
		{"cluster { tls: {} }", `F:1:10: missing 'cert_file' in TLS configuration`},
		{"cluster { authorization: { users: [] } }", `F:1:27: field "users" is not supported by cairn yet`},
		{"cluster { colour: red }", `F:1:10: unknown field "colour"`},
		{"X = 1\nport: 2", `F:1:0: unknown field "X"`},
		{"max_payload: 3GB", `F:1:0: max_payload value is too big`},
		{"max_payload: -1", `F:1:0: max_payload value can not be negative`},
		{"port: 70000", `F:1:0: port 70000 out of range`},
		{"listen: nohost", `F:1:0: could not parse address string "nohost"`},
		{"server_name: 'a b'", `F:1:0: server name cannot contain spaces`},
		{`ping_interval: "2 minutes"`, `F:1:0: error parsing ping_interval: time: unknown unit " minutes" in duration "2 minutes"`},
		{`lame_duck_duration: "10s"`, `F:1:0: invalid lame_duck_duration of 10s, minimum is 30 seconds`},
		{`lame_duck_grace_period: "-1s"`, `F:1:0: invalid lame_duck_grace_period, needs to be positive`},
		{"jetstream: maybe", `F:1:0: Expected 'enabled' or 'disabled' for string value, got 'maybe'`},
		{"jetstream: 5", `F:1:0: Expected map, bool or string to define JetStream, got int64`},
		{`jetstream { max_memory_store: "1X" }`, `F:1:12: max_mem_store sizes defined as strings must end in K, M, G, T`},
		{`jetstream { max_file: true }`, `F:1:12: max_file_store must be int64 or string`},
		{"store_dir: /a\njetstream { store_dir: /b }", `F:1:0: Duplicate 'store_dir' configuration`},
		{"write_timeout: sometimes", `F:1:0: write_timeout must be 'default', 'close' or 'retry'`},
		{"cluster: 5", `F:1:0: Expected map to define cluster, got int64`},
		{`jetstream { ack_before_sync_interval: "0s" }`, `F:1:12: ack_before_sync_interval must be positive`},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			wantLines(t, problemTexts(t, tc.text), tc.want)
		})
	}
}

// A sync interval would acknowledge before the fsync: refused, with the
// name that accepts the loss.
func TestSyncIntervalRefused(t *testing.T) {
	for _, text := range []string{`jetstream { sync_interval: "2m" }`, "jetstream { sync: 10 }"} {
		got := problemTexts(t, text)
		last := got[len(got)-1]
		if !strings.Contains(last, "would acknowledge messages before they are on disk") || !strings.Contains(last, "ack_before_sync_interval") {
			t.Errorf("%q: %v", text, got)
		}
	}
	got := problemTexts(t, `jetstream { sync_interval: always, ack_before_sync_interval: "1s" }`)
	if !strings.Contains(strings.Join(got, "\n"), "sync_interval always contradicts ack_before_sync_interval") {
		t.Errorf("conflict not reported: %v", got)
	}
}

// Syntax errors come from nats-server's parser, whose text has the line;
// cairn adds the file. An error in an included file names both.
func TestSyntaxErrorsNameTheFile(t *testing.T) {
	wantLines(t, problemTexts(t, "port 4222\n  x = [1, 2\n"),
		`F: Parse error on line 3: 'Expected an array value terminator "," or an array terminator "]", but got '\x00' instead.'`)
	dir := t.TempDir()
	writeConf(t, dir, "bad.conf", "port: {\n")
	p := writeConf(t, dir, "main.conf", "include bad.conf\n")
	_, _, err := Load(p)
	if err == nil || !strings.HasPrefix(err.Error(), p+": error parsing include file 'bad.conf', ") {
		t.Fatalf("include error: %v", err)
	}
	wantLines(t, problemTexts(t, "port: $NOPE_NOT_SET"), `F: variable reference for 'NOPE_NOT_SET' on line 1 can not be found`)
	wantLines(t, problemTexts(t, "max_payload: 99999999999999999999"), `F: integer '99999999999999999999' is out of the range`)
}

func TestMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "none.conf")
	_, _, err := Load(p)
	if !errors.Is(err, os.ErrNotExist) || err.Error() != "open "+p+": no such file or directory" {
		t.Fatalf("got %v", err)
	}
}

// Keys whose absence a client does not see are accepted with a warning
// naming them; nothing is dropped silently.
func TestWarnings(t *testing.T) {
	cases := []struct{ text, want string }{
		{"ping_interval: 60", `F:1:0: invalid use of field "ping_interval": ping_interval should be converted to a duration`},
		{"cluster { name: c, port: 6222, pool_size: 3 }", `F:1:31: field "pool_size" is ignored: cairn keeps one route connection per peer, carrying every subject (nats-server's pool_size: -1)`},
		{"syslog: true", `F:1:0: field "syslog" is ignored: cairn logs to stderr or to log_file`},
		{"max_connections: 0", `F:1:0: max_connections 0 refuses every client connection (as in nats-server)`},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			p := writeConf(t, t.TempDir(), "cairn.conf", tc.text)
			_, warns, err := Load(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(warns) != 1 || strings.ReplaceAll(warns[0].Error(), p, "F") != tc.want {
				t.Fatalf("warnings %v, want %q", warns, tc.want)
			}
		})
	}
	// Zero values of limits cairn does not have are what cairn does.
	if _, warns := mustLoad(t, "max_subscriptions: 0\nsyslog: false\nno_system_account: true\nproxy_protocol: false\nhttp_port: 0"); len(warns) != 0 {
		t.Fatalf("warnings for default values: %v", warns)
	}
}

// Validate checks combinations with nats-server's texts, counting the
// defaults of what is not set.
func TestValidate(t *testing.T) {
	c, _ := mustLoad(t, "max_payload: 100MB")
	if err := c.Validate(); err == nil || err.Error() != "max_payload (104857600) cannot be higher than max_pending (67108864)" {
		t.Fatalf("got %v", err)
	}
	c, _ = mustLoad(t, "max_payload: 100MB\nmax_pending: 200MB")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c, _ = mustLoad(t, "")
	c.ServerName = "my srv" // as -n sets it
	if err := c.Validate(); err == nil || err.Error() != "server name cannot contain spaces" {
		t.Fatalf("server name with a space: %v", err)
	}
	c, _ = mustLoad(t, "")
	c.Cluster.Name = "my cluster" // as --cluster_name sets it
	if err := c.Validate(); err == nil || err.Error() != "cluster name cannot contain spaces" {
		t.Fatalf("cluster name with a space: %v", err)
	}
	c, _ = mustLoad(t, "lame_duck_duration: \"30s\"\nlame_duck_grace_period: \"30s\"")
	if err := c.Validate(); err == nil || err.Error() != "lame duck grace period (30s) should be strictly lower than lame duck duration (30s)" {
		t.Fatalf("got %v", err)
	}
}

// JetStream with a cluster listener needs a server name and a cluster
// name, as nats-server v2.15.2 refuses to start without them
// (server/jetstream.go validateJetStreamOptions); without a cluster
// listener, or without JetStream, neither is needed.
func TestValidateJetStreamClusterNames(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"jetstream: enabled\ncluster { port: 6222, name: c1 }", "jetstream cluster requires `server_name` to be set"},
		{"jetstream: enabled\nserver_name: n1\ncluster { port: 6222 }", "jetstream cluster requires `cluster.name` to be set"},
		{"jetstream: enabled\nserver_name: n1\ncluster { port: -1, name: c1 }", ""},
		{"cluster { port: 6222 }", ""},
		{"jetstream: enabled", ""},
	} {
		c, _ := mustLoad(t, tc.file)
		err := c.Validate()
		if (tc.want == "" && err != nil) || (tc.want != "" && (err == nil || err.Error() != tc.want)) {
			t.Errorf("%q: got %v, want %q", tc.file, err, tc.want)
		}
	}
}

// Every top-level key of nats-server v2.15.2 (server/opts.go
// processConfigFileLine) is known to cairn: implemented, refused or
// warned about, never "unknown field".
func TestEveryNatsServerKeyIsClassified(t *testing.T) {
	keys := []string{
		"listen", "client_advertise", "port", "server_name", "host", "net", "debug", "trace", "trace_verbose",
		"trace_headers", "logtime", "logtime_utc", "mappings", "maps", "disable_sublist_cache", "no_sublist_cache",
		"accounts", "default_sentinel", "authorization", "http", "https", "http_port", "monitor_port", "https_port",
		"http_base_path", "cluster", "gateway", "leaf", "leafnodes", "store_dir", "storedir", "jetstream", "logfile",
		"log_file", "logfile_size_limit", "log_size_limit", "logfile_max_num", "log_max_num", "syslog", "remote_syslog",
		"pidfile", "pid_file", "ports_file_dir", "prof_port", "prof_block_rate", "max_control_line", "max_payload",
		"max_pending", "proxy_protocol", "max_connections", "max_conn", "max_traced_msg_len", "max_subscriptions",
		"max_subs", "max_sub_tokens", "max_subscription_tokens", "ping_interval", "ping_max", "tls", "ocsp",
		"allow_non_tls", "write_deadline", "write_timeout", "lame_duck_duration", "lame_duck_grace_period", "operator",
		"operators", "roots", "root", "root_operators", "root_operator", "resolver", "account_resolver",
		"accounts_resolver", "resolver_tls", "resolver_preload", "resolver_pinned_accounts", "no_auth_user",
		"system_account", "system", "no_system_account", "no_system", "no_sys_acc", "no_header_support", "trusted",
		"trusted_keys", "connect_error_reports", "reconnect_error_reports", "websocket", "ws", "mqtt", "server_tags",
		"server_metadata", "feature_flags", "default_js_domain", "ocsp_cache", "no_fast_producer_stall",
		"max_closed_clients", "proxies",
	}
	for _, k := range keys {
		if _, ok := topLevel[k]; !ok {
			t.Errorf("nats-server key %q is unknown to cairn", k)
		}
	}
	block := []string{
		"strict", "store", "store_dir", "storedir", "sync", "sync_interval", "max_memory_store", "max_mem_store",
		"max_mem", "max_file_store", "max_file", "domain", "enable", "enabled", "key", "ek", "encryption_key",
		"prev_key", "prev_ek", "prev_encryption_key", "cipher", "extension_hint", "limits", "tpm", "unique_tag",
		"max_outstanding_catchup", "max_buffered_size", "max_buffered_msgs", "request_queue_limit",
		"info_queue_limit", "meta_compact", "meta_compact_size", "meta_compact_sync", "max_concurrent_io",
	}
	for _, k := range block {
		if _, ok := jetstreamBlockKeys[k]; !ok {
			t.Errorf("nats-server jetstream key %q is unknown to cairn", k)
		}
	}
}

// A negative connect_retries loads, as in nats-server v2.15.2, which keeps
// any integer and dials a learned route once when it is 0 or less.
func TestNegativeConnectRetries(t *testing.T) {
	c, warns := mustLoad(t, "cluster { port: 6222, connect_retries: -3 }")
	if c.Cluster.ConnectRetries != -3 || len(warns) != 0 {
		t.Fatalf("connect_retries %d, warnings %v", c.Cluster.ConnectRetries, warns)
	}
}
