package activities

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/longrunning"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/internal/seal"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// pollActivity is the poll activity, registered as "IdempotentHTTPPoll": it
// follows a long-running operation, one GET of its status monitor per
// attempt, the input workflows.Call (with Request.Follow) and
// workflows.FollowAccepted schedule it with.
//
// The start request's origin's Convention.LongRunning reads the answer. An
// operation still running ends the attempt with a retryable
// workflows.ErrTypeOperationRunning whose NextRetryDelay is the monitor's
// Retry-After (at least 1 second, at most
// Config.MaxRetryAfter), else the poll backoff: Temporal's retry timer, not
// the worker, holds the wait, so a waiting operation costs the worker no
// goroutine and survives a worker's or the Temporal server's restart. A
// failed read of the monitor is classified as any answer is (the table
// in docs/how-it-works.md) and retried at the same pace. A succeeded operation returns its
// final result (the monitor's answer, its ResultField, the result URL's, or
// a 303's target's); a failed or cancelled one fails with
// workflows.ErrTypeOperationFailed or ErrTypeOperationCanceled; one still
// running when the next poll could not happen before the schedule-to-close
// deadline fails with ErrTypeOperationStillRunning. Polls carry the
// monitor origin's credentials, never the idempotency key. Each request
// goes through the origin's admission (Config.Admission) as the start
// request does: one not admitted ends the attempt with a retryable
// workflows.ErrTypeNotAdmitted. Asked to cancel the operation instead, it
// sends the convention's cancel request, retried as a poll is, and counts
// the requests that reached the API: it fails after the third that failed
// (attempts not admitted, whose credential could not be applied or that
// could not connect send none).
func (a *Activities) pollActivity(ctx context.Context, in poll.Monitor) (*workflows.Response, error) {
	if !activity.IsActivity(ctx) {
		return nil, errors.New("activities: the poll activity runs only as a Temporal activity: register it with Activities.Register and follow operations from a workflow (workflows.Request.Follow)")
	}
	info := activity.GetInfo(ctx)
	pl := &poller{a: a, info: info, in: in, op: followedOperation(&in, info.Attempt)}
	resp, err := pl.poll(ctx)
	if pl.span != nil {
		// As the start request's: the attempt's span ends with its result.
		endSpan(pl.span, pl.status, resp, err)
	}
	m := a.metrics(ctx, pl.origin, in.Operation)
	a.countIn(m, metricPolls, err)
	if pl.status > 0 {
		m.Timer(metricAttemptDuration).Record(pl.took)
	}
	return resp, err
}

// poller is one attempt of the poll activity.
type poller struct {
	a    *Activities
	info activity.Info
	in   poll.Monitor
	op   *workflows.Accepted
	// l is the start origin's convention, start that origin and startURL
	// the start request's URL; style reads the monitor's answers.
	l        *LongRunning
	start    string
	startURL *url.URL
	style    longrunning.Style
	// span is the attempt's client span, started by its first request
	// sent, and spanCtx the context that carries it.
	span    trace.Span
	spanCtx context.Context
	// origin is the origin of the last request (for metrics), status its
	// answer's status (0: none, or it was not admitted), took the time the
	// requests of the attempt took.
	origin string
	status int
	took   time.Duration
	// ended: the status document said the operation succeeded (its 202
	// is then no "still running").
	ended bool
	// prev is the progress of the attempts before this one.
	prev progress
	// succeeded: the status document said so; what fails after (reading
	// the result) says it.
	succeeded bool
	// reached: a request of this attempt reached the API (a poll, or a
	// cancel request, that counts).
	reached bool
	// credential: the attempt ends waiting for the origin's credential
	// (nothing sent), refused: it was refused (progress.RefusedSince).
	credential, refused bool
	// resultURL is the operation's result URL as the server named it
	// (op.ResultURL may show it redacted: Accepted.Sealed).
	resultURL string
}

