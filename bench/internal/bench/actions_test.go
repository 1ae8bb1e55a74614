package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/harness/actions"
)

// run is an ActionsRun of calls whose counter rose by server and whose
// histories say hist (the calls') and shared (the governor's), both
// counted alike by the server and by Cloud but for the upserts.
func run(calls int, server actions.Counts, hist, shared actions.Tally, upserts float64) ActionsRun {
	sharedServer := shared.Add(actions.Tally{actions.Upsert: upserts})
	return ActionsRun{Calls: calls, Workers: 1, Window: 5 * time.Second, Busy: 4 * time.Second, Server: server,
		History: actions.Run{Server: hist, Cloud: hist, Attempts: int(hist[actions.Activity] + hist[actions.Retry])}, Shared: actions.Run{Server: sharedServer, Cloud: shared}}
}

// actionsResults is a synthetic actions section: a first try at 2 both
// ways, retries at 2 actions each (the retry and its heartbeat), the 503
// run with one held attempt a call, polls, a webhook, a lookup, the
// shared rate idle at 0 and under load at 1.05 and 0.95 per worker per
// second.
func actionsResults() *Results {
	t := func(kv ...any) actions.Tally {
		m := actions.Tally{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(actions.Category)] = float64(kv[i+1].(int))
		}
		return m
	}
	shared := t(actions.Signal, 2, actions.Marker, 1)
	sharedCounts := actions.Counts{actions.TypeSignalWithStart: 2, actions.TypeBatchMarkers: 1, actions.TypeUpsert: 3}
	ours := func(calls int, c actions.Counts, hist actions.Tally) ActionsRun {
		return run(calls, sharedCounts.Add(c), hist, shared, 3)
	}
	plain := func(calls int, c actions.Counts, hist actions.Tally) *ActionsRun {
		r := run(calls, c, hist, actions.Tally{}, 0)
		return &r
	}
	first := actions.Counts{actions.TypeStart: 10, actions.TypeScheduled: 10}
	firstT := t(actions.Workflow, 10, actions.Activity, 10)
	retries := first.Add(actions.Counts{actions.TypeRetry: 30})
	retriesT := firstT.Add(t(actions.Retry, 30))
	load := func(workers int, reports int) ActionsRun {
		r := run(80, actions.Counts{actions.TypeStart: 80, actions.TypeScheduled: 80, actions.TypeSignalWithStart: float64(reports)},
			t(actions.Workflow, 80, actions.Activity, 80), t(actions.Signal, reports), 0)
		r.Workers, r.Busy = workers, 20*time.Second
		return r
	}
	a := &ActionsResult{Params: ActionsParams{Calls: 10, Concurrency: 10, FailingCalls: 10, Retries: 3, Polls: 10, Idle: 30 * time.Second, Stream: 20 * time.Second, StreamRate: 4},
		Namespace: "default", Scenarios: []ActionsScenario{
			{Name: scenFirstTry, Plain: plain(10, first, firstT), Ours: ours(10, first, firstT)},
			{Name: scenRetries425, Plain: plain(10, retries, retriesT), Ours: ours(10, retries.Add(actions.Counts{actions.TypeHeartbeat: 30}), retriesT)},
			{Name: scenRetries, Plain: plain(10, retries, retriesT),
				Ours: ours(10, retries.Add(actions.Counts{actions.TypeRetry: 10, actions.TypeHeartbeat: 40}), retriesT.Add(t(actions.Retry, 10)))},
			{Name: scenFollow, Plain: plain(10, first.Add(actions.Counts{actions.TypeScheduled: 10, actions.TypeRetry: 90}), firstT.Add(t(actions.Activity, 10, actions.Retry, 90))),
				Ours: ours(10, first.Add(actions.Counts{actions.TypeScheduled: 10, actions.TypeRetry: 90, actions.TypeHeartbeat: 90, actions.TypeTimer: 10}),
					firstT.Add(t(actions.Activity, 10, actions.Retry, 90, actions.Timer, 10)))},
			{Name: scenWebhook, Plain: plain(10, first.Add(actions.Counts{actions.TypeTimer: 10, actions.TypeSignal: 10}), firstT.Add(t(actions.Timer, 10, actions.Signal, 10))),
				Ours: ours(10, first.Add(actions.Counts{actions.TypeTimer: 10, actions.TypeUpdateAccepted: 10}), firstT.Add(t(actions.Timer, 10, actions.Update, 10)))},
			{Name: scenLookup, Plain: plain(10, first.Add(actions.Counts{actions.TypeRetry: 10}), firstT.Add(t(actions.Retry, 10))),
				Ours: ours(10, first.Add(actions.Counts{actions.TypeRetry: 10, actions.TypeHeartbeat: 10}), firstT.Add(t(actions.Retry, 10)))},
			{Name: scenLoad1, Ours: load(1, 21)},
			{Name: scenIdle, Ours: ActionsRun{Workers: 1, Window: 30 * time.Second, Server: actions.Counts{}}},
			{Name: scenLoad2, Ours: load(2, 38)},
		}}
	return &Results{Actions: a}
}

