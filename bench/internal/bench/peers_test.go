package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
)

// TestPeerActivitiesRetry runs the peer workflow with each peer activity in
// Temporal's test environment against a server that answers 503 with
// Retry-After: 0 twice, then 200: the library, not Temporal, retries, so
// the server sees three requests, all with the workflow's Idempotency-Key,
// and the workflow succeeds.
func TestPeerActivitiesRetry(t *testing.T) {
	for _, p := range peers {
		t.Run(p.Activity, func(t *testing.T) {
			var (
				mu   sync.Mutex
				keys []string
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				mu.Lock()
				keys = append(keys, r.Header.Get(activities.IdempotencyKeyHeader))
				n := len(keys)
				mu.Unlock()
				if n <= 2 {
					w.Header().Set("Retry-After", "0")
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				_, _ = io.WriteString(w, `{"id":"rec_1"}`)
			}))
			defer srv.Close()

			var s sdktestsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			registerPeers(env, newPeerActivities())
			env.ExecuteWorkflow(peerWorkflowName, p.Activity, srv.URL+"/charges", []byte(`{"amount":42}`))
			if !env.IsWorkflowCompleted() {
				t.Fatal("the workflow did not complete")
			}
			if err := env.GetWorkflowError(); err != nil {
				t.Fatalf("workflow error: %v", err)
			}
			var resp PeerResponse
			if err := env.GetWorkflowResult(&resp); err != nil {
				t.Fatal(err)
			}
			if resp.Status != http.StatusOK || string(resp.Body) != `{"id":"rec_1"}` {
				t.Errorf("result: status %d, body %q; want 200 and the server's body", resp.Status, resp.Body)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(keys) != 3 {
				t.Fatalf("the server got %d requests, want 3", len(keys))
			}
			if keys[0] == "" || keys[1] != keys[0] || keys[2] != keys[0] {
				t.Errorf("Idempotency-Keys %q: want the same non-empty key on every retry", keys)
			}
		})
	}
}

// TestWriteMarkdownPeers checks that the report computes claim 2b from the
// numbers it is given (met when Do's ratio is at most the best peer's) and
// writes both peers tables.
func TestWriteMarkdownPeers(t *testing.T) {
	for _, c := range []struct {
		do   float64
		want string
	}{{1.05, "| yes |"}, {1.30, "| **MISSED** |"}} {
		r := &Results{Peers: &PeersResult{
			Params: defaultContention,
			Overhead: &PeerOverhead{
				Baseline:      BenchStat{Name: "raw", MedianNs: 100},
				Do:            BenchStat{Name: "Activities.Do", MedianNs: 105, Ratios: []float64{c.do}, Ratio: c.do},
				RetryableHTTP: BenchStat{Name: "go-retryablehttp client in an activity", MedianNs: 130, Ratios: []float64{1.3}, Ratio: 1.3},
				Failsafe:      BenchStat{Name: "failsafe-go HTTP client in an activity", MedianNs: 120, Ratios: []float64{1.2}, Ratio: 1.2},
				Rounds:        1, Iterations: 10,
			},
			Contention: []ContentionRun{
				{Peer: peerRetryableHTTP, Requests: 900, Successes: 100, ToLastSuccess: 350 * time.Second, MaxAttempts: 17},
				{Peer: peerFailsafe, Requests: 910, Successes: 100, ToLastSuccess: 340 * time.Second, MaxAttempts: 17},
			},
		}}
		var buf bytes.Buffer
		if err := WriteMarkdown(&buf, r, "go run ./cmd/bench -only peers", "contention.svg"); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		var claim string
		for line := range strings.SplitSeq(out, "\n") {
			if strings.HasPrefix(line, "| 2b |") {
				claim = line
			}
		}
		if !strings.HasSuffix(claim, c.want) || !strings.Contains(claim, "best peer failsafe-go 1.200") {
			t.Errorf("Do ratio %.2f: claim 2b is %q, want it to end %q and name failsafe-go as the best peer", c.do, claim, c.want)
		}
		for _, want := range []string{"## 5. Peers", "| hashicorp/go-retryablehttp v0.7.8 | 900 | 9.00 | 350.0 s | 21.00 | 17 | 0 |", "| failsafe-go v0.9.8 (failsafehttp) | 910 | 9.10 |"} {
			if !strings.Contains(out, want) {
				t.Errorf("markdown lacks %q", want)
			}
		}
	}
}