// poll runs the attempt: one GET of the monitor (or the cancel request),
// and the request its answer leads to, if any.
func (pl *poller) poll(ctx context.Context) (*workflows.Response, error) {
	mon, err := pl.begin(ctx)
	if err != nil {
		return nil, err
	}
	method := http.MethodGet
	if pl.in.Cancel {
		var ok bool
		if method, mon, ok = pl.l.cancel().Request(mon); !ok {
			activity.GetLogger(ctx).Info("operation not cancelled: its convention has no cancel request", "key", pl.in.IdempotencyKey)
			pl.origin = pl.start
			return nil, nil
		}
	}
	p := pl.prepare(method, mon, pl.sealedShown(pl.op.Monitor, pl.in.Cancel))
	ans, err := pl.send(ctx, p)
	if err != nil {
		return nil, err
	}
	if pl.in.Cancel {
		return pl.result(ctx, p, &ans, "")
	}
	return pl.read(ctx, p, &ans, true)
}

// begin finds the start origin's convention and the monitor to poll,
// checked as the start's monitor is.
func (pl *poller) begin(ctx context.Context) (string, error) {
	a, in := pl.a, pl.in
	su, err := a.urls.parse(in.URL)
	if err != nil {
		return "", pl.final(nil, workflows.ErrTypeInvalidRequest, 0, "the operation's start URL: "+err.Error(), "")
	}
	so := a.origins[su.origin]
	if so == nil {
		return "", pl.final(nil, workflows.ErrTypeOriginNotAllowed, 0, fmt.Sprintf("origin %s of the operation's start request is not allowed by this worker: add it to Config.AllowedOrigins", su.origin), "")
	}
	// A webhook's fallback poll reads the resource by the workflow's rule
	// (style); the origin's convention still says which monitors to follow.
	pl.l, pl.start, pl.startURL = &so.conv.LongRunning, su.origin, su.url
	pl.style = pl.l.style(&pl.in)
	if pl.prev = loadProgress(ctx, pl.info.Attempt); pl.prev.Monitor != "" && !in.Cancel {
		// Moved by an earlier poll.
		pl.op.Monitor, pl.op.Sealed = pl.prev.Monitor, pl.prev.Sealed
	}
	// Attempts that were not admitted sent no poll.
	pl.op.Polls = int(pl.prev.Sent) + 1
	monitor, result, err := a.unseal(&poll.Monitor{Accepted: *pl.op})
	if errors.Is(err, seal.ErrKeyNotHeld) {
		return "", pl.awaitKey(ctx, err)
	}
	if err != nil {
		return "", pl.final(nil, workflows.ErrTypeMonitorNotFollowed, 0, fmt.Sprintf("the monitor %s cannot be followed: %v", a.shownURL(pl.op.Monitor), err), "")
	}
	pl.resultURL = result
	// What a server names is checked before it is written to history
	// (followable): a sealed URL was, and a webhook's fallback poll reads
	// the URL the workflow wrote (WebhookPoll.URL, in history already, as
	// Request.URL is): polled as written.
	written := in.Status != nil && pl.op.Monitor == in.Monitor
	mon, secret, err := a.followable(pl.l, su.origin, su.url, monitor, !written && pl.op.Sealed == "")
	if err == nil && secret != "" {
		err = fmt.Errorf("%s, which must not be in Temporal's history in clear", secret)
	}
	if err != nil {
		return "", pl.final(nil, workflows.ErrTypeMonitorNotFollowed, 0, fmt.Sprintf("the monitor %s cannot be followed: %v", a.shownURL(pl.op.Monitor), err), "")
	}
	return mon, nil
}

// awaitKeyDelay is how long a poll waits for a worker that holds the key
// its monitor was sealed with.
const awaitKeyDelay = 5 * time.Second

// awaitKey ends the attempt, which sent nothing, when this worker does not
// hold the key the monitor was sealed with (err): another may, in a key
// rotation rolled out one worker at a time, so the poll is retried
// (workflows.ErrTypeCredentialUnavailable, not counted as a poll) until
// following it times out (ErrTypeOperationStillRunning, resumable).
func (pl *poller) awaitKey(ctx context.Context, err error) error {
	a := pl.a
	d := pl.details(nil, 0)
	d.Reason = fmt.Sprintf("the monitor %s cannot be opened here: %v", a.shownURL(pl.op.Monitor), err)
	d.OutcomeUnknown = true
	next := pl.prev
	next.Attempt = pl.info.Attempt
	if left, beyond := beyondDeadline(pl.info, pl.prev, &next, a.cfg.Now(), awaitKeyDelay); beyond {
		return pl.final(nil, workflows.ErrTypeOperationStillRunning, 0, fmt.Sprintf("%s, and only %s remain before following it times out: the operation may still end at the server; give every worker the same Config.SealKeys, then resume with workflows.FollowAccepted and Failure.Accepted", d.Reason, max(left, 0).Round(time.Millisecond)), "")
	}
	activity.GetLogger(ctx).Warn("poll waits for a worker that holds its monitor's seal key", "key", d.IdempotencyKey, "error", err.Error())
	return a.handOver(ctx, next, workflows.ErrTypeCredentialUnavailable,
		d.Reason+"; asking again in "+awaitKeyDelay.String()+" (a worker that holds the key may take it): give every worker the same Config.SealKeys", awaitKeyDelay, true, d)
}