// TestActionsReport: the claims and the section's table say what the
// figures give: the first try even with the plain activity, a retry and
// a poll at 2, the 503 retries missed (a held attempt each), the idle
// worker at 0, one worker's shared rate over 1 per second and two
// workers' under; every run explained by its histories.
func TestActionsReport(t *testing.T) {
	r := actionsResults()
	for _, sc := range r.Actions.Scenarios {
		for _, run := range []*ActionsRun{sc.Plain, &sc.Ours} {
			if run != nil && run.Unexplained() != 0 {
				t.Errorf("%s: unexplained %g", sc.Name, run.Unexplained())
			}
		}
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, r, "bench", "contention.svg"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 11a | Temporal actions per call, first try (201)", "| 1.00 (2 ÷ 2; server metric 2 ÷ 2); the shared rate besides: 0.3 per call in this run (2 reports) | ≤ 1.00 | yes |",
		"| 11b | Actions per retry: 3 × 425 Too Early", "| 2 (server metric 2; heartbeats 1, attempts 4 per call); the plain activity 1 | ≤ 2, 1 where nothing is carried | yes |",
		"| 11c | … 3 × 503", "| 2.67 (server metric 2.67; heartbeats 1.33, attempts 5 per call); the plain activity 1 | ≤ 2, 1 where nothing is carried | **MISSED** |",
		"| 11d | Actions per poll", "| 2 (server metric 2; heartbeats 0.9, attempts 11 per call); the plain activity 1 |",
		"| 11e | Actions per lookup-reconciled retry", "| 11f | Actions per webhook wait", "| 1.00 (4 ÷ 4) | ≤ 1.00 | yes |",
		"| 11g | The shared rate idle", "| 0 (server metric 0) | 0 | yes |",
		"| 11h | The shared rate under load, 1 worker(s)", "| 1.05 (server metric 1.05; 21 reports in 20.0 s; the calls' own 2 per call) | ≤ 1 | **MISSED** |",
		"| 11i | The shared rate under load, 2 worker(s)", "| 0.95 (server metric 0.95; 38 reports in 20.0 s; the calls' own 2 per call) | ≤ 1 | yes |",
		"## 11. Temporal actions per call",
		"| first try (201) | 10 | 2 (workflow 1, activity 1) | 2 | 2 / 2 (workflow 1, activity 1) | 1.00 | 0.6 / 0.3 | 1 / 1 | 11a: ≤ 1.00 | yes |",
		"| 3 retries (425 × 3, then 201) | 10 | 8 (workflow 1, activity 1, retry 3, heartbeat 3) | 8 | 5 / 5 (workflow 1, activity 1, retry 3) | 1.60 |",
		"| idle worker (1 worker(s), 30.0 s) | — | none | 0 | — | — | **per worker per second: 0 / 0** (0) | — | 11g: 0 | yes |",
		"| steady stream, 2 workers (2 worker(s), 20.0 s) | 80 | 2 per call: workflow 1, activity 1 | 2 |",
		"Where the actions beyond the plain activity's go: each retry of the ready workflow's call sends a heartbeat",
		"| 3 retries (503 × 3, then 201) | ours | 10 | 5.0 s | `activity_retry 40, command_BatchMarkers 1, command_ScheduleActivityTask 10, command_UpsertWorkflowSearchAttributes 3, grpc_RecordActivityTaskHeartbeat 40, grpc_SignalWithStartWorkflowExecution 2, grpc_StartWorkflowExecution 10` |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("RESULTS.md:\n%s", md.String())
	}
	var svg bytes.Buffer
	if err := WriteActionsSVG(&svg, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "first try", "3 retries (503)", "stream, 2 workers", "shared rate (governor, reports)", "</svg>"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("actions.svg lacks %q", want)
		}
	}
	if err := WriteActionsSVG(io.Discard, &Results{}); err == nil {
		t.Error("WriteActionsSVG drew results without an actions section")
	}
}

