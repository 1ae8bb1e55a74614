package interop_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/harness/interop"
	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
)

// The OAuth 2.0 row: internal/credential's client-credentials Source
// against oidc-provider (interop/node/oauth-server.js), an OpenID-certified
// authorization server, issuing opaque tokens of 5 s. A small Go API in
// front checks every token it receives by the provider's introspection
// endpoint (RFC 7662), answering 401 invalid_token for one that is not
// active; a proxy in front of the token endpoint counts the token
// requests and how many run at once.

const (
	oauthServer    = "oauth-server"
	oauthTTL       = 5 * time.Second
	oauthWorkerID  = "payments-worker"
	oauthWorkerKey = "interop-worker-secret-4f1c9a7e"
	oauthAPIKey    = "interop-api-secret-8d2b6e03"
)

// oauthRow is one row of the OAuth 2.0 table.
type oauthRow struct {
	scenario, outcome string
	ok                bool
}

var oauthResults struct {
	mu   sync.Mutex
	rows []oauthRow
}

func oauthMarkdown() string {
	oauthResults.mu.Lock()
	defer oauthResults.mu.Unlock()
	if len(oauthResults.rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## OAuth 2.0 client credentials\n\ninternal/credential's NewOAuth2 (golang.org/x/oauth2/clientcredentials) against oidc-provider " +
		"(interop/oauth2_test.go, interop/node/oauth-server.js), client-credentials grant only, opaque access tokens of 5 s. " +
		"Every call goes to a Go API that checks its token by the provider's introspection endpoint (401 invalid_token when not active: " +
		"the caller refreshes once and resends); a proxy in front of the token endpoint counts the token requests and how many run at once.\n\n" +
		"| scenario | oidc-provider |\n|---|---|\n")
	for _, r := range oauthResults.rows {
		mark := "✓"
		if !r.ok {
			mark = "✗"
		}
		fmt.Fprintf(&b, "| %s | %s %s |\n", r.scenario, mark, r.outcome)
	}
	return b.String()
}

func addOAuthRow(t *testing.T, scenario, outcome string) {
	t.Logf("%s: %s", scenario, outcome)
	oauthResults.mu.Lock()
	defer oauthResults.mu.Unlock()
	oauthResults.rows = append(oauthResults.rows, oauthRow{scenario, outcome, !t.Failed()})
}

// tokenProxy forwards to the token endpoint, counting.
type tokenProxy struct {
	*httptest.Server
	requests, inFlight, maxIn atomic.Int64
	mu                        sync.Mutex
	statuses                  []int
}

func newTokenProxy(t *testing.T, target string) *tokenProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &tokenProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		in := p.inFlight.Add(1)
		defer p.inFlight.Add(-1)
		for m := p.maxIn.Load(); in > m && !p.maxIn.CompareAndSwap(m, in); m = p.maxIn.Load() {
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		rp.ServeHTTP(sw, r)
		p.mu.Lock()
		p.statuses = append(p.statuses, sw.status)
		p.mu.Unlock()
	}))
	t.Cleanup(p.Close)
	return p
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// introspectingAPI answers 200 to a request whose bearer token the
// provider says is active, else 401 invalid_token.
func introspectingAPI(t *testing.T, issuer string, rejected *atomic.Int64) *httptest.Server {
	hc := &http.Client{Timeout: 10 * time.Second}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if ok && interop.Introspect(r.Context(), hc, issuer, oauthAPIKey, tok) == oauthWorkerID {
			w.WriteHeader(http.StatusOK)
			return
		}
		rejected.Add(1)
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// setRedactor records every secret it is told.
type setRedactor struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (r *setRedactor) Add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[s] = true
}

func (r *setRedactor) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[s]
}

// oauthCall is one API call as the activity makes it: Apply, send, and on
// 401 invalid_token one Refresh and one resend.
func oauthCall(ctx context.Context, src credential.Source, red *setRedactor, api string) (status int, resent bool, err error) {
	for try := 0; ; try++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api+"/payments", nil)
		if err := src.Apply(ctx, req, nil); err != nil {
			return 0, try > 0, err
		}
		if tok, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); !red.has(tok) {
			return 0, try > 0, errors.New("a token was applied before the Redactor was told")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, try > 0, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || try > 0 {
			return resp.StatusCode, try > 0, nil
		}
		if !src.(credential.Refresher).Refresh(ctx, req) {
			// No new token: Apply says why (the token endpoint's error).
			if err := src.Apply(ctx, req, nil); err != nil {
				return 0, false, err
			}
			return resp.StatusCode, false, nil
		}
	}
}

// runOAuthCalls makes n calls from 8 goroutines spread over d, and returns
// how many were authorized (200), resent after a 401, and the errors.
func runOAuthCalls(ctx context.Context, src credential.Source, red *setRedactor, api string, n int, d time.Duration) (ok, resent int, errs []error) {
	const workers = 8
	var mu sync.Mutex
	var wg sync.WaitGroup
	gap := d * workers / time.Duration(n)
	for w := range workers {
		wg.Go(func() {
			time.Sleep(gap * time.Duration(w) / workers)
			for i := w; i < n; i += workers {
				st, re, err := oauthCall(ctx, src, red, api)
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case st == http.StatusOK:
					ok++
				default:
					errs = append(errs, fmt.Errorf("the API answered %d", st))
				}
				if re {
					resent++
				}
				mu.Unlock()
				time.Sleep(gap)
			}
		})
	}
	wg.Wait()
	return ok, resent, errs
}