// read ends the attempt with the monitor's answer ans to p, as the style
// reads it; see: a 303 may still be followed (once per attempt).
func (pl *poller) read(ctx context.Context, p *prepared, ans *answer, see bool) (*workflows.Response, error) {
	if ans.err != nil || !(see && ans.status == http.StatusSeeOther) && (ans.status < 200 || ans.status > 299) {
		return pl.result(ctx, p, ans, "")
	}
	if err := pl.whole(p, ans); err != nil {
		return nil, err
	}
	r := pl.style.Read(longrunning.Answer{Status: ans.status, Header: ans.header, Body: ans.body})
	name := pl.stateName(r.Name)
	pl.op.State = name
	switch r.State {
	case longrunning.Ended, longrunning.Elsewhere:
		if r.Next == "" {
			return pl.result(ctx, p, ans, "")
		}
		return pl.seeOther(ctx, p, ans, r)
	case longrunning.Running:
		return nil, pl.moved(ctx, p, ans, r.Next, name)
	case longrunning.Unreadable:
		field, _ := pl.style.Document()
		return nil, pl.retry(ctx, p, ans, workflows.ErrTypeHTTPRetryableStatus,
			fmt.Sprintf("the monitor's %d answer is not a status document this origin's Convention.LongRunning reads (no %s): polling again", ans.status, field))
	case longrunning.Failed, longrunning.Canceled:
		return nil, pl.failed(p, ans, r, name)
	}
	return pl.succeed(ctx, p, ans, r.Detail, name)
}

// whole fails the following when the style reads a status document and
// ans, a 2xx, holds none it can read: cut at Config.MaxResponseBytes, or
// in a content coding the worker cannot decode.
func (pl *poller) whole(p *prepared, ans *answer) error {
	a := pl.a
	if _, doc := pl.style.Document(); !doc || ans.status == http.StatusSeeOther ||
		ans.size <= a.cfg.MaxResponseBytes && !ans.truncated && ans.encoded == "" {
		return nil
	}
	return pl.final(p, workflows.ErrTypeHTTPNonRetryableStatus, ans.status,
		fmt.Sprintf("the monitor's %d status document (%d bytes, content coding %q) cannot be read: it is larger than Config.MaxResponseBytes (%d) or in a coding the worker cannot decode; raise MaxResponseBytes, then resume with workflows.FollowAccepted and the Failure's Accepted",
			ans.status, ans.size, ans.encoded, a.cfg.MaxResponseBytes), "")
}

// moved ends the attempt of an operation still running (its state name):
// next, when set, is the monitor's new URL, where the next poll goes (RFC
// 9110's 202 names the monitor in Location; Azure SDKs follow the newest).
func (pl *poller) moved(ctx context.Context, p *prepared, ans *answer, next, name string) error {
	if next != "" {
		moved, secret, err := pl.a.followable(pl.l, pl.start, ans.from, next, true)
		if err == nil {
			// The result URL stays; it is sealed again if it was.
			resultSecret := ""
			if pl.resultURL != pl.in.ResultURL {
				resultSecret = "it was sealed"
			}
			err = pl.a.record(pl.op, moved, secret, pl.resultURL, resultSecret)
		}
		if err != nil {
			return pl.final(p, workflows.ErrTypeMonitorNotFollowed, ans.status, fmt.Sprintf("the monitor answered 202 with Location %s, a new monitor this worker will not follow: %v. The operation goes on at the server: fix the worker's configuration (Convention.LongRunning, Config.AllowedOrigins, Config.SealKeys), then resume with workflows.FollowAccepted and the Failure's Accepted", pl.a.shownURL(next), err), "")
		}
	}
	return pl.running(ctx, p, ans, name)
}

