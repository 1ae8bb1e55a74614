package main

import (
	"bytes"
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
