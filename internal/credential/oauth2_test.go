package credential

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
)

const (
	testClientID     = "client-abc"
	testClientSecret = "s3cret-client-value-XYZ"
)

// recRedactor records what it was told.
type recRedactor struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (r *recRedactor) Add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	r.seen[s] = true
}

func (r *recRedactor) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[s]
}

// fakeClock is the source's clock in tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// tokenEndpoint is an httptest token endpoint: it checks the client's
// Basic credentials and issues tokens "tok-<n>-…", counting requests.
type tokenEndpoint struct {
	*httptest.Server
	requests atomic.Int64
	inFlight atomic.Int64
	maxIn    atomic.Int64

	mu        sync.Mutex
	expiresIn int           // 0: no expires_in
	tokenType string        // default "Bearer"
	delay     time.Duration // before answering
	gate      chan struct{} // if set, each request waits for it to close
	answer    func(w http.ResponseWriter) bool
}

func newTokenEndpoint(t *testing.T, expiresIn int) *tokenEndpoint {
	e := &tokenEndpoint{expiresIn: expiresIn, tokenType: "Bearer"}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.Close)
	return e
}

func (e *tokenEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	n := e.requests.Add(1)
	in := e.inFlight.Add(1)
	defer e.inFlight.Add(-1)
	for m := e.maxIn.Load(); in > m && !e.maxIn.CompareAndSwap(m, in); m = e.maxIn.Load() {
	}
	e.mu.Lock()
	delay, gate, answer, exp, typ := e.delay, e.gate, e.answer, e.expiresIn, e.tokenType
	e.mu.Unlock()
	time.Sleep(delay)
	if gate != nil {
		<-gate
	}
	if answer != nil && answer(w) {
		return
	}
	id, secret, ok := r.BasicAuth()
	if err := r.ParseForm(); err != nil || !ok || id != testClientID || secret != testClientSecret || r.PostForm.Get("grant_type") != "client_credentials" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
		return
	}
	m := map[string]any{"access_token": fmt.Sprintf("tok-%d-%s", n, strings.Repeat("x", 16)), "token_type": typ}
	if exp > 0 {
		m["expires_in"] = exp
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m)
}

func (e *tokenEndpoint) set(f func(e *tokenEndpoint)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(e)
}

// newTestOAuth2 returns a source on endpoint url with a fake clock.
func newTestOAuth2(t *testing.T, url string) (*oauth2Source, *recRedactor, *fakeClock) {
	t.Helper()
	r := &recRedactor{}
	cfg := &clientcredentials.Config{ClientID: testClientID, ClientSecret: testClientSecret, TokenURL: url, AuthStyle: oauth2.AuthStyleInHeader}
	src, err := NewOAuth2(cfg, &http.Client{Timeout: 10 * time.Second}, r)
	if err != nil {
		t.Fatal(err)
	}
	s := src.(*oauth2Source)
	c := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s.UseClock(c.now)
	return s, r, c
}

// apply calls s.Apply and returns the Authorization header set, checking
// that its token was given to the redactor first.
func applyOAuth(t *testing.T, s *oauth2Source, r *recRedactor) (string, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "https://api.example/pay", nil)
	if err := s.Apply(context.Background(), req, nil); err != nil {
		return "", err
	}
	h := req.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		t.Fatalf("Authorization = %q, want Bearer <token>", h)
	}
	if !r.has(tok) {
		t.Errorf("token %q was applied before the Redactor was told", tok)
	}
	return h, nil
}

// waitIdle waits until no token request is running.
func waitIdle(t *testing.T, s *oauth2Source) {
	t.Helper()
	for i := 0; i < 10000; i++ {
		s.mu.Lock()
		f := s.flight
		s.mu.Unlock()
		if f == nil {
			return
		}
		<-f.done
	}
	t.Fatal("the token request never ended")
}

