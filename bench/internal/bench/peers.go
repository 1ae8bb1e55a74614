package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/google/uuid"
	"github.com/hashicorp/go-retryablehttp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
)

// The peers are what a user would write instead of this library: a plain
// Temporal activity that POSTs with an HTTP retry library's client, which
// retries in a loop inside the one activity attempt (the workflow gives the
// activity MaximumAttempts 1: the library retries, not Temporal). Each sends
// the workflow's Idempotency-Key on every retry. They are measured, not
// offered: go-retryablehttp and failsafe-go are imported from this package
// only.
const (
	peerWorkflowName = "BenchPeerPOST"
	// peerRetryableHTTP uses github.com/hashicorp/go-retryablehttp's client
	// with its default policy (DefaultRetryPolicy, DefaultBackoff: 1 s
	// doubling to 30 s, no jitter, Retry-After honoured on 429 and 503) and
	// RetryMax peerMaxRetries.
	peerRetryableHTTP = "BenchPeerRetryableHTTP"
	// peerFailsafe uses github.com/failsafe-go/failsafe-go's HTTP retry
	// policy (failsafehttp.NewRetryPolicyBuilder: retries errors, 429 and
	// 5xx but 501, honours Retry-After on 429 and 503) with WithBackoff(1 s,
	// 30 s) (no jitter) and MaxAttempts peerMaxRetries+1, in
	// failsafehttp.NewRoundTripper.
	peerFailsafe = "BenchPeerFailsafe"
)

// peerMaxRetries is high enough that a peer retries until it succeeds or
// the activity's deadline, as a user who wants the call to succeed sets it.
const peerMaxRetries = 999

// peerTimeout is the peer activity's start-to-close and schedule-to-close
// timeout: one attempt holds every retry, which at 30 s apart can take
// minutes under contention.
const peerTimeout = 10 * time.Minute

// peers are the peer activities, in report order.
var peers = []struct{ Activity, Name string }{
	{peerRetryableHTTP, "hashicorp/go-retryablehttp v0.7.8"},
	{peerFailsafe, "failsafe-go v0.9.8 (failsafehttp)"},
}

// peerName is the label of a peer activity in tables.
func peerName(activity string) string {
	for _, p := range peers {
		if p.Activity == activity {
			return p.Name
		}
	}
	return activity
}

// PeerRequest is the input of a peer activity.
type PeerRequest struct {
	URL            string `json:"url"`
	Body           []byte `json:"body"`
	IdempotencyKey string `json:"idempotency_key"`
}

// PeerResponse is its result.
type PeerResponse struct {
	Status int    `json:"status"`
	Body   []byte `json:"body"`
}

// peerActivities holds the two peers' clients, each on its own Transport
// as cmd/worker builds it (newTransport).
type peerActivities struct {
	retryable *retryablehttp.Client
	failsafe  *http.Client
}

func newPeerActivities() *peerActivities {
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: newTransport()}
	rc.RetryMax = peerMaxRetries
	// The default logger prints a [DEBUG] line per request to stderr;
	// this one formats it and throws it away, as the activity's logger does
	// in the overhead benchmarks.
	rc.Logger = log.New(io.Discard, "", log.LstdFlags)
	policy := failsafehttp.NewRetryPolicyBuilder().
		WithBackoff(time.Second, 30*time.Second).
		WithMaxAttempts(peerMaxRetries + 1).
		Build()
	return &peerActivities{
		retryable: rc,
		failsafe:  &http.Client{Transport: failsafehttp.NewRoundTripper(newTransport(), policy)},
	}
}

// RetryableHTTP POSTs req with go-retryablehttp.
func (a *peerActivities) RetryableHTTP(ctx context.Context, req PeerRequest) (PeerResponse, error) {
	r, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, req.URL, req.Body)
	if err != nil {
		return PeerResponse{}, err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(activities.IdempotencyKeyHeader, req.IdempotencyKey)
	resp, err := a.retryable.Do(r)
	if err != nil {
		return PeerResponse{}, err
	}
	return peerResult(resp)
}

// Failsafe POSTs req with failsafe-go's round tripper.
func (a *peerActivities) Failsafe(ctx context.Context, req PeerRequest) (PeerResponse, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return PeerResponse{}, err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(activities.IdempotencyKeyHeader, req.IdempotencyKey)
	resp, err := a.failsafe.Do(r)
	if err != nil {
		return PeerResponse{}, err
	}
	return peerResult(resp)
}

// peerResult reads and closes the body; anything but a 2xx is an error.
func peerResult(resp *http.Response) (PeerResponse, error) {
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return PeerResponse{}, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return PeerResponse{Status: resp.StatusCode}, fmt.Errorf("status %d", resp.StatusCode)
	}
	return PeerResponse{Status: resp.StatusCode, Body: data}, nil
}

// peerWorkflow calls peer activity act once (MaximumAttempts 1: the
// library retries inside the attempt) to POST body to url, with an
// Idempotency-Key derived from the workflow ID, as a user would.
func peerWorkflow(ctx workflow.Context, act, url string, body []byte) (PeerResponse, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    peerTimeout,
		ScheduleToCloseTimeout: peerTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	key := uuid.NewSHA1(uuid.NameSpaceURL, []byte("idemhttp-bench-peer:"+workflow.GetInfo(ctx).WorkflowExecution.ID)).String()
	var resp PeerResponse
	err := workflow.ExecuteActivity(ctx, act, PeerRequest{URL: url, Body: body, IdempotencyKey: key}).Get(ctx, &resp)
	return resp, err
}