// TestActionsWhereWithoutHeartbeats: with the progress carried on the
// failed attempts (no heartbeat in the 425 run), the section says so and
// puts the 503 run's extra actions on the attempts held back.
func TestActionsWhereWithoutHeartbeats(t *testing.T) {
	r := actionsResults()
	for i, sc := range r.Actions.Scenarios {
		if sc.Name == scenRetries425 {
			r.Actions.Scenarios[i].Ours.Server = sc.Plain.Server.Add(actions.Counts{actions.TypeSignalWithStart: 2, actions.TypeBatchMarkers: 1, actions.TypeUpsert: 3})
		}
	}
	var b strings.Builder
	writeActionsWhere(&b, r.Actions)
	for _, want := range []string{
		"nowhere on a retry: its progress for the next attempt rides on the failed attempt's response",
		"(0 heartbeats per call for 3 retries)",
		"hold attempts back: 1 attempts per call beyond the 4 the API's answers needed, each an action",
		", with 4 heartbeats per call",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the prose lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "sends a heartbeat at the end of the failed attempt") {
		t.Errorf("the prose says retries heartbeat, but none did:\n%s", b.String())
	}
}

// TestRetryMet: a retry may cost 2 when a heartbeat carries its
// progress, 1 when nothing does.
func TestRetryMet(t *testing.T) {
	for _, c := range []struct {
		perRetry, heartbeats float64
		want                 bool
	}{{2, 1, true}, {1, 0, true}, {2.1, 1.05, false}, {1.1, 0, false}, {3.13, 1.57, false}} {
		if got := retryMet(c.perRetry, c.heartbeats); got != c.want {
			t.Errorf("retryMet(%g, %g) = %v; want %v", c.perRetry, c.heartbeats, got, c.want)
		}
	}
}

// TestActionsAPI: the section's API answers each mode as its scenario
// needs, per call.
func TestActionsAPI(t *testing.T) {
	post := func(t *testing.T, url, body string) (*http.Response, error) {
		t.Helper()
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		return c.Post(url, "application/json", strings.NewReader(body))
	}
	t.Run("retries", func(t *testing.T) {
		srv := httptest.NewServer(newActionsAPI(apiRetries, 3, 0, http.StatusTooEarly))
		defer srv.Close()
		for call, want := range map[string][]int{"a": {425, 425, 425, 201, 201}, "b": {425}} {
			for i, w := range want {
				resp, err := post(t, srv.URL+"/charges", `{"call":"`+call+`"}`)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != w {
					t.Errorf("call %s, request %d: %d; want %d", call, i+1, resp.StatusCode, w)
				}
			}
		}
	})
	t.Run("follow", func(t *testing.T) {
		srv := httptest.NewServer(newActionsAPI(apiFollow, 0, 3, 0))
		defer srv.Close()
		resp, err := post(t, srv.URL+"/transfers", `{"call":"c1"}`)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusAccepted || loc != srv.URL+"/ops/c1" || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("start: %d, Location %q, Retry-After %q", resp.StatusCode, loc, resp.Header.Get("Retry-After"))
		}
		for i, want := range []int{202, 202, 200} {
			resp, err := http.Get(loc)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("poll %d: %d; want %d", i+1, resp.StatusCode, want)
			}
		}
	})
	t.Run("lookup", func(t *testing.T) {
		api := newActionsAPI(apiLookup, 0, 0, 0)
		srv := httptest.NewServer(api)
		defer srv.Close()
		if _, err := post(t, srv.URL+"/payments", `{"call":"c1","client_reference":"k1"}`); err == nil {
			t.Error("the first POST of a reference was answered; want its answer cut")
		}
		resp, err := http.Get(srv.URL + "/payments?client_reference=k1")
		if err != nil {
			t.Fatal(err)
		}
		var recs []map[string]any
		err = json.NewDecoder(resp.Body).Decode(&recs)
		resp.Body.Close()
		if err != nil || len(recs) != 1 || recs[0]["client_reference"] != "k1" {
			t.Fatalf("lookup: %v, %v; want the one record", recs, err)
		}
		resp, err = post(t, srv.URL+"/payments", `{"call":"c1","client_reference":"k1"}`)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("the second POST: %d; want 201 (a second record)", resp.StatusCode)
		}
		if requests, records := api.stats(); requests != 3 || records != 2 {
			t.Errorf("stats: %d requests, %d records; want 3 and 2", requests, records)
		}
	})
	t.Run("webhook", func(t *testing.T) {
		api := newActionsAPI(apiWebhook, 0, 0, 0)
		srv := httptest.NewServer(api)
		defer srv.Close()
		posted := api.expect("w1")
		resp, err := post(t, srv.URL+"/charges", `{"call":"w1"}`)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		select {
		case <-posted:
		case <-time.After(5 * time.Second):
			t.Fatal("the call's POST was not announced")
		}
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("start: %d; want 201", resp.StatusCode)
		}
	})
}

