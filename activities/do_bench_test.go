package activities_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/registered"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
)

// cannedRT answers every request with a 201 JSON body without a network, so
// BenchmarkDoNoNetwork measures Do's own work (and net/http's client-side
// request handling), not a server's.
type cannedRT struct{}

const cannedBody = `{"id":"rec_1","status":"created","amount":42,"currency":"EUR"}`

func (cannedRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusCreated, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(strings.NewReader(cannedBody)),
		ContentLength: int64(len(cannedBody)), Request: r,
	}, nil
}

// BenchmarkDoNoNetwork runs one attempt of Do per iteration inside one
// activity execution (as bench's DoInActivity, logger at Info formatting JSON
// to io.Discard) against cannedRT.
func BenchmarkDoNoNetwork(b *testing.B) {
	benchDo(b, nil)
}

// BenchmarkDoNoNetworkStaticBearer is BenchmarkDoNoNetwork with a static
// bearer token for the origin (Credential.Header).
func BenchmarkDoNoNetworkStaticBearer(b *testing.B) {
	benchDo(b, map[string]activities.Credential{"http://127.0.0.1:8081": {Header: http.Header{"Authorization": {"Bearer tok_live_0123456789abcdef"}}}})
}

// BenchmarkDoNoNetworkHeaderFile is BenchmarkDoNoNetwork with the bearer
// token read from a file (Credential.HeaderFiles): its checks for a change
// are measured too.
func BenchmarkDoNoNetworkHeaderFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "token")
	if err := os.WriteFile(path, []byte("Bearer tok_live_0123456789abcdef\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	benchDo(b, map[string]activities.Credential{"http://127.0.0.1:8081": {HeaderFiles: map[string]string{"Authorization": path}}})
}

func benchDo(b *testing.B, creds map[string]activities.Credential) {
	a, err := activities.New(activities.Config{
		AllowedOrigins: []string{"http://127.0.0.1:8081"},
		Credentials:    creds,
		HTTPClient:     &http.Client{Transport: cannedRT{}},
		// Admission on, at a rate that never makes an attempt wait: its
		// bookkeeping is measured, not the slow start's ramp.
		Admission: activities.Admission{InitialRate: 1e9},
	})
	if err != nil {
		b.Fatal(err)
	}
	r := input.Input{
		Operation: "charge", Method: http.MethodPost, URL: "http://127.0.0.1:8081/charges",
		Body: []byte(`{"amount":42,"currency":"EUR"}`), IdempotencyKey: "5f0c2f3e-8a55-5d2c-9a77-2b1f3c4d5e6f",
	}
	do := registered.Of(a).Do
	inActivity(b, func(ctx context.Context) {
		resp, err := do(ctx, r)
		if err != nil || resp.Status != http.StatusCreated {
			b.Fatalf("Do: %v", err)
		}
	})
}

// BenchmarkRawNoNetwork is BenchmarkDoNoNetwork's baseline: the POST a
// hand-written activity would send (its headers, the body read, the
// status checked) through an http.Client on cannedRT. BenchmarkDoNoNetwork
// minus it is Do's own work.
func BenchmarkRawNoNetwork(b *testing.B) {
	c := &http.Client{Transport: cannedRT{}}
	body := []byte(`{"amount":42,"currency":"EUR"}`)
	inActivity(b, func(ctx context.Context) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:8081/charges", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(activities.IdempotencyKeyHeader, "5f0c2f3e-8a55-5d2c-9a77-2b1f3c4d5e6f")
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusCreated || len(data) == 0 {
			b.Fatalf("raw POST: %v, status %d", err, resp.StatusCode)
		}
	})
}

// inActivity runs op b.N times, timed, inside one activity execution of
// Temporal's test environment, its logger at Info formatting JSON to
// io.Discard (as cmd/worker's). Beside ns/op it reports cpu-ns/op, the
// process's user + system CPU time per op (the garbage collector's
// included), which other load on the machine moves much less than wall
// time.
func inActivity(b *testing.B, op func(context.Context)) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := cpuTime()
		for range b.N {
			op(ctx)
		}
		cpu := cpuTime() - cpu0
		b.StopTimer()
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		return nil
	}, activity.RegisterOptions{Name: "BenchLoop"})
	if _, err := env.ExecuteActivity("BenchLoop"); err != nil {
		b.Fatal(err)
	}
}
