package apicheck

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite api/v1.txt with the listing of the public API as it is")

// listingFile is the checked-in listing, relative to the module root.
const listingFile = "api/v1.txt"

// TestAPI compares the listing of the public packages with the checked-in
// one: a change to the public API must come with the change of the file.
func TestAPI(t *testing.T) {
	root, modPath, err := ModuleRoot(".")
	require.NoError(t, err)
	lines, err := Listing(root)
	require.NoError(t, err)
	require.NotEmpty(t, lines, "no public package found")
	want := Render(modPath, lines)
	file := filepath.Join(root, filepath.FromSlash(listingFile))

	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
		require.NoError(t, os.WriteFile(file, want, 0o644))
		t.Logf("wrote %s: %d lines", listingFile, len(lines))
		return
	}

	const msg = "the public API changed: if that is deliberate, run `go test ./harness/apicheck -update` and commit " + listingFile
	got, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		t.Fatalf("%s is missing; %s", listingFile, msg)
	}
	require.NoError(t, err)
	if bytes.Equal(got, want) {
		return
	}
	if d := Diff(listingFile, "the source", Parse(got), lines); d != "" {
		t.Fatalf("%s\n\n%s", msg, d)
	}
	t.Fatalf("%s is not as -update writes it (header, order or duplicates); run `go test ./harness/apicheck -update` and commit it", listingFile)
}

// maxTopLevel is the most exported top-level identifiers the public
// packages may have together (issue 40: "at most 120, with no capability
// lost"). A new one is a reason to take one out, or to raise this with
// the reason in CHANGELOG.md: 122 for testsuite.PlainDialect and
// CutAfterWork, 127 for workflows.Reconcile and the four error types of
// reconciling (issue 41).
const maxTopLevel = 127

// TestAPIBudget counts the exported top-level identifiers of the public
// packages (the header of api/v1.txt states the count) against
// maxTopLevel.
func TestAPIBudget(t *testing.T) {
	root, _, err := ModuleRoot(".")
	require.NoError(t, err)
	lines, err := Listing(root)
	require.NoError(t, err)
	counts := TopLevel(lines)
	if n := Total(counts); n > maxTopLevel {
		t.Fatalf("the public packages export %d top-level identifiers (%v), more than %d: unexport one, or say in CHANGELOG.md why the API needs more and raise maxTopLevel", n, counts, maxTopLevel)
	}
}

func TestTopLevel(t *testing.T) {
	lines := []string{
		"pkg p, const A = 1",
		"pkg p, func F(int, string) (T, error)",
		"pkg p, method (*T) M()",
		"pkg p, type Pair[K, V any] struct",
		"pkg p, type Pair[K, V any] struct, Key K",
		"pkg p, type Set map[string, struct{}]",
		"pkg p, type T struct",
		"pkg p, type T struct, Nested struct, with a comma",
		"pkg p, type T struct, embedded E",
		"pkg p, type I interface",
		"pkg p, type I interface, M(int, int) error",
		"pkg p, type X = other.Y",
		"pkg q, var V int",
	}
	counts := TopLevel(lines)
	assert.Equal(t, map[string]int{"p": 7, "q": 1}, counts)
	assert.Equal(t, 8, Total(counts))
}

// lister is shared by the tests of snippets: it loads each package of the
// standard library their constants refer to once.
var lister = sync.OnceValue(func() *Lister { return NewLister("", "") })

// list returns the listing of a package made of the given sources.
func list(t *testing.T, srcs ...string) []string {
	t.Helper()
	l := lister()
	var files []*ast.File
	for i, src := range srcs {
		f, err := parser.ParseFile(l.FileSet(), string(rune('a'+i))+".go", src, parser.SkipObjectResolution)
		require.NoError(t, err)
		files = append(files, f)
	}
	return l.List("p", "example.com/p", files)
}