func TestNewOAuth2Validation(t *testing.T) {
	ok := clientcredentials.Config{ClientID: "id", ClientSecret: "12345678", TokenURL: "https://as.example/token"}
	for _, tc := range []struct {
		name  string
		edit  func(c *clientcredentials.Config)
		field string // "" = valid
	}{
		{"valid", func(*clientcredentials.Config) {}, ""},
		{"relative URL", func(c *clientcredentials.Config) { c.TokenURL = "/token" }, "Credential.OAuth2.TokenURL"},
		{"ftp URL", func(c *clientcredentials.Config) { c.TokenURL = "ftp://as.example/token" }, "Credential.OAuth2.TokenURL"},
		{"empty URL", func(c *clientcredentials.Config) { c.TokenURL = "" }, "Credential.OAuth2.TokenURL"},
		{"user info", func(c *clientcredentials.Config) { c.TokenURL = "https://u:p@as.example/token" }, "Credential.OAuth2.TokenURL"},
		{"no client ID", func(c *clientcredentials.Config) { c.ClientID = " " }, "Credential.OAuth2.ClientID"},
		{"short secret", func(c *clientcredentials.Config) { c.ClientSecret = "1234567" }, "Credential.OAuth2.ClientSecret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			r := &recRedactor{}
			_, err := NewOAuth2(&c, nil, r)
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !r.has(c.ClientSecret) {
					t.Error("the client secret was not given to the Redactor")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("err = %v, want one naming %s", err, tc.field)
			}
			if strings.Contains(err.Error(), c.ClientSecret) || strings.Contains(err.Error(), "u:p@") {
				t.Errorf("err %q holds a secret", err)
			}
		})
	}
	if _, err := NewOAuth2(nil, nil, &recRedactor{}); err == nil {
		t.Error("NewOAuth2(nil) succeeded")
	}
}

func TestOAuth2ExpiryAndEarlyRefresh(t *testing.T) {
	e := newTokenEndpoint(t, 5)
	s, r, clock := newTestOAuth2(t, e.URL)
	h1, err := applyOAuth(t, s, r)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if h, _ := applyOAuth(t, s, r); h != h1 {
			t.Fatalf("token changed within its lifetime: %q then %q", h1, h)
		}
	}
	if n := e.requests.Load(); n != 1 {
		t.Fatalf("token requests = %d, want 1 within the lifetime", n)
	}
	// 5 s lifetime: refreshed from 4.5 s on, in the background, while the
	// current token is still sent.
	clock.advance(4600 * time.Millisecond)
	if h, _ := applyOAuth(t, s, r); h != h1 {
		t.Fatalf("before expiry the current token is sent while refreshing; got %q", h)
	}
	waitIdle(t, s)
	h2, err := applyOAuth(t, s, r)
	if err != nil {
		t.Fatal(err)
	}
	if h2 == h1 || e.requests.Load() != 2 {
		t.Fatalf("after the early refresh: %q (was %q), %d requests; want a new token, 2 requests", h2, h1, e.requests.Load())
	}
	// Past expiry without a refresh: Apply waits for a new token.
	clock.advance(6 * time.Second)
	h3, err := applyOAuth(t, s, r)
	if err != nil {
		t.Fatal(err)
	}
	if h3 == h2 || e.requests.Load() != 3 {
		t.Fatalf("after expiry: %q (was %q), %d requests; want a new token, 3 requests", h3, h2, e.requests.Load())
	}
}

func TestOAuth2NoExpiryReusedUntilInvalid(t *testing.T) {
	e := newTokenEndpoint(t, 0)
	s, r, clock := newTestOAuth2(t, e.URL)
	h1, err := applyOAuth(t, s, r)
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(48 * time.Hour)
	if h, _ := applyOAuth(t, s, r); h != h1 || e.requests.Load() != 1 {
		t.Fatalf("a token without expires_in was not reused: %q, %d requests", h, e.requests.Load())
	}
	sent, _ := http.NewRequest(http.MethodGet, "https://api.example/", nil)
	sent.Header.Set("Authorization", h1)
	if !s.Refresh(context.Background(), sent) {
		t.Fatal("Refresh = false, want a new token")
	}
	if h, _ := applyOAuth(t, s, r); h == h1 || e.requests.Load() != 2 {
		t.Fatalf("after Refresh: %q, %d requests; want a new token, 2 requests", h, e.requests.Load())
	}
}

