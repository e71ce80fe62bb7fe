package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The packages whose state machines apply operations, and their files
// that only the delivering node runs (consumer.Deliverer: leader-side
// logic, which may read an id source), exempt from the rule below.
var (
	applyPackages = []string{"internal/stream", "internal/consumer", "internal/cluster/meta"}
	leaderFiles   = map[string]bool{
		"internal/consumer/deliverer.go": true,
		"internal/consumer/pull.go":      true,
		"internal/consumer/position.go":  true,
		"internal/consumer/priority.go":  true,
	}
)

// forbiddenCalls read a clock or wait for one.
var forbiddenCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "After": true, "Tick": true,
	"NewTimer": true, "NewTicker": true, "AfterFunc": true, "Sleep": true,
}

// forbiddenImports are random sources and the environment.
var forbiddenImports = map[string]bool{
	"math/rand": true, "math/rand/v2": true, "crypto/rand": true,
	"github.com/nats-io/nuid": true, "os": true,
}

// TestApplyReadsNoClock: the state machines that apply operations read
// no clock, no random source and nothing of the environment, so that
// every replica applying the same operations reaches the same state
// (docs/engine.md, "What decides what"). An operation carries every time
// it needs.
func TestApplyReadsNoClock(t *testing.T) {
	root := repoRoot(t)
	for _, dir := range applyPackages {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			rel, _ := filepath.Rel(root, path)
			if strings.HasSuffix(path, "_test.go") || leaderFiles[filepath.ToSlash(rel)] {
				continue
			}
			checkApplyFile(t, path, rel)
		}
	}
}

func checkApplyFile(t *testing.T, path, rel string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	timeName := ""
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if forbiddenImports[p] {
			t.Errorf("%s imports %s: an apply function may read no random source or environment", rel, p)
		}
		if p == "time" {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	if timeName == "" {
		return
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == timeName && forbiddenCalls[sel.Sel.Name] {
			t.Errorf("%s: %s uses time.%s: an apply function reads no clock (an operation carries its time)", rel, fset.Position(sel.Pos()), sel.Sel.Name)
		}
		return true
	})
}