// failed fails the following of an operation its status document says
// failed or was cancelled (r, its state name), with the server's error.
func (pl *poller) failed(p *prepared, ans *answer, r longrunning.Reading, name string) error {
	t, what := workflows.ErrTypeOperationFailed, "failed"
	if r.State == longrunning.Canceled {
		t, what = workflows.ErrTypeOperationCanceled, "was cancelled"
	}
	body := ans.body
	if r.Detail != nil {
		body = r.Detail
	}
	shown := pl.a.redact.snippet(body)
	return pl.final(p, t, ans.status, fmt.Sprintf("the operation %s (status %q): %s", what, name, shown), shown)
}

// seeOther reads the answer at r.Next, a 303's target: the operation's
// result (r.State Ended), or the resource whose status document decides,
// as the monitor's would have (Elsewhere: a webhook's fallback poll).
func (pl *poller) seeOther(ctx context.Context, p *prepared, ans *answer, r longrunning.Reading) (*workflows.Response, error) {
	target, _, err := pl.a.followable(pl.l, pl.start, ans.from, r.Next, false)
	if err != nil {
		return nil, pl.final(p, workflows.ErrTypeRedirectNotFollowed, ans.status, fmt.Sprintf("the monitor answered 303 See Other to %s, which this worker will not follow: %v", redact.URL(r.Next), err), "")
	}
	p = pl.prepare(http.MethodGet, target, "")
	got, err := pl.send(ctx, p)
	if err != nil {
		return nil, err
	}
	if r.State == longrunning.Ended {
		return pl.result(ctx, p, &got, "")
	}
	return pl.read(ctx, p, &got, false)
}

// succeed ends the attempt of an operation its status document says
// succeeded (its state name): the result is read at the operation's
// result URL, else it is the document's result field (detail), else the
// document.
func (pl *poller) succeed(ctx context.Context, p *prepared, ans *answer, detail []byte, name string) (*workflows.Response, error) {
	pl.succeeded = true
	if pl.resultURL != "" {
		target, _, err := pl.a.followable(pl.l, pl.start, pl.startURL, pl.resultURL, false)
		if err != nil {
			return nil, pl.final(p, workflows.ErrTypeMonitorNotFollowed, ans.status, fmt.Sprintf("the operation succeeded, but its result URL %s cannot be read: %v", pl.a.shownURL(pl.in.ResultURL), err), "")
		}
		p = pl.prepare(http.MethodGet, target, pl.sealedShown(pl.op.ResultURL, false))
		got, err := pl.send(ctx, p)
		if err != nil {
			return nil, err
		}
		return pl.result(ctx, p, &got, name)
	}
	pl.ended = true
	if detail != nil {
		ans.body, ans.size, ans.sha256 = detail, int64(len(detail)), ""
	}
	return pl.result(ctx, p, ans, name)
}

// stateName is a state's name as the server wrote it, redacted and cut
// to maxStateBytes (it goes to history, logs and messages).
func (pl *poller) stateName(name string) string {
	name = pl.a.redact.string(name)
	if len(name) > maxStateBytes {
		name = strings.ToValidUTF8(name[:maxStateBytes], "") + "…"
	}
	return name
}

// maxStateBytes bounds a state's name as the server wrote it.
const maxStateBytes = 64

// prepare is the request of method to raw (an URL followable has
// checked): the monitor origin's credentials, no key. shown, when set, is
// how raw is shown (sealedShown), else it is shown as any URL is.
func (pl *poller) prepare(method, raw, shown string) *prepared {
	pu, err := pl.a.urls.parse(raw)
	if err != nil {
		// followable parsed it.
		panic(err)
	}
	switch {
	case shown == "":
		shown = pu.shown
	case !strings.HasPrefix(shown, pu.origin+"/"):
		// Accepted's shown URL is not of the origin sealed with it (a
		// workflow changed it): the origin alone.
		shown = pu.origin + "/" + redacted
	}
	req := input.Input{Operation: pl.in.Operation, Method: method, URL: pu.raw, IdempotencyKey: pl.in.IdempotencyKey}
	return &prepared{req: req, method: method, url: pu.url, raw: pu.raw, shown: pl.a.redact.string(shown), origin: pu.origin, o: pl.a.origins[pu.origin], noKey: true}
}

