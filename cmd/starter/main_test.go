package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no url", []string{"--body", "{}"}, "--url is required"},
		{"body not JSON", []string{"--url", "http://127.0.0.1:1/x", "--body", "{amount:"}, "request body is not valid JSON"},
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr.String(), tt.want)
			assert.Empty(t, stdout.String(), "nothing on stdout on failure")
		})
	}
}

func TestParseFlagsFollow(t *testing.T) {
	var stderr bytes.Buffer
	cfg, ok := parseFlags([]string{"--url", "http://127.0.0.1:1/transfers", "--follow", "--follow-timeout", "2h"}, &stderr)
	assert.True(t, ok, stderr.String())
	if assert.NotNil(t, cfg.req.Follow) {
		assert.Equal(t, 2*time.Hour, cfg.req.Follow.Timeout)
	}
	cfg, ok = parseFlags([]string{"--url", "http://127.0.0.1:1/transfers"}, &stderr)
	assert.True(t, ok)
	assert.Nil(t, cfg.req.Follow, "no following without --follow")
}

// TestUILink: the link goes to the Web UI the flag or TEMPORAL_UI_URL
// names; without one, to the UI derived from the frontend's address
// (Temporal Cloud's, or the dev server's port + 1000) when it answers;
// when none answers there, no dead link but how to set it.
func TestUILink(t *testing.T) {
	const path = "/namespaces/default/workflows/wf-1/run-1/history"
	for _, tc := range []struct {
		name, set, hostPort string
		answers             bool
		want                string
		probed              string
	}{
		{"the flag, not probed", "http://localhost:18233/", "localhost:7233", false, "Web UI: http://localhost:18233" + path, ""},
		{"derived from the default frontend", "", "", true, "Web UI: http://localhost:8233" + path, "http://localhost:8233"},
		{"derived from a dev server on another port", "", "127.0.0.1:17233", true, "Web UI: http://127.0.0.1:18233" + path, "http://127.0.0.1:18233"},
		{"IPv6 frontend", "", "[::1]:7233", true, "Web UI: http://[::1]:8233" + path, "http://[::1]:8233"},
		{"Temporal Cloud", "", "default.acct.tmprl.cloud:7233", false, "Web UI: https://cloud.temporal.io" + path, ""},
		{"nothing answers where derived", "", "127.0.0.1:7233", false,
			"Web UI: nothing answers at http://127.0.0.1:8233 (a dev server's default for the frontend 127.0.0.1:7233: its port + 1000); set --ui or TEMPORAL_UI_URL to the Web UI's address for a link", "http://127.0.0.1:8233"},
		{"a frontend without a port", "", "temporal.internal", true,
			"Web UI: no address derived from the frontend temporal.internal; set --ui or TEMPORAL_UI_URL to the Web UI's address for a link", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var probed string
			var b bytes.Buffer
			printUILink(&b, tc.set, tc.hostPort, "default", "wf-1", "run-1", func(base string) bool { probed = base; return tc.answers })
			assert.Equal(t, tc.want+"\n", b.String())
			assert.Equal(t, tc.probed, probed)
		})
	}
}

// TestUIFlagDefault: --ui defaults to TEMPORAL_UI_URL, else to nothing
// (derived when the link is printed), never to a fixed port.
func TestUIFlagDefault(t *testing.T) {
	for _, env := range []string{"", "http://ui.example:8080"} {
		t.Setenv("TEMPORAL_UI_URL", env)
		var stderr bytes.Buffer
		cfg, ok := parseFlags([]string{"--url", "http://127.0.0.1:1/x"}, &stderr)
		assert.True(t, ok, stderr.String())
		assert.Equal(t, env, cfg.uiURL)
	}
}

// TestUIAnswers: a UI that answers counts; a closed port or an error
// status does not.
func TestUIAnswers(t *testing.T) {
	ui := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
		}
	}))
	notUI := httptest.NewServer(http.NotFoundHandler())
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	t.Cleanup(ui.Close)
	t.Cleanup(notUI.Close)
	assert.True(t, uiAnswers(ui.URL))
	assert.False(t, uiAnswers(notUI.URL))
	assert.False(t, uiAnswers(closed.URL))
}

// TestParseFlagsListsAccumulate (issue 30, item 10): --await-webhook and
// --webhook-failed given twice keep both, commas split as well.
func TestParseFlagsListsAccumulate(t *testing.T) {
	var stderr bytes.Buffer
	cfg, ok := parseFlags([]string{"--url", "http://127.0.0.1:1/charges",
		"--await-webhook", "charge.succeeded", "--await-webhook", "charge.captured,charge.settled",
		"--webhook-failed", "charge.failed", "--webhook-failed", "charge.expired"}, &stderr)
	require.True(t, ok, stderr.String())
	require.NotNil(t, cfg.req.Webhook)
	assert.Equal(t, []string{"charge.succeeded", "charge.captured", "charge.settled"}, cfg.req.Webhook.Succeeded)
	assert.Equal(t, []string{"charge.failed", "charge.expired"}, cfg.req.Webhook.Failed)
}