// peerRegistry is what registerPeers needs of a worker (or a test
// environment).
type peerRegistry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// registerPeers registers the peer workflow and both peer activities on w.
func registerPeers(w peerRegistry, a *peerActivities) {
	w.RegisterWorkflowWithOptions(peerWorkflow, workflow.RegisterOptions{Name: peerWorkflowName})
	w.RegisterActivityWithOptions(a.RetryableHTTP, activity.RegisterOptions{Name: peerRetryableHTTP})
	w.RegisterActivityWithOptions(a.Failsafe, activity.RegisterOptions{Name: peerFailsafe})
}

// peerLoad is the contention experiment's load for peer activity act.
func peerLoad(h *harness, act string) contentionLoad {
	return contentionLoad{
		Name:     act,
		Workflow: peerWorkflowName,
		Args: func(i int) []any {
			body, _ := json.Marshal(map[string]int{"client": i})
			return []any{act, h.Target.URL + "/charges", body}
		},
		Wait: func(ctx context.Context, run client.WorkflowRun) (int32, error) {
			var resp PeerResponse
			return 0, run.Get(ctx, &resp)
		},
	}
}

// PeersResult is the peers section.
type PeersResult struct {
	Overhead *PeerOverhead `json:"overhead,omitempty"`
	// Credentials is one attempt of Activities.Do with OAuth 2.0 against
	// one with a static bearer (the attempt section only).
	Credentials *CredentialOverhead `json:"credentials,omitempty"`
	// Params is the contention setup; Contention the peers' runs of it
	// (ContentionRun.Peer says which).
	Params     ContentionParams `json:"params"`
	Contention []ContentionRun  `json:"contention,omitempty"`
}

// PeerOverhead is one successful attempt through each peer's client against
// the overhead section's server, each a ratio to the raw POST in an
// activity (Baseline) in the same round, with Activities.Do measured in the
// same rounds.
type PeerOverhead struct {
	Baseline, Do, RetryableHTTP, Failsafe BenchStat
	Rounds, Iterations                    int
	// Profile is where Do's CPU time goes (the attempt section only).
	Profile *AttemptProfile `json:"profile,omitempty"`
}

// runPeerOverhead runs rawInActivity (the baseline), doInActivity and one
// successful POST through each peer activity's code inside one activity
// execution, rounds times, iters iterations each, in rotating order.
func runPeerOverhead(rounds, iters int, logf func(string, ...any)) (*PeerOverhead, error) {
	o, err := newOverhead()
	if err != nil {
		return nil, err
	}
	defer o.Close()
	pa := newPeerActivities()
	req := PeerRequest{URL: o.url, Body: o.body, IdempotencyKey: o.req.IdempotencyKey}
	peerOp := func(call func(context.Context, PeerRequest) (PeerResponse, error)) func(context.Context) error {
		return func(ctx context.Context) error {
			resp, err := call(ctx, req)
			if err != nil {
				return err
			}
			if resp.Status != http.StatusCreated || len(resp.Body) == 0 {
				return fmt.Errorf("status %d, %d bytes", resp.Status, len(resp.Body))
			}
			return nil
		}
	}
	res := &PeerOverhead{
		Baseline:      BenchStat{Name: "raw net/http in an activity (baseline)"},
		Do:            BenchStat{Name: "Activities.Do"},
		RetryableHTTP: BenchStat{Name: "go-retryablehttp client in an activity"},
		Failsafe:      BenchStat{Name: "failsafe-go HTTP client in an activity"},
		Rounds:        rounds, Iterations: iters,
	}
	benches := []benchLoop{
		{&res.Baseline, o.rawInActivity},
		{&res.Do, o.doInActivity},
		{&res.RetryableHTTP, func(sw stopwatch, n int) error {
			return o.inActivity(sw, n, slog.LevelInfo, peerOp(pa.RetryableHTTP))
		}},
		{&res.Failsafe, func(sw stopwatch, n int) error {
			return o.inActivity(sw, n, slog.LevelInfo, peerOp(pa.Failsafe))
		}},
	}
	if err := runRounds(benches, rounds, iters, logf); err != nil {
		return res, err
	}
	for _, s := range []*BenchStat{&res.Baseline, &res.Do, &res.RetryableHTTP, &res.Failsafe} {
		s.summarize()
	}
	return res, nil
}

// BestPeer returns the short name and the ratio of the peer with the
// lowest ratio to the baseline.
func (p *PeerOverhead) BestPeer() (string, float64) {
	if p.Failsafe.Ratio < p.RetryableHTTP.Ratio {
		return "failsafe-go", p.Failsafe.Ratio
	}
	return "go-retryablehttp", p.RetryableHTTP.Ratio
}

// Summary is one line with Do's and each peer's median ratio, the spread of
// the per-round ratios (min–max) and whether Do's is at most the best peer's.
func (p *PeerOverhead) Summary() string {
	best, bestRatio := p.BestPeer()
	return fmt.Sprintf("one attempt ÷ raw net/http in an activity, median of %d rounds (min–max): Activities.Do %s; go-retryablehttp %s; failsafe-go %s; best peer %s: %s",
		p.Rounds, ratioSpread(p.Do), ratioSpread(p.RetryableHTTP), ratioSpread(p.Failsafe), best, met(p.Do.Ratio <= bestRatio))
}

// ratioSpread is s's median ratio and the range of its per-round ratios.
func ratioSpread(s BenchStat) string {
	return fmt.Sprintf("%.3f (%.3f–%.3f)", s.Ratio, minOf(s.Ratios), maxOf(s.Ratios))
}