// sealedShown is how the operation's URL shown (its Accepted.Monitor or
// ResultURL; for its cancel request when cancel) shows the URL it stands
// for when that one is sealed (Accepted.Sealed), else "". A sealed URL
// holds a secret that the worker that sealed it knew, and the one that
// opens it may not (it started after a token it never fetched, or its
// redactor has let an old secret go): it is shown as the sealing worker
// showed it, never as it is.
func (pl *poller) sealedShown(shown string, cancel bool) string {
	if pl.op.Sealed == "" || shown == "" {
		return ""
	}
	if cancel {
		// The cancel request's URL (longrunning.Cancel.Request), shown.
		path, query, ok := strings.Cut(shown, "?")
		shown = path + pl.l.CancelSuffix
		if ok {
			shown += "?" + query
		}
	}
	return shown
}

// send sends p once admitted, as the start request is (admit, exchange,
// in the attempt's client span, which Poll ends with the attempt's result
// as requestActivity does): a poll is no retry for the retry budget unless the last one
// failed, and one not admitted ends the attempt with a retryable
// workflows.ErrTypeNotAdmitted, the operation in its Failure; its next
// attempt polls at its turn. The error is nil when it was sent.
func (pl *poller) send(ctx context.Context, p *prepared) (answer, error) {
	a := pl.a
	pl.origin, pl.status = p.origin, 0
	d := pl.details(p, 0)
	d.OutcomeUnknown = !pl.in.Cancel
	q := asking{info: pl.info, prev: &pl.prev, retry: pl.prev.Retry || pl.prev.Unknown, d: d,
		lateType: workflows.ErrTypeOperationStillRunning, lateAdvice: "The operation may still end at the server: resume with workflows.FollowAccepted and Failure.Accepted"}
	if pl.in.Cancel {
		q.lateType, q.lateAdvice = workflows.ErrTypeRetryWouldExceedDeadline, "The operation goes on at the server: ask it to cancel again later"
	}
	if err := a.admit(ctx, p, a.metrics(ctx, p.origin, pl.in.Operation), q); err != nil {
		return answer{}, err
	}
	if pl.span == nil {
		pl.spanCtx, pl.span = a.startSpan(ctx, p, pl.info.Attempt)
	}
	p.inject = a.cfg.Propagator != nil || pl.span.SpanContext().IsValid()
	start := time.Now()
	ans := a.exchange(pl.spanCtx, pl.info.TaskQueue, p)
	pl.took += time.Since(start)
	pl.status = ans.status
	// A request that never left the worker (its credential could not be
	// applied) is no poll; a cancel request counts only when it reached
	// the API (a connection was made).
	if !ans.unsent() && !(pl.in.Cancel && notConnected(ans.err)) {
		pl.reached = true
	}
	return ans, nil
}

// result ends the attempt with the answer ans to p: a 2xx is the final
// result (a 202 still running), anything else is classified as any
// answer is.
func (pl *poller) result(ctx context.Context, p *prepared, ans *answer, state string) (*workflows.Response, error) {
	if ans.err == nil && ans.status == http.StatusAccepted && !pl.in.Cancel && !pl.ended {
		return nil, pl.running(ctx, p, ans, state)
	}
	// A poll carries no key: no answer of it is about a key, and a 409 is
	// only a conflict (retried, as the monitor may settle).
	v := decide(ans, &Convention{}, progress{})
	if v.credential {
		// Asked again as the start request's credential is (askAgain,
		// credentialBackoff), not counted as a poll.
		v = askAgain(v, p.o, pl.prev.RefusedSince, pl.a.cfg.Now())
		pl.credential, pl.refused = v.kind == kindRetry, v.refused
		if pl.credential && v.retryAfter == 0 {
			v.retryAfter = credentialBackoff(pl.prev.Credential + 1)
		}
	}
	if v.inFlight {
		v.errType, v.reason = workflows.ErrTypeHTTPRetryableStatus, fmt.Sprintf("%d from the monitor, marked to retry", ans.status)
	}
	if v.retryAfter > 0 {
		// A credential's Retry-After (a token endpoint's): nothing was
		// sent, so there is no answer's header; the wait is taken as a
		// monitor's Retry-After would be.
		ans.header = http.Header{"Retry-After": {strconv.FormatInt(int64(math.Ceil(v.retryAfter.Seconds())), 10)}}
	}
	switch v.kind {
	case kindSuccess:
		pl.op.State = state
		r := pl.a.result(ans, p, pl.info.Attempt, pl.op)
		r.Replayed = false
		activity.GetLogger(ctx).Info("long-running operation ended", "key", pl.in.IdempotencyKey, "monitor", pl.a.shownURL(pl.op.Monitor), "status", ans.status, "polls", pl.info.Attempt, "state", state)
		return r, nil
	case kindFinal:
		return nil, pl.final(p, v.errType, ans.status, pl.describe(p, ans, v.reason), pl.a.redact.snippet(ans.body))
	}
	return nil, pl.retry(ctx, p, ans, v.errType, pl.describe(p, ans, v.reason))
}

