package scriptstest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestWrapsKeepTheCause: no fmt.Errorf that wraps a sentinel with %w
// formats another error with %v, which would hide the cause from
// errors.Is and errors.As (a caller branching on a context's end, a
// guard or a network error would not see it): the cause is wrapped too
// ("%w: %w"). An argument counts as an error when it is named err, or is
// a call of Err() or a selector ending in err. A retry loop's "%w (last:
// %v)" is meant: the cause is the context's end, and the last attempt's
// error is only told (a caller must not take it for retryable).
func TestWrapsKeepTheCause(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Errorf" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "fmt" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			format, err := strconv.Unquote(lit.Value)
			if err != nil || !strings.Contains(format, "%w") {
				return true
			}
			for i, verb := range verbs(format) {
				if verb == 'v' && !lastAttempt(format, i) && i+1 < len(call.Args) && isErrorArg(call.Args[i+1]) {
					bad = append(bad, fset.Position(call.Pos()).String())
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		rel, _ := filepath.Rel(root, b)
		t.Errorf("%s: an error formatted with %%v beside a %%w: wrap it with %%w", rel)
	}
}

// verbs returns the verbs of a format string in order (%% is none).
func verbs(format string) []byte {
	var out []byte
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("+-# 0123456789.*[]", format[j]) >= 0 {
			j++
		}
		if j < len(format) && format[j] != '%' {
			out = append(out, format[j])
		}
		i = j
	}
	return out
}

// lastAttempt reports whether verb i of format is a retry loop's "(last: %v)".
func lastAttempt(format string, i int) bool {
	at := -1
	for k := 0; k <= i; k++ {
		j := strings.IndexByte(format[at+1:], '%')
		if j < 0 {
			return false
		}
		at += 1 + j
		if strings.HasPrefix(format[at:], "%%") {
			at++
			k--
		}
	}
	return strings.HasSuffix(format[:at], "(last: ")
}

// isErrorArg reports whether an argument looks like an error value.
func isErrorArg(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name == "err" || strings.HasSuffix(x.Name, "Err")
	case *ast.SelectorExpr:
		return x.Sel.Name == "err" || strings.HasSuffix(x.Sel.Name, "Err")
	case *ast.CallExpr:
		if s, ok := x.Fun.(*ast.SelectorExpr); ok {
			return s.Sel.Name == "Err"
		}
	}
	return false
}
