package integration_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// These tests await the outcome of operations by signed webhooks, end to
// end: the reference server (in this process, testsuite.Options.Webhooks)
// starts an operation per new key, answers 201 {"id": "op_N"}, and, once
// it ends, delivers its signed events to the worker binary's receiver
// (--webhook-addr, POST /webhooks) or to a callback URL; the workflows are
// the ready workflow, run by the worker binary, but for the callback
// tests, whose workflow runs on a worker in this process.

const (
	// hookOperation is the operation name of every call here.
	hookOperation = "charge"
	// The event types of the reference server's events.
	hookSucceeded  = "operation.succeeded"
	hookFailed     = "operation.failed"
	hookProcessing = "operation.processing"
)

// hookOptions are the WebhookOptions of the calls here: the reference
// server's terminal event types, a timeout well under the workflows'
// execution timeout (5 min), and poll, if set, as the fallback.
func hookOptions(poll *workflows.WebhookPoll) *workflows.WebhookOptions {
	return &workflows.WebhookOptions{
		Succeeded: []string{hookSucceeded}, Failed: []string{hookFailed},
		Timeout: 3 * time.Minute, Poll: poll,
	}
}

// hookSecret returns a new signing secret for scheme: "whsec_" and 32
// bytes in base64 for Standard Webhooks, "whsec_" and hex for Stripe.
func hookSecret(scheme string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	if scheme == "standard-webhooks" {
		return "whsec_" + base64.StdEncoding.EncodeToString(b)
	}
	return "whsec_" + hex.EncodeToString(b)
}

// hookBody is the start request's body of the ready workflow's call in
// workflowID: the metadata names the workflow and operation, and the
// reference server copies it into its events, where the receiver's default
// routing fields read it.
func hookBody(workflowID string, amount int) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"amount":   amount,
		"metadata": map[string]string{"workflow_id": workflowID, "operation": hookOperation},
	})
	return b
}

// hookCall is one workflow of a test here and how it ended.
type hookCall struct {
	wid        string
	srv        *testsuite.Server
	wantFailed bool
	run        client.WorkflowRun
	// Set by wait:
	resp *workflows.Response
	err  error
	out  *workflows.Outcome
}

// startHookCalls starts the ready workflow for each call, with a POST to
// its server's /payments and the webhook options opts.
func startHookCalls(t *testing.T, ctx context.Context, tq string, calls []*hookCall, opts *workflows.WebhookOptions) {
	t.Helper()
	for i, c := range calls {
		c.run = start(t, ctx, tq, c.wid, workflows.Request{
			Operation: hookOperation, URL: c.srv.URL + "/payments", Body: hookBody(c.wid, 100+i), Webhook: opts,
		})
	}
}

// waitHookCalls waits for every call's workflow to end and sets its
// result, error and Outcome (of the result, or of the failure of a failed
// operation).
func waitHookCalls(ctx context.Context, calls []*hookCall) {
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			var resp workflows.Response
			if c.err = c.run.Get(ctx, &resp); c.err == nil {
				c.resp, c.out = &resp, resp.Outcome
			} else if f, ok := workflows.AsFailure(c.err); ok {
				c.out = f.Outcome
			}
		})
	}
	wg.Wait()
}

// checkHookOutcome checks that c ended as wanted (its operation succeeded,
// or failed if c.wantFailed) and that source said so.
func checkHookOutcome(t *testing.T, c *hookCall, source workflows.Source) bool {
	t.Helper()
	want := workflows.StateSucceeded
	if c.wantFailed {
		want = workflows.StateFailed
	}
	switch f, _ := workflows.AsFailure(c.err); {
	case c.out == nil:
		t.Errorf("%s: no Outcome; error %v", c.wid, c.err)
		return false
	case c.wantFailed && (c.err == nil || f.Type != workflows.ErrTypeOperationFailed):
		t.Errorf("%s: want a failure of type %s, got %v", c.wid, workflows.ErrTypeOperationFailed, c.err)
	case !c.wantFailed && c.err != nil:
		t.Errorf("%s: %v", c.wid, c.err)
	case c.out.State != want || c.out.Source != source:
		t.Errorf("%s: Outcome %s from %s, want %s from %s", c.wid, c.out.State, c.out.Source, want, source)
	default:
		return true
	}
	return false
}

// hookDeliveries sums up a reference server's Deliveries().
type hookDeliveries struct {
	attempts int
	// byEvent are the attempts of each event ID (all copies of it).
	byEvent map[string][]testsuite.Delivery
	// kind and typ are each event ID's kind and type; terminal is the valid
	// terminal event of each operation.
	kind     map[string]testsuite.DeliveryKind
	typ      map[string]string
	terminal map[string]string
	// bad are the forged and stale event IDs; bad4xx counts their attempts
	// answered 4xx, badOther the others.
	bad              map[string]bool
	bad4xx, badOther int
	// valid2xx, validFailed count the valid events' attempts answered 2xx
	// and not (the provider's retries follow those); retries counts the
	// attempts after a copy's first; statuses are the valid attempts'
	// statuses (0: no answer).
	valid2xx, validFailed, retries int
	statuses                       map[int]int
}

