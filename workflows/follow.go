package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/internal/wire"
)

// FollowOptions ask a call to follow a long-running operation to its end:
// when the server accepts the start request with a status monitor (by the
// origin's activities.LongRunning: a 202 with Location by default;
// Operation-Location, Azure-AsyncOperation or Google's operation name with
// its presets), the call polls the monitor, durably, until the operation
// ends, and returns its final result. The zero value follows with the
// defaults.
type FollowOptions struct {
	// Timeout bounds the following from the start answer on, the wait
	// before the first poll and all polls included (default 24 hours): a start answer's Retry-After longer
	// than it is cut to it. An operation still running then fails with
	// ErrTypeOperationStillRunning; its Failure.Accepted resumes it with
	// FollowAccepted.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Interval and MaximumInterval pace the polls of a monitor that sends
	// no Retry-After: the wait starts at Interval (default 1 second) and
	// doubles up to MaximumInterval (default 1 minute), with equal jitter;
	// never below 1 second. A Retry-After is followed as sent, at least 1
	// second and at most MaxRetryAfter (below); the first poll waits for
	// the start answer's (a wait of at most the worker's
	// Config.Admission.MaxWait, 1 s by default, inside the start
	// request's attempt, saving a timer; a longer one, or any with
	// CancelOperation or a HeartbeatTimeout on the call's activity
	// options, on a timer).
	Interval        time.Duration `json:"interval,omitempty"`
	MaximumInterval time.Duration `json:"maximum_interval,omitempty"`
	// MaxRetryAfter, when more than 0, is the longest Retry-After of the
	// monitor honoured, in place of the origin's
	// (activities.Convention.MaxRetryAfter) and the worker's
	// (activities.Config.MaxRetryAfter, default 5 minutes): a 72-hour
	// operation whose monitor asks for an hour between polls is polled
	// about 72 times, not 864.
	MaxRetryAfter time.Duration `json:"max_retry_after,omitempty"`
	// CancelOperation: when the workflow is cancelled while following (in
	// the wait before the first poll, in a poll or between polls), ask the
	// server to cancel the operation too, if the origin's convention has a
	// cancel request (activities.LongRunning.CancelMethod; Google's
	// ":cancel"). The workflow ends cancelled once the server answered
	// it, after 3 cancel requests that reached the API and failed, or
	// after 10 min of asking (attempts that send nothing are not counted:
	// those the origin's admission holds back, those whose credential
	// could not be applied, those that could not connect; the workflow
	// stays open meanwhile), and at the latest 10 s
	// before its own deadline (the run's start plus the shorter of its
	// WorkflowRunTimeout and WorkflowExecutionTimeout), so that Temporal
	// does not time it out while it asks; with less than 1 s of asking
	// left before that, no cancel request is sent (logged). Default
	// false: polling stops, the operation goes on.
	CancelOperation bool `json:"cancel_operation,omitempty"`
}

// MarshalJSON encodes o with durations as strings such as "24h0m0s".
func (o FollowOptions) MarshalJSON() ([]byte, error) {
	type plain FollowOptions
	return wire.Marshal(plain(o))
}

// UnmarshalJSON decodes what MarshalJSON encodes, and durations as
// nanoseconds.
func (o *FollowOptions) UnmarshalJSON(data []byte) error {
	type plain FollowOptions
	return wire.Unmarshal(data, (*plain)(o))
}

// firstWait is the wait before the first poll that a start answer's
// Retry-After ra asks for under o: at least poll.MinInterval, at most
// o.MaxRetryAfter when set (the worker capped ra as the origin's; the
// call's own cap holds for it too). follow bounds it by o.Timeout.
func (o FollowOptions) firstWait(ra time.Duration) time.Duration {
	first := max(ra, poll.MinInterval)
	if o.MaxRetryAfter > 0 {
		first = min(first, max(o.MaxRetryAfter, poll.MinInterval))
	}
	return first
}

