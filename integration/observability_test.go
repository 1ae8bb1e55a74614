package integration_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	otlpcommonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestObservabilityMetrics runs the seed scenario (the reference API
// binary with --script 503,429:1, then processing; the API requires the
// worker's token) through the worker binary started with --metrics-addr,
// and scrapes its /metrics: the attempt counters say 1 success and 2
// retryable attempts, the histograms hold 3 attempt durations, one
// Retry-After wait of 1 s and two delays handed to Temporal, the SDK's own
// worker metrics are there, and neither the key, the token, the URL's path
// nor its query values appear in any label (or anywhere in the page).
func TestObservabilityMetrics(t *testing.T) {
	t.Parallel()
	const (
		token = "tok_metrics_5f4e3d2c1b0a"
		query = "?customer=cus_metrics_query_81&ref=ref-metrics-92"
	)
	_, base := startDemoAPI(t, "--script", "503,429:1", "--require-token", token)
	port, err := itest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := itest.HostPort(port)
	tq := uniqueName(t, "tq")
	w := startWorkerWith(t, workerOptions{TaskQueue: tq, Origins: []string{base}, Token: token}, nil, "--metrics-addr", addr)
	metricsURL := "http://" + addr + "/metrics"
	if !strings.Contains(w.Output(), metricsURL) {
		t.Errorf("the worker's log does not say where the metrics are (%s):\n%s", metricsURL, w.Tail(4<<10))
	}
	wid := uniqueName(t, "payment")
	_, resp, err := call(t, ctxT(t, 2*time.Minute), tq, wid, workflows.Request{Operation: "charge", URL: base + "/payments" + query, Body: body})
	if err != nil {
		t.Fatalf("workflow failed: %v\nworker output:\n%s", err, w.Tail(8<<10))
	}
	if resp.Status != 201 || resp.Attempt != 3 {
		t.Fatalf("result: status %d on attempt %d; want 201 on attempt 3", resp.Status, resp.Attempt)
	}
	checkStats(t, apiStats(t, base), testsuite.Stats{Requests: 3, DistinctKeys: 1, Records: 1, Replays: 0, InFlight: 0, Failures: 2})

	fams, text := scrape(t, metricsURL)
	// The shared rate, on by default, runs the activity on the origin's
	// own queue.
	activityTQ, err := workflows.OriginTaskQueue(tq, base)
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]string{
		"task_queue": activityTQ, "origin": base, "operation": "charge", "namespace": dev.Namespace,
		"activity_type": input.ActivityName, "workflow_type": workflows.WorkflowName,
	}
	byOutcome := map[string]float64{}
	for _, m := range series(fams, "idempotent_http_attempts_total", ours) {
		l := labelsOf(m)
		byOutcome[l["outcome"]+"/"+l["error_type"]] += m.GetCounter().GetValue()
	}
	want := map[string]float64{"success/none": 1, "retryable/HTTPRetryableStatus": 2}
	if fmt.Sprint(byOutcome) != fmt.Sprint(want) {
		t.Errorf("idempotent_http_attempts_total by outcome/error_type = %v, want %v", byOutcome, want)
	}
	if got := fams["idempotent_http_attempts_total"].GetType(); got != dto.MetricType_COUNTER {
		t.Errorf("idempotent_http_attempts_total is a %v, want a counter", got)
	}
	histogram := func(name string) *dto.Histogram {
		s := series(fams, name, ours)
		if len(s) != 1 || s[0].GetHistogram() == nil {
			t.Errorf("%s: %d series with labels %v, want one histogram", name, len(s), ours)
			return &dto.Histogram{}
		}
		return s[0].GetHistogram()
	}
	if h := histogram("idempotent_http_attempt_duration_seconds"); h.GetSampleCount() != 3 || h.GetSampleSum() <= 0 {
		t.Errorf("idempotent_http_attempt_duration_seconds: count %d, sum %g; want 3 attempts", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := histogram("idempotent_http_retry_after_seconds"); h.GetSampleCount() != 1 || h.GetSampleSum() != 1 {
		t.Errorf("idempotent_http_retry_after_seconds: count %d, sum %g; want the one wait of 1 s", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := histogram("idempotent_http_retry_delay_seconds"); h.GetSampleCount() != 2 || h.GetSampleSum() < 1 {
		t.Errorf("idempotent_http_retry_delay_seconds: count %d, sum %g; want 2 delays, one of 1 s", h.GetSampleCount(), h.GetSampleSum())
	}
	if s := series(fams, "idempotent_http_in_flight_waits_total", ours); len(s) != 0 {
		t.Errorf("idempotent_http_in_flight_waits_total: %v, want none: no key was in flight", s)
	}
	// The SDK's own worker metrics, through the same handler.
	for _, name := range []string{"temporal_activity_execution_latency_seconds", "temporal_workflow_completed_total", "temporal_request_total"} {
		if len(series(fams, name, map[string]string{"task_queue": tq})) == 0 && len(series(fams, name, nil)) == 0 {
			t.Errorf("the SDK's metric %s is not served", name)
		}
	}
	if len(series(fams, "temporal_activity_execution_latency_seconds", map[string]string{"activity_type": input.ActivityName, "task_queue": activityTQ})) == 0 {
		t.Errorf("temporal_activity_execution_latency_seconds has no series for the activity on %s", activityTQ)
	}

	key := keyOf(wid, "charge")
	secrets := []string{token, key, "cus_metrics_query_81", "ref-metrics-92"}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for k, v := range labelsOf(m) {
				for _, s := range append(secrets, "/payments") {
					if strings.Contains(v, s) {
						t.Errorf("%s: label %s=%q holds %q", name, k, v, s)
					}
				}
			}
		}
	}
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("/metrics holds %q", s)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
}

// recordingAPI is the reference server behind an httptest server that
// records the traceparent header of every request.
type recordingAPI struct {
	*httptest.Server
	api  *testsuite.Server
	mu   sync.Mutex
	seen []string
}

func startRecordingAPI(t testing.TB, steps ...testsuite.Step) *recordingAPI {
	r := &recordingAPI{api: testsuite.NewServer(testsuite.Options{})}
	r.api.Script(steps...)
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Header.Get("traceparent"))
		r.mu.Unlock()
		r.api.ServeHTTP(w, req)
	}))
	t.Cleanup(func() { r.Close(); r.api.Close() })
	return r
}

