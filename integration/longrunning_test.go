package integration_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// These tests follow long-running operations on a real Temporal server,
// through the worker binary (and the starter binary for one): the
// reference API (demoapi --async) accepts the work with a 202 and a status
// monitor that answers "running" with Retry-After: 2 for 30 s from the
// acceptance, then the record it made at once. A proxy in front of it
// notes when each poll arrives and which headers it carries.
//
// How many polls that takes: the first poll waits for the start
// answer's Retry-After (2 s, a workflow timer), and Temporal starts poll
// n+1 no earlier than the Retry-After (the attempt's NextRetryDelay)
// after poll n's failure is recorded, so polls are at least 2 s apart: at
// most 14 polls (at ≥ 2, 4, …, 28 s) see the operation running, plus the
// one that sees it ended: 15; opMaxPolls allows one more. A gap is 2 s
// plus the dispatch of a retry and a GET (the dev server's ~1 s timer
// lateness is for timers under ~1 s, TEMPORAL-NOTES.md; 2 s timers fired
// on time), so at most 3 s even on a loaded machine: at least 10 polls
// see it running, 11 in all: opMinPolls. Measured before the first poll
// waited: 16 polls in every run, gaps 2.01-2.19 s, median 2.02 s.
const (
	opDuration   = 30 * time.Second
	opRetryAfter = 2 * time.Second
	opMinPolls   = 11
	opMaxPolls   = 16
	// opMaxGap bounds the gap between two polls of an undisturbed
	// operation: Retry-After + a dispatch and a GET, with room for a
	// loaded machine (-race, two cores, the other tests in parallel) and
	// a timer up to 1 s late; measured 2.01-2.19 s.
	opMaxGap = opRetryAfter + 1500*time.Millisecond
	// opOperation is the operation name of every call here.
	opOperation = "create-order"
)

// opProxy is a reverse proxy in front of demoapi that notes every request
// to an operation's monitor or result, and can hold one GET of the monitor
// as an answer that has not come yet.
type opProxy struct {
	*httptest.Server
	// Base is demoapi's own URL (for /stats).
	Base string

	rp      *httputil.ReverseProxy
	mu      sync.Mutex
	starts  []time.Time
	seen    []pollSeen
	holdAt  int           // the holdAt-th GET of the monitor is held (0: none)
	held    chan struct{} // closed once it is held
	release chan struct{} // closed to let it through
	once    sync.Once
}

// pollSeen is a request to a monitor or a result as the proxy saw it.
type pollSeen struct {
	At time.Time
	// Result: a GET of the result URL, not of the monitor.
	Result bool
	// Auth and Key are the Authorization and Idempotency-Key headers.
	Auth, Key string
	// Dropped: held until its client went away, never passed on.
	Dropped bool
}

// startOpAPI runs demoapi playing style's convention for an operation of
// opDuration with Retry-After opRetryAfter, requiring token on the start
// request, behind an opProxy that holds its holdAt-th monitor GET (0:
// none). The worker must be allowed the proxy's URL, the origin of the
// monitors it names.
func startOpAPI(t testing.TB, style testsuite.AsyncStyle, token string, holdAt int) *opProxy {
	t.Helper()
	_, base := startDemoAPI(t, "--async", string(style), "--async-duration", opDuration.String(),
		"--async-retry-after", fmt.Sprint(int(opRetryAfter/time.Second)), "--require-token", token)
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	p := &opProxy{Base: base, holdAt: holdAt, held: make(chan struct{}), release: make(chan struct{})}
	p.rp = &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		// demoapi names its monitors after the Host it was asked at.
		pr.Out.Host = pr.In.Host
	}}
	p.Server = httptest.NewServer(p)
	t.Cleanup(p.Close)
	t.Cleanup(p.let) // before Close: a held request must end
	return p
}