// startWait is the most of the wait before the first poll that the start
// request's attempt, under ao, may spend before it returns
// (input.Input.StartWait): the longest first wait o lets follow time, so
// that the start never waits longer than the workflow would have, and at
// most a fifth of the attempt's start-to-close timeout (the bound the
// activity applies, with the origin's admission). None with
// o.CancelOperation, whose promise covers the wait before the first poll:
// a workflow cancelled while its start's attempt waits loses the start
// answer, and with it the cancel request the timer's wait would send; nor
// with a heartbeat timeout on ao, for a waiting attempt sends no
// heartbeat.
func (o FollowOptions) startWait(ao workflow.ActivityOptions) time.Duration {
	if o.CancelOperation || ao.HeartbeatTimeout > 0 {
		return 0
	}
	return min(o.firstWait(math.MaxInt64), cmp.Or(o.Timeout, poll.DefaultFollowTimeout), ao.StartToCloseTimeout/5)
}

// validate checks o's durations, which become Temporal activity options.
func (o FollowOptions) validate() error {
	if o.Timeout < 0 || o.Interval < 0 || o.MaximumInterval < 0 || o.MaxRetryAfter < 0 {
		return fmt.Errorf("Request.Follow: Timeout, Interval, MaximumInterval and MaxRetryAfter must be 0 (the default) or more, got %s, %s, %s and %s", o.Timeout, o.Interval, o.MaximumInterval, o.MaxRetryAfter)
	}
	return nil
}

// Accepted is a long-running operation the server accepted: where its
// state is read, and, in a final Response, how following it went. It is
// Response.Accepted of a followed call, and Failure.Accepted of an
// operation that failed, was cancelled or was still running at the
// timeout (resume that one with FollowAccepted). Its fields:
//
//   - Operation, Method, URL and IdempotencyKey: the start request's;
//   - StartStatus and RetryAfter: the start answer's status (202) and
//     Retry-After (at least 1 s, at most the worker's
//     Config.MaxRetryAfter), the wait before the first poll;
//   - Waited: how much of that wait the start request's attempt spent
//     before it returned (a wait of at most the worker's
//     Config.Admission.MaxWait, 1 s by default, that fits the attempt);
//     the workflow waits the rest on a timer;
//   - Monitor: the status monitor's URL, polled with GET (in a final
//     Response or a Failure, the last one polled);
//   - StatusDocument: the monitor answers a status document (Azure's
//     "status", Google's "done"), not its status code;
//   - ResultURL: where the final result is read once the operation
//     succeeded, when set;
//   - State: the last state the monitor reported ("InProgress",
//     "Succeeded", …), redacted, at most 64 bytes;
//   - Polls: how many polls the last following took.
//
// It is declared in internal/poll, where the poll activity's input
// embeds it; go doc internal/poll.Accepted documents each field in
// full. Its URLs are stored in Temporal's history: they never hold user
// info, and hold query values only for the names the origin's
// activities.LongRunning.KeepQuery allows, or those the workflow wrote
// itself (WebhookPoll.URL).
type Accepted = poll.Accepted

// pollInput is op as the poll activity's input, paced by o: State and
// Polls are the activity's to report, not its input.
func pollInput(op Accepted, o FollowOptions) poll.Monitor {
	op.State, op.Polls = "", 0
	b := poll.Backoff(o.Interval, o.MaximumInterval)
	b.MaxRetryAfter = o.MaxRetryAfter
	return poll.Monitor{Accepted: op, Backoff: b}
}

// FollowAccepted polls op until it ends and returns its final result, as
// a call with Request.Follow does after its start request: use it to
// resume an operation whose following failed with
// ErrTypeOperationStillRunning (its Failure.Accepted). The first poll goes
// out at once. The polls run on the task queue and with the per-attempt
// timeout already on ctx (workflow.WithActivityOptions; default the
// workflow's queue and 10 seconds).
func FollowAccepted(ctx workflow.Context, op Accepted, opts FollowOptions) (*Response, error) {
	if op.Monitor == "" || op.URL == "" {
		return nil, invalid("FollowAccepted needs Accepted.Monitor and Accepted.URL: pass the Accepted of a Response or of a Failure")
	}
	if err := opts.validate(); err != nil {
		return nil, invalid("FollowAccepted: %v", err)
	}
	return follow(ctx, workflow.GetActivityOptions(ctx), op, opts, 0, 0)
}