func sumDeliveries(ds []testsuite.Delivery) hookDeliveries {
	h := hookDeliveries{
		attempts: len(ds), byEvent: map[string][]testsuite.Delivery{}, kind: map[string]testsuite.DeliveryKind{}, typ: map[string]string{},
		terminal: map[string]string{}, bad: map[string]bool{}, statuses: map[int]int{},
	}
	for _, d := range ds {
		h.byEvent[d.EventID] = append(h.byEvent[d.EventID], d)
		h.kind[d.EventID], h.typ[d.EventID] = d.Kind, d.Type
		if d.Attempt > 1 {
			h.retries++
		}
		ok := d.Status >= 200 && d.Status <= 299
		if d.Kind != testsuite.DeliveryValid {
			h.bad[d.EventID] = true
			if d.Status >= 400 && d.Status <= 499 {
				h.bad4xx++
			} else {
				h.badOther++
			}
			continue
		}
		h.statuses[d.Status]++
		if ok {
			h.valid2xx++
		} else {
			h.validFailed++
		}
		if d.Type != hookProcessing {
			h.terminal[d.Operation] = d.EventID
		}
	}
	return h
}

// firstSent is when the first attempt of event id went out.
func (h hookDeliveries) firstSent(id string) time.Time {
	ds := h.byEvent[id]
	if len(ds) == 0 {
		return time.Time{}
	}
	return ds[0].Time
}

