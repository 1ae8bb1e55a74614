package repocheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsShowOriginsFile pins that the origins file docs/credentials.md
// shows is the one the worker's tests parse and validate
// (host/testdata/origins.toml, TestOriginsExample): the page holds it
// word for word in a ```toml block.
func TestDocsShowOriginsFile(t *testing.T) {
	example, err := os.ReadFile(filepath.Join(root, "host", "testdata", "origins.toml"))
	require.NoError(t, err)
	page, err := os.ReadFile(filepath.Join(root, "docs", "credentials.md"))
	require.NoError(t, err)
	block := "```toml\n" + string(example) + "```\n"
	if !strings.Contains(string(page), block) {
		t.Errorf("docs/credentials.md does not show host/testdata/origins.toml word for word in a ```toml block; copy it there:\n%s", example)
	}
}
