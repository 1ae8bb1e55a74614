package workflows_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// declaredErrTypes returns the values of the ErrType constants declared in
// failure.go, by name, read from the source: a constant added there is
// tested here without a list of its own.
func declaredErrTypes(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "failure.go", nil, 0)
	require.NoError(t, err)
	types := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "ErrType") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				require.True(t, ok, "%s is not a string literal", n.Name)
				types[n.Name] = strings.Trim(lit.Value, `"`)
			}
		}
	}
	require.NotEmpty(t, types)
	return types
}

// TestAsFailureReadsEveryErrorType: every error type the package declares,
// and so every one the activities return, is read by AsFailure, retryable
// or final, through Temporal's failure converter as a workflow sees it,
// OutcomeUnknown included.
func TestAsFailureReadsEveryErrorType(t *testing.T) {
	fc := temporal.GetDefaultFailureConverter()
	for name, typ := range declaredErrTypes(t) {
		for _, final := range []bool{false, true} {
			t.Run(name, func(t *testing.T) {
				appErr := temporal.NewApplicationErrorWithOptions("m", typ, temporal.ApplicationErrorOptions{
					NonRetryable: final, Details: []any{workflows.Failure{Attempt: 2, OutcomeUnknown: true, Reason: "r"}},
				})
				f, ok := workflows.AsFailure(fc.FailureToError(fc.ErrorToFailure(appErr)))
				require.True(t, ok, "AsFailure cannot read a Failure of type %s", typ)
				assert.Equal(t, typ, f.Type)
				assert.Equal(t, !final, f.Retryable)
				assert.True(t, f.OutcomeUnknown)
				assert.Equal(t, int32(2), f.Attempt)
			})
		}
	}
}

// TestActivitiesReturnOnlyDeclaredErrorTypes: the error types the worker
// side returns are ErrType constants (which AsFailure reads, above), never
// a string of its own.
func TestActivitiesReturnOnlyDeclaredErrorTypes(t *testing.T) {
	declared := declaredErrTypes(t)
	values := map[string]bool{}
	for _, v := range declared {
		values[v] = true
	}
	used := regexp.MustCompile(`workflows\.(ErrType\w+)`)
	literal := regexp.MustCompile(`NewApplicationError\w*\(\s*[^,]+,\s*"(\w+)"`)
	files, err := filepath.Glob("../activities/*.go")
	require.NoError(t, err)
	more, err := filepath.Glob("../internal/*/*.go")
	require.NoError(t, err)
	files = append(files, more...)
	var seen []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range used.FindAllStringSubmatch(string(src), -1) {
			_, ok := declared[m[1]]
			assert.True(t, ok, "%s uses %s, which failure.go does not declare", f, m[1])
			seen = append(seen, m[1])
		}
		for _, m := range literal.FindAllStringSubmatch(string(src), -1) {
			assert.True(t, values[m[1]], "%s returns the error type %q, which is no ErrType constant", f, m[1])
		}
	}
	assert.Contains(t, seen, "ErrTypeCredentialUnavailable")
	assert.True(t, slices.Contains(seen, "ErrTypeNotAdmitted"))
}