func (r *recordingAPI) traceparents() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// TestObservabilityTrace starts the seed scenario (503, 429 with
// Retry-After: 1, then processing) on the dev server through a client and
// an in-process worker that carry the SDK's OpenTelemetry tracing
// interceptor, spans going to an in-memory exporter: all spans form one
// trace rooted in the client's StartWorkflow span; each attempt's HTTP
// client span is the child of that attempt's RunActivity span; the API
// received, on every attempt, a traceparent with that trace ID and the
// attempt's span as parent; the activity's log lines carry both IDs.
func TestObservabilityTrace(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(ctxT(t, 5*time.Second)) })
	tracing, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: tp.Tracer("temporal-sdk-go")})
	if err != nil {
		t.Fatal(err)
	}
	api := startRecordingAPI(t, testsuite.Fail(503), testsuite.Fail(429, "1"))

	var logs syncBuffer
	c, err := client.NewClientFromExisting(tc, client.Options{
		Interceptors: []interceptor.ClientInterceptor{tracing},
		Logger:       sdklog.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, nil))),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	acts, err := activities.New(activities.Config{AllowedOrigins: []string{api.URL}, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	tq, identity := uniqueName(t, "tq"), uniqueName(t, "in-process")
	w := worker.New(c, tq, worker.Options{Identity: identity})
	acts.Register(w)
	workflows.Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := itest.WaitForPollers(ctxT(t, 30*time.Second), tc, tq, identity); err != nil {
		t.Fatal(err)
	}

	ctx := ctxT(t, 2*time.Minute)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: uniqueName(t, "payment"), TaskQueue: tq, WorkflowExecutionTimeout: 5 * time.Minute},
		workflows.WorkflowName, workflows.Request{Operation: "charge", URL: api.URL + "/payments", Body: body})
	if err != nil {
		t.Fatal(err)
	}
	var resp workflows.Response
	if err := run.Get(ctx, &resp); err != nil || resp.Attempt != 3 {
		t.Fatalf("workflow: attempt %d, %v; want success on attempt 3\nlog:\n%s", resp.Attempt, err, logs.String())
	}
	// The worker's workflow task that completed the run may still be
	// finishing its spans.
	var spans tracetest.SpanStubs
	err = itest.Eventually(ctx, 50*time.Millisecond, func() error {
		spans = exp.GetSpans()
		for _, s := range spans {
			if strings.HasPrefix(s.Name, "RunWorkflow:") {
				return nil
			}
		}
		return fmt.Errorf("no RunWorkflow span among %d", len(spans))
	})
	if err != nil {
		t.Fatal(err)
	}
	checkTrace(t, spans, api.traceparents(), "StartWorkflow:"+workflows.WorkflowName)

	// The attempts' log lines carry the trace and the attempt's span.
	var httpSpanIDs []string
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindClient && s.Name == "POST" {
			httpSpanIDs = append(httpSpanIDs, s.SpanContext.SpanID().String())
		}
	}
	var attemptLines int
	for line := range strings.Lines(logs.String()) {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		if msg, _ := l["msg"].(string); !strings.HasPrefix(msg, "HTTP ") {
			continue
		}
		attemptLines++
		if l["TraceID"] != spans[0].SpanContext.TraceID().String() || !containsString(httpSpanIDs, fmt.Sprint(l["SpanID"])) {
			t.Errorf("log line %v: want TraceID %s and the SpanID of an HTTP span (%v)", l, spans[0].SpanContext.TraceID(), httpSpanIDs)
		}
	}
	if attemptLines != 3 {
		t.Errorf("%d log lines of attempts, want 3\nlog:\n%s", attemptLines, logs.String())
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkTrace checks that spans form one trace whose root is named root,
// holding three HTTP client spans (the attempts), each the child of a
// RunActivity span, and that the API received on each attempt a
// traceparent naming that trace and that attempt's span.
func checkTrace(t *testing.T, spans tracetest.SpanStubs, traceparents []string, root string) {
	t.Helper()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	traces := map[trace.TraceID]bool{}
	var roots, httpSpans []tracetest.SpanStub
	var names []string
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
		traces[s.SpanContext.TraceID()] = true
		names = append(names, s.Name)
		if !s.Parent.IsValid() {
			roots = append(roots, s)
		}
		if s.SpanKind == trace.SpanKindClient && s.Name == "POST" {
			httpSpans = append(httpSpans, s)
		}
	}
	if len(traces) != 1 || len(roots) != 1 || roots[0].Name != root {
		t.Fatalf("%d traces, roots %v; want one trace rooted in %s (spans %q)", len(traces), roots, root, names)
	}
	traceID := roots[0].SpanContext.TraceID()
	if len(httpSpans) != 3 || len(traceparents) != 3 {
		t.Fatalf("%d HTTP client spans and %d requests, want 3 of each (spans %q)", len(httpSpans), len(traceparents), names)
	}
	// Attempts in order.
	for i := range httpSpans {
		for j := i + 1; j < len(httpSpans); j++ {
			if httpSpans[j].StartTime.Before(httpSpans[i].StartTime) {
				httpSpans[i], httpSpans[j] = httpSpans[j], httpSpans[i]
			}
		}
	}
	for i, s := range httpSpans {
		parent, ok := byID[s.Parent.SpanID()]
		if !ok || parent.Name != "RunActivity:"+input.ActivityName {
			t.Errorf("HTTP span %d: parent %q, want RunActivity:%s", i+1, parent.Name, input.ActivityName)
		}
		want := fmt.Sprintf("00-%s-%s-01", traceID, s.SpanContext.SpanID())
		if traceparents[i] != want {
			t.Errorf("request %d: traceparent %q, want %q (the trace %s, the attempt's span)", i+1, traceparents[i], want, traceID)
		}
		var attempt int64
		for _, kv := range s.Attributes {
			if kv.Key == "idempotent_http.attempt" {
				attempt = kv.Value.AsInt64()
			}
		}
		if attempt != int64(i+1) {
			t.Errorf("HTTP span %d: idempotent_http.attempt %d", i+1, attempt)
		}
	}
}

