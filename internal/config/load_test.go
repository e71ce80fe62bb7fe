package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeConf writes text to name in dir and returns its path.
func writeConf(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadText loads text as a configuration file in a fresh directory.
func loadText(t *testing.T, text string) (*Config, []Problem, error) {
	t.Helper()
	return Load(writeConf(t, t.TempDir(), "cairn.conf", text))
}

func mustLoad(t *testing.T, text string) (*Config, []Problem) {
	t.Helper()
	c, warns, err := loadText(t, text)
	if err != nil {
		t.Fatalf("Load(%q): %v", text, err)
	}
	return c, warns
}

// Every form of nats-server's grammar (docs/configuration.md, "The format")
// reaches the typed settings: the parser is nats-server's own, so these
// check that cairn reads what it produces for each form.
func TestGrammarForms(t *testing.T) {
	t.Setenv("CAIRN_TEST_PORT", "4555")
	t.Setenv("CAIRN_TEST_SIZE", "2MB")
	cases := []struct {
		name, text string
		check      func(*Config) bool
	}{
		{"equals", "port = 4333", func(c *Config) bool { return c.Port == 4333 }},
		{"colon", "port: 4333", func(c *Config) bool { return c.Port == 4333 }},
		{"blank", "port 4333", func(c *Config) bool { return c.Port == 4333 }},
		{"semicolon and comma terminators", "port: 4333; server_name: a,\n", func(c *Config) bool { return c.Port == 4333 && c.ServerName == "a" }},
		{"hash comment", "# a comment\nport: 4333 # trailing\n", func(c *Config) bool { return c.Port == 4333 }},
		{"slash comment", "// a comment\nport: 4333 // trailing\n", func(c *Config) bool { return c.Port == 4333 }},
		{"case-insensitive keys", "PORT: 4333\nServer_Name: x", func(c *Config) bool { return c.Port == 4333 && c.ServerName == "x" }},
		{"double-quoted string", `server_name: "n\x41"`, func(c *Config) bool { return c.ServerName == "nA" }},
		{"single-quoted string", `server_name: 'n\x41'`, func(c *Config) bool { return c.ServerName == `n\x41` }},
		{"bare string", "server_name: node-1", func(c *Config) bool { return c.ServerName == "node-1" }},
		{"quoted key", `"server_name": n1`, func(c *Config) bool { return c.ServerName == "n1" }},
		{"bare host:port", "listen: 127.0.0.1:4333", func(c *Config) bool { return c.Host == "127.0.0.1" && c.Port == 4333 }},
		{"listen port only", "listen: 4333", func(c *Config) bool { return c.Port == 4333 }},
		{"size 1000s", "max_payload: 2M", func(c *Config) bool { return c.Limits.MaxPayload == 2_000_000 }},
		{"size 1024s", "max_payload: 2MB", func(c *Config) bool { return c.Limits.MaxPayload == 2<<20 }},
		{"size mib", "max_pending: 512MiB", func(c *Config) bool { return c.Limits.MaxPending == 512<<20 }},
		{"size gb", "max_pending: 1GB", func(c *Config) bool { return c.Limits.MaxPending == 1<<30 }},
		{"duration string", `ping_interval: "2m"`, func(c *Config) bool { return c.Limits.PingInterval == 2*time.Minute }},
		{"bare duration", `write_deadline: 250ms`, func(c *Config) bool { return c.Limits.WriteDeadline == 250*time.Millisecond }},
		{"booleans", "debug: yes\ntrace: on\nlogtime: false", func(c *Config) bool { return c.Log.Debug && c.Log.Trace && !c.Log.Time }},
		{"nested block", "jetstream {\n  store_dir: /data\n  max_file_store: 10Gi\n}", func(c *Config) bool {
			return c.JetStream.Enabled && c.JetStream.StoreDir == "/data" && c.JetStream.MaxFileStore == 10<<30
		}},
		{"block with separator", "jetstream: { store_dir = '/data' }", func(c *Config) bool { return c.JetStream.StoreDir == "/data" }},
		{"block on one line with commas", "jetstream {store_dir: /d, max_memory_store: 0}", func(c *Config) bool {
			return c.JetStream.StoreDir == "/d" && c.JetStream.MaxMemoryStore == 0
		}},
		{"array", "cluster { routes: [] }", func(c *Config) bool { return true }},
		{"variable", "P = 4333\nport: $P", func(c *Config) bool { return c.Port == 4333 }},
		{"block-scoped variable shadows outer", "DIR = /outer\njetstream {\n  DIR = /inner\n  store_dir: $DIR\n}\nlog_file: $DIR", func(c *Config) bool {
			return c.JetStream.StoreDir == "/inner" && c.Log.File == "/outer"
		}},
		{"outer variable in a block", "DIR = /outer\njetstream { store_dir: $DIR }", func(c *Config) bool { return c.JetStream.StoreDir == "/outer" }},
		{"environment variable re-parsed as a value", "port: $CAIRN_TEST_PORT\nmax_payload: $CAIRN_TEST_SIZE", func(c *Config) bool {
			return c.Port == 4555 && c.Limits.MaxPayload == 2<<20
		}},
		{"quoted variable stays literal", `server_name: "$P"`, func(c *Config) bool { return c.ServerName == "$P" }},
		{"JSON", `{"port": 4333, "jetstream": {"store_dir": "/data", "max_memory_store": 0}}`, func(c *Config) bool {
			return c.Port == 4333 && c.JetStream.StoreDir == "/data" && c.JetStream.MaxMemoryStore == 0
		}},
		{"last definition wins", "port: 1\nport: 2", func(c *Config) bool { return c.Port == 2 }},
		{"jetstream true", "jetstream: true", func(c *Config) bool { return c.JetStream.Enabled }},
		{"jetstream enabled", "jetstream: enabled", func(c *Config) bool { return c.JetStream.Enabled }},
		{"jetstream block disabled", "jetstream { enabled: false }", func(c *Config) bool { return !c.JetStream.Enabled }},
		{"storage size string", `jetstream { max_memory_store: "1G" }`, func(c *Config) bool { return c.JetStream.MaxMemoryStore == 1<<30 }},
		{"top-level store_dir", "store_dir: /data\njetstream: enabled", func(c *Config) bool { return c.JetStream.StoreDir == "/data" }},
		{"sync always", "jetstream { sync_interval: always }", func(c *Config) bool { return c.JetStream.AckBeforeSyncInterval == 0 }},
		{"ack before sync", `jetstream { ack_before_sync_interval: "1s" }`, func(c *Config) bool { return c.JetStream.AckBeforeSyncInterval == time.Second }},
		{"max_connections 0 refuses all", "max_connections: 0", func(c *Config) bool { return c.Limits.MaxConnections == -1 }},
		{"max_conn alias", "max_conn: 10", func(c *Config) bool { return c.Limits.MaxConnections == 10 }},
		{"unset storage limits", "jetstream {}", func(c *Config) bool {
			return c.JetStream.MaxMemoryStore == Unset && c.JetStream.MaxFileStore == Unset
		}},
		{"pid file and profiling", "pid_file: /run/x.pid\nprof_port: 6060", func(c *Config) bool {
			return c.Process.PidFile == "/run/x.pid" && c.Process.ProfPort == 6060
		}},
		{"client_advertise", "client_advertise: nats.example.com:4333", func(c *Config) bool { return c.ClientAdvertise == "nats.example.com:4333" }},
		{"logging", "log_file: /var/log/cairn.log\nlogtime_utc: true\ntrace_verbose: true", func(c *Config) bool {
			return c.Log.File == "/var/log/cairn.log" && c.Log.TimeUTC && c.Log.Trace
		}},
		{"log_format json", "log_format: json", func(c *Config) bool { return c.Log.JSON }},
		{"log_format text", "log_format: text", func(c *Config) bool { return !c.Log.JSON }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := mustLoad(t, tc.text)
			if !tc.check(c) {
				t.Errorf("%q gave %+v", tc.text, *c)
			}
		})
	}
}

