package telemetry

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

func TestTracesExporter(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr string
	}{
		{name: "nothing set: off", env: nil, want: ""},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: "http/protobuf"},
		{name: "traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, want: "http/protobuf"},
		{name: "otlp exporter, default endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: "http/protobuf"},
		{name: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, want: "grpc"},
		{name: "traces protocol wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, want: "http/protobuf"},
		{name: "none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: ""},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: ""},
		{name: "other exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "only otlp"},
		{name: "json protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: "want http/protobuf or grpc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tracesExporter(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("tracesExporter = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestMetricsEndpoint: what goes through the client's metrics handler is
// served on /metrics under its Prometheus name, counters as counters,
// timers as histograms in seconds with buckets for seconds, without the
// otel_scope labels.
func TestMetricsEndpoint(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	tel, err := Setup(context.Background(), Options{ServiceName: "test", MetricsAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.TracesExporter != "" {
		t.Errorf("traces exported with %q, want none without OTEL_* variables", tel.TracesExporter)
	}
	var opts client.Options
	tel.Apply(&opts)
	if len(opts.Interceptors) != 1 || opts.MetricsHandler == nil {
		t.Fatalf("client options: %d interceptors, metrics handler %v; want the tracing interceptor and a handler", len(opts.Interceptors), opts.MetricsHandler)
	}
	h := opts.MetricsHandler.WithTags(map[string]string{"origin": "https://api.example.com"})
	h.Counter("idempotent_http_attempts_total").Inc(2)
	h.Counter("temporal_request").Inc(1)
	h.Timer("idempotent_http_retry_after_seconds").Record(1500 * time.Millisecond)

	resp, err := http.Get(tel.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	text := string(b)
	for _, want := range []string{
		"# TYPE idempotent_http_attempts_total counter\n",
		`idempotent_http_attempts_total{origin="https://api.example.com"} 2` + "\n",
		`temporal_request_total{origin="https://api.example.com"} 1` + "\n",
		"# TYPE idempotent_http_retry_after_seconds histogram\n",
		`idempotent_http_retry_after_seconds_bucket{origin="https://api.example.com",le="1"} 0` + "\n",
		`idempotent_http_retry_after_seconds_bucket{origin="https://api.example.com",le="2.5"} 1` + "\n",
		`idempotent_http_retry_after_seconds_sum{origin="https://api.example.com"} 1.5` + "\n",
		"go_goroutines ",
		`target_info{service_name="test"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, bad := range []string{"otel_scope", "_total_total", "_seconds_seconds"} {
		if strings.Contains(text, bad) {
			t.Errorf("/metrics has %q", bad)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
}

// TestSetupFailsCleanly: a Setup that fails (here, on a metrics address
// that cannot be listened on) returns its error; it used to panic in its
// own clean-up, on the nil *Telemetry it had just returned.
func TestSetupFailsCleanly(t *testing.T) {
	for _, addr := range []string{"256.1.1.1:99999", "no-port"} {
		tel, err := Setup(t.Context(), Options{MetricsAddr: addr})
		if err == nil || tel != nil || !strings.Contains(err.Error(), addr) {
			t.Errorf("Setup(MetricsAddr %q) = %v, %v; want nil and an error naming the address", addr, tel, err)
		}
	}
}
