package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary files to Load: whatever the parser accepts,
// the typed layer must report problems, never panic.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"port: 4222", "jetstream { store_dir: /d, max_memory_store: 0 }", `{"port": 1, "cluster": {"routes": []}}`,
		"listen: 1.2.3.4:5", "max_payload: 1GB", "X = 1\nport: $X", "jetstream: enabled", "http: 8222",
		"lame_duck_duration: \"1m\"", "cluster { listen: 0.0.0.0:6222 }", "jetstream { sync: always }",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		if strings.Contains(strings.ToLower(text), "include") {
			t.Skip("an include may name any file, /dev/zero among them")
		}
		p := filepath.Join(dir, "fuzz.conf")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		c, _, err := Load(p)
		if err == nil {
			_ = c.Validate()
			_ = Changes(Default(), c)
		}
	})
}