// describe says what ans to p was, for an error's message.
func (pl *poller) describe(p *prepared, ans *answer, reason string) string {
	if ans.err != nil {
		return fmt.Sprintf("%s %s: %s (%s)", p.method, p.shown, redact.Err(ans.err), reason)
	}
	return fmt.Sprintf("%s %s answered %d: %s", p.method, p.shown, ans.status, reason)
}

// details are the Failure of this attempt.
func (pl *poller) details(p *prepared, status int) workflows.Failure {
	shown := pl.a.shownURL(pl.op.Monitor)
	d := workflows.Failure{
		Operation: pl.in.Operation, Method: http.MethodGet, URL: shown, IdempotencyKey: pl.in.IdempotencyKey,
		Attempt: pl.info.Attempt, Status: status, Accepted: pl.op, Location: shown,
	}
	if p != nil {
		d.Method, d.URL = p.method, p.shown
	}
	return d
}

// final fails the following for good: the operation's outcome is not
// known to the workflow unless the monitor said it (failed, cancelled).
func (pl *poller) final(p *prepared, errType string, status int, msg, body string) error {
	if pl.succeeded {
		msg = fmt.Sprintf("the operation succeeded (status %q), but its result could not be read: %s; the result is still at the server: resume with workflows.FollowAccepted and the Failure's Accepted", pl.op.State, msg)
	}
	d := pl.details(p, status)
	d.Body = body
	d.OutcomeUnknown = errType != workflows.ErrTypeOperationFailed && errType != workflows.ErrTypeOperationCanceled
	d.Reason = msg
	return pl.a.fail(msg, errType, d)
}

// running ends the attempt of an operation still running: Temporal polls
// again after the wait.
func (pl *poller) running(ctx context.Context, p *prepared, ans *answer, state string) error {
	pl.op.State = state
	shown := state
	if shown == "" {
		shown = fmt.Sprint(ans.status)
	}
	return pl.retry(ctx, p, ans, workflows.ErrTypeOperationRunning, fmt.Sprintf("the operation is still running (%s, poll %d)", shown, pl.info.Attempt))
}