// eventObject reads the operation ID and the workflow ID of its metadata
// from an event body.
func eventObject(body json.RawMessage) (op, workflowID string) {
	var ev struct {
		Data struct {
			Object struct {
				ID       string `json:"id"`
				Metadata struct {
					WorkflowID string `json:"workflow_id"`
				} `json:"metadata"`
			} `json:"object"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &ev)
	return ev.Data.Object.ID, ev.Data.Object.Metadata.WorkflowID
}

// hookHistory is what a workflow's history says of its notifications.
type hookHistory struct {
	// updates are the IDs of the accepted updates, in order.
	updates []string
	// closed counts the close events; activities the scheduled activities.
	closed, activities int
}

func readHookHistory(t *testing.T, ctx context.Context, workflowID, runID string) hookHistory {
	t.Helper()
	var h hookHistory
	for _, ev := range history(t, ctx, workflowID, runID) {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			h.updates = append(h.updates, ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetMeta().GetUpdateId())
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			h.closed++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			h.activities++
		}
	}
	return h
}

// checkHookHistory checks a workflow ended by the webhook of scheme: one
// close event, one activity (the start), at most two accepted updates
// (the progress event and the terminal one), as many as
// Outcome.Notifications, none twice, none of a forged or stale event (bad),
// and the terminal notification's among them. It returns how many.
func checkHookHistory(t *testing.T, ctx context.Context, c *hookCall, scheme string, bad map[string]bool) int {
	t.Helper()
	h := readHookHistory(t, ctx, c.wid, c.run.GetRunID())
	if h.closed != 1 || h.activities != 1 {
		t.Errorf("%s: history has %d close events and %d activities, want 1 and 1 (the start)", c.wid, h.closed, h.activities)
	}
	prefix := "webhook/" + string(scheme) + "/" + hookOperation + "/"
	seen := map[string]bool{}
	for _, id := range h.updates {
		ev, ok := strings.CutPrefix(id, prefix)
		switch {
		case !ok:
			t.Errorf("%s: accepted update %q, want an ID %s<event ID>", c.wid, id, prefix)
		case seen[id]:
			t.Errorf("%s: update %s accepted twice", c.wid, id)
		case bad[ev]:
			t.Errorf("%s: update %s of a forged or stale event accepted", c.wid, id)
		}
		seen[id] = true
	}
	if len(h.updates) > 2 || c.out != nil && len(h.updates) != c.out.Notifications {
		t.Errorf("%s: %d accepted updates %v, want 1 or 2, as many as Outcome.Notifications (%+v)", c.wid, len(h.updates), h.updates, c.out)
	}
	if c.out != nil && c.out.Notification != nil && !seen[prefix+c.out.Notification.ID] {
		t.Errorf("%s: the terminal notification %s is not among the accepted updates %v", c.wid, c.out.Notification.ID, h.updates)
	}
	return len(h.updates)
}

// durations sums up a list of durations.
type durations []time.Duration

func (ds durations) String() string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Sorted(slices.Values(ds))
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("min %s median %s max %s", r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]))
}

func (ds durations) max() time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}

// waitDelivered waits until no reference server has a copy of an event
// still to send or retry.
func waitDelivered(t *testing.T, ctx context.Context, srvs ...*testsuite.Server) {
	t.Helper()
	err := itest.Eventually(ctx, 100*time.Millisecond, func() error {
		for _, s := range srvs {
			if st := s.Stats(); st.WebhooksPending != 0 {
				return fmt.Errorf("%d event copies still pending at %s (stats %+v)", st.WebhooksPending, s.URL, st)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// receiverProxy passes webhook deliveries on to the receiver and notes,
// for each, the event ID, the status and the receiver's "status" (its
// outcome: delivered, duplicate, ignored, rejected, …).
type receiverProxy struct {
	*httptest.Server
	target string
	hc     *http.Client
	mu     sync.Mutex
	seen   []proxied
}

type proxied struct {
	EventID, Outcome string
	Status           int
	Took             time.Duration
}

func startReceiverProxy(t *testing.T, target string) *receiverProxy {
	p := &receiverProxy{target: target, hc: &http.Client{Timeout: 30 * time.Second}}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *receiverProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var ev struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &ev)
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header = r.Header.Clone()
	began := time.Now()
	resp, err := p.hc.Do(req)
	if err != nil {
		p.note(proxied{EventID: ev.ID, Outcome: "no answer: " + err.Error(), Status: http.StatusBadGateway, Took: time.Since(began)})
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var a struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(out, &a)
	p.note(proxied{EventID: ev.ID, Outcome: a.Status, Status: resp.StatusCode, Took: time.Since(began)})
	for _, h := range []string{"Content-Type", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(out)
}

func (p *receiverProxy) note(x proxied) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, x)
}

func (p *receiverProxy) answers() []proxied {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// TestWebhookFixedEndpoint runs operations whose every outcome comes by
// webhook to the worker binary's fixed endpoint, from two reference
// servers (one whose operations succeed, one whose fail: every 10th call),
// each operation delivering its terminal event 3 times, a progress event,
// a forged and a stale copy, shuffled and jittered so that they
// interleave. Every workflow ends once, with its own operation's terminal
// event; the forged and stale copies are all answered 4xx and none is in
// any history; the duplicates and the late progress events leave nothing
// in history.
func TestWebhookFixedEndpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scheme string
		ops    int
	}{
		{"standard-webhooks", 100},
		{"stripe", 40},
	} {
		t.Run(string(tc.scheme), func(t *testing.T) {
			t.Parallel()
			testWebhookFixedEndpoint(t, tc.scheme, tc.ops)
		})
	}
}

func testWebhookFixedEndpoint(t *testing.T, scheme string, ops int) {
	const deliveries = 3
	ctx := ctxT(t, 150*time.Second)
	secret := hookSecret(scheme)
	port, err := itest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	proxy := startReceiverProxy(t, "http://"+itest.HostPort(port))
	hooks := testsuite.Webhooks{
		URL: proxy.URL + "/webhooks", Scheme: scheme, Secret: secret,
		Duration: 2 * time.Second, Deliveries: deliveries, Progress: true, Shuffle: true,
		Jitter: 400 * time.Millisecond, Forged: 1, Stale: 1, RetryFor: 2 * time.Minute,
	}
	ok := testsuite.StartServer(t, testsuite.Options{Webhooks: &hooks})
	failing := hooks
	failing.State = workflows.StateFailed
	bad := testsuite.StartServer(t, testsuite.Options{Webhooks: &failing})

	tq := uniqueName(t, "tq")
	startWorkerWith(t, workerOptions{TaskQueue: tq, Origins: []string{ok.URL, bad.URL}},
		[]string{"WEBHOOK_SECRETS=" + secret}, "--webhook-addr", itest.HostPort(port), "--webhook-scheme", string(scheme))

	calls := make([]*hookCall, ops)
	for i := range calls {
		c := &hookCall{wid: uniqueName(t, "pay-"+strconv.Itoa(i)), srv: ok}
		if i%10 == 9 {
			c.srv, c.wantFailed = bad, true
		}
		calls[i] = c
	}
	began := time.Now()
	startHookCalls(t, ctx, tq, calls, hookOptions(nil))
	waitHookCalls(ctx, calls)
	took := time.Since(began)
	// The duplicates and late events still being delivered, answered
	// once every workflow has ended.
	waitDelivered(t, ctx, ok, bad)

	sums := map[*testsuite.Server]hookDeliveries{ok: sumDeliveries(ok.Deliveries()), bad: sumDeliveries(bad.Deliveries())}
	allBad := map[string]bool{}
	for _, h := range sums {
		for id := range h.bad {
			allBad[id] = true
		}
	}
	var (
		completed, failedOK, accepted, twoUpdates int
		latency                                   durations
		terminalOf                                = map[string]bool{} // terminal event IDs taken
	)
	for _, c := range calls {
		if !checkHookOutcome(t, c, workflows.SourceWebhook) {
			continue
		}
		completed++
		if c.wantFailed {
			failedOK++
		}
		n := c.out.Notification
		h := sums[c.srv]
		op, wid := eventObject(n.Body)
		switch {
		case n.Scheme != string(scheme) || n.Operation != hookOperation:
			t.Errorf("%s: notification %+v, want scheme %s, operation %s", c.wid, n, scheme, hookOperation)
		case wid != c.wid:
			t.Errorf("%s: ended by an event of workflow %q (%s)", c.wid, wid, op)
		case h.terminal[op] != n.ID:
			t.Errorf("%s: ended by event %s (%s), not operation %s's terminal event %s", c.wid, n.ID, h.kind[n.ID], op, h.terminal[op])
		case terminalOf[n.ID]:
			t.Errorf("%s: event %s ended another workflow too", c.wid, n.ID)
		}
		terminalOf[n.ID] = true
		if c.resp != nil {
			if id := jsonString(c.resp.Body, "id"); c.resp.Status != http.StatusCreated || id != op {
				t.Errorf("%s: result %d for %q, want the start answer, 201 for %s", c.wid, c.resp.Status, id, op)
			}
		}
		latency = append(latency, c.out.At.Sub(h.firstSent(n.ID)))
		u := checkHookHistory(t, ctx, c, scheme, allBad)
		accepted += u
		if u == 2 {
			twoUpdates++
		}
	}

	// The reference servers: one record, one operation per call; every
	// valid copy answered 2xx in the end (deliveries times per terminal
	// event, once the progress event), every forged or stale copy 4xx at
	// its only attempt.
	var valid2xx, validFailed, retries, bad4xx, badOther, badEvents int
	for srv, h := range sums {
		want := 0
		for _, c := range calls {
			if c.srv == srv {
				want++
			}
		}
		st := srv.Stats()
		if st.Records != want || st.Operations != want || st.DistinctKeys != want {
			t.Errorf("reference server %s: %d records, %d operations, %d keys; want %d each (stats %+v)", srv.URL, st.Records, st.Operations, st.DistinctKeys, want, st)
		}
		if len(h.terminal) != want || len(h.bad) != 2*want {
			t.Errorf("reference server %s: %d terminal events, %d forged or stale; want %d and %d", srv.URL, len(h.terminal), len(h.bad), want, 2*want)
		}
		for id, ds := range h.byEvent {
			n2xx := 0
			for _, d := range ds {
				if d.Status >= 200 && d.Status <= 299 {
					n2xx++
				}
			}
			wantN := deliveries
			switch {
			case h.kind[id] != testsuite.DeliveryValid:
				wantN = 0
				if len(ds) != 1 {
					t.Errorf("%s event %s: %d attempts, want 1 (not retried after a 4xx)", h.kind[id], id, len(ds))
				}
			case h.typ[id] == hookProcessing:
				wantN = 1
			}
			if n2xx != wantN {
				t.Errorf("%s event %s (%s): %d attempts answered 2xx, want %d: %+v", h.kind[id], id, h.typ[id], n2xx, wantN, ds)
			}
		}
		valid2xx += h.valid2xx
		validFailed += h.validFailed
		retries += h.retries
		bad4xx += h.bad4xx
		badOther += h.badOther
		badEvents += len(h.bad)
	}
	if badOther != 0 || bad4xx != 2*ops || badEvents != 2*ops {
		t.Errorf("forged and stale copies: %d events, %d attempts answered 4xx, %d otherwise; want %d, %d, 0", badEvents, bad4xx, badOther, 2*ops, 2*ops)
	}
	// What the receiver answered, as the proxy saw it.
	outcomes := map[string]int{}
	var badAnswers []string
	for _, a := range proxy.answers() {
		outcomes[a.Outcome]++
		if allBad[a.EventID] != (a.Outcome == "rejected") {
			badAnswers = append(badAnswers, fmt.Sprintf("%s %d %s", a.EventID, a.Status, a.Outcome))
		}
	}
	if len(badAnswers) > 0 {
		t.Errorf("the receiver's answers: forged and stale events must be rejected, the others not: %v", badAnswers)
	}
	// Each delivery the receiver answered "delivered" is an update the
	// workflow accepted (the copies of one operation go out one after the
	// other, so no two race); the other valid ones are duplicates or
	// ignored (a progress event after the end).
	if d := outcomes["delivered"]; d != accepted || d+outcomes["duplicate"]+outcomes["ignored"] != valid2xx || outcomes["rejected"] != badEvents {
		t.Errorf("receiver outcomes %v: want %d delivered (the accepted updates), %d delivered, duplicate or ignored (the valid deliveries), %d rejected",
			outcomes, accepted, valid2xx, badEvents)
	}
	if completed != ops || accepted < ops || accepted > 2*ops {
		t.Errorf("%d of %d workflows ended as wanted, %d updates accepted", completed, ops, accepted)
	}
	if worst := latency.max(); worst > 30*time.Second {
		t.Errorf("a workflow learned its outcome %s after the first delivery of its terminal event", worst)
	}
	t.Logf("%s, %d ops × %d deliveries (+progress, forged, stale; shuffled, jitter %s): %d completed once (%d failed as wanted) in %s; "+
		"%d valid deliveries answered 2xx, %d valid attempts not (statuses %v, %d retries); receiver outcomes %v; "+
		"%d forged+stale all 4xx, 0 accepted; %d updates accepted (%d workflows took the progress event too), 0 duplicates; "+
		"first delivery of the terminal event → workflow: %s",
		scheme, ops, deliveries, hooks.Jitter, completed, failedOK, took.Round(time.Millisecond),
		valid2xx, validFailed, statusesOf(sums), retries, outcomes, bad4xx, accepted, twoUpdates, latency)
}

// statusesOf merges the valid deliveries' status counts.
func statusesOf(sums map[*testsuite.Server]hookDeliveries) map[int]int {
	m := map[int]int{}
	for _, h := range sums {
		for s, n := range h.statuses {
			m[s] += n
		}
	}
	return m
}

// jsonString is the top-level string field name of a JSON body.
func jsonString(body []byte, name string) string {
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	s, _ := m[name].(string)
	return s
}

// TestWebhookReceiverKilled kills (SIGKILL) the worker binary that serves
// the receiver while the operations' events are being delivered, and
// starts another on the same address a few seconds later: the provider's
// retries (the deliveries that found no receiver, or lost their answer)
// bring every event, and every workflow ends once, by webhook.
func TestWebhookReceiverKilled(t *testing.T) {
	t.Parallel()
	const (
		ops        = 50
		deliveries = 3
		down       = 3 * time.Second
	)
	ctx := ctxT(t, 150*time.Second)
	scheme := "standard-webhooks"
	secret := hookSecret(scheme)
	port, err := itest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := itest.HostPort(port)
	srv := testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{
		URL: "http://" + addr + "/webhooks", Scheme: scheme, Secret: secret,
		Duration: 3 * time.Second, Deliveries: deliveries, Shuffle: true, Jitter: 1500 * time.Millisecond,
		RetryFor: 2 * time.Minute,
	}})
	tq := uniqueName(t, "tq")
	env := []string{"WEBHOOK_SECRETS=" + secret}
	args := []string{"--webhook-addr", addr, "--webhook-scheme", string(scheme)}
	doomed := startWorkerWith(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}}, env, args...)

	calls := make([]*hookCall, ops)
	for i := range calls {
		calls[i] = &hookCall{wid: uniqueName(t, "pay-"+strconv.Itoa(i)), srv: srv}
	}
	startHookCalls(t, ctx, tq, calls, hookOptions(nil))

	// Kill the receiver once about a quarter of the copies are delivered:
	// the rest are due over the next seconds.
	const killAfter = ops * deliveries / 4
	if err := itest.Eventually(ctx, 20*time.Millisecond, func() error {
		if n := srv.Stats().WebhooksDelivered; n < killAfter {
			return fmt.Errorf("%d copies delivered so far", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := doomed.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	atKill := srv.Stats()
	time.Sleep(down)
	startWorkerWith(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}}, env, args...)
	back := time.Now()

	waitHookCalls(ctx, calls)
	waitDelivered(t, ctx, srv)

	h := sumDeliveries(srv.Deliveries())
	var (
		completed, endedAfter, accepted int
		latency                         durations
	)
	for _, c := range calls {
		if !checkHookOutcome(t, c, workflows.SourceWebhook) {
			continue
		}
		completed++
		n := c.out.Notification
		if op, wid := eventObject(n.Body); wid != c.wid || h.terminal[op] != n.ID {
			t.Errorf("%s: ended by event %s of %s (workflow %s), want that operation's terminal event %s", c.wid, n.ID, op, wid, h.terminal[op])
		}
		if n.Received.After(killed) {
			endedAfter++
		}
		latency = append(latency, c.out.At.Sub(h.firstSent(n.ID)))
		accepted += checkHookHistory(t, ctx, c, scheme, nil)
	}
	// Deliveries that found no receiver (status 0) or lost their answer in
	// the kill, and the retries that followed.
	var noAnswer, duringDown, unavailable int
	for _, ds := range h.byEvent {
		for _, d := range ds {
			switch {
			case d.Status == 0:
				noAnswer++
				if d.Time.After(killed) && d.Time.Before(back) {
					duringDown++
				}
			case d.Status == http.StatusServiceUnavailable:
				unavailable++
			}
		}
		n2xx := 0
		for _, d := range ds {
			if d.Status >= 200 && d.Status <= 299 {
				n2xx++
			}
		}
		if n2xx != deliveries {
			t.Errorf("event %s: %d copies answered 2xx, want %d: %+v", ds[0].EventID, n2xx, deliveries, ds)
		}
	}
	st := srv.Stats()
	if st.Records != ops || st.Operations != ops || st.DistinctKeys != ops {
		t.Errorf("reference server: %d records, %d operations, %d keys; want %d each (stats %+v)", st.Records, st.Operations, st.DistinctKeys, ops, st)
	}
	if completed != ops || accepted != ops {
		t.Errorf("%d of %d workflows ended by webhook, %d updates accepted; want %d and %d", completed, ops, accepted, ops, ops)
	}
	// The kill must have cut deliveries, and the retries brought them.
	if noAnswer == 0 || h.retries == 0 || endedAfter == 0 {
		t.Errorf("the kill cut nothing: %d deliveries unanswered, %d retries, %d workflows ended after it", noAnswer, h.retries, endedAfter)
	}
	t.Logf("%d ops × %d deliveries, receiver killed after %d of %d copies were delivered (%d attempts), back on %s %s later: "+
		"%d completed once (%d after the kill), %d updates accepted; %d attempts in all, %d retries: %d unanswered (%d while down), %d answered 503; "+
		"statuses %v; first delivery of the terminal event → workflow: %s",
		ops, deliveries, atKill.WebhooksDelivered, ops*deliveries, atKill.Webhooks, addr, back.Sub(killed).Round(time.Millisecond),
		completed, endedAfter, accepted, h.attempts, h.retries, noAnswer, duringDown, unavailable, h.statuses, latency)
}

// TestWebhookNeverSent runs operations whose webhooks are never sent
// (DropRate 1): every workflow learns its outcome from the fallback poll
// of the resource, which starts WebhookPoll.After the start answer.
func TestWebhookNeverSent(t *testing.T) {
	t.Parallel()
	const ops = 20
	ctx := ctxT(t, 120*time.Second)
	hooks := testsuite.Webhooks{
		// Never used: every operation's webhooks are dropped.
		URL: "http://127.0.0.1:9/webhooks", Secret: hookSecret("standard-webhooks"),
		Duration: 4 * time.Second, DropRate: 1,
	}
	ok := testsuite.StartServer(t, testsuite.Options{Webhooks: &hooks})
	failing := hooks
	failing.State = workflows.StateFailed
	bad := testsuite.StartServer(t, testsuite.Options{Webhooks: &failing})
	tq := uniqueName(t, "tq")
	startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{ok.URL, bad.URL}})

	calls := make([]*hookCall, ops)
	for i := range calls {
		c := &hookCall{wid: uniqueName(t, "pay-"+strconv.Itoa(i)), srv: ok}
		if i%10 == 9 {
			c.srv, c.wantFailed = bad, true
		}
		calls[i] = c
	}
	const after = 2 * time.Second
	for i, c := range calls {
		poll := &workflows.WebhookPoll{
			URL: c.srv.URL + "/resources/{id}", After: after, Succeeded: []string{"succeeded"}, Failed: []string{"failed"},
			Interval: time.Second, MaximumInterval: 2 * time.Second,
		}
		c.run = start(t, ctx, tq, c.wid, workflows.Request{
			Operation: hookOperation, URL: c.srv.URL + "/payments", Body: hookBody(c.wid, 100+i), Webhook: hookOptions(poll),
		})
	}
	began := time.Now()
	waitHookCalls(ctx, calls)
	took := time.Since(began)

	polls := map[*testsuite.Server]int{}
	var perOp []int
	failedOK := 0
	for _, c := range calls {
		if !checkHookOutcome(t, c, workflows.SourcePoll) {
			continue
		}
		if c.out.Notification != nil || c.out.Notifications != 0 || c.out.Polls < 1 {
			t.Errorf("%s: Outcome %+v, want no notification and at least one poll", c.wid, c.out)
		}
		if c.wantFailed {
			failedOK++
		}
		polls[c.srv] += int(c.out.Polls)
		perOp = append(perOp, int(c.out.Polls))
		h := readHookHistory(t, ctx, c.wid, c.run.GetRunID())
		if len(h.updates) != 0 || h.closed != 1 {
			t.Errorf("%s: history has updates %v and %d close events, want none and 1", c.wid, h.updates, h.closed)
		}
	}
	for _, srv := range []*testsuite.Server{ok, bad} {
		st := srv.Stats()
		want := 0
		for _, c := range calls {
			if c.srv == srv {
				want++
			}
		}
		if st.Records != want || st.Operations != want || st.Webhooks != 0 || len(srv.Deliveries()) != 0 || st.Polls != polls[srv] {
			t.Errorf("reference server %s: %d records, %d operations, %d webhooks, %d GETs of resources; want %d, %d, 0, %d (the Outcomes' polls)",
				srv.URL, st.Records, st.Operations, st.Webhooks, st.Polls, want, want, polls[srv])
		}
	}
	if len(perOp) != ops {
		t.Errorf("%d of %d workflows ended by the poll", len(perOp), ops)
	}
	slices.Sort(perOp)
	total := 0
	for _, n := range perOp {
		total += n
	}
	if len(perOp) > 0 {
		t.Logf("%d ops, no webhook (DropRate 1), operations of %s, poll after %s: %d ended by poll (%d failed as wanted) in %s; "+
			"polls per op min %d median %d max %d, %d in all", ops, hooks.Duration, after, len(perOp), failedOK, took.Round(time.Millisecond),
			perOp[0], perOp[len(perOp)/2], perOp[len(perOp)-1], total)
	}
}

// callbackInput is the input of callbackChargeWorkflow.
type callbackInput struct {
	URL    string `json:"url"`
	Amount int    `json:"amount"`
	// ByResource binds the provider's events by the resource the start
	// answer names (WebhookOptions.Resource) instead of the metadata.
	ByResource bool `json:"by_resource,omitempty"`
}

// callbackChargeWorkflow starts a charge whose provider reports its outcome
// to the callback URL in the request's body, and awaits it. The metadata,
// which the provider copies into its signed events, binds them to this
// operation (a signed event without it ends nothing by itself), or, with
// in.ByResource, the resource the start answer names does.
func callbackChargeWorkflow(ctx workflow.Context, in callbackInput) (*workflows.Response, error) {
	u, err := workflows.CallbackURL(ctx, hookOperation, "")
	if err != nil {
		return nil, err
	}
	body := map[string]any{"amount": in.Amount, "callback_url": u}
	opts := hookOptions(nil)
	if in.ByResource {
		opts.Resource = &workflows.WebhookResource{Start: "id", Event: "data.object.id"}
	} else {
		body["metadata"] = workflows.WebhookMetadata(ctx, hookOperation, "")
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return workflows.Call(ctx, workflows.Request{Operation: hookOperation, URL: in.URL, Body: raw, Webhook: opts})
}

// TestWebhookCallbackURL runs a workflow, on a worker in this process,
// that puts its operation's callback URL (workflows.CallbackURL) in the
// start request; the reference server delivers the events there, to a
// webhooks.Receiver with Callbacks: authenticated by the URL's token alone,
// or by the token and a Stripe signature. A delivery to a workflow's path
// with another operation's token is answered 401 and never reaches the
// workflow, while a delivery with the right token, sent at the same time,
// does.
func TestWebhookCallbackURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		scheme     string // the reference server's
		verify     bool   // the receiver verifies the Stripe signature too
		byResource bool   // events bound by the start answer's resource, not metadata
	}{
		{"token only", "standard-webhooks", false, false},
		{"token and Stripe signature", "stripe", true, false},
		{"token and Stripe signature, bound by the resource", "stripe", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testWebhookCallbackURL(t, tc.scheme, tc.verify, tc.byResource)
		})
	}
}

func testWebhookCallbackURL(t *testing.T, scheme string, verify, byResource bool) {
	const ops = 3
	ctx := ctxT(t, 90*time.Second)
	secret := hookSecret(scheme)
	var forged int
	var v webhooks.Verifier
	wantScheme := "callback"
	if verify {
		var err error
		if v, err = webhooks.StripeVerifier(secret); err != nil {
			t.Fatal(err)
		}
		forged, wantScheme = 1, v.Scheme()
	}
	srv := testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{
		Scheme: scheme, Secret: secret, Duration: 5 * time.Second, Deliveries: 2, Forged: forged, RetryFor: time.Minute,
	}})

	// The receiver, on a server whose URL the Callbacks need first.
	var handler http.Handler = http.NotFoundHandler()
	var hmu sync.Mutex
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hmu.Lock()
		h := handler
		hmu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	cb := &webhooks.Callbacks{BaseURL: hs.URL + "/callbacks", Secrets: []string{randomHex(32)}, Namespace: dev.Namespace}
	var logs syncBuffer
	rc, err := webhooks.NewReceiver(webhooks.Config{
		Client: tc, Verifier: v, Callbacks: cb,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	hmu.Lock()
	handler = rc
	hmu.Unlock()

	// The worker: the activities, the callback activity and the workflow.
	tq := uniqueName(t, "tq")
	acts, err := activities.New(activities.Config{AllowedOrigins: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewClientFromExisting(tc, client.Options{
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))),
	})
	if err != nil {
		t.Fatal(err)
	}
	identity := uniqueName(t, "in-process")
	w := worker.New(c, tq, worker.Options{Identity: identity})
	acts.Register(w)
	cb.Register(w)
	w.RegisterWorkflowWithOptions(callbackChargeWorkflow, workflow.RegisterOptions{Name: "itest-callback-charge"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Stop()
		c.Close()
		if t.Failed() {
			t.Logf("in-process worker and receiver log:\n%s", logs.String())
		}
	})
	if err := itest.WaitForPollers(ctxT(t, 30*time.Second), tc, tq, identity); err != nil {
		t.Fatal(err)
	}

	calls := make([]*hookCall, ops)
	for i := range calls {
		hc := &hookCall{wid: uniqueName(t, "pay-"+strconv.Itoa(i)), srv: srv}
		hc.run, err = tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: hc.wid, TaskQueue: tq, WorkflowExecutionTimeout: 2 * time.Minute},
			"itest-callback-charge", callbackInput{URL: srv.URL + "/payments", Amount: 100 + i, ByResource: byResource})
		if err != nil {
			t.Fatal(err)
		}
		calls[i] = hc
	}
	// Every operation started, none ended yet (Duration 5 s): deliveries
	// to workflow 0's path, one with workflow 1's token (tampered) and one
	// with its own (the control, a progress event that ends nothing).
	if err := itest.Eventually(ctx, 20*time.Millisecond, func() error {
		if n := srv.Stats().Operations; n < ops {
			return fmt.Errorf("%d operations started", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	victim, other := calls[0].wid, calls[1].wid
	own, err := cb.URL(victim, hookOperation, "")
	if err != nil {
		t.Fatal(err)
	}
	theirs, _ := cb.URL(other, hookOperation, "")
	tampered := own[:strings.LastIndexByte(own, '/')+1] + theirs[strings.LastIndexByte(theirs, '/')+1:]
	swapped := theirs[:strings.LastIndexByte(theirs, '/')+1] + own[strings.LastIndexByte(own, '/')+1:]
	// post sends an event of resource object (its JSON) to u.
	post := func(u, id, typ, object string) (int, string) {
		body := fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"object":%s}}`, id, typ, time.Now().Unix(), object)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if verify {
			req.Header.Set(signature.StripeSignature, signature.Stripe(time.Now().Unix(), []byte(body), secret))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	tamperedIDs := []string{"evt_tampered_" + randomHex(8), "evt_swapped_" + randomHex(8)}
	for i, u := range []string{tampered, swapped} {
		if st, b := post(u, tamperedIDs[i], hookFailed, `{"id":"op_1","status":"failed"}`); st != http.StatusUnauthorized {
			t.Errorf("delivery to %s with another operation's token: %d %s, want 401", u, st, b)
		}
	}
	probe := "evt_probe_" + randomHex(8)
	// The probe names its workflow (metadata): it is victim's whatever binds.
	probeObject := fmt.Sprintf(`{"id":"op_1","status":"processing","metadata":{"workflow_id":%q,"operation":%q}}`, victim, hookOperation)
	if st, b := post(own, probe, hookProcessing, probeObject); st != http.StatusOK || !strings.Contains(b, `"delivered"`) {
		t.Errorf("delivery to %s with its own token: %d %s, want 200 delivered", own, st, b)
	}
	if verify {
		// Another order's genuine signed event, which names no workflow,
		// posted to this one's URL: taken, but it decides nothing (the
		// workflow, whose operation succeeds, must not end failed); bound
		// by the resource, refused (another resource's).
		want := `"delivered"`
		if byResource {
			want = `"ignored"`
		}
		if st, b := post(own, "evt_foreign_"+randomHex(8), hookFailed, `{"id":"op_foreign","status":"failed"}`); st != http.StatusOK || !strings.Contains(b, want) {
			t.Errorf("another order's signed event to %s: %d %s, want 200 %s", own, st, b, want)
		}
	}

	waitHookCalls(ctx, calls)
	waitDelivered(t, ctx, srv)
	h := sumDeliveries(srv.Deliveries())
	var latency durations
	completed := 0
	for i, c := range calls {
		if !checkHookOutcome(t, c, workflows.SourceWebhook) {
			continue
		}
		completed++
		n := c.out.Notification
		wantN := 1
		if i == 0 {
			wantN = 2 // the probe
			if verify && !byResource {
				wantN = 3 // and the foreign event
			}
		}
		evID := n.ID
		if n.Scheme == "callback" {
			// A token-only callback's event is named by its content's
			// hash; the body holds the reference server's event ID.
			evID, _ = stringField(n.Body, "id")
		}
		if n.Scheme != wantScheme || n.Operation != hookOperation || !slices.Contains(slices.Collect(maps.Values(h.terminal)), evID) || c.out.Notifications != wantN {
			t.Errorf("%s: Outcome %+v with notification %+v; want a terminal event of the reference server, scheme %s, %d notifications",
				c.wid, c.out, n, wantScheme, wantN)
		}
		latency = append(latency, c.out.At.Sub(h.firstSent(n.ID)))
		hist := readHookHistory(t, ctx, c.wid, c.run.GetRunID())
		for _, id := range hist.updates {
			for _, bad := range tamperedIDs {
				if strings.HasSuffix(id, "/"+bad) {
					t.Errorf("%s: the tampered delivery %s reached the workflow (update %s)", c.wid, bad, id)
				}
			}
			if _, bad := h.bad[strings.TrimPrefix(id, "webhook/"+wantScheme+"/"+hookOperation+"/")]; bad {
				t.Errorf("%s: the forged delivery reached the workflow (update %s)", c.wid, id)
			}
		}
		probeID := "webhook/" + wantScheme + "/" + hookOperation + "/" + probe
		if len(hist.updates) != wantN || (i == 0 && verify && !slices.Contains(hist.updates, probeID)) {
			t.Errorf("%s: accepted updates %v, want %d (the probe's too for the first)", c.wid, hist.updates, wantN)
		}
	}
	// Where the reference server delivered: each operation's callback URL,
	// the one the receiver's Callbacks make for its workflow.
	recs := srv.Records()
	urls := map[string]bool{}
	for _, r := range recs {
		var b struct {
			CallbackURL string `json:"callback_url"`
		}
		_ = json.Unmarshal(r.Request, &b)
		urls[b.CallbackURL] = true
	}
	for _, c := range calls {
		u, _ := cb.URL(c.wid, hookOperation, "")
		if !urls[u] {
			t.Errorf("%s: no start request carried its callback URL %s (they carried %v)", c.wid, u, urls)
		}
	}
	delivered := 0
	for _, ds := range h.byEvent {
		for _, d := range ds {
			if !urls[d.URL] {
				t.Errorf("event %s delivered to %s, not a callback URL", d.EventID, d.URL)
			}
			if d.Kind == testsuite.DeliveryValid && d.Status == http.StatusOK {
				delivered++
			}
		}
	}
	if len(recs) != ops || delivered != 2*ops || h.bad4xx != forged*ops || h.badOther != 0 {
		t.Errorf("%d records, %d valid deliveries answered 200, %d forged answered 4xx, %d otherwise; want %d, %d, %d, 0",
			len(recs), delivered, h.bad4xx, h.badOther, ops, 2*ops, forged*ops)
	}
	if completed != ops {
		t.Errorf("%d of %d workflows ended by their callback", completed, ops)
	}
	t.Logf("callbacks (%s, receiver scheme %s): %d ops completed once by their callback URL, %d valid deliveries answered 200, %d forged answered 4xx; "+
		"2 deliveries with another operation's token answered 401 and absent from history; first delivery → workflow: %s",
		scheme, wantScheme, completed, delivered, h.bad4xx, latency)
}

// stringField is the top-level string name of the JSON document body.
func stringField(body []byte, name string) (string, bool) {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return "", false
	}
	v, ok := doc[name].(string)
	return v, ok
}
