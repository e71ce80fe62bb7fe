package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The resolver block is read with nats-server v2.15.2's keys, defaults
// and refusals (opts.go "resolver", checked against nats-server -t).
func TestResolverBlock(t *testing.T) {
	opJWT, _, _, _ := operatorFixture(t)
	dir := filepath.Join(t.TempDir(), "jwt")
	c, _ := mustLoad(t, "operator: "+opJWT+"\nsystem_account: ABC\nresolver { type: full, dir: \""+dir+"\", allow_delete: true, interval: \"2m\", limit: 10, timeout: \"3s\" }\n")
	want := ResolverDir{Full: true, Dir: dir, AllowDelete: true, Limit: 10, Interval: 2 * time.Minute, Timeout: 3 * time.Second}
	if c.Operator.Resolver != "FULL" || c.Operator.ResolverDir != want {
		t.Fatalf("full: %q %+v", c.Operator.Resolver, c.Operator.ResolverDir)
	}
	if d := c.Operator.ResolverDir; d.SyncInterval() != 2*time.Minute || d.FetchTimeout() != 3*time.Second || d.MaxJWTs() != 10 {
		t.Fatalf("full defaults %v %v %v", d.SyncInterval(), d.FetchTimeout(), d.MaxJWTs())
	}
	c, _ = mustLoad(t, "resolver { type: CACHE, dir: \""+dir+"\", ttl: \"1m\" }\n")
	if d := c.Operator.ResolverDir; c.Operator.Resolver != "CACHE" || d.Full || d.TTL != time.Minute || d.MaxJWTs() != DefaultCacheLimit || d.FetchTimeout() != DefaultResolverTimeout {
		t.Fatalf("cache: %q %+v", c.Operator.Resolver, d)
	}
	c, _ = mustLoad(t, "resolver { type: mem }\n")
	if c.Operator.Resolver != "MEMORY" {
		t.Fatalf("mem: %q", c.Operator.Resolver)
	}
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string][]string{
		`type: full`: {"2:1: dir has no value and needs to point to a directory", "2:1: mkdir : no such file or directory"},
		`type: full, dir: "` + dir + `", ttl: "1m"`:                                               {"2:1: FULL does not accept ttl"},
		`type: cache, dir: "` + dir + `", interval: "1m", allow_delete: true, hard_delete: false`: {"2:1: CACHE does not accept sync", "2:1: CACHE does not accept allow_delete", "2:1: CACHE does not accept hard_delete"},
		`type: full, dir: "` + dir + `", hard_delete: true`:                                       {"2:1: hard_delete has no effect without delete"},
		`type: bogus, dir: "` + dir + `"`:                                                         {`2:1: error parsing account resolver, should be MEM or  URL("url") or a map containing dir and type state=[FULL|CACHE])`},
		`type: full, dir: "` + dir + `", timeout: "0s"`:                                           {"2:1: Fetch timeout 0s is too smal"},
		`type: full, dir: "` + dir + `", interval: "abc"`:                                         {`2:1: time: invalid duration "abc"`},
		`type: full, dir: "` + file + `"`:                                                         {"2:1: dir needs to point to an accessible directory", "2:1: mkdir " + file + ": not a directory"},
		`type: full, dir: 5`:                                                                      {"2:24: interface conversion: interface {} is int64, not string"},
	} {
		got := problemTexts(t, "operator: "+opJWT+"\nresolver { "+body+" }\n")
		if len(got) != len(want) {
			t.Errorf("%s: %q, want %q", body, got, want)
			continue
		}
		for i := range want {
			if !strings.HasSuffix(got[i], want[i]) {
				t.Errorf("%s: %q, want %q", body, got[i], want[i])
			}
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("reading the file made the directory (the server makes it at start)")
	}
	// A nats-based resolver needs a system account.
	c, _ = mustLoad(t, "operator: "+opJWT+"\nresolver { type: full, dir: \""+dir+"\" }\n")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "using nats based account resolver - the system account needs to be specified in configuration or the operator jwt") {
		t.Fatalf("no system account: %v", err)
	}
}
