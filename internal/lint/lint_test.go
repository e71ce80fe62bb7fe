package lint

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/cairnmq/cairn/"

// The one nats-server package the product may import, and where: its
// configuration-file parser (docs/architecture.md section 1).
const (
	confPackage  = "github.com/nats-io/nats-server/v2/conf"
	confImporter = "internal/config"
)

// allowed lists, for each package, the cairn packages it may import
// (docs/architecture.md section 2: lower levels never import higher ones). A package missing
// from this table fails the test, so new packages must be placed.
var allowed = map[string][]string{
	"cmd/cairn":                      {"internal/config", "internal/logger", "internal/memrelease", "internal/monitor", "internal/route", "internal/server"},
	"internal/monitor":               {"internal/auth", "internal/cluster/jscluster", "internal/config", "internal/consumer", "internal/jetstream", "internal/jsapi", "internal/logger", "internal/raftnode", "internal/server", "internal/store", "internal/stream", "internal/subject", "internal/vfs"},
	"internal/config":                {"internal/transform"},
	"internal/auth":                  {"internal/config", "internal/subject", "internal/sublist"},
	"internal/jwtstore":              {},
	"internal/server":                {"internal/auth", "internal/cluster/jscluster", "internal/config", "internal/jetstream", "internal/jsapi", "internal/jwtstore", "internal/logger", "internal/protocol", "internal/raftnode", "internal/route", "internal/subject", "internal/sublist", "internal/transform", "internal/vfs"},
	"internal/sublist":               {"internal/subject"},
	"internal/subject":               {},
	"internal/transform":             {},
	"internal/store":                 {"internal/subject"},
	"internal/store/storetest":       {"internal/store", "internal/subject"},
	"internal/store/memstore":        {"internal/store", "internal/subject"},
	"internal/store/filestore":       {"internal/logger", "internal/store", "internal/subject", "internal/vfs"},
	"internal/stream":                {"internal/store", "internal/subject", "internal/jserr", "internal/transform"},
	"internal/consumer":              {"internal/store", "internal/stream", "internal/subject", "internal/jserr"},
	"internal/jsapi":                 {"internal/jetstream", "internal/consumer", "internal/stream", "internal/store", "internal/jserr", "internal/subject"},
	"internal/snapshot":              {},
	"internal/jetstream":             {"internal/consumer", "internal/jetstream/consumerrun", "internal/jetstream/metafile", "internal/jetstream/sourcing", "internal/jetstream/streamrun", "internal/jserr", "internal/snapshot", "internal/store", "internal/store/filestore", "internal/store/memstore", "internal/stream", "internal/subject", "internal/transform", "internal/vfs"},
	"internal/jetstream/consumerrun": {"internal/consumer", "internal/jetstream/metafile", "internal/jetstream/streamrun", "internal/jserr", "internal/store", "internal/stream", "internal/vfs"},
	"internal/jetstream/metafile":    {"internal/vfs"},
	"internal/jetstream/sourcing":    {"internal/consumer", "internal/jetstream/streamrun", "internal/jserr", "internal/store", "internal/stream", "internal/transform"},
	"internal/jetstream/streamrun":   {"internal/consumer", "internal/jserr", "internal/store", "internal/stream", "internal/vfs"},
	"internal/vfs":                   {},
	"internal/raftnode":              {"internal/logger", "internal/vfs"},
	"internal/cluster/streamlog":     {"internal/jetstream/streamrun", "internal/raftnode", "internal/stream"},
	"internal/cluster/consumerlog":   {"internal/consumer", "internal/jetstream/streamrun", "internal/raftnode"},
	"internal/cluster/meta":          {"internal/jserr", "internal/raftnode", "internal/subject", "internal/vfs"},
	"internal/cluster/transport":     {"internal/raftnode", "internal/route"},
	"internal/cluster/catchup":       {"internal/raftnode", "internal/store"},
	"internal/cluster/usage":         {},
	"internal/cluster/streamckpt":    {"internal/cluster/catchup", "internal/cluster/streamlog", "internal/jetstream/streamrun", "internal/raftnode", "internal/store", "internal/store/filestore", "internal/store/memstore", "internal/stream", "internal/vfs"},
	"internal/cluster/jscluster":     {"internal/cluster/catchup", "internal/cluster/consumerlog", "internal/cluster/meta", "internal/cluster/streamckpt", "internal/cluster/streamlog", "internal/cluster/transport", "internal/cluster/usage", "internal/consumer", "internal/jetstream", "internal/jetstream/metafile", "internal/jetstream/streamrun", "internal/jsapi", "internal/jserr", "internal/logger", "internal/raftnode", "internal/route", "internal/store", "internal/store/memstore", "internal/stream", "internal/subject", "internal/vfs"},
	"internal/protocol":              {"internal/wireline"},
	"internal/route":                 {"internal/wireline"},
	"internal/wireline":              {},
	"internal/wireline/streamtest":   {},
	"internal/jserr":                 {},
	"internal/logger":                {},
	"internal/memrelease":            {},
	"internal/lint":                  {},
	"internal/faults":                {},
	"test":                           {},
	"bench/faults":                   {"internal/faults"},
	"bench/idle":                     {"internal/faults"},
	"bench/fetchnoack":               {},
	"bench/fsync":                    {},
	"bench/handover":                 {"internal/faults"},
	"bench/consumerkill":             {"internal/faults"},
	"bench/restart":                  {},
	"bench/burstmem":                 {},
	"bench/bigentry":                 {},
	"bench/scrape":                   {},
	"bench/objput":                   {},
}