// followStart follows the operation the start answer resp accepted (a
// call with Request.Follow): it waits what the start request's attempt
// did not wait of the start answer's Retry-After (Accepted.Waited), then
// polls. A 202 that names no monitor the worker follows (from a worker
// that predates following, or a server that sends none) is
// ErrTypeMonitorNotFollowed: the 202 is no result.
func followStart(ctx workflow.Context, ao workflow.ActivityOptions, in input.Input, resp *Response, opts FollowOptions) (*Response, error) {
	if resp.Accepted == nil {
		if resp.Status != http.StatusAccepted {
			return resp, nil // the result at once
		}
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s %s answered 202 Accepted without a status monitor this worker follows (check the origin's Convention.LongRunning, and that every worker runs a version that follows): the operation goes on at the server; run the same workflow ID again once fixed (the same key gets the stored answer)", in.Method, redact.URL(in.URL)),
			ErrTypeMonitorNotFollowed, nil, Failure{Operation: in.Operation, Method: in.Method, URL: redact.URL(in.URL), IdempotencyKey: in.IdempotencyKey,
				Status: resp.Status, Attempt: resp.Attempt, OutcomeUnknown: true})
	}
	// Waited as the history holds it: the start waited only what its
	// input, in the history too, asked (input.Input.StartWait). Options
	// recomputed on replay must not decide whether a timer follows.
	return follow(ctx, ao, *resp.Accepted, opts, opts.firstWait(resp.Accepted.RetryAfter), resp.Accepted.Waited)
}

// follow follows op within opts.Timeout, counted from the start answer
// on: it waits first (the start answer's Retry-After; 0 for an operation
// resumed), at most until the timeout, less what the start request's
// attempt waited of it already (waited, Accepted.Waited: only where the
// workflow asked it to, input.Input.StartWait), then polls op with the
// poll activity under options made from ao, the start request's activity
// options. A workflow cancelled
// at any point of it asks the server to cancel op when
// opts.CancelOperation is set: this is the one place that does.
func follow(ctx workflow.Context, ao workflow.ActivityOptions, op Accepted, opts FollowOptions, first, waited time.Duration) (*Response, error) {
	in := pollInput(op, opts)
	timeout := cmp.Or(opts.Timeout, poll.DefaultFollowTimeout)
	deadline := workflow.Now(ctx).Add(timeout)
	wait := min(first, timeout)
	if first > timeout && workflow.GetVersion(ctx, firstWaitBounded, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		// A history recorded before the timeout bounded the first wait
		// waited the whole Retry-After, then polled for the whole
		// timeout: replay it as recorded, not as a nondeterminism error.
		wait, deadline = first, deadline.Add(first)
	}
	// The timeout counts from the start answer on: the start request's
	// attempt waited the first of it, the timer waits the rest. A start
	// that waited its whole Retry-After leaves no timer whatever the
	// options say now (first is at most the Retry-After).
	w := min(waited, wait)
	wait, deadline = wait-w, deadline.Add(-w)
	var resp *Response
	err := waitBeforePolling(ctx, op, wait)
	ask := opts.CancelOperation
	if err != nil && ask && workflow.GetVersion(ctx, cancelDuringFirstWait, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		// A history recorded before a cancellation during the first wait
		// asked the server to cancel ended there, without asking: replay
		// it as recorded, not as a nondeterminism error.
		ask = false
	}
	if err == nil {
		if left := deadline.Sub(workflow.Now(ctx)); left > 0 {
			resp, _, err = pollMonitor(ctx, ao, op, in, left)
		} else {
			err = stillRunning(op, timeout, fmt.Sprintf("the start answer's Retry-After asked for %s before the first poll: a FollowOptions.Timeout above it lets a poll happen", first), nil, Failure{})
		}
	}
	if err == nil {
		return resp, nil
	}
	var ce *temporal.CanceledError
	if (errors.As(err, &ce) || ctx.Err() != nil) && ask {
		askToCancel(ctx, pollOptions(ao, op, in, timeout), in)
	}
	workflow.GetLogger(ctx).Error("following a long-running operation failed", "operation", op.Operation, "key", op.IdempotencyKey,
		"monitor", redact.URL(op.Monitor), "error", err)
	return nil, err
}