func TestOAuth2ConcurrentApplyAtExpiry(t *testing.T) {
	e := newTokenEndpoint(t, 5)
	s, r, clock := newTestOAuth2(t, e.URL)
	if _, err := applyOAuth(t, s, r); err != nil {
		t.Fatal(err)
	}
	clock.advance(10 * time.Second) // expired: every Apply must wait
	e.set(func(e *tokenEndpoint) { e.delay = 50 * time.Millisecond })
	const n = 1000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	heads := make(chan string, n)
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, "https://api.example/pay", nil)
			if err := s.Apply(context.Background(), req, nil); err != nil {
				errs <- err
				return
			}
			heads <- req.Header.Get("Authorization")
		})
	}
	wg.Wait()
	close(errs)
	close(heads)
	for err := range errs {
		t.Fatal(err)
	}
	distinct := map[string]bool{}
	for h := range heads {
		distinct[h] = true
	}
	if got := e.requests.Load(); got != 2 || len(distinct) != 1 || e.maxIn.Load() != 1 {
		t.Fatalf("%d concurrent Apply at expiry: %d token requests (want 2 in all), %d distinct tokens (want 1), %d at once (want 1)", n, got, len(distinct), e.maxIn.Load())
	}
}

func TestOAuth2RefreshDedupe(t *testing.T) {
	e := newTokenEndpoint(t, 3600)
	s, r, _ := newTestOAuth2(t, e.URL)
	h1, err := applyOAuth(t, s, r)
	if err != nil {
		t.Fatal(err)
	}
	e.set(func(e *tokenEndpoint) { e.delay = 20 * time.Millisecond })
	sent, _ := http.NewRequest(http.MethodGet, "https://api.example/", nil)
	sent.Header.Set("Authorization", h1)
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 1000 {
		wg.Go(func() {
			if !s.Refresh(context.Background(), sent) {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	if got := e.requests.Load(); got != 2 || refused.Load() != 0 {
		t.Fatalf("1000 Refresh with the same token: %d token requests (want 2 in all), %d false (want 0)", got, refused.Load())
	}
	// The old token again: already replaced, no fetch.
	if !s.Refresh(context.Background(), sent) || e.requests.Load() != 2 {
		t.Fatalf("Refresh with a replaced token fetched again: %d requests", e.requests.Load())
	}
	h2, _ := applyOAuth(t, s, r)
	if h2 == h1 {
		t.Fatal("Apply after Refresh sent the stale token")
	}
}

func TestOAuth2RefreshFailure(t *testing.T) {
	e := newTokenEndpoint(t, 3600)
	s, r, _ := newTestOAuth2(t, e.URL)
	h1, err := applyOAuth(t, s, r)
	if err != nil {
		t.Fatal(err)
	}
	e.set(func(e *tokenEndpoint) {
		e.answer = func(w http.ResponseWriter) bool { w.WriteHeader(http.StatusServiceUnavailable); return true }
	})
	sent, _ := http.NewRequest(http.MethodGet, "https://api.example/", nil)
	sent.Header.Set("Authorization", h1)
	if s.Refresh(context.Background(), sent) {
		t.Fatal("Refresh = true though the token endpoint is down")
	}
	// The stale token is not sent again.
	_, err = applyOAuth(t, s, r)
	var ce *Error
	if !errors.As(err, &ce) || !ce.Retryable {
		t.Fatalf("Apply after a failed refresh: %v, want a retryable *Error", err)
	}
}

// jsonAnswer is a token endpoint's answer: status, headers (name, value,
// …) and a JSON body.
func jsonAnswer(status int, body string, hdr ...string) func(w http.ResponseWriter) bool {
	return func(w http.ResponseWriter) bool {
		w.Header().Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
		return true
	}
}

func TestOAuth2Refusals(t *testing.T) {
	const echo = "ECHOED-BODY-" + testClientSecret
	for _, tc := range []struct {
		name       string
		answer     func(w http.ResponseWriter) bool
		typ        string
		down       bool
		retryable  bool
		status     int
		retryAfter time.Duration
		says       string
	}{
		{"400 invalid_client", jsonAnswer(400, `{"error":"invalid_client","error_description":"client authentication failed","debug":"`+echo+`"}`), "", false, false, 400, 0, "invalid_client (client authentication failed)"},
		{"401 bare", jsonAnswer(401, `{"debug":"`+echo+`"}`), "", false, false, 401, 0, "ClientSecret"},
		{"400 unauthorized_client", jsonAnswer(400, `{"error":"unauthorized_client"}`), "", false, false, 400, 0, "client_credentials grant"},
		{"400 invalid_scope", jsonAnswer(400, `{"error":"invalid_scope"}`), "", false, false, 400, 0, "Scopes"},
		{"500", jsonAnswer(500, `{"debug":"`+echo+`"}`), "", false, true, 500, 0, "HTTP 500"},
		{"503 Retry-After", jsonAnswer(503, `oops`, "Retry-After", "7"), "", false, true, 503, 7 * time.Second, "HTTP 503"},
		{"429 Retry-After", jsonAnswer(429, `{}`, "Retry-After", "2"), "", false, true, 429, 2 * time.Second, "HTTP 429"},
		{"unreachable", nil, "", true, true, 0, 0, "could not be reached"},
		{"token type mac", nil, "mac", false, false, 0, 0, `"mac"`},
		{"malformed JSON", func(w http.ResponseWriter) bool {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token": "`+echo)
			return true
		}, "", false, false, 0, 0, "not an OAuth 2.0 token response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTokenEndpoint(t, 60)
			e.set(func(e *tokenEndpoint) {
				e.answer = tc.answer
				if tc.typ != "" {
					e.tokenType = tc.typ
				}
			})
			url := e.URL
			if tc.down {
				e.Close()
			}
			s, r, clock := newTestOAuth2(t, url)
			_, err := applyOAuth(t, s, r)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if ce.Scheme != "oauth2" || ce.Retryable != tc.retryable || ce.Status != tc.status || ce.RetryAfter != tc.retryAfter {
				t.Errorf("got {%s retryable:%v status:%d retryAfter:%v}, want {oauth2 %v %d %v}", ce.Scheme, ce.Retryable, ce.Status, ce.RetryAfter, tc.retryable, tc.status, tc.retryAfter)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.says) {
				t.Errorf("err %q does not say %q", msg, tc.says)
			}
			// The activity reports it through redact.Err, which
			// hides what follows a "?" as a URL's query: it must read the same.
			if got := redact.Err(err); got != msg {
				t.Errorf("err %q reads %q once its queries are redacted: write no \"?\" in it", msg, got)
			}
			if strings.Contains(msg, "ECHOED") || strings.Contains(msg, testClientSecret[:8]) || strings.Contains(msg, "tok-") {
				t.Errorf("err %q holds the endpoint's body or a secret", msg)
			}
			if tc.typ != "" && !r.has("tok-1-"+strings.Repeat("x", 16)) {
				t.Error("a refused token was not given to the Redactor")
			}
			// Attempts that all fail do not storm the token endpoint.
			before := e.requests.Load()
			for range 100 {
				if _, err := applyOAuth(t, s, r); err == nil {
					t.Fatal("Apply succeeded during the hold")
				}
			}
			if got := e.requests.Load(); got != before {
				t.Errorf("100 Apply after a failure: %d more token requests, want 0 during the hold", got-before)
			}
			clock.advance(oauth2RefusedHold + time.Second)
			_, _ = applyOAuth(t, s, r)
			if got := e.requests.Load(); !tc.down && got != before+1 {
				t.Errorf("after the hold: %d more token requests, want 1", got-before)
			}
		})
	}
}

func TestOAuth2WaiterRespectsContext(t *testing.T) {
	e := newTokenEndpoint(t, 60)
	gate := make(chan struct{})
	e.set(func(e *tokenEndpoint) { e.gate = gate })
	s, r, _ := newTestOAuth2(t, e.URL)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example/pay", nil)
		done <- s.Apply(ctx, req, nil)
	}()
	for e.requests.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	err := <-done
	var ce *Error
	if !errors.As(err, &ce) || !ce.Retryable || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want a retryable *Error wrapping context.Canceled", err)
	}
	close(gate) // the fetch, not cancelled with its starter, serves the next attempt
	waitIdle(t, s)
	if _, err := applyOAuth(t, s, r); err != nil || e.requests.Load() != 1 {
		t.Fatalf("after the fetch: %v, %d token requests; want the token fetched once", err, e.requests.Load())
	}
}

// The token endpoint asks for the secret in the body when AuthStyle says
// so, and scopes and extra parameters reach it.
func TestOAuth2RequestShape(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		got.Store(r.PostForm.Encode())
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"abcdefghijklmnop","token_type":"bearer","expires_in":60}`)
	}))
	defer srv.Close()
	r := &recRedactor{}
	cfg := &clientcredentials.Config{ClientID: testClientID, ClientSecret: testClientSecret, TokenURL: srv.URL, Scopes: []string{"a", "b"},
		EndpointParams: map[string][]string{"audience": {"https://api.example"}}, AuthStyle: oauth2.AuthStyleInParams}
	src, err := NewOAuth2(cfg, srv.Client(), r)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "https://api.example/", nil)
	if err := src.Apply(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if h := req.Header.Get("Authorization"); h != "Bearer abcdefghijklmnop" {
		t.Errorf("Authorization = %q (a lower-case bearer type is Bearer)", h)
	}
	want := "audience=https%3A%2F%2Fapi.example&client_id=client-abc&client_secret=" + testClientSecret + "&grant_type=client_credentials&scope=a+b"
	if got.Load() != want {
		t.Errorf("token request form = %v, want %v", got.Load(), want)
	}
	if _, ok := src.(Refresher); !ok {
		t.Error("the OAuth2 source is not a Refresher")
	}
}

// BenchmarkApply compares Apply of the OAuth 2.0 source, token cached,
// with setting a static bearer header by hand (NewStatic's work).
func BenchmarkApply(b *testing.B) {
	e := &tokenEndpoint{expiresIn: 3600, tokenType: "Bearer"}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	defer e.Close()
	cfg := &clientcredentials.Config{ClientID: testClientID, ClientSecret: testClientSecret, TokenURL: e.URL, AuthStyle: oauth2.AuthStyleInHeader}
	src, err := NewOAuth2(cfg, nil, &recRedactor{})
	if err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "https://api.example/pay", nil)
	ctx := context.Background()
	if err := src.Apply(ctx, req, nil); err != nil {
		b.Fatal(err)
	}
	static := "Bearer " + strings.Repeat("s", 40)
	b.Run("static", func(b *testing.B) {
		for b.Loop() {
			req.Header.Set("Authorization", static)
		}
	})
	b.Run("oauth2", func(b *testing.B) {
		for b.Loop() {
			if err := src.Apply(ctx, req, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A Retry-After is honoured from memory: attempts in the meantime get
// what is left of it, and no token request.
func TestOAuth2RetryAfterHold(t *testing.T) {
	e := newTokenEndpoint(t, 60)
	var busy atomic.Bool
	busy.Store(true)
	e.set(func(e *tokenEndpoint) {
		e.answer = func(w http.ResponseWriter) bool {
			if !busy.Load() {
				return false
			}
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
	})
	s, r, clock := newTestOAuth2(t, e.URL)
	for _, step := range []struct {
		advance time.Duration
		want    time.Duration // RetryAfter; 0: a token
		fetches int64
	}{
		{0, 7 * time.Second, 1},
		{3 * time.Second, 4 * time.Second, 1},
		{3 * time.Second, time.Second, 1},
		{2 * time.Second, 0, 2},
	} {
		clock.advance(step.advance)
		if step.want == 0 {
			busy.Store(false)
		}
		_, err := applyOAuth(t, s, r)
		var ce *Error
		switch {
		case step.want == 0 && err != nil:
			t.Fatalf("after the Retry-After: %v", err)
		case step.want != 0 && (!errors.As(err, &ce) || ce.RetryAfter != step.want || !ce.Retryable):
			t.Fatalf("at +%v: %v, want a retryable *Error with RetryAfter %v", step.advance, err, step.want)
		}
		if got := e.requests.Load(); got != step.fetches {
			t.Fatalf("%d token requests, want %d", got, step.fetches)
		}
	}
}

// An attempt whose deadline is shorter than the token endpoint's answer
// gets a retryable error, and the token request it started still serves
// the next attempts: one request, not one per attempt.
func TestOAuth2ShortAttemptDeadline(t *testing.T) {
	e := newTokenEndpoint(t, 60)
	gate := make(chan struct{})
	e.set(func(e *tokenEndpoint) { e.gate = gate })
	s, r, _ := newTestOAuth2(t, e.URL)
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		req, _ := http.NewRequest(http.MethodPost, "https://api.example/pay", nil)
		err := s.Apply(ctx, req, nil)
		cancel()
		var ce *Error
		if !errors.As(err, &ce) || !ce.Retryable || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("attempt past its deadline: %v, want a retryable *Error wrapping context.DeadlineExceeded", err)
		}
	}
	close(gate)
	waitIdle(t, s)
	if _, err := applyOAuth(t, s, r); err != nil || e.requests.Load() != 1 {
		t.Fatalf("after the answer: %v, %d token requests; want the token of the one request", err, e.requests.Load())
	}
}