func (p *opProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	monitor := strings.HasPrefix(r.URL.Path, "/operations/")
	if !monitor && !strings.HasPrefix(r.URL.Path, "/results/") {
		if r.Method == http.MethodPost {
			p.mu.Lock()
			p.starts = append(p.starts, time.Now())
			p.mu.Unlock()
		}
		p.rp.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.seen = append(p.seen, pollSeen{At: time.Now(), Result: !monitor, Auth: r.Header.Get("Authorization"), Key: r.Header.Get("Idempotency-Key")})
	i := len(p.seen) - 1
	hold := monitor && p.holdAt > 0 && p.monitorGets() == p.holdAt
	p.mu.Unlock()
	if hold {
		close(p.held)
		select {
		case <-r.Context().Done():
			p.mu.Lock()
			p.seen[i].Dropped = true
			p.mu.Unlock()
			return
		case <-p.release:
		}
	}
	p.rp.ServeHTTP(w, r)
}

// monitorGets counts the GETs of the monitor seen. p.mu is held.
func (p *opProxy) monitorGets() int {
	n := 0
	for _, s := range p.seen {
		if !s.Result {
			n++
		}
	}
	return n
}

// let lets the held request through.
func (p *opProxy) let() { p.once.Do(func() { close(p.release) }) }

// log returns the start requests' times and the polls seen.
func (p *opProxy) log() ([]time.Time, []pollSeen) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.starts), slices.Clone(p.seen)
}

// monitorCount returns how many GETs of the monitor the proxy has seen.
func (p *opProxy) monitorCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.monitorGets()
}

// opRequest is the ready workflow's input for a followed call to p.
func opRequest(p *opProxy) workflows.Request {
	return workflows.Request{
		Operation: opOperation, URL: p.URL + "/orders", Body: body,
		Follow: &workflows.FollowOptions{Timeout: 5 * time.Minute},
	}
}

// followed is what checkFollowed checks of a followed call.
type followed struct {
	proxy  *opProxy
	wid    string
	resp   *workflows.Response
	events []*historypb.HistoryEvent
	token  string
	// state is the Accepted.State of the end (the status document's
	// "Succeeded"; "" where the status code decides).
	state string
	// resultGets are the GETs of a result URL once the monitor says the
	// operation succeeded (Azure's Location: 1).
	resultGets int
	// lost are the polls that never reached the API (held and dropped).
	lost int
	// minPolls and maxPolls bound Accepted.Polls.
	minPolls, maxPolls int
	// pollIdentity, if set, is the worker that ran the last poll.
	pollIdentity string
	// restart, if set, is when the Temporal server was killed and when it
	// answered again: up to maxEarly polls that come from then to
	// opRetryAfter × 2 after may be early (see
	// TestLongRunningServerRestarted).
	restart  [2]time.Time
	maxEarly int
}

// pollStats are the gaps between the GETs of the monitor the proxy saw,
// and when the first came after the start request.
type pollStats struct {
	Gaps     []time.Duration
	First    time.Duration
	Min, Max time.Duration
	Median   time.Duration
	Took     time.Duration // from the start request to the last poll
}

func (s pollStats) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	return fmt.Sprintf("first poll %s after the start, gaps min %s median %s max %s, %s from the start to the last",
		r(s.First), r(s.Min), r(s.Median), r(s.Max), r(s.Took))
}

