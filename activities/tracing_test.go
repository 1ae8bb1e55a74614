package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// traceparents wraps h and records the traceparent header of every request.
type traceparents struct {
	mu   sync.Mutex
	seen []string
}

func (tp *traceparents) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.mu.Lock()
		tp.seen = append(tp.seen, r.Header.Get("traceparent"))
		tp.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (tp *traceparents) all() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]string(nil), tp.seen...)
}

// traceparent is the W3C header for sc, as a sampled span sends it.
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestAttemptSpan: one attempt is one HTTP client span after OpenTelemetry's
// conventions, a child of the span in the activity's context, whose
// traceparent the server receives; the URL's query values are redacted, and
// no attribute holds the credential.
func TestAttemptSpan(t *testing.T) {
	const query = "?customer=cus_query_value_77&ref=r1"
	tests := []struct {
		name    string
		handler http.HandlerFunc
		closed  bool
		// want: attributes beside those every attempt has.
		want    map[attribute.Key]attribute.Value
		wantErr bool
	}{
		{name: "201", handler: status(201, `{"id":"p1"}`), want: map[attribute.Key]attribute.Value{
			"http.response.status_code": attribute.IntValue(201), "idempotent_http.outcome": attribute.StringValue("success"),
			"idempotent_http.replayed": attribute.BoolValue(false),
		}},
		{name: "429 Retry-After 1", handler: status(429, "", "Retry-After", "1"), wantErr: true, want: map[attribute.Key]attribute.Value{
			"http.response.status_code": attribute.IntValue(429), "error.type": attribute.StringValue("429"),
			"idempotent_http.outcome": attribute.StringValue("retryable"), "idempotent_http.error_type": attribute.StringValue("HTTPRetryableStatus"),
			"idempotent_http.retry_delay_seconds": attribute.Float64Value(1),
		}},
		{name: "400", handler: status(400, `{"error":"bad"}`), wantErr: true, want: map[attribute.Key]attribute.Value{
			"http.response.status_code": attribute.IntValue(400), "error.type": attribute.StringValue("400"),
			"idempotent_http.outcome": attribute.StringValue("non_retryable"), "idempotent_http.error_type": attribute.StringValue("HTTPClientError"),
		}},
		{name: "connection refused", closed: true, wantErr: true, want: map[attribute.Key]attribute.Value{
			"error.type":              attribute.StringValue("NetworkError"),
			"idempotent_http.outcome": attribute.StringValue("retryable"), "idempotent_http.error_type": attribute.StringValue("NetworkError"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen traceparents
			h := tt.handler
			if h == nil {
				h = status(200, "")
			}
			srv := httptest.NewServer(seen.wrap(h))
			t.Cleanup(srv.Close)
			if tt.closed {
				srv.Close()
			}
			sr := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
			ctx, parent := tp.Tracer("test").Start(context.Background(), "RunActivity")
			defer parent.End()

			var s sdktestsuite.WorkflowTestSuite
			s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
			env := s.NewTestActivityEnvironment()
			env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
			a, err := activities.New(activities.Config{
				AllowedOrigins: []string{srv.URL}, TracerProvider: tp,
				Credentials: map[string]activities.Credential{srv.URL: {Header: http.Header{"Authorization": {"Bearer " + token}}}},
			})
			require.NoError(t, err)
			a.Register(env)
			r := req(srv.URL + "/payments" + query)
			_, err = env.ExecuteActivity(input.ActivityName, r)
			assert.Equal(t, tt.wantErr, err != nil, "error: %v", err)

			spans := sr.Ended()
			require.Len(t, spans, 1)
			span := spans[0]
			assert.Equal(t, "POST", span.Name())
			assert.Equal(t, trace.SpanKindClient, span.SpanKind())
			assert.Equal(t, parent.SpanContext().SpanID(), span.Parent().SpanID(), "a child of the activity's span")
			assert.Equal(t, parent.SpanContext().TraceID(), span.SpanContext().TraceID())
			u, _ := url.Parse(srv.URL)
			want := map[attribute.Key]attribute.Value{
				"http.request.method":             attribute.StringValue("POST"),
				"url.full":                        attribute.StringValue(srv.URL + "/payments?customer=REDACTED&ref=REDACTED"),
				"server.address":                  attribute.StringValue("127.0.0.1"),
				"server.port":                     attribute.IntValue(mustAtoi(t, u.Port())),
				"idempotent_http.operation":       attribute.StringValue("charge"),
				"idempotent_http.idempotency_key": attribute.StringValue("key-1"),
				"idempotent_http.attempt":         attribute.IntValue(1),
			}
			for k, v := range tt.want {
				want[k] = v
			}
			got := attrs(span)
			if _, ok := want["idempotent_http.retry_delay_seconds"]; !ok && tt.wantErr && tt.want["idempotent_http.outcome"].AsString() == "retryable" {
				// A jittered backoff: some delay.
				assert.Positive(t, got["idempotent_http.retry_delay_seconds"].AsFloat64())
				delete(got, "idempotent_http.retry_delay_seconds")
			}
			assert.Equal(t, want, got)
			if tt.wantErr {
				assert.Equal(t, codes.Error, span.Status().Code)
			} else {
				assert.Equal(t, codes.Unset, span.Status().Code)
			}
			for k, v := range attrs(span) {
				for _, secret := range []string{token, "cus_query_value_77", "r1"} {
					assert.NotContains(t, v.Emit(), secret, "attribute %s", k)
				}
			}
			if !tt.closed {
				assert.Equal(t, []string{traceparent(span.SpanContext())}, seen.all(), "the server continues the attempt's trace")
			}
		})
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	_, err := fmt.Sscan(s, &n)
	require.NoError(t, err)
	return n
}

// TestWorkflowTrace runs the ready workflow in Temporal's test environment
// with the SDK's OpenTelemetry tracing interceptor against the reference
// server scripted 503, 429 (Retry-After: 1), then processing: one trace,
// rooted in the workflow's span, holds the three attempts' HTTP client
// spans, each a child of its own RunActivity span, and every request the
// server received carried a traceparent naming that trace and that span.
// The activity's log lines carry the trace and the attempt's span.
func TestWorkflowTrace(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	tracing, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: tp.Tracer("temporal-sdk-go")})
	require.NoError(t, err)

	api := testsuite.NewServer(testsuite.Options{})
	api.Script(testsuite.Fail(503), testsuite.Fail(429, "1"))
	var seen traceparents
	srv := httptest.NewServer(seen.wrap(api))
	t.Cleanup(srv.Close)

	var logs lockedBuffer
	var s sdktestsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{tracing}})
	testsuite.Register(t, env, nil, activities.Config{AllowedOrigins: []string{srv.URL}, TracerProvider: tp})
	env.ExecuteWorkflow(workflows.WorkflowName, workflows.Request{Operation: "charge", URL: srv.URL + "/payments", Body: []byte(`{"amount":42}`)})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	spans := sr.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	traces := map[trace.TraceID]bool{}
	var workflowSpans, httpSpans []sdktrace.ReadOnlySpan
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
		traces[s.SpanContext().TraceID()] = true
		switch {
		case strings.HasPrefix(s.Name(), "RunWorkflow:"):
			workflowSpans = append(workflowSpans, s)
		case s.SpanKind() == trace.SpanKindClient && s.Name() == "POST":
			httpSpans = append(httpSpans, s)
		}
	}
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	require.Len(t, traces, 1, "spans: %q", names)
	require.Len(t, workflowSpans, 1, "spans: %q", names)
	require.Len(t, httpSpans, 3, "spans: %q", names)
	traceID := workflowSpans[0].SpanContext().TraceID()

	got := seen.all()
	require.Len(t, got, 3)
	for i, s := range httpSpans {
		parent, ok := byID[s.Parent().SpanID()]
		if assert.True(t, ok, "the parent of HTTP span %d was recorded", i+1) {
			assert.Equal(t, "RunActivity:"+input.ActivityName, parent.Name())
		}
		assert.Equal(t, int64(i+1), attrs(s)["idempotent_http.attempt"].AsInt64())
		assert.Equal(t, traceparent(s.SpanContext()), got[i], "request %d", i+1)
		assert.Contains(t, got[i], traceID.String())
	}
	// The attempts' log lines, in order: two retries, one success.
	var lines []map[string]any
	for line := range strings.Lines(logs.String()) {
		var l map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &l))
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "HTTP ") {
			lines = append(lines, l)
		}
	}
	if assert.Len(t, lines, 3, "log:\n%s", logs.String()) {
		for i, l := range lines {
			assert.Equal(t, traceID.String(), l["TraceID"], "log line %d: %v", i+1, l)
			assert.Equal(t, httpSpans[i].SpanContext().SpanID().String(), l["SpanID"], "log line %d: %v", i+1, l)
		}
	}
	assert.Equal(t, []int64{503, 429, 201}, []int64{
		attrs(httpSpans[0])["http.response.status_code"].AsInt64(),
		attrs(httpSpans[1])["http.response.status_code"].AsInt64(),
		attrs(httpSpans[2])["http.response.status_code"].AsInt64(),
	})
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPropagator: by default a request carries the W3C trace context and
// not the baggage of the activity's context (meant for the worker's own
// services); Config.Propagator can send it.
func TestPropagator(t *testing.T) {
	member, err := baggage.NewMember("tenant", "acme-internal")
	require.NoError(t, err)
	bag, err := baggage.New(member)
	require.NoError(t, err)
	for _, withBaggage := range []bool{false, true} {
		t.Run(fmt.Sprint("baggage propagator ", withBaggage), func(t *testing.T) {
			srv := newRecorder(t, status(201, "{}"))
			tp := sdktrace.NewTracerProvider()
			ctx, parent := tp.Tracer("test").Start(baggage.ContextWithBaggage(context.Background(), bag), "RunActivity")
			defer parent.End()
			var s sdktestsuite.WorkflowTestSuite
			s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
			env := s.NewTestActivityEnvironment()
			env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
			cfg := activities.Config{AllowedOrigins: []string{srv.URL}, TracerProvider: tp}
			if withBaggage {
				cfg.Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
			}
			a, err := activities.New(cfg)
			require.NoError(t, err)
			a.Register(env)
			_, err = env.ExecuteActivity(input.ActivityName, req(srv.URL))
			require.NoError(t, err)
			r, _ := srv.last()
			assert.Contains(t, r.Header.Get("traceparent"), parent.SpanContext().TraceID().String())
			if withBaggage {
				assert.Equal(t, "tenant=acme-internal", r.Header.Get("baggage"))
			} else {
				assert.Empty(t, r.Header.Values("baggage"))
			}
		})
	}
}

