package repocheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsShowExampleCode pins that the code the README and docs/ show is
// the code that compiles and runs: every region of examples/ marked
// "// README: <name>" … "// README: end" stands word for word in README.md
// or in a page of docs/, and each example keeps the regions it shows.
func TestDocsShowExampleCode(t *testing.T) {
	pages := map[string]string{}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, p := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		pages[p] = string(b)
	}
	shown := func(code string) bool {
		for _, text := range pages {
			if strings.Contains(text, code) {
				return true
			}
		}
		return false
	}
	region := regexp.MustCompile(`(?s)// README: (\w+)\n(.*?)// README: end`)
	for _, tt := range []struct {
		example string
		want    []string
	}{
		{"payment", []string{"declined", "test", "worker", "workflow"}}, // README.md, docs/testing.md
		{"transfer", []string{"test", "worker", "workflow"}},            // docs/long-running.md
		{"capture", []string{"receiver", "test", "workflow"}},           // docs/webhooks.md
		{"ownworker", []string{"main"}},                                 // README.md
		{"ledger", []string{"test", "workflow"}},                        // docs/unknown-outcomes.md
	} {
		t.Run(tt.example, func(t *testing.T) {
			files, err := filepath.Glob(filepath.Join(root, "examples", tt.example, "*.go"))
			require.NoError(t, err)
			var found []string
			for _, file := range files {
				src, err := os.ReadFile(file)
				require.NoError(t, err)
				for _, m := range region.FindAllSubmatch(src, -1) {
					found = append(found, string(m[1]))
					if code := strings.TrimSpace(string(m[2])); !shown(code) {
						t.Errorf("neither README.md nor docs/*.md shows the %q region of %s word for word:\n%s", m[1], file, code)
					}
				}
			}
			slices.Sort(found)
			require.Equal(t, tt.want, found, "the regions of examples/%s", tt.example)
		})
	}
}
