package repocheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errorNotLast returns the positions of the function types of f (function
// and method declarations, function literals, interface methods, function
// types) whose results hold an error before the last one, as Go's
// convention and the style checkers' error-return rule want it: errors
// last in every result list.
func errorNotLast(fset *token.FileSet, f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		ft, ok := n.(*ast.FuncType)
		if !ok || ft.Results == nil {
			return true
		}
		var results []ast.Expr
		for _, r := range ft.Results.List {
			for range max(len(r.Names), 1) {
				results = append(results, r.Type)
			}
		}
		for _, t := range results[:len(results)-1] {
			if id, ok := t.(*ast.Ident); ok && id.Name == "error" {
				out = append(out, fset.Position(ft.Pos()).String())
				break
			}
		}
		return true
	})
	return out
}

// TestErrorsLast pins that every function of the module, tests and
// unexported ones included, returns its error last: (resp, done, err), not
// (resp, err, done).
func TestErrorsLast(t *testing.T) {
	fset := token.NewFileSet()
	var bad []string
	for _, path := range goFiles(t, ".go") {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		bad = append(bad, errorNotLast(fset, f)...)
	}
	assert.Empty(t, bad, "these functions return an error before their last result: put the error last")
}

func TestErrorNotLastFinds(t *testing.T) {
	src := `package p

func A() (int, error)              { return 0, nil }
func B() (v int, err error, ok bool) { return }
func C() (error, error)            { return nil, nil }
func D() error                     { return nil }

type I interface{ M() (error, bool) }

type F func() (a, b error, c int)

var g = func() (error, string) { return nil, "" }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	require.NoError(t, err)
	var lines []string
	for _, p := range errorNotLast(fset, f) {
		var line, col int
		_, err := fmt.Sscanf(strings.TrimPrefix(p, "p.go:"), "%d:%d", &line, &col)
		require.NoError(t, err)
		lines = append(lines, fmt.Sprint(line))
	}
	assert.Equal(t, []string{"4", "5", "8", "10", "12"}, lines)
}