// checkFollowed checks a call followed to its end: its result is the
// record, the API got one start request, one key and made one record and
// one operation; every poll carried the worker's token and no key; polls
// came at least Retry-After apart; and the history holds the two
// activities once each, not one event per poll. It returns the polls'
// spacing.
func checkFollowed(t *testing.T, f followed) pollStats {
	t.Helper()
	key := keyOf(f.wid, opOperation)
	resp := f.resp
	if resp.Status != http.StatusOK || resp.IdempotencyKey != key {
		t.Errorf("result: status %d, key %s; want 200 (the monitor's final answer), key %s", resp.Status, resp.IdempotencyKey, key)
	}
	checkRecord(t, resp.Body, key)

	op := resp.Accepted
	if op == nil {
		t.Fatalf("the result has no Operation: %+v", resp)
	}
	if !strings.Contains(op.Monitor, "/operations/op_1") || op.StartStatus != http.StatusAccepted ||
		op.IdempotencyKey != key || op.State != f.state || op.URL != f.proxy.URL+"/orders" {
		t.Errorf("Accepted %+v: want the monitor /operations/op_1 of a 202 to POST %s/orders, key %s, state %q", op, f.proxy.URL, key, f.state)
	}
	if op.Polls < f.minPolls || op.Polls > f.maxPolls {
		t.Errorf("%d polls, want %d..%d", op.Polls, f.minPolls, f.maxPolls)
	}

	// The API: one start request, one key, one record, one operation.
	st := apiStats(t, f.proxy.Base)
	checkStats(t, st, testsuite.Stats{Requests: -1, DistinctKeys: 1, Records: 1, Replays: 0, InFlight: 0, Failures: 0})
	if starts := st.Requests - st.Polls - st.Cancels; starts != 1 || st.Operations != 1 || st.Cancels != 0 {
		t.Errorf("reference API: %d start requests, %d operations, %d cancels; want 1, 1, 0 (all stats: %+v)", starts, st.Operations, st.Cancels, st)
	}
	if want := int(op.Polls) - f.lost + f.resultGets; st.Polls != want {
		t.Errorf("reference API: %d polls, want %d (%d attempts of the poll activity, %d lost on the way, %d GETs of the result)",
			st.Polls, want, op.Polls, f.lost, f.resultGets)
	}

	// What the proxy saw: the polls, each with the token and without the key.
	starts, seen := f.proxy.log()
	if len(starts) != 1 {
		t.Fatalf("%d start requests went through the proxy, want 1", len(starts))
	}
	var monitor []time.Time
	dropped, results := 0, 0
	for i, s := range seen {
		if s.Auth != "Bearer "+f.token || s.Key != "" {
			t.Errorf("poll %d: Authorization %q, Idempotency-Key %q; want the worker's token and no key", i+1, s.Auth, s.Key)
		}
		if s.Result {
			results++
		} else {
			monitor = append(monitor, s.At)
		}
		if s.Dropped {
			dropped++
		}
	}
	if len(monitor) != int(op.Polls) || dropped != f.lost || results != f.resultGets {
		t.Errorf("the proxy saw %d GETs of the monitor (%d dropped) and %d of the result; want %d (one per attempt), %d and %d",
			len(monitor), dropped, results, op.Polls, f.lost, f.resultGets)
	}
	var ps pollStats
	if len(monitor) > 0 {
		ps.First, ps.Took = monitor[0].Sub(starts[0]), monitor[len(monitor)-1].Sub(starts[0])
	}
	for i := 1; i < len(monitor); i++ {
		ps.Gaps = append(ps.Gaps, monitor[i].Sub(monitor[i-1]))
	}
	if len(ps.Gaps) > 0 {
		sorted := slices.Sorted(slices.Values(ps.Gaps))
		ps.Min, ps.Max, ps.Median = sorted[0], sorted[len(sorted)-1], sorted[len(sorted)/2]
	}
	// The Retry-After is a floor: Temporal's timer never fires early. But
	// for polls just after a restart of the Temporal server.
	early := 0
	for i, g := range ps.Gaps {
		if g >= opRetryAfter {
			continue
		}
		at := monitor[i+1]
		if early < f.maxEarly && at.After(f.restart[0]) && at.Before(f.restart[1].Add(2*opRetryAfter)) {
			early++
			t.Logf("poll %d came %s after poll %d, less than the Retry-After (%s), %s after the restarted server answered",
				i+2, g.Round(time.Millisecond), i+1, opRetryAfter, at.Sub(f.restart[1]).Round(time.Millisecond))
			continue
		}
		t.Errorf("poll %d came %s after poll %d, less than the Retry-After (%s)", i+2, g, i+1, opRetryAfter)
	}

	checkFollowHistory(t, f, op.Polls)
	return ps
}