func TestListingLines(t *testing.T) {
	src := `package p

import (
	"context"
	"time"
	other "example.com/other"
)

const (
	A = "a"
	B Kind = iota
	C
	hidden = 1
	D = time.Second * 2
	E = other.Value
	F other.Kind = 3
)

const G, H = 1.5, 'x'

var V = New
var W, X int
var Y = other.Make()

type Kind int

type Config struct {
	Name    string ` + "`json:\"name\"`" + `
	Retries int    ` + "`json:\"retries,omitempty\"`" + `
	A, B    []*other.Thing
	hidden  int
	*Embedded
	Inline struct {
		X int ` + "`json:\"x\"`" + `
	}
}

type Embedded struct{}

type Doer interface {
	Do(ctx context.Context, in string) (out *Config, err error)
	fmt.Stringer
	private()
}

type Number interface{ ~int | ~float64 }

type Option func(*Config)

type Alias = Config

type Pair[K comparable, V any] struct{ Key K }

type hiddenType struct{}

func (hiddenType) Exported() {}

func New(cfg Config, opts ...Option) (*Config, error) { return nil, nil }

func Map[T, U any](xs []T, f func(x T) U) []U { return nil }

func (c *Config) Run(ctx context.Context, a, b int) error { return nil }

func (c Config) private() {}

func (p *Pair[K, V]) Get() (k K, ok bool) { return }

func (Kind) String() string { return "" }

func unexported() {}
`
	want := []string{
		`pkg p, const A = "a"`,
		`pkg p, const B Kind = 1`,
		`pkg p, const C Kind = 2`,
		`pkg p, const D time.Duration = 2000000000`,
		`pkg p, const E = other.Value`,
		`pkg p, const F other.Kind = 3`,
		`pkg p, const G = 3/2`,
		`pkg p, const H = 120`,
		`pkg p, func Map[T, U any]([]T, func(T) U) []U`,
		`pkg p, func New(Config, ...Option) (*Config, error)`,
		`pkg p, method (*Config) Run(context.Context, int, int) error`,
		`pkg p, method (*Pair[K, V]) Get() (K, bool)`,
		`pkg p, method (Kind) String() string`,
		`pkg p, type Alias = Config`,
		`pkg p, type Config struct`,
		`pkg p, type Config struct, A []*other.Thing`,
		`pkg p, type Config struct, B []*other.Thing`,
		`pkg p, type Config struct, Inline struct{X int ` + "`json:\"x\"`" + `}`,
		`pkg p, type Config struct, Name string json:"name"`,
		`pkg p, type Config struct, Retries int json:"retries,omitempty"`,
		`pkg p, type Config struct, embedded *Embedded`,
		`pkg p, type Doer interface`,
		`pkg p, type Doer interface, Do(context.Context, string) (*Config, error)`,
		`pkg p, type Doer interface, embedded fmt.Stringer`,
		`pkg p, type Doer interface, unexported methods`,
		`pkg p, type Embedded struct`,
		`pkg p, type Kind int`,
		`pkg p, type Number interface`,
		`pkg p, type Number interface, embedded ~int | ~float64`,
		`pkg p, type Option func(*Config)`,
		`pkg p, type Pair[K comparable, V any] struct`,
		`pkg p, type Pair[K comparable, V any] struct, Key K`,
		`pkg p, var V func(Config, ...Option) (*Config, error)`,
		`pkg p, var W int`,
		`pkg p, var X int`,
		`pkg p, var Y = other.Make()`,
	}
	assert.Equal(t, want, list(t, src))
}

// TestListingChanges checks that the listing changes with the public API,
// and only with it.
func TestListingChanges(t *testing.T) {
	const base = `package p

import "time"

// ErrType is recorded in workflow histories.
const ErrType = "Timeout"

const Window = 24 * time.Hour

type Response struct {
	Status int ` + "`json:\"status\"`" + `
	body   []byte
}

func Do(r *Response) error { return nil }

func helper() int { return 1 }
`
	tests := []struct {
		name    string
		old     string // replaced in base
		new     string
		changes bool
	}{
		{"new exported func", "func helper", "func Extra() {}\n\nfunc helper", true},
		{"changed const value", `"Timeout"`, `"Deadline"`, true},
		{"changed const value from another package", "24 * time.Hour", "24 * time.Minute", true},
		{"changed json tag", "json:\"status\"", "json:\"code\"", true},
		{"json tag added option", "json:\"status\"", "json:\"status,omitempty\"", true},
		{"changed field type", "Status int", "Status int64", true},
		{"changed parameter", "Do(r *Response)", "Do(r Response)", true},
		{"renamed parameter", "Do(r *Response)", "Do(resp *Response)", false},
		{"changed result", ") error { return nil }", ") (int, error) { return 0, nil }", true},
		{"new exported field", "body   []byte", "body   []byte\n\tHeader map[string]string", true},
		{"unexported field", "body   []byte", "body   string", false},
		{"unexported func", "func helper() int { return 1 }", "func helper() string { return \"\" }", false},
		{"body of an exported func", "error { return nil }", "error { _ = helper(); return nil }", false},
		{"comment", "// ErrType is recorded", "// ErrType, recorded", false},
		{"equal value written otherwise", "24 * time.Hour", "1440 * time.Minute", false},
	}
	before := list(t, base)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(base, tt.old, tt.new, 1)
			require.NotEqual(t, base, src, "the change %q does not apply", tt.old)
			after := list(t, src)
			if tt.changes {
				assert.NotEqual(t, before, after, "the listing missed the change")
			} else {
				assert.Equal(t, before, after, "the listing changed without an API change")
			}
		})
	}
}

