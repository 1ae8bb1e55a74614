// Package telemetry sets up tracing and metrics for the worker and the
// starter the way Temporal's SDK takes them: the OpenTelemetry tracing
// interceptor of go.temporal.io/sdk/contrib/opentelemetry in the client's
// interceptors, and its metrics handler over OpenTelemetry's Prometheus
// exporter as the client's metrics handler, served on /metrics.
//
// Traces are exported with OTLP only when the standard environment asks for
// it (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_TRACES_EXPORTER=otlp); the exporter, the sampler, the batch processor
// and the resource read the rest of the OTEL_* variables themselves. Without
// them nothing is exported, but the interceptor still carries a trace
// context that arrives in Temporal's headers on to the API's requests.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// Options configure Setup.
type Options struct {
	// ServiceName is the resource's service.name unless OTEL_SERVICE_NAME
	// or OTEL_RESOURCE_ATTRIBUTES names one.
	ServiceName string
	// MetricsAddr is the host:port /metrics is served on; "" serves none.
	MetricsAddr string
	// Logger receives the exporters' errors (default: slog's default).
	Logger *slog.Logger
}

// Telemetry is what Setup made; Apply puts it into client options.
type Telemetry struct {
	// TracesExporter is the OTLP protocol spans are exported with
	// ("http/protobuf" or "grpc"), "" when none are.
	TracesExporter string
	// MetricsURL is the URL of /metrics, "" when none is served.
	MetricsURL string

	interceptor interceptor.Interceptor
	handler     client.MetricsHandler
	shutdown    []func(context.Context) error
}

// Setup sets OpenTelemetry's global tracer provider (when traces are
// exported) and propagator (W3C Trace Context and Baggage), builds the
// tracing interceptor, and serves /metrics when o.MetricsAddr is set. Call
// Shutdown before exiting: it flushes the spans not yet exported.
func Setup(ctx context.Context, o Options) (t *Telemetry, err error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	t = &Telemetry{}
	// A failed Setup returns nil: shut down what it started through its
	// own reference.
	started := t
	defer func() {
		if err != nil {
			_ = started.Shutdown(context.Background())
		}
	}()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		o.Logger.Warn("OpenTelemetry", slog.String("error", err.Error()))
	}))
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	if t.TracesExporter, err = tracesExporter(os.Getenv); err != nil {
		return nil, err
	}
	var res *resource.Resource
	if t.TracesExporter != "" || o.MetricsAddr != "" {
		// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
		// over the default name.
		res, err = resource.New(ctx,
			resource.WithAttributes(semconv.ServiceName(o.ServiceName)),
			resource.WithFromEnv(), resource.WithTelemetrySDK())
		if err != nil {
			return nil, fmt.Errorf("OpenTelemetry resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): %w", err)
		}
	}
	if t.TracesExporter != "" {
		var exp sdktrace.SpanExporter
		if t.TracesExporter == "grpc" {
			exp, err = otlptracegrpc.New(ctx)
		} else {
			exp, err = otlptracehttp.New(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter (OTEL_EXPORTER_OTLP_*): %w", err)
		}
		// The sampler (OTEL_TRACES_SAMPLER, default parent-based always-on)
		// and the batch processor (OTEL_BSP_*) read the environment.
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}
	// Without an exporter the global tracer provider records nothing, but
	// its spans keep the parent's context: a trace that the starter began
	// goes on through the workflow to the API.
	if t.interceptor, err = temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{}); err != nil {
		return nil, fmt.Errorf("Temporal tracing interceptor: %w", err)
	}

	if o.MetricsAddr != "" {
		if err := t.serveMetrics(o, res); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// tracesExporter decides from the environment whether spans are exported
// and over which OTLP protocol. Unlike OpenTelemetry's default (otlp to
// localhost), nothing is exported unless an endpoint or
// OTEL_TRACES_EXPORTER=otlp is set.
func tracesExporter(getenv func(string) string) (string, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return "", nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return "", nil
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return "", nil
		}
	case "otlp":
	default:
		return "", fmt.Errorf("OTEL_TRACES_EXPORTER=%q: only otlp (or none) is supported", exp)
	}
	protocol := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if protocol == "" {
		protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch protocol {
	case "", "http/protobuf":
		return "http/protobuf", nil
	case "grpc":
		return "grpc", nil
	default:
		return "", fmt.Errorf("OTLP protocol %q (OTEL_EXPORTER_OTLP_PROTOCOL): want http/protobuf or grpc", protocol)
	}
}

// secondsBuckets are the histogram buckets, in seconds, of every histogram
// (the SDK's latencies and the activity's durations and waits, up to
// defaults.MaxRetryAfter). OpenTelemetry's default buckets are
// meant for milliseconds.
var secondsBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// serveMetrics serves the SDK's and the activity's metrics, and Go's
// runtime and process metrics, on http://o.MetricsAddr/metrics.
func (t *Telemetry) serveMetrics(o Options, res *resource.Resource) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		// otel_scope_name on every series says only "temporal-sdk-go".
		otelprom.WithoutScopeInfo(),
		otelprom.WithAggregationSelector(func(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
			if k == sdkmetric.InstrumentKindHistogram {
				return sdkmetric.AggregationExplicitBucketHistogram{Boundaries: secondsBuckets}
			}
			return sdkmetric.DefaultAggregationSelector(k)
		}),
	)
	if err != nil {
		return fmt.Errorf("Prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	t.shutdown = append(t.shutdown, mp.Shutdown)
	t.handler = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter: mp.Meter("temporal-sdk-go"),
		// Counters as counters (with _total), not as gauges.
		UseMonotonicCounters: true,
		OnError: func(err error) {
			o.Logger.Warn("metrics", slog.String("error", err.Error()))
		},
	})

	l, err := net.Listen("tcp", o.MetricsAddr)
	if err != nil {
		return fmt.Errorf("--metrics-addr %s: %w", o.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn)}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Logger.Error("metrics server stopped", slog.String("error", err.Error()))
		}
	}()
	t.shutdown = append(t.shutdown, srv.Shutdown)
	t.MetricsURL = "http://" + l.Addr().String() + "/metrics"
	return nil
}

// Apply adds the tracing interceptor to opts and, when metrics are served,
// sets its metrics handler.
func (t *Telemetry) Apply(opts *client.Options) {
	opts.Interceptors = append(opts.Interceptors, t.interceptor)
	if t.handler != nil {
		opts.MetricsHandler = t.handler
	}
}

// Shutdown stops serving /metrics and flushes the spans not yet exported,
// within ctx.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for i := len(t.shutdown) - 1; i >= 0; i-- {
		errs = append(errs, t.shutdown[i](ctx))
	}
	t.shutdown = nil
	return errors.Join(errs...)
}