// TestRunAttemptSmall runs the attempt section (-only attempt) in
// miniature: only the per-attempt rows of the peers section, without the
// dev server, each loop with a ratio per round, and a report with claim 2b
// and its spread. It asserts no timing.
func TestRunAttemptSmall(t *testing.T) {
	res, err := Run(t.Context(), Options{Only: []string{AttemptSection}, OverheadCount: 2, OverheadIters: 20, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if res.Overhead != nil || res.Peers == nil || res.Peers.Overhead == nil || len(res.Peers.Contention) != 0 {
		t.Fatalf("overhead %v, peers %+v: want the peers' per-attempt rows alone", res.Overhead, res.Peers)
	}
	po := res.Peers.Overhead
	for _, s := range []BenchStat{po.Do, po.RetryableHTTP, po.Failsafe} {
		if len(s.Ratios) != 2 || s.Ratio <= 0 {
			t.Errorf("%s: ratios %v, median %v; want one per round", s.Name, s.Ratios, s.Ratio)
		}
	}
	c := res.Peers.Credentials
	if c == nil {
		t.Fatal("no credential rows")
	}
	if len(c.OAuth2.Ratios) != 2 || c.OAuth2.Ratio <= 0 || c.Static.MedianNs <= 0 {
		t.Errorf("%s: ratios %v, median %v; want one per round", c.OAuth2.Name, c.OAuth2.Ratios, c.OAuth2.Ratio)
	}
	// Tokens of an hour: the first attempt fetches one, every other
	// attempt of the run (warm-ups included) applies it from memory.
	if c.TokenRequests != 1 {
		t.Errorf("the token endpoint got %d requests; want 1", c.TokenRequests)
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, res, "cd bench && go run ./cmd/bench -only attempt", "contention.svg"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| 2b |") || !strings.Contains(b.String(), ratioSpread(po.Do)) {
		t.Errorf("the report lacks claim 2b with Do's spread %s:\n%s", ratioSpread(po.Do), b.String())
	}
	if !strings.Contains(b.String(), "| 2c |") || !strings.Contains(b.String(), ratioSpread(c.OAuth2)) || !strings.Contains(b.String(), "1 token requests") {
		t.Errorf("the report lacks claim 2c with OAuth 2.0's spread %s and 1 token request:\n%s", ratioSpread(c.OAuth2), b.String())
	}
}

// TestWriteMarkdownCredentials checks that the report computes claim 2c
// from the numbers it is given: met when OAuth 2.0's ratio to the static
// bearer is at most 1.05.
func TestWriteMarkdownCredentials(t *testing.T) {
	for _, c := range []struct {
		ratio float64
		want  string
	}{{1.02, "| yes |"}, {1.05, "| yes |"}, {1.06, "| **MISSED** |"}} {
		r := &Results{Peers: &PeersResult{Params: defaultContention, Credentials: &CredentialOverhead{
			Static:        BenchStat{Name: "static", MedianNs: 100},
			OAuth2:        BenchStat{Name: "oauth2", MedianNs: 100 * c.ratio, Ratios: []float64{c.ratio - 0.01, c.ratio, c.ratio + 0.01}, Ratio: c.ratio},
			TokenRequests: 1, Rounds: 3, Iterations: 10,
		}}}
		var buf bytes.Buffer
		if err := WriteMarkdown(&buf, r, "go run ./cmd/bench -only attempt", "contention.svg"); err != nil {
			t.Fatal(err)
		}
		var claim string
		for line := range strings.SplitSeq(buf.String(), "\n") {
			if strings.HasPrefix(line, "| 2c |") {
				claim = line
			}
		}
		spread := fmt.Sprintf("%.3f (%.3f–%.3f)", c.ratio, c.ratio-0.01, c.ratio+0.01)
		if !strings.HasSuffix(claim, c.want) || !strings.Contains(claim, spread) || !strings.Contains(claim, "1 token requests") {
			t.Errorf("ratio %.2f: claim 2c is %q, want it to end %q with %s and 1 token request", c.ratio, claim, c.want, spread)
		}
		if !strings.Contains(buf.String(), "**Credentials.**") {
			t.Errorf("ratio %.2f: the peers section lacks the credential rows", c.ratio)
		}
	}
}
