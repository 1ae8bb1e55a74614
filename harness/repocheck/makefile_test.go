package repocheck

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// root is the module's root, two levels above this package (harness/repocheck).
const root = "../.."

// recipes returns the recipe lines of each target of the Makefile at
// path: the tab-indented lines that follow "name:".
func recipes(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	out := map[string][]string{}
	target := ""
	rule := regexp.MustCompile(`^([A-Za-z0-9_.-]+):`)
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "\t"):
			if target != "" {
				out[target] = append(out[target], strings.TrimSpace(line))
			}
		case rule.MatchString(line) && !strings.Contains(line, ":="):
			target = rule.FindStringSubmatch(line)[1]
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
		default:
			target = ""
		}
	}
	require.NoError(t, s.Err())
	return out
}

// fuzzTarget is one fuzz function of the module: its package directory
// (relative to the root, "./x/y") and name.
type fuzzTarget struct{ dir, name string }

// fuzzTargets lists the module's fuzz functions.
func fuzzTargets(t *testing.T) []fuzzTarget {
	t.Helper()
	fn := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)
	var out []fuzzTarget
	for _, path := range goFiles(t, "_test.go") {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		rel, err := filepath.Rel(root, filepath.Dir(path))
		require.NoError(t, err)
		for _, m := range fn.FindAllSubmatch(b, -1) {
			out = append(out, fuzzTarget{dir: "./" + filepath.ToSlash(rel), name: string(m[1])})
		}
	}
	require.NotEmpty(t, out, "no fuzz target found under %s", root)
	return out
}

// TestMakeTestIsDeterministic pins that the test command (make test, which
// CI runs) runs no coverage-guided fuzzing: a fuzz run can find a new input
// on any run and fail a change that has nothing to do with it. Plain go
// test runs every fuzz target's seed corpus and testdata/fuzz inputs,
// which is deterministic.
func TestMakeTestIsDeterministic(t *testing.T) {
	r := recipes(t, filepath.Join(root, "Makefile"))
	require.Contains(t, r, "test", "the Makefile has no test target")
	for _, line := range r["test"] {
		require.NotRegexp(t, `(^|\s)-fuzz(\s|=|$)`, line,
			"make test runs coverage-guided fuzzing; move it to make fuzz (its seed corpus already runs as a plain test)")
	}
}

// TestMakeFuzzCoversEveryTarget pins that make fuzz, the time-boxed
// fuzzing run before a stop, fuzzes every fuzz target of the module in
// its own package.
func TestMakeFuzzCoversEveryTarget(t *testing.T) {
	r := recipes(t, filepath.Join(root, "Makefile"))
	require.Contains(t, r, "fuzz", "the Makefile has no fuzz target")
	for _, ft := range fuzzTargets(t) {
		want := regexp.MustCompile(`\$\(GO\) test ` + regexp.QuoteMeta(ft.dir) + ` .*-fuzz '\^` + ft.name + `\$\$'`)
		found := false
		for _, line := range r["fuzz"] {
			found = found || want.MatchString(line)
		}
		require.True(t, found, "make fuzz does not fuzz %s in %s: add\n\t$(GO) test %s -run '^$$' -fuzz '^%s$$' -fuzztime $(FUZZTIME)", ft.name, ft.dir, ft.dir, ft.name)
	}
}

// goFiles lists the module's files whose names end in suffix, skipping
// the directories of other modules (bench, tools), testdata, node
// packages, bin and hidden directories.
func goFiles(t *testing.T, suffix string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			switch name := d.Name(); {
			case name == "testdata", name == "node", name == "node_modules", name == "bin", strings.HasPrefix(name, "."):
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, suffix) {
			out = append(out, path)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}
