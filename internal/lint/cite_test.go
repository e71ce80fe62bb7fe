package lint

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every source a comment or a page cites must be one a reader of the
// repository can open: a nats-server version and function, an ADR, a
// public URL or a page in docs/ (docs/architecture.md rule 8). The design
// notes the project started from live outside the repository; these
// checks keep citations of them from coming back.

// citedExts are the files whose text is checked.
var citedExts = map[string]bool{".go": true, ".md": true, ".mjs": true, ".js": true, ".sh": true}

// outsideDirs are directories outside the repository that text must not
// point into. (Built from parts so that this file does not cite them.)
var outsideDirs = []string{".." + "/shared", "/work" + "/shared"}

// notePage matches a mention of one of the outside notes' file names,
// with the path in front of it (group 1) and the name (group 2). A name
// inside a longer one ("my-style.md") is not a mention.
var notePage = regexp.MustCompile(`(?:^|[^\w-])((?:[\w.-]*/)*)((?:DESIGN|protocol|reliability|operations|clustering|style)\.md)`)

// citeProblems returns what is wrong with the citations in text, the
// content of the file at rel (slash-separated, relative to the repository
// root). exists reports whether a slash-separated path relative to the
// root names a file. A mention of a note's name is fine only when it
// resolves to a file of the repository: "docs/<name>" from anywhere, or
// the bare name (a link to a sibling page) inside docs/.
func citeProblems(rel, text string, exists func(string) bool) []string {
	var problems []string
	for i, line := range strings.Split(text, "\n") {
		at := fmt.Sprintf("%s:%d", rel, i+1)
		for _, dir := range outsideDirs {
			if strings.Contains(line, dir) {
				problems = append(problems, fmt.Sprintf("%s cites %s, which is not part of the repository: cite a page in docs/", at, dir))
			}
		}
		for _, m := range notePage.FindAllStringSubmatch(line, -1) {
			prefix, name := m[1], m[2]
			if !resolves(rel, prefix+name, exists) {
				problems = append(problems, fmt.Sprintf("%s cites %s%s, which is no file of the repository: cite a page of docs/ (docs/protocol.md, docs/durability.md, docs/architecture.md, ...), a nats-server function, an ADR or a URL instead", at, prefix, name))
			}
		}
	}
	return problems
}

// resolves reports whether target, as written in the file rel, names a
// file of the repository: relative to the root (docs/x.md in a comment)
// or to rel's directory (a link between pages of docs/).
func resolves(rel, target string, exists func(string) bool) bool {
	for _, p := range []string{path.Clean(target), path.Join(path.Dir(rel), target)} {
		if p != ".." && !strings.HasPrefix(p, "../") && !path.IsAbs(p) && exists(p) {
			return true
		}
	}
	return false
}

// TestCitationsInRepository: no .go, .md, .mjs, .js or .sh file of the
// repository cites the notes kept outside it.
func TestCitationsInRepository(t *testing.T) {
	root := repoRoot(t)
	exists := func(p string) bool {
		fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
		return err == nil && !fi.IsDir()
	}
	checked := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !citedExts[filepath.Ext(name)] {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, problem := range citeProblems(filepath.ToSlash(rel), string(b), exists) {
			t.Error(problem)
		}
		checked++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d files under %s: the walk missed the repository", checked, root)
	}
}

// TestCiteProblems pins what the check accepts and refuses. The names of
// the outside notes are built with md so that this file cites none.
func TestCiteProblems(t *testing.T) {
	md := func(name string) string { return name + ".md" }
	files := map[string]bool{"docs/protocol.md": true, "docs/durability.md": true}
	exists := func(p string) bool { return files[p] }
	shared := ".." + "/shared"
	cases := []struct {
		rel, line string
		bad       int
	}{
		{"internal/x/x.go", "// (docs/protocol.md 1.7)", 0},
		{"internal/x/x.go", "// (docs/protocol.md 1.7; docs/durability.md item 2)", 0},
		{"README.md", "[docs/protocol.md](docs/protocol.md)", 0},
		{"docs/compatibility.md", "([" + md("protocol") + "](" + md("protocol") + ") 0, item 1)", 0},
		{"docs/compatibility.md", "see ../" + "docs/protocol.md", 0},
		{"internal/x/x.go", "// nats.go, my-" + md("style") + ", CONCURRENCY.md, x.mdx", 0},
		{"internal/x/x.go", "// (" + md("protocol") + " 1.7)", 1},
		{"internal/x/x.go", "// (" + shared + "/" + md("DESIGN") + " section 2)", 2},
		{"internal/x/x.go", "// (" + shared + "/reference/" + md("protocol") + " section 1)", 2},
		{"internal/x/x.go", "// (/work" + "/shared/" + md("DESIGN") + ")", 2},
		{"internal/x/x.go", "// (" + md("reliability") + " S4)", 1},
		{"internal/x/x.go", "// (" + md("operations") + " 5.1; " + md("clustering") + " 1.2; " + md("style") + " rule 9)", 3},
		{"internal/x/x.go", "// " + md("DESIGN") + " section 2", 1},
		{"internal/x/x.go", "// (docs/" + md("reliability") + ")", 1},
		{"internal/x/x.go", "// (reference/" + md("protocol") + " 1.3)", 1},
		{"docs/compatibility.md", "(`" + shared + "/" + md("DESIGN") + "` section 1)", 2},
		{"docs/compatibility.md", "(" + md("DESIGN") + " section 2)", 1},
		{"test/node/x.test.mjs", "// (" + md("protocol") + " sections 3.2 and 5.10)", 1},
	}
	for _, c := range cases {
		if got := citeProblems(c.rel, c.line, exists); len(got) != c.bad {
			t.Errorf("%s %q: %d problems, want %d: %q", c.rel, c.line, len(got), c.bad, got)
		}
	}
}
