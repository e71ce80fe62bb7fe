package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/config"
)

// --user, --pass and --auth mean what nats-server v2.15.2's mean (the
// single user and the token of the authorization block) and override the
// file's.
func TestAuthFlags(t *testing.T) {
	c := settingsOf(t, "--user", "u", "--pass", "p")
	if c.Auth.User != "u" || c.Auth.Password != "p" || !c.Auth.Required() {
		t.Fatalf("auth %+v", c.Auth)
	}
	if c := settingsOf(t, "--auth", "tok"); c.Auth.Token != "tok" {
		t.Fatalf("token %+v", c.Auth)
	}
	path := filepath.Join(t.TempDir(), "a.conf")
	if err := os.WriteFile(path, []byte("authorization { user: file, password: fp }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c = settingsOf(t, "-c", path, "--pass", "flag")
	if c.Auth.User != "file" || c.Auth.Password != "flag" {
		t.Fatalf("flags over the file: %+v", c.Auth)
	}
	if o := serverOptions(c, nil); o.Auth.User != "file" || o.Auth.Password != "flag" {
		t.Fatalf("server options %+v", o.Auth)
	}
}

// A refused reload of an authentication setting never prints its values
// (they hold passwords and tokens).
func TestReloadRefusalHidesSecrets(t *testing.T) {
	err := refusal(config.Change{Key: "authorization.password", Old: "old-secret", New: "new-secret"})
	if strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "authorization.password") {
		t.Fatalf("refusal %q", err)
	}
}
