package scriptstest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestNoRaceListHasNoConcurrency: the packages scripts/test runs without the
// race detector start no goroutine and import neither sync nor sync/atomic,
// in their code or their tests, so the detector could report nothing there.
// A package that gains a goroutine must leave the list.
func TestNoRaceListHasNoConcurrency(t *testing.T) {
	root := repoRoot(t)
	script, err := os.ReadFile(filepath.Join(root, "scripts", "test"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\nnorace="([^"]*)"`).FindSubmatch(script)
	if m == nil {
		t.Fatal(`scripts/test has no norace="..." list`)
	}
	const module = "github.com/meridian-crawler/meridian/"
	pkgs := strings.Fields(string(m[1]))
	if len(pkgs) == 0 {
		t.Fatal("scripts/test's norace list is empty: the pattern is wrong")
	}
	for _, pkg := range pkgs {
		rel, ok := strings.CutPrefix(pkg, module)
		if !ok {
			t.Errorf("norace lists %q, not a package of %s", pkg, module)
			continue
		}
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(rel), "*.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("norace lists %s: no Go files in %s (%v)", pkg, rel, err)
			continue
		}
		fset := token.NewFileSet()
		for _, file := range files {
			f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				if path, _ := strconv.Unquote(imp.Path.Value); path == "sync" || path == "sync/atomic" {
					t.Errorf("%s imports %s: %s must run under the race detector", fset.Position(imp.Pos()), path, pkg)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if g, ok := n.(*ast.GoStmt); ok {
					t.Errorf("%s starts a goroutine: %s must run under the race detector", fset.Position(g.Pos()), pkg)
				}
				return true
			})
		}
	}
}
