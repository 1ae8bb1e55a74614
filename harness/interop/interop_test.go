package interop_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/interop"
)

// TestServers starts every server and checks the harness around the
// middleware: a scripted failure in front, a processed request, a replay,
// the counters.
func TestServers(t *testing.T) {
	for _, name := range interop.Servers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			base := interop.Start(t, name, interop.Options{})
			// A tenant's knobs and counters are its own.
			base.Tenant("other").ControlT(t, interop.Control{Script: "500,500,500"})
			s := base.Tenant("t1")
			s.ControlT(t, interop.Control{Script: "503,429:1"})
			post := func() (*http.Response, string) {
				req, _ := http.NewRequest(http.MethodPost, s.PaymentsURL(), bytes.NewBufferString(`{"amount":4200}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "k-1")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var b bytes.Buffer
				_, _ = b.ReadFrom(resp.Body)
				return resp, b.String()
			}
			if r, _ := post(); r.StatusCode != 503 {
				t.Fatalf("first: %d, want scripted 503", r.StatusCode)
			}
			if r, _ := post(); r.StatusCode != 429 || r.Header.Get("Retry-After") != "1" {
				t.Fatalf("second: %d Retry-After %q, want scripted 429 and 1", r.StatusCode, r.Header.Get("Retry-After"))
			}
			r1, b1 := post()
			r2, b2 := post()
			if r1.StatusCode != 201 || r2.StatusCode != 201 || b1 != b2 {
				t.Fatalf("processed %d %s, then %d %s: want 201 twice with the same record", r1.StatusCode, b1, r2.StatusCode, b2)
			}
			st := s.StatsT(t)
			if st.Requests != 4 || st.Records != 1 || st.HandlerCalls != 1 || st.Statuses() != "503 429 201 201" {
				t.Fatalf("stats %+v, want 4 requests (503 429 201 201), 1 handler call, 1 record", st)
			}
			s.ControlT(t, interop.Control{Reset: true, Delay: 50 * time.Millisecond, DelayCount: 1})
			if st := s.StatsT(t); st.Requests != 0 || st.Records != 0 {
				t.Fatalf("after reset: %+v", st)
			}
			if st := base.Tenant("other").StatsT(t); st.Requests != 0 {
				t.Fatalf("tenant other: %+v, want no requests", st)
			}
		})
	}
}
