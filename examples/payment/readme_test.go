package payment_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEShowsThisCode: every region of this package's code marked
// "README: <name>" stands word for word in README.md or in a page of
// docs/, so the README's workflow, worker and test are the code that
// compiles and runs here.
func TestREADMEShowsThisCode(t *testing.T) {
	showing := pages(t)
	region := regexp.MustCompile(`(?s)// README: (\w+)\n(.*?)// README: end`)
	found := 0
	for _, file := range []string{"payment.go", "payment_test.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range region.FindAllSubmatch(src, -1) {
			found++
			code := strings.TrimSpace(string(m[2]))
			if !shown(showing, code) {
				t.Errorf("neither README.md nor docs/*.md shows the %q region of %s word for word:\n%s", m[1], file, code)
			}
		}
	}
	if found != 3 {
		t.Errorf("found %d README regions, want 3 (workflow, worker, test)", found)
	}
}

// pages returns README.md and every page of docs/, by path: a region
// marked "README: <name>" must stand word for word in one of them.
func pages(t *testing.T) map[string]string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range append([]string{"../../README.md"}, docs...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	return out
}

// shown reports whether one of the pages holds code word for word.
func shown(pages map[string]string, code string) bool {
	for _, text := range pages {
		if strings.Contains(text, code) {
			return true
		}
	}
	return false
}