// external lists, for the packages named, the only modules outside the
// standard library and cairn they may import (by import path prefix).
// internal/raftnode keeps every type of etcd raft inside it
// (docs/cluster.md, decision 1); protobuf is how raft v3.7's messages are
// encoded (proto.Marshal), part of using that module.
var external = map[string][]string{
	"internal/raftnode": {"go.etcd.io/raft/v3", "google.golang.org/protobuf/proto"},
}

func TestImportDirection(t *testing.T) {
	root := repoRoot(t)
	for _, dir := range packageDirs(t, root) {
		pkg, err := build.ImportDir(filepath.Join(root, dir), 0)
		if err != nil {
			continue // no buildable Go files (for example, test/node)
		}
		allow, known := allowed[dir]
		if !known {
			t.Errorf("package %s is not placed in the import table of lint_test.go", dir)
			continue
		}
		checkImports(t, dir, pkg.Imports, allow)
		if ext, ok := external[dir]; ok {
			checkExternal(t, dir, pkg.Imports, ext)
		}
	}
}

func checkExternal(t *testing.T, dir string, imports, ext []string) {
	t.Helper()
	for _, imp := range imports {
		first, _, _ := strings.Cut(imp, "/")
		if !strings.Contains(first, ".") || strings.HasPrefix(imp, module) {
			continue // the standard library, or cairn
		}
		ok := false
		for _, e := range ext {
			ok = ok || imp == e || strings.HasPrefix(imp, e+"/")
		}
		if !ok {
			t.Errorf("%s imports %s, outside the modules it may use %v", dir, imp, ext)
		}
	}
}

func checkImports(t *testing.T, dir string, imports, allow []string) {
	t.Helper()
	for _, imp := range imports {
		if strings.HasPrefix(imp, "github.com/nats-io/nats-server") && !(dir == confImporter && imp == confPackage) {
			t.Errorf("%s imports %s: the product imports no nats-server package but %s, in %s", dir, imp, confPackage, confImporter)
		}
		rel, ok := strings.CutPrefix(imp, module)
		if ok && !contains(allow, rel) {
			t.Errorf("%s imports %s, which its level may not import", dir, rel)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(filepath.Dir(wd))
}

func packageDirs(t *testing.T, root string) []string {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			if len(dirs) == 0 || dirs[len(dirs)-1] != rel {
				dirs = append(dirs, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}
