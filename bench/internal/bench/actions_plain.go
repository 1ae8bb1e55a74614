package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// The actions section's baseline: what a user writes with Temporal
// alone, a minimal workflow around a plain activity that does the same
// request with net/http, under the ready workflow's retry policy.
const (
	plainActionsWorkflow = "BenchActionsPlain"
	plainRequestActivity = "BenchActionsPlainRequest"
	plainPollActivity    = "BenchActionsPlainPoll"
	// plainWebhookSignal is the signal a webhook handler of the user's
	// own sends the plain workflow.
	plainWebhookSignal = "webhook"
)

// The plain workflow's modes.
const (
	plainPost    = "post"    // the POST, retried by Temporal on an error, a 5xx or a cut
	plainFollow  = "follow"  // the POST, then a poll activity Temporal retries every second until the monitor answers 200
	plainWebhook = "webhook" // the POST, then a signal awaited with a timeout
)

// PlainCall is the plain workflow's input.
type PlainCall struct {
	Mode string `json:"mode"`
	URL  string `json:"url"`
	Body []byte `json:"body"`
	// Wait is the webhook's timeout (mode webhook).
	Wait time.Duration `json:"wait,omitempty"`
	// Poll paces the polls (mode follow).
	Poll *PlainPollSetup `json:"poll,omitempty"`
}

// PlainPollSetup paces the plain follow's polls (default every second).
type PlainPollSetup struct {
	Interval time.Duration `json:"interval"`
}

// PlainAnswer is the plain request activity's result.
type PlainAnswer struct {
	Status   int    `json:"status"`
	Location string `json:"location,omitempty"`
}

// plainRetryPolicy is the ready workflow's default retry policy as a
// plain RetryPolicy (200 ms doubling to 10 s, 5 attempts; Temporal's own
// backoff, no jitter: jitter changes no count).
func plainRetryPolicy() *temporal.RetryPolicy {
	b := workflows.RetryOptions{}.WithDefaults()
	return &temporal.RetryPolicy{InitialInterval: b.InitialInterval, BackoffCoefficient: b.BackoffCoefficient,
		MaximumInterval: b.MaximumInterval, MaximumAttempts: defaults.MaximumAttempts}
}

// plainActions is the baseline workflow of every scenario.
func plainActions(ctx workflow.Context, in PlainCall) (int, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    defaults.StartToCloseTimeout,
		ScheduleToCloseTimeout: defaults.ScheduleToCloseTimeout,
		RetryPolicy:            plainRetryPolicy(),
	})
	var ans PlainAnswer
	if err := workflow.ExecuteActivity(actx, plainRequestActivity, http.MethodPost, in.URL, in.Body).Get(ctx, &ans); err != nil {
		return 0, err
	}
	switch in.Mode {
	case plainFollow:
		every := time.Second
		if in.Poll != nil && in.Poll.Interval > 0 {
			every = in.Poll.Interval
		}
		pctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout:    defaults.StartToCloseTimeout,
			ScheduleToCloseTimeout: 10 * time.Minute,
			RetryPolicy:            &temporal.RetryPolicy{InitialInterval: every, BackoffCoefficient: 1, MaximumInterval: every},
		})
		if err := workflow.ExecuteActivity(pctx, plainPollActivity, ans.Location).Get(ctx, &ans); err != nil {
			return 0, err
		}
	case plainWebhook:
		got := false
		ch := workflow.GetSignalChannel(ctx, plainWebhookSignal)
		workflow.Go(ctx, func(ctx workflow.Context) {
			var ev []byte
			ch.Receive(ctx, &ev)
			got = true
		})
		ok, err := workflow.AwaitWithTimeout(ctx, in.Wait, func() bool { return got })
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, errors.New("no webhook within the timeout")
		}
	}
	return ans.Status, nil
}

// plainHTTP is the plain activities' client.
type plainHTTP struct{ client *http.Client }

// Request sends method to url with body: a 2xx is the answer (a 202's
// Location with it), anything else an error Temporal retries.
func (p *plainHTTP) Request(ctx context.Context, method, url string, body []byte) (PlainAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return PlainAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return PlainAnswer{}, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return PlainAnswer{}, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return PlainAnswer{Status: resp.StatusCode}, fmt.Errorf("status %d", resp.StatusCode)
	}
	return PlainAnswer{Status: resp.StatusCode, Location: resp.Header.Get("Location")}, nil
}

// Poll GETs a monitor: a 202 is "still running", an error Temporal
// retries at the poll activity's interval; another 2xx is the result.
func (p *plainHTTP) Poll(ctx context.Context, url string) (PlainAnswer, error) {
	ans, err := p.Request(ctx, http.MethodGet, url, nil)
	if err == nil && ans.Status == http.StatusAccepted {
		return ans, errors.New("still running")
	}
	return ans, err
}

// registerPlainActions registers the baseline workflow and activities on w.
func registerPlainActions(w peerRegistry, c *http.Client) {
	p := &plainHTTP{client: c}
	w.RegisterWorkflowWithOptions(plainActions, workflow.RegisterOptions{Name: plainActionsWorkflow})
	w.RegisterActivityWithOptions(p.Request, activity.RegisterOptions{Name: plainRequestActivity})
	w.RegisterActivityWithOptions(p.Poll, activity.RegisterOptions{Name: plainPollActivity})
}