// checkRecord checks that result, a body, is the reference API's record
// of the one start request, made under key.
func checkRecord(t *testing.T, result []byte, key string) {
	t.Helper()
	var rec testsuite.Record
	if err := json.Unmarshal(result, &rec); err != nil {
		t.Fatalf("the result's body %q is not a record: %v", result, err)
	}
	var got, want bytes.Buffer
	_ = json.Compact(&got, rec.Request)
	_ = json.Compact(&want, body)
	if rec.ID != "rec_1" || rec.IdempotencyKey != key || rec.Method != http.MethodPost || rec.Path != "/orders" || got.String() != want.String() {
		t.Errorf("the result's body is the record %+v; want rec_1 of POST /orders %s under key %s", rec, want.String(), key)
	}
}

// checkFollowHistory checks that the history holds the start activity and
// the poll activity once each: one ActivityTaskScheduled, Started and
// Completed per activity, whatever the number of polls, for Temporal
// keeps an activity's retries out of the history. The poll activity's
// Started event carries the last attempt (= polls) and, as its last
// failure, the "still running" that set the wait from the Retry-After. No
// piece of the worker's token is in it.
func checkFollowHistory(t *testing.T, f followed, polls int) {
	t.Helper()
	var (
		scheduled          []string
		started, completed int
		others             []string
		pollStarted        *historypb.ActivityTaskStartedEventAttributes
	)
	for _, ev := range f.events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED {
			// The Web UI names the timer for what it is, without the
			// monitor's query.
			want := "Retry-After wait before polling " + strings.TrimPrefix(f.proxy.URL, "http://") + "/operations/op_1"
			if got := decode(t, ev.GetUserMetadata().GetSummary()); got != want {
				t.Errorf("the first poll's timer summary is %q, want %q", got, want)
			}
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled = append(scheduled, ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started++
			pollStarted = ev.GetActivityTaskStartedEventAttributes()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			completed++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
			enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
		default:
			others = append(others, ev.GetEventType().String())
		}
	}
	// The one timer is the wait for the start answer's Retry-After before
	// the first poll; the polls themselves are retries, never events.
	if want := []string{input.ActivityName, poll.ActivityName}; !slices.Equal(scheduled, want) || started != 2 || completed != 2 ||
		!slices.Equal(others, []string{"TimerStarted", "TimerFired"}) {
		t.Errorf("history (%d events): activities scheduled %v, %d started, %d completed, other events %v; want %v once each, started and completed, and the first poll's timer, nothing else",
			len(f.events), scheduled, started, completed, others, want)
	}
	if pollStarted != nil {
		if int(pollStarted.GetAttempt()) != polls {
			t.Errorf("the poll activity's Started event says attempt %d, the result %d polls", pollStarted.GetAttempt(), polls)
		}
		lf := pollStarted.GetLastFailure()
		if info := lf.GetApplicationFailureInfo(); info.GetType() != workflows.ErrTypeOperationRunning ||
			!strings.Contains(lf.GetMessage(), fmt.Sprintf("next poll in %s (Retry-After \"%d\")", opRetryAfter, int(opRetryAfter/time.Second))) {
			t.Errorf("the last poll's last failure: %q (%v); want a %s waiting the Retry-After", lf.GetMessage(), info, workflows.ErrTypeOperationRunning)
		}
		if f.pollIdentity != "" && pollStarted.GetIdentity() != f.pollIdentity {
			t.Errorf("the last poll ran on %q, want %q", pollStarted.GetIdentity(), f.pollIdentity)
		}
	}
	checkNoSecret(t, "the workflow's history", dump(t, messages(f.events)...), f.token)
}

