package repocheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// docPages lists the Markdown pages whose links are checked: the README,
// every page of docs/, the changelog and CONTRIBUTING.md.
func docPages(t *testing.T, dir string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(dir, "docs", "*.md"))
	require.NoError(t, err)
	pages := []string{"README.md", "CHANGELOG.md", "CONTRIBUTING.md"}
	for i, p := range pages {
		pages[i] = filepath.Join(dir, p)
	}
	return append(pages, docs...)
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	inlineCode = regexp.MustCompile("`+[^`]*`+")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	link       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// prose returns the lines of a Markdown file outside fenced code blocks.
func prose(text string) []string {
	var out []string
	inFence := false
	for line := range strings.SplitSeq(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if !inFence {
			out = append(out, line)
		}
	}
	return out
}

// slug is the anchor GitHub makes of a heading: lower case, every
// character but letters, digits, spaces, '-' and '_' dropped, spaces
// turned into '-'.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown file's headings; a repeated
// heading gets "-1", "-2", … as on GitHub.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(text) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// brokenLinks returns every relative link of the pages that names no
// existing file, or an anchor its Markdown target has no heading for, and
// how many relative links it checked.
func brokenLinks(t *testing.T, pages []string) (broken []string, checked int) {
	t.Helper()
	for _, page := range pages {
		text, err := os.ReadFile(page)
		require.NoError(t, err)
		for n, line := range prose(string(text)) {
			line = inlineCode.ReplaceAllString(line, "")
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if scheme.MatchString(target) {
					continue // http:, https:, mailto:
				}
				checked++
				path, anchor, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
				}
				where := page + ", prose line " + strconv.Itoa(n+1) + ": " + target
				dest, err := os.ReadFile(file)
				if err != nil {
					if _, statErr := os.Stat(file); statErr != nil {
						broken = append(broken, where+" (no such file)")
						continue
					}
				}
				if anchor != "" && (!strings.HasSuffix(file, ".md") || !anchors(string(dest))[anchor]) {
					broken = append(broken, where+" (no such heading)")
				}
			}
		}
	}
	return broken, checked
}

// TestDocLinksResolve: every relative link of the README and the docs
// pages names a file that exists and, with an anchor, a heading of it.
func TestDocLinksResolve(t *testing.T) {
	broken, checked := brokenLinks(t, docPages(t, root))
	require.Empty(t, broken, "links that resolve to nothing: fix the path or the anchor (GitHub's: the heading in lower case, spaces as '-', punctuation dropped)")
	require.Greater(t, checked, 30, "the pages' relative links were not found")
}

// TestBrokenLinksFound: the check reports a missing file, a missing
// heading and an anchor in this page, and passes the links that resolve.
func TestBrokenLinksFound(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	write("docs/a.md", "# A\n\n## Classification (one place: `activities/outcome.go`)\n\n## Twice\n\n## Twice\n")
	write("src/x.go", "package x\n")
	write("README.md", strings.Join([]string{
		"[ok](docs/a.md#classification-one-place-activitiesoutcomego)",
		"[ok](docs/a.md#twice-1) [ok](src/x.go) [ok](#readme) [ok](https://example.com/#nothing)",
		"`[code](nowhere.md)`",
		"```",
		"[fenced](nowhere.md)",
		"```",
		"# Readme",
		"[bad](docs/missing.md)",
		"[bad](docs/a.md#twice-2)",
		"[bad](#nothing)",
	}, "\n"))
	write("CHANGELOG.md", "")
	write("CONTRIBUTING.md", "")
	broken, checked := brokenLinks(t, docPages(t, dir))
	require.Equal(t, 7, checked) // the https link is not checked
	require.Len(t, broken, 3, "broken: %q", broken)
	for i, want := range []string{"docs/missing.md (no such file)", "docs/a.md#twice-2 (no such heading)", "#nothing (no such heading)"} {
		require.True(t, strings.HasSuffix(broken[i], want), "broken[%d] = %q, want …%q", i, broken[i], want)
	}
}

// TestSlug: anchors as GitHub makes them from the docs' own headings.
func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Classification (one place: `activities/outcome.go`)", "classification-one-place-activitiesoutcomego"},
		{"Admission: the API's capacity, learned per origin", "admission-the-apis-capacity-learned-per-origin"},
		{"Backoff, `Retry-After` and deadlines", "backoff-retry-after-and-deadlines"},
		{"What the server must do (the reference server in `testsuite`)", "what-the-server-must-do-the-reference-server-in-testsuite"},
		{"Quick start", "quick-start"},
		{"snake_case and-dash", "snake_case-and-dash"},
	} {
		require.Equal(t, c.want, slug(c.heading), c.heading)
	}
}