// pollMonitor runs the poll activity on in (op's monitor) until the
// operation ends or timeout passes, under options made from ao; an
// operation not known to have ended then is ErrTypeOperationStillRunning.
// It returns the poll's options too.
func pollMonitor(ctx workflow.Context, ao workflow.ActivityOptions, op Accepted, in poll.Monitor, timeout time.Duration) (*Response, workflow.ActivityOptions, error) {
	po := pollOptions(ao, op, in, timeout)
	var resp Response
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, po), poll.ActivityName, in).Get(ctx, &resp)
	if err == nil {
		return &resp, po, nil
	}
	var te *temporal.TimeoutError
	var ce *temporal.CanceledError
	f, ok := AsFailure(err)
	if !errors.As(err, &ce) && ctx.Err() == nil && (errors.As(err, &te) || ok && f.Retryable) {
		// The activity fails itself before the timeout; this is the
		// backstop (a worker lost at the very end, the attempt ceiling, a
		// clock off by more than the margin): a poll still to be retried
		// is an operation not known to have ended.
		err = stillRunning(op, timeout, "", err, f)
	}
	return nil, po, err
}

// firstWaitBounded is the change ID (workflow.GetVersion) of
// FollowOptions.Timeout bounding the first wait: its marker is recorded
// only where a start answer's Retry-After passes the timeout.
const firstWaitBounded = "follow-timeout-bounds-first-wait"

// cancelDuringFirstWait is the change ID (workflow.GetVersion) of
// FollowOptions.CancelOperation asking the server to cancel when the
// workflow is cancelled during the first wait: its marker is recorded
// only where that happens.
const cancelDuringFirstWait = "follow-cancel-during-first-wait"

// waitBeforePolling waits d (none if 0) before the first poll of op, on
// a timer the Web UI names for what it is: the monitor's host and path,
// never its query.
func waitBeforePolling(ctx workflow.Context, op Accepted, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	shown := "the status monitor"
	if u, err := url.Parse(op.Monitor); err == nil {
		shown = u.Host + u.EscapedPath()
	}
	return workflow.NewTimerWithOptions(ctx, d, workflow.TimerOptions{Summary: "Retry-After wait before polling " + shown}).Get(ctx, nil)
}

// stillRunning is the error of op not known to have ended when following
// it timed out (after timeout; why, when set, says why no poll told),
// with the last poll's error as cause and its failure f.
func stillRunning(op Accepted, timeout time.Duration, why string, cause error, f Failure) error {
	shown := redact.URL(op.Monitor)
	if why != "" {
		why = "; " + why
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("the operation at %s had not ended when following it timed out (%s%s): resume with FollowAccepted and the Failure's Accepted", shown, timeout, why),
		ErrTypeOperationStillRunning, cause,
		Failure{Operation: op.Operation, Method: http.MethodGet, URL: shown, IdempotencyKey: op.IdempotencyKey,
			Status: f.Status, Attempt: f.Attempt, Location: shown, OutcomeUnknown: true, Accepted: &op})
}

