package activities_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// FuzzPoll drives the poll activity against a monitor answering generated
// statuses, headers and bodies (status documents or not) that echo the
// worker's credentials, as FuzzDo does for the start request, under each
// long-running convention. Invariants: no panic; no piece of a credential
// or of a server-sent query value in an error, Failure, result or log
// line; a poll never carries the idempotency key; a result only from a
// 2xx other than 202 whose body arrived whole; every error is the
// activity's own, carrying the operation (Failure.Accepted); a retry
// waits at least poll.MinInterval (a wait for admission: its turn); a poll
// to an origin whose breaker is open sends nothing unless it is the probe.
// An odd conv/4 polls through admission: the origin's breaker opened by
// five 503s, a poll while it is open, the probe after its open time, and
// a poll after the probe.
func FuzzPoll(f *testing.F) {
	const (
		tok    = "tok_fuzz_4e5d6c7b8a9f"
		digits = "5551234567890123"
	)
	var (
		mu      sync.Mutex
		cur     fuzzAnswer
		answers []fuzzAnswer
		keyed   int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		a := cur
		if r.Header.Get("Idempotency-Key") != "" {
			keyed++
		}
		if !strings.HasPrefix(r.URL.Path, "/hop/") {
			answers = append(answers, a)
		}
		mu.Unlock()
		a.write(w, r)
	}))
	f.Cleanup(srv.Close)
	conventions := []activities.LongRunning{activities.AcceptedLocation(), activities.AzureAsyncOperation(), activities.OperationLocation(), activities.GoogleOperation(srv.URL + "/v1/")}
	envs := make([]*testsuite.TestActivityEnvironment, len(conventions))
	var logs syncBuffer
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	config := func(l activities.LongRunning) activities.Config {
		c := activities.IETFConvention()
		c.LongRunning = l
		return activities.Config{
			AllowedOrigins: []string{srv.URL},
			Credentials:    map[string]activities.Credential{srv.URL: {Header: http.Header{"Authorization": {"Bearer " + tok}, "X-Api-Key": {digits}}}},
			Conventions:    map[string]activities.Convention{srv.URL: c},
			MaxResultBytes: 4 << 10, MaxResponseBytes: 2 << 10, MaxRetryAfter: time.Minute,
			ResultHeaders: []string{"Location", "Content-Location", "X-Request-Id"},
			Admission:     activities.Admission{Off: true},
			HTTPClient:    srv.Client(),
		}
	}
	for i, l := range conventions {
		a, err := activities.New(config(l))
		if err != nil {
			f.Fatal(err)
		}
		envs[i] = suite.NewTestActivityEnvironment()
		a.Register(envs[i])
	}
	// breakerOpen returns an environment whose activities' breaker for
	// the server's origin five 503s have just opened (for openTime), its
	// clock and its metrics.
	const openTime = 10 * time.Second
	breakerOpen := func(t *testing.T, l activities.LongRunning) (*testsuite.TestActivityEnvironment, *fakeClock, *counting) {
		clock := &fakeClock{now: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
		cfg := config(l)
		cfg.Now = clock.Now
		cfg.Admission = activities.Admission{Breaker: activities.Breaker{OpenTime: openTime}}
		a, err := activities.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := newCounting()
		var s testsuite.WorkflowTestSuite
		s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
		s.SetMetricsHandler(m)
		env := s.NewTestActivityEnvironment()
		a.Register(env)
		mu.Lock()
		cur = fuzzAnswer{status: http.StatusServiceUnavailable}
		mu.Unlock()
		for range 5 {
			_, err := env.ExecuteActivity(poll.ActivityName, poll.Monitor{Accepted: poll.Accepted{
				Operation: "fuzz", IdempotencyKey: "fuzz-key", Method: http.MethodPost, URL: srv.URL + "/start", Monitor: srv.URL + "/hop/open"}})
			if err == nil {
				t.Fatal("a 503 ended the poll")
			}
		}
		return env, clock, m
	}
	for _, s := range []struct {
		conv     byte
		doc      bool
		status   uint16
		headers  string
		body     string
		echoMode byte
	}{
		{0, false, 202, "Retry-After: 2", `{"status":"running"}`, 0},
		{0, false, 200, "", `{"id":"rec_1","echo":""}`, 2},
		{0, false, 303, "Location: /results/1?sig=$QV", ``, 0},
		{1, true, 200, "Retry-After: 0", `{"status":"InProgress"}`, 0},
		{1, true, 200, "", `{"status":"Failed","error":{"message":""}}`, 1},
		{2, true, 200, "", `{"status":"Succeeded","result":{"echo":""}}`, 2},
		{3, true, 200, "", `{"name":"operations/1","done":true,"response":{"e":""}}`, 4},
		{3, true, 200, "", `{"name":"operations/1","done":true,"error":{"code":9,"message":""}}`, 6},
		{1, true, 503, "Retry-After: Wed, 02 Dec 2026 00:00:09 GMT", `busy`, 1 | 0x08},
		{1, true, 200, "", `{"status":"Succeeded"}`, 0x20 | 2},
		{0, false, 302, "Location: https://u:p@evil.example/x?X-Amz-Signature=$QV", ``, 7},
		{2, true, 404, "", `{"error":""}`, 0x40 | 1},
		// Through admission, the breaker open.
		{4, false, 202, "Retry-After: 2", `{"status":"running"}`, 0},
		{4, false, 303, "Location: /results/1?sig=$QV", ``, 0},
		{5, true, 503, "", `busy`, 1},
		{5, true, 200, "", `{"status":"Succeeded"}`, 0x20 | 2},
		{6, true, 500, "Retry-After: 30", `{"status":"Running"}`, 0},
		{7, true, 200, "", `{"name":"operations/1","done":true,"response":{"e":""}}`, 4},
	} {
		f.Add(s.conv, s.doc, "", s.status, s.headers, []byte(s.body), uint16(9), s.echoMode)
	}
	f.Fuzz(func(t *testing.T, conv byte, doc bool, path string, status uint16, headers string, respBody []byte, echoAt uint16, echoMode byte) {
		env := envs[int(conv)%len(envs)]
		admitted := int(conv)/len(envs)%2 == 1
		var (
			clock *fakeClock
			m     *counting
		)
		if admitted {
			env, clock, m = breakerOpen(t, conventions[int(conv)%len(envs)])
		}
		in := poll.Monitor{Accepted: poll.Accepted{
			Operation: "fuzz", IdempotencyKey: "fuzz-key", Method: http.MethodPost, URL: srv.URL + "/start",
			Monitor: srv.URL + "/operations/" + path, StatusDocument: doc,
		}}
		if strings.ContainsAny(path, "?#") || !utf8.ValidString(path) {
			// The monitor comes through JSON and followable: UTF-8, no query.
			in.Monitor = srv.URL + "/operations/x"
		}
		st := int(status)
		if st < 200 || st > 599 {
			st = 200 + st%400
		}
		mu.Lock()
		cur = fuzzAnswer{status: st, headers: headers, body: respBody, echoAt: int(echoAt), echoMode: echoMode}
		answers, keyed = answers[:0], 0
		mu.Unlock()
		logs.take()
		dog := time.AfterFunc(20*time.Second, func() { panic(fmt.Sprintf("the poll did not end in 20 s: %q %q", headers, respBody)) })
		defer dog.Stop()
		// pollHeld polls while the breaker is open: nothing may be sent,
		// and the attempt waits for admission, carrying the operation
		// (or fails before any request, as for a monitor it will not
		// follow).
		pollHeld := func(when string) {
			t.Helper()
			_, err := env.ExecuteActivity(poll.ActivityName, in)
			mu.Lock()
			n := len(answers)
			mu.Unlock()
			if n != 0 {
				t.Fatalf("%s: a poll sent %d requests to an origin whose breaker is open (not the probe)", when, n)
			}
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) {
				t.Fatalf("%s: a poll held by the open breaker ended with %v, want a NotAdmitted", when, err)
			}
			if fl, ok := workflows.AsFailure(err); !ok || fl.Accepted == nil || fl.Status != 0 {
				t.Fatalf("%s: an error without the operation, or with a status, though nothing was sent: %v", when, err)
			}
			if appErr.Type() == workflows.ErrTypeNotAdmitted && (appErr.NonRetryable() || appErr.NextRetryDelay() <= 0) {
				t.Fatalf("%s: NotAdmitted final or without its delay: %v", when, err)
			}
		}
		if admitted {
			pollHeld("open")
			// The probe.
			clock.add(openTime)
		}
		val, err := env.ExecuteActivity(poll.ActivityName, in)
		var resp *workflows.Response
		if err == nil && val != nil && val.HasValue() {
			resp = new(workflows.Response)
			if derr := val.Get(resp); derr != nil {
				t.Fatalf("result does not decode: %v", derr)
			}
		}
		mu.Lock()
		got, k := append([]fuzzAnswer(nil), answers...), keyed
		mu.Unlock()
		text := logs.take()
		secrets := []string{tok, digits}
		if !qvInPath(headers) && len(pieces(strings.Join([]string{path, strings.ReplaceAll(headers, "$QV", ""), string(respBody)}, "\n"), qsecret)) == 0 {
			secrets = append(secrets, qsecret)
		}
		assertNoPiece(t, err, resp, text, secrets...)
		if k != 0 {
			t.Fatalf("%d polls carried the idempotency key", k)
		}
		if err == nil {
			if resp == nil || len(got) == 0 {
				t.Fatalf("success without a result (%d answers)", len(got))
			}
			last := got[len(got)-1]
			if last.status < 200 || last.status > 299 || last.status == http.StatusAccepted || last.cut() {
				t.Fatalf("success after answers %+v", got)
			}
			if resp.Accepted == nil || resp.Accepted.Monitor != in.Monitor {
				t.Fatalf("result without its operation: %+v", resp.Accepted)
			}
			return
		}
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) {
			t.Fatalf("not an ApplicationError: %T %v", err, err)
		}
		fl, ok := workflows.AsFailure(err)
		if !ok || fl.Accepted == nil {
			t.Fatalf("no Failure with the operation: %v", err)
		}
		if !appErr.NonRetryable() && appErr.Type() != workflows.ErrTypeNotAdmitted && appErr.NextRetryDelay() < poll.MinInterval {
			t.Fatalf("retry after %s, under the floor: %v", appErr.NextRetryDelay(), err)
		}
		if admitted {
			if appErr.Type() == workflows.ErrTypeNotAdmitted {
				t.Fatalf("the probe was not admitted: %v", err)
			}
			if m.gaugeValues()["idempotent_http_circuit_open{origin="+srv.URL+"}"] == 1 {
				// The probe failed: the breaker is open again.
				mu.Lock()
				answers = answers[:0]
				mu.Unlock()
				pollHeld("after a failed probe")
			}
		}
	})
}