// TestLongRunningOperation follows an operation of 30 s with Retry-After
// 2 to its record: the default convention (202 + Location polled by status
// code) through the starter binary's --follow, and Azure's status
// document (the worker's --convention ORIGIN=ietf+azure) through a client.
// The two run at once, each with its own API and worker, in one test: the
// suite runs as many tests at a time as there are cores (two here), and
// the wait is the operation's. See the top of the file for the bounds.
func TestLongRunningOperation(t *testing.T) {
	t.Parallel()
	type opCase struct {
		name       string
		style      testsuite.AsyncStyle
		args       []string // the worker's, %s the API's origin
		starter    bool
		state      string
		resultGets int

		p              *opProxy
		token, tq, wid string
		run            client.WorkflowRun // started through a client
	}
	cases := []*opCase{
		{name: "location through the starter", style: testsuite.AsyncLocation, starter: true},
		{name: "azure", style: testsuite.AsyncAzure, args: []string{"--convention", "%s=ietf+azure"}, state: "Succeeded", resultGets: 1},
	}
	ctx := ctxT(t, 3*time.Minute)
	began := time.Now()
	for _, c := range cases {
		c.token = "tok_" + randomHex(16)
		c.p = startOpAPI(t, c.style, c.token, 0)
		var args []string
		for _, a := range c.args {
			args = append(args, strings.ReplaceAll(a, "%s", c.p.URL))
		}
		c.tq = uniqueName(t, string(c.style)+"-tq")
		startWorkerWith(t, workerOptions{TaskQueue: c.tq, Origins: []string{c.p.URL}, Token: c.token}, nil, args...)
		c.wid = uniqueName(t, string(c.style)+"-order")
		if !c.starter {
			c.run = start(t, ctx, c.tq, c.wid, opRequest(c.p))
		}
	}
	// The starter waits for its workflow while the others follow theirs.
	var starter starterRun
	for _, c := range cases {
		if c.starter {
			starter = runStarter(t, ctx, c.tq, "--url", c.p.URL+"/orders", "--operation", opOperation, "--workflow-id", c.wid,
				"--body", string(body), "--follow", "--follow-timeout", "5m")
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := keyOf(c.wid, opOperation)
			var resp workflows.Response
			run := c.run
			if c.starter {
				if starter.Code != 0 {
					t.Fatalf("the starter exited with status %d", starter.Code)
				}
				out := parseStarterOutput(t, starter)
				if out.Status != http.StatusOK || out.IdempotencyKey != key {
					t.Errorf("the starter printed status %d, key %s; want 200, %s", out.Status, out.IdempotencyKey, key)
				}
				checkRecord(t, out.Body, key)
				run = tc.GetWorkflow(ctx, c.wid, out.RunID)
			}
			if err := run.Get(ctx, &resp); err != nil {
				t.Fatalf("workflow failed: %v", err)
			}
			ps := checkFollowed(t, followed{
				proxy: c.p, wid: c.wid, resp: &resp, events: history(t, ctx, c.wid, run.GetRunID()), token: c.token,
				state: c.state, resultGets: c.resultGets, minPolls: opMinPolls, maxPolls: opMaxPolls,
			})
			if ps.Max > opMaxGap {
				t.Errorf("polls came up to %s apart, want at most %s (Retry-After %s + the dev server's timer lateness)", ps.Max, opMaxGap, opRetryAfter)
			}
			t.Logf("%s: %d polls in %s; %s; gaps %v", c.style, resp.Accepted.Polls, ps.Took.Round(10*time.Millisecond), ps, roundAll(ps.Gaps))
		})
	}
	t.Logf("both followed in %s", time.Since(began).Round(10*time.Millisecond))
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Millisecond)
	}
	return out
}

