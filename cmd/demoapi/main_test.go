package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

func TestParseFlagsDialect(t *testing.T) {
	with := func(d testsuite.Dialect, f func(*testsuite.Dialect)) testsuite.Dialect { f(&d); return d }
	tests := []struct {
		args []string
		want testsuite.Dialect
	}{
		{nil, testsuite.IETFDialect()},
		{[]string{"--dialect", "stripe"}, testsuite.StripeDialect()},
		{[]string{"--dialect=express"}, testsuite.ExpressDialect()},
		{[]string{"--in-flight-retry-after=false"}, with(testsuite.IETFDialect(), func(d *testsuite.Dialect) { d.InFlightRetryAfter = false })},
		{[]string{"--dialect", "stripe", "--in-flight-retry-after"}, with(testsuite.StripeDialect(), func(d *testsuite.Dialect) { d.InFlightRetryAfter = true })},
		{[]string{"--key-header", "PayPal-Request-Id", "--replay-header="}, with(testsuite.IETFDialect(), func(d *testsuite.Dialect) {
			d.KeyHeader, d.ReplayHeader = "PayPal-Request-Id", ""
		})},
		{[]string{"--dialect", "express", "--replay-header", "X-Cache"}, with(testsuite.ExpressDialect(), func(d *testsuite.Dialect) { d.ReplayHeader = "X-Cache" })},
	}
	for _, tt := range tests {
		cfg, err := parseFlags(tt.args, "")
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if cfg.opts.Dialect != tt.want {
			t.Errorf("%q: dialect %+v, want %+v", tt.args, cfg.opts.Dialect, tt.want)
		}
		if cfg.opts.Orphan != nil {
			t.Errorf("%q: orphans without --orphan-prefix", tt.args)
		}
	}
}

func TestParseFlagsErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--dialect", "paypal"},
		{"--lock-timeout", "-1s"},
		{"--failure-rate", "2"},
		{"--script", "abc"},
		{"--no-such-flag"},
		{"stray"},
		{"--async", "soap"},
		{"--async", "azure", "--async-outcome", "maybe"},
	} {
		if _, err := parseFlags(args, ""); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// TestOrphanPrefix: with --dialect express --orphan-prefix, a key with the
// prefix is locked by a first request that is never answered; the next one
// gets express-idempotency's 409, without Retry-After.
func TestOrphanPrefix(t *testing.T) {
	cfg, err := parseFlags([]string{"--dialect", "express", "--orphan-prefix", "orphan-", "--lock-timeout", "1h", "--require-token", "x"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.opts.LockTimeout != time.Hour || cfg.token != "x" {
		t.Fatalf("lock timeout %v, token %q", cfg.opts.LockTimeout, cfg.token)
	}
	srv := testsuite.NewServer(cfg.opts)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Close)
	post := func(c *http.Client, key string) (*http.Response, string, error) {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/payments", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := c.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b), nil
	}
	if _, _, err := post(&http.Client{Timeout: 200 * time.Millisecond}, "orphan-1"); err == nil {
		t.Fatal("the orphaned request was answered")
	}
	resp, body, err := post(http.DefaultClient, "orphan-1")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Retry-After") != "" || body != "A previous request is still in progress for this key.\n" {
		t.Errorf("in flight: %d, Retry-After %q, body %q", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, _, err := post(http.DefaultClient, "other"); err != nil || resp.StatusCode != http.StatusCreated {
		t.Errorf("a key without the prefix: %v %v", resp, err)
	}
}

func TestParseFlagsAsync(t *testing.T) {
	cfg, err := parseFlags([]string{"--async", "operation-location", "--async-duration", "5s", "--async-retry-after", "1", "--async-outcome", "failed", "--async-flaky-polls", "3"}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := testsuite.Async{Style: testsuite.AsyncOperationLocation, Duration: 5 * time.Second, RetryAfter: 1, Outcome: testsuite.OutcomeFailed, FlakyPolls: 3}
	if cfg.opts.Async == nil || *cfg.opts.Async != want {
		t.Errorf("async %+v, want %+v", cfg.opts.Async, want)
	}
	if cfg, _ := parseFlags(nil, ""); cfg.opts.Async != nil {
		t.Errorf("async without --async: %+v", cfg.opts.Async)
	}
}