// TestOAuth2ClientCredentialsOIDCProvider: 200 calls over ~12 s with 5 s
// tokens are all authorized, with about one token request per lifetime,
// never two at once; then the client is removed from the provider and the
// Source reports a final *credential.Error with the provider's error code
// instead of asking again and again.
func TestOAuth2ClientCredentialsOIDCProvider(t *testing.T) {
	t.Parallel()
	as := interop.Start(t, oauthServer, interop.Options{Env: []string{
		"TOKEN_TTL=5", "CLIENT_SECRET=" + oauthWorkerKey, "API_SECRET=" + oauthAPIKey,
	}})
	proxy := newTokenProxy(t, as.URL)
	var rejected atomic.Int64
	api := introspectingAPI(t, as.URL, &rejected)
	red := &setRedactor{seen: map[string]bool{}}
	cfg := &clientcredentials.Config{ClientID: oauthWorkerID, ClientSecret: oauthWorkerKey, TokenURL: proxy.URL + "/token", AuthStyle: oauth2.AuthStyleInHeader}
	src, err := credential.NewOAuth2(cfg, &http.Client{Timeout: 10 * time.Second}, red)
	if err != nil {
		t.Fatal(err)
	}
	if !red.has(oauthWorkerKey) {
		t.Error("the client secret was not given to the Redactor")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	start := time.Now()
	ok, resent, errs := runOAuthCalls(ctx, src, red, api.URL, 200, 12*time.Second)
	run := time.Since(start)
	fetches := proxy.requests.Load()
	most := run.Seconds()/oauthTTL.Seconds() + 2
	for _, err := range errs[:min(len(errs), 5)] {
		t.Error(err)
	}
	if ok != 200 {
		t.Errorf("%d of 200 calls authorized", ok)
	}
	if fetches < 1 || float64(fetches) > most {
		t.Errorf("%d token requests in %.1f s of 5 s tokens, want 1 to %.1f", fetches, run.Seconds(), most)
	}
	if proxy.maxIn.Load() != 1 {
		t.Errorf("%d token requests at once, want 1", proxy.maxIn.Load())
	}
	addOAuthRow(t, "200 calls from 8 goroutines over ~12 s, 5 s tokens",
		fmt.Sprintf("%d/200 authorized (%d resent after 401 invalid_token); %d token requests in %.1f s (run ÷ lifetime = %.1f), at most %d at once",
			ok, resent, fetches, run.Seconds(), run.Seconds()/oauthTTL.Seconds(), proxy.maxIn.Load()))

	oauthRevokedToken(ctx, t, src, red, proxy, as.URL, api.URL)

	// The client is removed from the provider's adapter: its next token
	// request is refused (401 invalid_client).
	resp, err := http.Post(as.URL+"/__revoke", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	before := proxy.requests.Load()
	ok2, _, errs2 := runOAuthCalls(ctx, src, red, api.URL, 80, 8*time.Second)
	after := proxy.requests.Load() - before
	var final *credential.Error
	for _, err := range errs2 {
		var ce *credential.Error
		if !errors.As(err, &ce) {
			t.Errorf("after revocation: %v, want a *credential.Error", err)
			continue
		}
		final = ce
	}
	switch {
	case final == nil:
		t.Error("80 calls after revocation over 8 s (more than a token lifetime): no *credential.Error")
	case final.Retryable || final.Status != http.StatusUnauthorized || !strings.Contains(final.Error(), "invalid_client"):
		t.Errorf("after revocation: %v (retryable %v, status %d), want final, 401, invalid_client", final, final.Retryable, final.Status)
	case strings.Contains(final.Error(), oauthWorkerKey[:8]):
		t.Errorf("the error holds the client secret: %v", final)
	}
	if after < 1 || after > 2 {
		t.Errorf("%d token requests after revocation, want 1 or 2 (no retry storm)", after)
	}
	var msg string
	if final != nil {
		msg = fmt.Sprintf("; *credential.Error{Retryable: %v, Status: %d}: %q", final.Retryable, final.Status, final.Err)
	}
	addOAuthRow(t, "client removed from the provider, then 80 calls over ~8 s",
		fmt.Sprintf("%d authorized with the token held, %d refused%s; %d token requests after the removal", ok2, len(errs2), msg, after))
}

// oauthRevokedToken: the current token is revoked at the provider (RFC
// 7009) in the middle of its life; 16 calls from 8 goroutines get 401
// invalid_token, refresh (one token request for all) and are resent.
func oauthRevokedToken(ctx context.Context, t *testing.T, src credential.Source, red *setRedactor, proxy *tokenProxy, issuer, api string) {
	// A new token first (Refresh with the current one), so that no
	// refresh before expiry falls within the scenario.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api, nil)
	if err := src.Apply(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	if !src.(credential.Refresher).Refresh(ctx, req) {
		t.Fatal("Refresh with the current token: no new token")
	}
	if err := src.Apply(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	tok, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	rv, _ := http.NewRequestWithContext(ctx, http.MethodPost, issuer+"/token/revocation", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	rv.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rv.SetBasicAuth(oauthWorkerID, oauthWorkerKey)
	resp, err := http.DefaultClient.Do(rv)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoking the token: %s", resp.Status)
	}
	before := proxy.requests.Load()
	ok, resent, errs := runOAuthCalls(ctx, src, red, api, 16, 0)
	fetched := proxy.requests.Load() - before
	for _, err := range errs {
		t.Error(err)
	}
	if ok != 16 || resent < 1 || fetched != 1 {
		t.Errorf("after revoking the token: %d/16 authorized, %d resent, %d token requests; want 16, >= 1, 1", ok, resent, fetched)
	}
	addOAuthRow(t, "token revoked at the provider (RFC 7009) mid-life, then 16 calls from 8 goroutines",
		fmt.Sprintf("%d/16 authorized, %d resent after 401 invalid_token and Refresh; %d token request", ok, resent, fetched))
}