// TestPollSpan: a poll attempt that sends is one HTTP client span, as a
// start attempt is, ended with the attempt's result: "still running" a
// retryable OperationRunning, the last one a success, the read of the
// result in the same attempt within it. (Polls once ended each span
// before they knew the result, and a recording tracer made every poll
// that got an answer panic.)
func TestPollSpan(t *testing.T) {
	for _, tc := range []struct {
		style testsuite.AsyncStyle
		conv  func(string) activities.Convention
	}{
		{testsuite.AsyncLocation, preset(activities.AcceptedLocation)},
		{testsuite.AsyncAzure, preset(activities.AzureAsyncOperation)},
		{testsuite.AsyncOperationLocation, preset(activities.OperationLocation)},
		{testsuite.AsyncGoogle, google},
	} {
		t.Run(string(tc.style), func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{Async: &testsuite.Async{Style: tc.style, Duration: 6 * time.Second, RetryAfter: 2}})
			sr := tracetest.NewSpanRecorder()
			env := testsuite.Register(t, nil, srv, activities.Config{
				TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr)),
				Conventions:    map[string]activities.Convention{srv.URL: tc.conv(srv.URL)},
			})
			env.RegisterWorkflow(followWorkflow)
			env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", workflows.FollowOptions{})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var resp *workflows.Response
			require.NoError(t, env.GetWorkflowResult(&resp))
			var polls []sdktrace.ReadOnlySpan
			for _, s := range sr.Ended() {
				if s.Name() == http.MethodGet {
					polls = append(polls, s)
				}
			}
			require.Len(t, polls, int(resp.Accepted.Polls), "one span per poll attempt")
			for i, s := range polls {
				a := attrs(s)
				assert.Equal(t, attribute.IntValue(i+1), a["idempotent_http.attempt"], "span %d", i)
				if i < len(polls)-1 {
					assert.Equal(t, "retryable", a["idempotent_http.outcome"].AsString(), "span %d", i)
					assert.Equal(t, workflows.ErrTypeOperationRunning, a["idempotent_http.error_type"].AsString(), "span %d", i)
					continue
				}
				assert.Equal(t, "success", a["idempotent_http.outcome"].AsString())
				assert.Equal(t, attribute.IntValue(http.StatusOK), a["http.response.status_code"])
				assert.Equal(t, codes.Unset, s.Status().Code)
			}
		})
	}
}