// TestPackages checks which directories of a module are listed.
func TestPackages(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) { writeFile(t, root, rel, content) }
	write("go.mod", "module example.com/m // the module\n\ngo 1.26\n")
	write("m.go", "package m\n\nfunc Root() {}\n")
	write("pub/a.go", "package pub\n\nfunc A() {}\n")
	write("pub/deeper/b.go", "package deeper\n\nconst B = 1\n")
	write("pub/deeper/internal/x/x.go", "package x\n\nfunc X() {}\n")
	write("pub/onlytests/t_test.go", "package onlytests\n\nfunc T() {}\n")
	write("pub/testdata/d.go", "package d\n\nfunc D() {}\n")
	write("pub/other/w.go", "//go:build windows\n\npackage other\n\nfunc W() {}\n")
	write("internal/i/i.go", "package i\n\nfunc I() {}\n")
	write("cmd/tool/main.go", "package main\n\nfunc main() {}\n")
	write("worker/main.go", "package main\n\nfunc main() {}\n")
	write("examples/e/e.go", "package e\n\nfunc E() {}\n")
	write("harness/h/h.go", "package h\n\nfunc H() {}\n")
	write("nested/go.mod", "module example.com/nested\n")
	write("nested/n.go", "package nested\n\nfunc N() {}\n")
	write(".hidden/h.go", "package h\n\nfunc H() {}\n")
	write("lib/cmd/c.go", "package cmd\n\nfunc C() {}\n") // only top-level cmd is skipped

	sub := filepath.Join(root, "pub", "deeper")
	gotRoot, modPath, err := ModuleRoot(sub)
	require.NoError(t, err)
	assert.Equal(t, root, gotRoot)
	assert.Equal(t, "example.com/m", modPath)

	lines, err := Listing(sub)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"pkg example.com/m, func Root()",
		"pkg lib/cmd, func C()",
		"pkg pub, func A()",
		"pkg pub/deeper, const B = 1",
	}, lines)
}

// TestModuleConstants checks that a constant defined from one of the
// module's own packages, internal ones included, is listed with its value,
// so that changing the value there changes the listing.
func TestModuleConstants(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) { writeFile(t, root, rel, content) }
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	write("internal/req/req.go", "package req\n\nimport \"time\"\n\nconst Interval = 200 * time.Millisecond\n\nfunc Unused() {}\n")
	write("pub/p.go", "package pub\n\nimport \"example.com/m/internal/req\"\n\nconst Interval = req.Interval\n")
	lines, err := Listing(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"pkg pub, const Interval time.Duration = 200000000"}, lines)
}

func TestDiff(t *testing.T) {
	old := []string{"pkg p, const A = 1", "pkg p, func F()", "pkg p, type T struct"}
	new := []string{"pkg p, const A = 2", "pkg p, func F()", "pkg p, type T struct", "pkg p, type U int"}
	assert.Equal(t, "--- old\n+++ new\n"+
		"-pkg p, const A = 1\n"+
		"+pkg p, const A = 2\n"+
		"+pkg p, type U int\n", Diff("old", "new", old, new))
	assert.Empty(t, Diff("old", "new", old, slices.Clone(old)))
}

func TestParseRender(t *testing.T) {
	lines := []string{"pkg a, func F()", "pkg b, var V int"}
	data := Render("example.com/m", lines)
	assert.True(t, strings.HasPrefix(string(data), "# "))
	assert.Contains(t, string(data), "# 2 exported top-level identifiers (a 1, b 1), 2 lines.\n")
	assert.Equal(t, lines, Parse(data))
}

// writeFile writes content to rel below root, making its directories.
func writeFile(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}