// include joins a file relative to the including one, at the top level and
// inside a block; an included file sees the environment, not the
// includer's variables.
func TestInclude(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeConf(t, dir, "sub/limits.conf", "max_payload: 64KB\n")
	writeConf(t, dir, "sub/js.conf", "store_dir: /data\nmax_file_store: 1G\n")
	p := writeConf(t, dir, "main.conf", "include 'sub/limits.conf'\njetstream {\n  include sub/js.conf\n}\nport: 4333\n")
	c, _, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxPayload != 64<<10 || c.JetStream.StoreDir != "/data" || c.JetStream.MaxFileStore != 1e9 || c.Port != 4333 {
		t.Fatalf("include not applied: %+v", *c)
	}
	if c.File != p || !strings.HasPrefix(c.Digest, "sha256:") {
		t.Fatalf("file %q digest %q", c.File, c.Digest)
	}
}

// An empty file is valid (with nats-server's warning) and gives the
// defaults.
func TestEmptyFile(t *testing.T) {
	c, warns := mustLoad(t, "# nothing\n")
	if !reflect.DeepEqual(c, withSource(Default(), c)) {
		t.Fatalf("empty file gave %+v", *c)
	}
	if len(warns) != 1 || !strings.Contains(warns[0].Error(), "config has no values or is empty") {
		t.Fatalf("warnings %v", warns)
	}
}