// TestLongRunningWorkerKilled kills (SIGKILL) the worker binary while it
// follows the operation, after 4 polls, in two runs at once (each with its
// own API, task queue and workers): while its 4th GET of the monitor
// waits for an answer (the proxy holds it; the attempt is lost, Temporal
// retries it after its StartToClose of 5 s and the retry policy's
// backoff, 1 s × 2³ for attempt 4), and between two polls (the wait is
// Temporal's retry timer, no worker holds it). A new worker on the task
// queue finishes the following: one start request, one key, one record,
// the final result; the killed worker's lost GET never reached the API.
//
// Bounds: between polls, the kill only lengthens one gap (the new
// worker's start, 1-2 s): opMinPolls-1..opMaxPolls. During a poll, the
// lost attempt's gap is 5 s + 8 s instead of 2 s: polls at ≥ 0, 2, 4, 6
// (lost), 19, 21, …, 29 and the end, at most 11; at the slowest (3 s
// gaps, 1-2 s for the new worker) 0, 3, 6, 9 (lost), 24, 27, 30: at least 7.
func TestLongRunningWorkerKilled(t *testing.T) {
	t.Parallel()
	const killAt = 4
	type killCase struct {
		name               string
		during             bool
		minPolls, maxPolls int

		p                  *opProxy
		token, tq, wid     string
		doomed             *itest.Process
		doomedID, survivor string
		run                client.WorkflowRun
	}
	// The held poll first: its attempt times out 5 s after it is held.
	cases := []*killCase{
		{name: "during a poll", during: true, minPolls: 7, maxPolls: 11},
		{name: "between polls", minPolls: opMinPolls - 1, maxPolls: opMaxPolls},
	}
	ctx := ctxT(t, 3*time.Minute)
	for _, c := range cases {
		c.token = "tok_" + randomHex(16)
		holdAt := 0
		if c.during {
			holdAt = killAt
		}
		c.p = startOpAPI(t, testsuite.AsyncLocation, c.token, holdAt)
		c.tq = uniqueName(t, "tq")
		c.doomedID = uniqueName(t, "doomed")
		c.doomed = startWorker(t, workerOptions{TaskQueue: c.tq, Origins: []string{c.p.URL}, Token: c.token, Identity: c.doomedID})
		c.wid = uniqueName(t, "order")
		req := opRequest(c.p)
		req.StartToCloseTimeout = 5 * time.Second
		c.run = start(t, ctx, c.tq, c.wid, req)
	}
	for _, c := range cases {
		// Wait for the moment: the 4th poll held, or a poll answered
		// after the 4th and the poll activity waiting for the next attempt.
		err := itest.Eventually(ctx, 20*time.Millisecond, func() error {
			if n := c.p.monitorCount(); n < killAt {
				return fmt.Errorf("%d polls so far", n)
			}
			desc, err := tc.DescribeWorkflowExecution(ctx, c.wid, c.run.GetRunID())
			if err != nil {
				return err
			}
			pa := desc.GetPendingActivities()
			if len(pa) != 1 || pa[0].GetActivityType().GetName() != poll.ActivityName {
				return fmt.Errorf("pending activities %v: want the poll activity", pa)
			}
			switch a := pa[0]; {
			case c.during && (a.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED || a.GetAttempt() != killAt || a.GetLastWorkerIdentity() != c.doomedID):
				return fmt.Errorf("pending poll activity %v: want attempt %d started by %s", a, killAt, c.doomedID)
			case !c.during && (a.GetState() != enumspb.PENDING_ACTIVITY_STATE_SCHEDULED || a.GetAttempt() <= killAt):
				return fmt.Errorf("pending poll activity %v: want it scheduled, waiting for attempt %d or later", a, killAt+1)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := c.doomed.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		c.survivor = uniqueName(t, "survivor")
		startWorker(t, workerOptions{TaskQueue: c.tq, Origins: []string{c.p.URL}, Token: c.token, Identity: c.survivor})
		t.Logf("%s: worker %s killed (%s) after %d polls; a new one polling %s later", c.name, c.doomedID, c.doomed.State(),
			c.p.monitorCount(), time.Since(killed).Round(10*time.Millisecond))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var resp workflows.Response
			if err := c.run.Get(ctx, &resp); err != nil {
				t.Fatalf("workflow failed after the worker was killed: %v", err)
			}
			lost := 0
			if c.during {
				lost = 1
			}
			ps := checkFollowed(t, followed{
				proxy: c.p, wid: c.wid, resp: &resp, events: history(t, ctx, c.wid, c.run.GetRunID()), token: c.token,
				lost: lost, minPolls: c.minPolls, maxPolls: c.maxPolls, pollIdentity: c.survivor,
			})
			if c.during && len(ps.Gaps) >= killAt {
				// The poll after the lost one waited for its StartToClose.
				if g := ps.Gaps[killAt-1]; g < 5*time.Second {
					t.Errorf("the poll after the lost one came %s after it, want at least its StartToClose (5s)", g)
				}
			}
			t.Logf("%d polls in %s; %s; gaps %v", resp.Accepted.Polls, ps.Took.Round(10*time.Millisecond), ps, roundAll(ps.Gaps))
		})
	}
}

// TestLongRunningServerRestarted kills (SIGKILL) a Temporal dev server of
// its own, which keeps its state in a SQLite file, while the worker's 3rd
// GET of the monitor waits for its answer (the proxy holds it), and starts
// it again on the same file and port; then lets the GET through. The
// workflow completes with the final result, one start request, one key,
// one record, and no poll lost.
//
// Polls may come early, less than the Retry-After after the one before,
// just after the restart. The restarted server processes again the tasks
// its queues had not checkpointed, among them the poll activity's
// TransferActivityTask, made when it was scheduled: Temporal 1.29.1 pushes
// it to matching checking only the activity's stamp
// (transferQueueActiveTaskExecutor.processActivityTask), and starts the
// activity on it without checking that the retry's backoff has passed
// (api/recordactivitytaskstarted), so the next attempt starts at once.
// The server's debug log of such a run shows it: the transfer queue
// processes the activity's task again, two retry timers are made 80 ms
// apart, and the first fires as a "Duplicate activity retry timer task".
// Each task delivered before the kill can come again at most once: up to
// holdAt early polls. Seen in 15 runs of 18: one early poll (0.09-1.5 s
// after the restarted server answered) in 13, two in a row in 2.
//
// Bounds: the restart lengthens one gap by the server's downtime (under a
// second with SQLite) and, if the held attempt's completion did not reach
// the new server, by its StartToClose (20 s here) and a backoff; the
// Retry-After floor caps the count at opMaxPolls, plus the early polls;
// gaps of up to 3 s otherwise give at least 5 polls (3 before, 30 s − 20 s
// − 4 s after).
func TestLongRunningServerRestarted(t *testing.T) {
	t.Parallel()
	const holdAt = 3
	srv := itest.StartRestartableDevServerT(t, itest.DevServerOptions{CLI: bins.Temporal})
	ctx := ctxT(t, 3*time.Minute)
	c, err := srv.Dial(ctx, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	token := "tok_" + randomHex(16)
	p := startOpAPI(t, testsuite.AsyncLocation, token, holdAt)
	tq := uniqueName(t, "tq")
	startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{p.URL}, Token: token, Server: &temporalServer{Env: srv.Env(), Client: c}})
	wid := uniqueName(t, "order")
	req := opRequest(p)
	req.StartToCloseTimeout = 20 * time.Second
	run := startOn(t, ctx, c, tq, wid, req)

	select {
	case <-p.held:
	case <-ctx.Done():
		t.Fatalf("the worker's %d-th poll never came: %d polls", holdAt, p.monitorCount())
	}
	pid := srv.Pid()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	down := up.Sub(killed)
	t.Logf("dev server (pid %d) killed with the worker's poll %d in flight; up again (pid %d) on %s after %s",
		pid, holdAt, srv.Pid(), srv.HostPort, down.Round(10*time.Millisecond))
	p.let()

	var resp workflows.Response
	if err := run.Get(ctx, &resp); err != nil {
		t.Fatalf("workflow failed after the server restart: %v", err)
	}
	ps := checkFollowed(t, followed{
		proxy: p, wid: wid, resp: &resp, events: historyOn(t, ctx, c, wid, run.GetRunID()), token: token,
		minPolls: 5, maxPolls: opMaxPolls + holdAt, restart: [2]time.Time{killed, up}, maxEarly: holdAt,
	})
	t.Logf("%d polls in %s; %s; gaps %v", resp.Accepted.Polls, ps.Took.Round(10*time.Millisecond), ps, roundAll(ps.Gaps))
}