// retry ends the attempt with a retryable error of errType: the next poll
// waits the monitor's Retry-After (bounded by poll.MinInterval and
// Config.MaxRetryAfter), else the poll backoff; if it could not happen
// before the deadline, the following fails with
// ErrTypeOperationStillRunning.
func (pl *poller) retry(ctx context.Context, p *prepared, ans *answer, errType, msg string) error {
	a := pl.a
	now := a.cfg.Now()
	d := pl.details(p, ans.status)
	d.Reason = msg
	delay, source := time.Duration(0), ""
	if ra, wait, ok := a.pollRetryAfter(ans.header, now, a.origins[pl.start], pl.in.Backoff); ok {
		d.RetryAfter, delay = ra, wait
		source = fmt.Sprintf("Retry-After %q", strings.Join(ans.header.Values("Retry-After"), ", "))
	} else {
		b := pl.in.Backoff
		if b.InitialInterval <= 0 {
			b = poll.Backoff(0, 0)
		}
		delay = max(b.Delay(int32(pl.op.Polls), a.cfg.Uniform, 0), poll.MinInterval)
		source = "poll backoff"
	}
	// The deadline is carried over to Config.Now's clock once and kept in
	// the heartbeat, as the HTTP activity does (see scheduleDeadline).
	prev := pl.prev
	if !pl.reached {
		pl.op.Polls = int(prev.Sent)
	}
	next := progress{Attempt: pl.info.Attempt, Deadline: prev.Deadline, Sent: int32(pl.op.Polls), Retry: errType != workflows.ErrTypeOperationRunning,
		Credential: prev.Credential, RefusedSince: prev.RefusedSince}
	if pl.credential {
		next.Credential++
		if pl.refused && next.RefusedSince.IsZero() {
			next.RefusedSince = now
		}
	}
	if (pl.op.Monitor != pl.in.Monitor || pl.op.Sealed != pl.in.Sealed) && !pl.in.Cancel {
		next.Monitor, next.Sealed = pl.op.Monitor, pl.op.Sealed
	}
	if pl.in.Cancel && pl.reached && next.Sent >= poll.CancelAttempts {
		// The activity counts the cancel requests that reached the API:
		// attempts the origin's admission held back sent none, nor did
		// those whose credential could not be applied or that could not
		// connect.
		activity.GetLogger(ctx).Error("cancel request failed, none left", "key", d.IdempotencyKey, "sent", next.Sent, "status", d.Status)
		return a.fail(fmt.Sprintf("%s; that was the last of %d cancel requests: the operation goes on at the server: ask it to cancel again later",
			msg, poll.CancelAttempts), errType, d)
	}
	left, beyond := beyondDeadline(pl.info, prev, &next, now, delay)
	a.leave(ctx, next)
	if beyond && pl.in.Cancel {
		d.NextRetryDelay = delay
		activity.GetLogger(ctx).Error("cancel request not retried before the deadline", "key", d.IdempotencyKey, "sent", next.Sent, "delay", delay)
		return a.fail(fmt.Sprintf("%s; the next cancel request would wait %s (%s) but only %s remain for asking (%s): the operation goes on at the server: ask it to cancel again later",
			msg, delay, source, max(left, 0).Round(time.Millisecond), pl.info.ScheduleToCloseTimeout), workflows.ErrTypeRetryWouldExceedDeadline, d)
	}
	if beyond {
		d.NextRetryDelay = delay
		d.OutcomeUnknown = true
		activity.GetLogger(ctx).Error("long-running operation still running at the deadline", "key", d.IdempotencyKey, "monitor", d.Location, "polls", pl.info.Attempt)
		return a.fail(fmt.Sprintf("%s; the next poll would wait %s (%s) but only %s remain before following it times out (%s of the timeout were left for polling): the operation may still end at the server; resume with workflows.FollowAccepted and Failure.Accepted",
			msg, delay, source, max(left, 0).Round(time.Millisecond), pl.info.ScheduleToCloseTimeout), workflows.ErrTypeOperationStillRunning, d)
	}
	d.NextRetryDelay = delay
	m := a.metrics(ctx, p.origin, pl.in.Operation)
	observeRetry(m, delay, true, source != "poll backoff", false)
	logger := activity.GetLogger(ctx)
	if errType == workflows.ErrTypeOperationRunning {
		logger.Debug("long-running operation still running", "key", d.IdempotencyKey, "poll", pl.info.Attempt, "state", pl.op.State, "delay", delay)
	} else {
		logger.Warn("poll of a long-running operation failed, Temporal will poll again", "key", d.IdempotencyKey, "status", d.Status, "poll", pl.info.Attempt, "delay", delay)
	}
	opts := temporal.ApplicationErrorOptions{NextRetryDelay: delay, Details: []any{a.scrub(d)}}
	if errType == workflows.ErrTypeOperationRunning {
		// Waiting is no failure: the SDK logs a benign error at Debug and
		// leaves it out of its failure metrics (1000 operations polled
		// every 5 s logged 10,863 "Activity error." lines otherwise).
		opts.Category = temporal.ApplicationErrorCategoryBenign
	}
	return temporal.NewApplicationErrorWithOptions(a.redact.string(fmt.Sprintf("%s; next poll in %s (%s)", msg, delay, source)), errType, opts)
}