// pollOptions are the options of the poll activity on in (op's monitor)
// for polls within timeout, made from ao.
func pollOptions(ao workflow.ActivityOptions, op Accepted, in poll.Monitor, timeout time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              ao.TaskQueue,
		DisableEagerExecution:  ao.DisableEagerExecution,
		StartToCloseTimeout:    cmp.Or(ao.StartToCloseTimeout, defaults.StartToCloseTimeout),
		ScheduleToCloseTimeout: timeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: in.Backoff.InitialInterval, BackoffCoefficient: in.Backoff.BackoffCoefficient,
			MaximumInterval: in.Backoff.MaximumInterval,
			// The timeout bounds the polls; this ceiling only replaces
			// Temporal's "0 is unlimited", which its test environment
			// reads as 10. Every attempt, a poll or one the origin's
			// admission held back, is followed by a wait of at least
			// backoff.MinInFlightWait, which AttemptCeiling counts.
			MaximumAttempts:        backoff.AttemptCeiling(0, timeout),
			NonRetryableErrorTypes: slices.Clone(nonRetryableErrorTypes),
		},
		Summary: "polling " + input.Summary("GET", op.Monitor, op.Operation),
	}
}

// askToCancel asks the server to cancel the operation in (the poll
// activity with Cancel set), in a context the workflow's cancellation
// does not reach, for poll.CancelTimeout at most, and never past
// poll.CancelMargin before the workflow's own deadline
// (workflowDeadline): with less than poll.MinCancelTime left before
// that, it schedules nothing and logs why. Its failure is logged, not
// returned. The activity counts the cancel requests it sends
// (poll.CancelAttempts): the attempts the origin's admission holds
// back send nothing and do not use them up.
func askToCancel(ctx workflow.Context, po workflow.ActivityOptions, in poll.Monitor) {
	timeout := poll.CancelTimeout
	if deadline, ok := workflowDeadline(ctx); ok {
		left := deadline.Sub(workflow.Now(ctx)) - poll.CancelMargin
		if left >= poll.MinCancelTime {
			timeout = min(timeout, left)
		} else if workflow.GetVersion(ctx, cancelWithinDeadline, workflow.DefaultVersion, 1) != workflow.DefaultVersion {
			workflow.GetLogger(ctx).Warn("not asking the server to cancel the operation: the workflow's own deadline (its run or execution timeout) leaves no time for it; the operation goes on at the server",
				"operation", in.Operation, "key", in.IdempotencyKey, "monitor", redact.URL(in.Monitor),
				"deadline", deadline, "left", max(left+poll.CancelMargin, 0), "margin", poll.CancelMargin)
			return
		}
		// Else a history recorded before the deadline bounded the asking:
		// it scheduled the cancel request whatever time was left; replay
		// it as recorded (the schedule-to-close timeout is not compared
		// on replay, the activity is).
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	in.Cancel = true
	po.ScheduleToCloseTimeout = timeout
	po.StartToCloseTimeout = min(po.StartToCloseTimeout, timeout)
	po.RetryPolicy = &temporal.RetryPolicy{
		MaximumAttempts:        backoff.AttemptCeiling(poll.CancelAttempts, timeout),
		NonRetryableErrorTypes: slices.Clone(nonRetryableErrorTypes),
	}
	po.Summary = "cancelling the operation at " + input.Summary("GET", in.Monitor, in.Operation)[len("GET "):]
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(dctx, po), poll.ActivityName, in).Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("asking the server to cancel the operation failed", "operation", in.Operation, "error", err)
	}
}

// cancelWithinDeadline is the change ID (workflow.GetVersion) of
// askToCancel scheduling no cancel request when the workflow's own
// deadline leaves no time for one: its marker is recorded only where that
// happens.
const cancelWithinDeadline = "follow-cancel-within-workflow-deadline"

// workflowDeadline is when Temporal times this run out: its start plus the
// shorter of its run timeout and its execution timeout (workflow.GetInfo);
// ok is false when it has neither. An execution that continued as new or
// was retried began before this run, which GetInfo does not say: its
// execution timeout may end it before this deadline.
func workflowDeadline(ctx workflow.Context) (time.Time, bool) {
	info := workflow.GetInfo(ctx)
	var d time.Duration
	for _, t := range []time.Duration{info.WorkflowRunTimeout, info.WorkflowExecutionTimeout} {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	if d == 0 || info.WorkflowStartTime.IsZero() {
		return time.Time{}, false
	}
	return info.WorkflowStartTime.Add(d), true
}
