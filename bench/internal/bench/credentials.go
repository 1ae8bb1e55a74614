package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/registered"
)

// The credentials of the credential rows: a static bearer token, and an
// OAuth 2.0 client whose token endpoint issues tokens of an hour, so that
// the loops measure the cached path (one token request in the whole run).
const (
	credStaticToken  = "sk_bench_static_4f3e2d1c0b9a8877"
	credClientSecret = "cs_bench_5e6f7a8b9c0d1e2f"
	credTokenLife    = 3600 // seconds
)

// CredentialOverhead compares one attempt of Activities.Do whose origin's
// credential is a static bearer header (Static, the baseline) with one
// whose credential is OAuth 2.0 client credentials (OAuth2), against the
// overhead section's server, in interleaved rounds. TokenRequests is what
// the token endpoint received during the whole run (warm-ups included).
type CredentialOverhead struct {
	Static, OAuth2     BenchStat
	TokenRequests      int64
	Rounds, Iterations int
}

// targetOAuth2Ratio bounds OAuth 2.0's attempt ÷ a static bearer's.
const targetOAuth2Ratio = 1.05

// runCredentialOverhead runs the static-bearer and OAuth 2.0 loops of Do
// rounds times, iters iterations each, in rotating order, each inside one
// activity execution (doInActivity's harness), on one server.
func runCredentialOverhead(rounds, iters int, logf func(string, ...any)) (*CredentialOverhead, error) {
	o, err := newOverhead()
	if err != nil {
		return nil, err
	}
	defer o.Close()
	var tokens atomic.Int64
	tokenSrv := httptest.NewServer(tokenHandler(&tokens))
	defer tokenSrv.Close()
	static, err := o.credentialed(activities.Credential{Header: http.Header{"Authorization": {"Bearer " + credStaticToken}}})
	if err != nil {
		return nil, err
	}
	oauth, err := o.credentialed(activities.Credential{OAuth2: &clientcredentials.Config{
		TokenURL: tokenSrv.URL + "/oauth2/token", ClientID: "bench-client", ClientSecret: credClientSecret,
		Scopes: []string{"payments"},
	}})
	if err != nil {
		return nil, err
	}
	res := &CredentialOverhead{
		Static: BenchStat{Name: "Activities.Do, static bearer (baseline)"},
		OAuth2: BenchStat{Name: "Activities.Do, OAuth 2.0 client credentials"},
		Rounds: rounds, Iterations: iters,
	}
	loop := func(a *activities.Activities) func(stopwatch, int) error {
		return func(sw stopwatch, n int) error {
			return o.inActivity(sw, n, slog.LevelInfo, func(ctx context.Context) error { return doWith(ctx, a, o) })
		}
	}
	benches := []benchLoop{{&res.Static, loop(static)}, {&res.OAuth2, loop(oauth)}}
	err = runRounds(benches, rounds, iters, logf)
	res.TokenRequests = tokens.Load()
	if err != nil {
		return res, err
	}
	res.Static.summarize()
	res.OAuth2.summarize()
	return res, nil
}

// credentialed is an Activities like o's, calling o's server with c.
func (o *overhead) credentialed(c activities.Credential) (*activities.Activities, error) {
	return activities.New(activities.Config{
		AllowedOrigins: []string{o.srv.URL},
		HTTPClient:     &http.Client{Transport: newTransport()},
		Admission:      activities.Admission{InitialRate: 1e9},
		Credentials:    map[string]activities.Credential{o.srv.URL: c},
	})
}

// doWith is one attempt of a's Do with o's request, which must succeed.
func doWith(ctx context.Context, a *activities.Activities, o *overhead) error {
	resp, err := registered.Of(a).Do(ctx, o.req)
	if err != nil {
		return err
	}
	if resp.Status != http.StatusCreated {
		return fmt.Errorf("status %d", resp.Status)
	}
	return nil
}

// tokenHandler is a client-credentials token endpoint (RFC 6749 §4.4.3)
// issuing tokens of credTokenLife seconds; it counts its requests in n.
func tokenHandler(n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		k := n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = fmt.Fprintf(w, `{"access_token":"at_bench_%016d","token_type":"Bearer","expires_in":%d}`, k, credTokenLife)
	})
}

// Summary is one line with OAuth 2.0's median ratio to the static bearer,
// its spread over rounds, the token requests and whether the claim is met.
func (c *CredentialOverhead) Summary() string {
	return fmt.Sprintf("one attempt with OAuth 2.0 ÷ with a static bearer, median of %d rounds (min–max): %s; CPU time %.3f; %d token requests; ≤ %.2f: %s",
		c.Rounds, ratioSpread(c.OAuth2), c.OAuth2.CPURatio, c.TokenRequests, targetOAuth2Ratio, met(c.OAuth2.Ratio <= targetOAuth2Ratio))
}