// TestPlainActions runs the baseline workflow in Temporal's test
// environment: a POST retried through two 425s, a 202 followed by polls
// until 200, and a webhook awaited as a signal.
func TestPlainActions(t *testing.T) {
	for _, c := range []struct {
		name string
		api  *actionsAPI
		in   func(url string) PlainCall
	}{
		{"post", newActionsAPI(apiRetries, 2, 0, http.StatusTooEarly), func(url string) PlainCall {
			return PlainCall{Mode: plainPost, URL: url + "/charges", Body: []byte(`{"call":"p1"}`)}
		}},
		{"follow", newActionsAPI(apiFollow, 0, 3, 0), func(url string) PlainCall {
			return PlainCall{Mode: plainFollow, URL: url + "/transfers", Body: []byte(`{"call":"f1"}`), Poll: &PlainPollSetup{Interval: 10 * time.Millisecond}}
		}},
		{"webhook", newActionsAPI(apiWebhook, 0, 0, 0), func(url string) PlainCall {
			return PlainCall{Mode: plainWebhook, URL: url + "/charges", Body: []byte(`{"call":"w1"}`), Wait: time.Hour}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.api)
			defer srv.Close()
			var s sdktestsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			registerPlainActions(env, &http.Client{Transport: newTransport()})
			if c.name == "webhook" {
				env.RegisterDelayedCallback(func() { env.SignalWorkflow(plainWebhookSignal, []byte(`{}`)) }, time.Minute)
			}
			env.ExecuteWorkflow(plainActionsWorkflow, c.in(srv.URL))
			if !env.IsWorkflowCompleted() {
				t.Fatal("the workflow did not complete")
			}
			if err := env.GetWorkflowError(); err != nil {
				t.Fatalf("workflow error: %v", err)
			}
			var status int
			if err := env.GetWorkflowResult(&status); err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"post": 201, "follow": 200, "webhook": 201}[c.name]
			if status != want {
				t.Errorf("status %d; want %d", status, want)
			}
			requests, _ := c.api.stats()
			if wantReq := map[string]int{"post": 3, "follow": 4, "webhook": 1}[c.name]; requests != wantReq {
				t.Errorf("%d requests at the API; want %d", requests, wantReq)
			}
		})
	}
}

// TestActionsParamsDefaults: zero fields take the section's defaults.
func TestActionsParamsDefaults(t *testing.T) {
	if got := (ActionsParams{}).withDefaults(); got != defaultActions {
		t.Errorf("withDefaults = %+v; want %+v", got, defaultActions)
	}
	if got := (ActionsParams{Calls: 3}).withDefaults(); got.Calls != 3 || got.Polls != defaultActions.Polls {
		t.Errorf("withDefaults kept %+v", got)
	}
}