func withSource(c, from *Config) *Config {
	c.File, c.Digest = from.File, from.Digest
	return c
}

func TestParseSize(t *testing.T) {
	cases := map[string]int64{
		"0": 0, "1000": 1000, "64K": 64000, "64KB": 64 << 10, "512mb": 512 << 20, "1G": 1e9,
		"1GB": 1 << 30, "10MiB": 10 << 20, "3gi": 3 << 30, "2TB": 2 << 40, "2t": 2e12, "1p": 1e15, "1e": 1e18,
	}
	for in, want := range cases {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "1X", "G", "99999999999T", "1kbb", "1 k", "k1", "1k1", "10e"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

// server_tags and unique_tag are read as nats-server v2.15.2 reads them:
// lowercased and trimmed, empty and repeated tags dropped; a value of
// another type is its error.
func TestServerTags(t *testing.T) {
	c, _ := mustLoad(t, "server_tags: [\" AZ:1 \", \"ssd\", \"SSD\", \"\"]\njetstream { unique_tag: \" AZ: \" }")
	if !slices.Equal(c.Tags, []string{"az:1", "ssd"}) || c.JetStream.UniqueTag != "az:" {
		t.Fatalf("tags %q, unique tag %q", c.Tags, c.JetStream.UniqueTag)
	}
	if c, _ = mustLoad(t, `server_tags: "A, B"`); !slices.Equal(c.Tags, []string{"a, b"}) {
		t.Fatalf("one string: %q", c.Tags)
	}
	wantLines(t, problemTexts(t, "server_tags: 5"), `F:1:0: error parsing tags: unsupported type int64`)
	wantLines(t, problemTexts(t, `server_tags: ["a", {x: 1}]`), `F:1:0: error parsing tags: unsupported type *conf.token where string is expected`)
	wantLines(t, problemTexts(t, "jetstream { unique_tag: 5 }"), `F:1:0: interface conversion: interface {} is int64, not string`)
}

// jetstream { max_buffered_size, max_buffered_msgs } are read as
// nats-server v2.15.2 reads them (opts.go parseJetStream): the size as a
// storage size (an integer with the parser's suffixes, or a string ending
// in K, M, G or T), the count as an integer, negative values kept (no
// bound), with nats-server's errors for anything else (the texts and
// positions nats-server -t gives for the same files).
func TestMaxBuffered(t *testing.T) {
	for text, want := range map[string][2]int64{
		"jetstream { max_buffered_size: 4096, max_buffered_msgs: 10 }": {4096, 10},
		"jetstream { max_buffered_size: 4kb, max_buffered_msgs: 1k }":  {4096, 1000},
		`jetstream { max_buffered_size: "2M" }`:                        {2 << 20, 0},
		"jetstream { max_buffered_size: -1, max_buffered_msgs: -1 }":   {-1, -1},
		"jetstream { }": {0, 0},
	} {
		c, warns := mustLoad(t, text)
		if got := [2]int64{c.JetStream.MaxBufferedSize, c.JetStream.MaxBufferedMsgs}; got != want || len(warns) != 0 {
			t.Errorf("%s: size, msgs %v, want %v; warnings %v", text, got, want, warns)
		}
	}
	for text, want := range map[string]string{
		"jetstream {\n  max_buffered_size: \"1MB\"\n}": `F:2:3: max_buffered_size strconv.ParseInt: parsing "1M": invalid syntax`,
		"jetstream {\n  MAX_Buffered_Size: \"100\"\n}": `F:2:3: max_buffered_size sizes defined as strings must end in K, M, G, T`,
		"jetstream {\n  max_buffered_size: 1.5\n}":     `F:2:3: max_buffered_size must be int64 or string`,
		"jetstream {\n  Max_Buffered_Msgs: \"1K\"\n}":  `F:2:3: Expected a parseable size for "Max_Buffered_Msgs", got 1K`,
		"jetstream {\n  max_buffered_size: \"-1K\"\n}": `F:2:3: max_buffered_size "-1K" is out of range`, // nats-server: no bound (docs/compatibility.md)
		"jetstream {\n  max_buffered_msgs: true\n}":    `F:2:3: Expected a parseable size for "max_buffered_msgs", got true`,
	} {
		wantLines(t, problemTexts(t, text), want)
	}
}