// otlpReceiver is an OTLP/HTTP trace receiver: it keeps every span it is
// sent, with its resource's service.name.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	service string
	span    *tracepb.Span
}

func startOTLPReceiver(t testing.TB) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		b, err := io.ReadAll(body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.GetResourceSpans() {
			var service string
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					r.spans = append(r.spans, receivedSpan{service, s})
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) received() []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedSpan(nil), r.spans...)
}

var traceLine = regexp.MustCompile(`(?m)^Trace: ([0-9a-f]{32})$`)

// TestObservabilityOTLP runs the seed scenario through the starter and
// worker binaries with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an OTLP/HTTP
// receiver: the starter prints its trace ID; the receiver gets the
// starter's spans and the worker's under that one trace, with the three
// HTTP client spans children of RunActivity spans; the API received that
// trace's traceparent on every attempt; the worker's log lines of the
// attempts carry the trace ID. Without the OTEL_* variables (every other
// test) the binaries export nothing.
func TestObservabilityOTLP(t *testing.T) {
	t.Parallel()
	recv := startOTLPReceiver(t)
	api := startRecordingAPI(t, testsuite.Fail(503), testsuite.Fail(429, "1"))
	otelEnv := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_TRACES_EXPORTER=", "OTEL_SDK_DISABLED=", "OTEL_SERVICE_NAME=", "OTEL_RESOURCE_ATTRIBUTES=",
	}
	tq := uniqueName(t, "tq")
	w := startWorkerWith(t, workerOptions{TaskQueue: tq, Origins: []string{api.URL}}, otelEnv)
	wid := uniqueName(t, "payment")

	ctx := ctxT(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, bins.Starter, "--task-queue", tq, "--url", api.URL+"/payments", "--body", string(body),
		"--workflow-id", wid, "--operation", "charge")
	cmd.Env = append(append(append(os.Environ(), dev.Env()...), "TASK_QUEUE=", "TEMPORAL_UI_URL="), otelEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("starter: %v\nstdout:\n%s\nstderr:\n%s\nworker:\n%s", err, stdout.String(), stderr.String(), w.Tail(8<<10))
	}
	m := traceLine.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("the starter printed no trace ID:\n%s", stderr.String())
	}
	traceHex := m[1]

	// The worker exports its spans in batches every 100 ms.
	var stubs tracetest.SpanStubs
	services := map[string]string{} // span name -> service
	err := itest.Eventually(ctx, 100*time.Millisecond, func() error {
		stubs, services = nil, map[string]string{}
		var attempts, run int
		for _, r := range recv.received() {
			s := r.span
			stubs = append(stubs, tracetest.SpanStub{
				// OTLP numbers span kinds as OpenTelemetry's API does.
				Name: s.GetName(), SpanKind: trace.SpanKind(s.GetKind()),
				SpanContext: spanContext(s.GetTraceId(), s.GetSpanId()), Parent: spanContext(s.GetTraceId(), s.GetParentSpanId()),
				StartTime:  time.Unix(0, int64(s.GetStartTimeUnixNano())),
				Attributes: attributesOf(s),
			})
			services[s.GetName()] = r.service
			if s.GetName() == "POST" {
				attempts++
			}
			if strings.HasPrefix(s.GetName(), "RunWorkflow:") {
				run++
			}
		}
		if attempts < 3 || run < 1 {
			return fmt.Errorf("%d HTTP spans and %d RunWorkflow spans received", attempts, run)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nworker:\n%s", err, w.Tail(8<<10))
	}
	checkTrace(t, stubs, api.traceparents(), "starter charge")
	if stubs[0].SpanContext.TraceID().String() != traceHex {
		t.Errorf("trace %s, the starter printed %s", stubs[0].SpanContext.TraceID(), traceHex)
	}
	for name, want := range map[string]string{
		"starter charge": "temporal-idempotent-http-starter", "StartWorkflow:" + workflows.WorkflowName: "temporal-idempotent-http-starter",
		"RunWorkflow:" + workflows.WorkflowName: "temporal-idempotent-http-worker", "POST": "temporal-idempotent-http-worker",
	} {
		if services[name] != want {
			t.Errorf("span %s came from service %q, want %q", name, services[name], want)
		}
	}
	var attemptLines int
	for line := range strings.Lines(w.Output()) {
		if strings.Contains(line, `"msg":"HTTP `) {
			attemptLines++
			if !strings.Contains(line, `"TraceID":"`+traceHex+`"`) {
				t.Errorf("the worker's log line lacks TraceID %s: %s", traceHex, line)
			}
		}
	}
	if attemptLines != 3 {
		t.Errorf("%d log lines of attempts in the worker's output, want 3:\n%s", attemptLines, w.Tail(8<<10))
	}
}

// attributesOf returns a received span's integer and string attributes.
func attributesOf(s *tracepb.Span) []attribute.KeyValue {
	var out []attribute.KeyValue
	for _, kv := range s.GetAttributes() {
		switch v := kv.GetValue().GetValue().(type) {
		case *otlpcommonpb.AnyValue_IntValue:
			out = append(out, attribute.Int64(kv.GetKey(), v.IntValue))
		case *otlpcommonpb.AnyValue_StringValue:
			out = append(out, attribute.String(kv.GetKey(), v.StringValue))
		}
	}
	return out
}

func spanContext(traceID, spanID []byte) trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], traceID)
	copy(sid[:], spanID)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
}
