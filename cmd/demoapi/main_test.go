package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/workflows"

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
	want := testsuite.Async{Style: testsuite.AsyncOperationLocation, Duration: 5 * time.Second, RetryAfter: 1, State: workflows.StateFailed, FlakyPolls: 3}
	if cfg.opts.Async == nil || !reflect.DeepEqual(*cfg.opts.Async, want) {
		t.Errorf("async %+v, want %+v", cfg.opts.Async, want)
	}
	if cfg, _ := parseFlags(nil, ""); cfg.opts.Async != nil {
		t.Errorf("async without --async: %+v", cfg.opts.Async)
	}
}

// TestParseFlagsWebhooks: any --webhook-* flag turns webhooks on, with
// the secret read from the environment variable --webhook-secret-env
// names.
func TestParseFlagsWebhooks(t *testing.T) {
	t.Setenv("WEBHOOK_SECRET", "whsec_MDEyMzQ1Njc4OWFiY2RlZg==")
	t.Setenv("OTHER_SECRET", "plain")
	tests := []struct {
		args []string
		want *testsuite.Webhooks
	}{
		{nil, nil},
		{[]string{"--async", "azure"}, nil},
		{[]string{"--webhook-url", "http://127.0.0.1:9/hooks"}, &testsuite.Webhooks{
			URL: "http://127.0.0.1:9/hooks", Scheme: "standard-webhooks", Secret: "whsec_MDEyMzQ1Njc4OWFiY2RlZg==",
			State: workflows.StateSucceeded, Deliveries: 1,
		}},
		{[]string{
			"--webhook-url", "https://example.test/h?x=1", "--webhook-scheme", "hmac", "--webhook-secret-env", "OTHER_SECRET",
			"--webhook-duration", "5s", "--webhook-outcome", "canceled", "--webhook-deliveries", "3", "--webhook-progress",
			"--webhook-shuffle", "--webhook-jitter", "20ms", "--webhook-forged", "2", "--webhook-stale", "1", "--webhook-drop-rate", "0.25",
		}, &testsuite.Webhooks{
			URL: "https://example.test/h?x=1", Scheme: "hmac", Secret: "plain", Duration: 5 * time.Second,
			State: workflows.StateCanceled, Deliveries: 3, Progress: true, Shuffle: true, Jitter: 20 * time.Millisecond,
			Forged: 2, Stale: 1, DropRate: 0.25,
		}},
		{[]string{"--webhook-scheme", "stripe"}, &testsuite.Webhooks{
			Scheme: "stripe", Secret: "whsec_MDEyMzQ1Njc4OWFiY2RlZg==", State: workflows.StateSucceeded, Deliveries: 1,
		}},
	}
	for _, tt := range tests {
		cfg, err := parseFlags(tt.args, "")
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		switch got := cfg.opts.Webhooks; {
		case tt.want == nil && got != nil:
			t.Errorf("%q: webhooks %+v, want none", tt.args, *got)
		case tt.want != nil && (got == nil || *got != *tt.want):
			t.Errorf("%q: webhooks %+v, want %+v", tt.args, got, *tt.want)
		}
	}
}

func TestParseFlagsWebhooksErrors(t *testing.T) {
	t.Setenv("WEBHOOK_SECRET", "whsec_MDEyMzQ1Njc4OWFiY2RlZg==")
	t.Setenv("EMPTY_SECRET", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--webhook-url", "http://x/h", "--webhook-secret-env", "EMPTY_SECRET"}, "EMPTY_SECRET"},
		{[]string{"--webhook-url", "http://x/h", "--async", "location"}, "pick one"},
		{[]string{"--webhook-scheme", "svix"}, `Scheme "svix"`},
		{[]string{"--webhook-outcome", "never"}, `State "never"`},
		{[]string{"--webhook-drop-rate", "2"}, "DropRate"},
		{[]string{"--webhook-deliveries", "0"}, "--webhook-deliveries 0"},
		{[]string{"--webhook-url", "x/h"}, "absolute"},
		{[]string{"--webhook-stale", "-1"}, "Stale"},
	} {
		_, err := parseFlags(tc.args, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one saying %q", tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "MDEyMzQ1") {
			t.Errorf("%q: the error shows the secret: %v", tc.args, err)
		}
	}
}

// TestWebhooksEndToEnd: the server of a parsed command line sends the
// HMAC-signed webhook of an operation to --webhook-url.
func TestWebhooksEndToEnd(t *testing.T) {
	t.Setenv("HOOK_SECRET", "s3cret")
	got := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m := hmac.New(sha256.New, []byte("s3cret"))
		m.Write(body)
		if r.Header.Get("X-Signature") != hex.EncodeToString(m.Sum(nil)) {
			w.WriteHeader(http.StatusBadRequest)
			got <- "bad signature"
			return
		}
		got <- string(body)
	}))
	t.Cleanup(receiver.Close)
	cfg, err := parseFlags([]string{"--webhook-url", receiver.URL, "--webhook-scheme", "hmac", "--webhook-secret-env", "HOOK_SECRET"}, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := testsuite.NewServer(cfg.opts)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/payments", strings.NewReader(`{"metadata":{"order":"o-1"}}`))
	req.Header.Set("Idempotency-Key", "k1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("start: %d", resp.StatusCode)
	}
	select {
	case body := <-got:
		if !strings.Contains(body, `"type":"operation.succeeded"`) || !strings.Contains(body, `"metadata":{"order":"o-1"}`) {
			t.Errorf("webhook %s", body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no webhook")
	}
}

// TestParseFlagsScriptAccumulates (issue 30, item 10): --script given
// twice plays both, in order.
func TestParseFlagsScriptAccumulates(t *testing.T) {
	cfg, err := parseFlags([]string{"--script", "503,429:1", "--script", "201"}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []testsuite.Step{{Status: 503}, {Status: 429, RetryAfter: "1"}, {Status: 201}}
	if !reflect.DeepEqual(cfg.steps, want) {
		t.Errorf("steps %+v, want %+v", cfg.steps, want)
	}
}
