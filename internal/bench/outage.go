package bench

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// defaultOutage is how long the API of the outage experiment answers 503
// to everything before it recovers.
const defaultOutage = 60 * time.Second

// OutageRun is one strategy's run of the outage experiment: the contention
// setup (Clients workflows, one success each) against an API that answers
// 503 without Retry-After to every request for Outage from its first
// request, then accepts Capacity per Window like the contention server.
type OutageRun struct {
	Strategy  activities.Jitter `json:"strategy"`
	Admission bool              `json:"admission,omitempty"`
	Outage    time.Duration     `json:"outage_ns"`
	// DuringOutage counts the requests the API got while it was down; After
	// the ones after it recovered.
	DuringOutage int `json:"during_outage"`
	After        int `json:"after"`
	Successes    int `json:"successes"`
	Failed       int `json:"failed"`
	// RecoveryToLast is from the recovery to the last success.
	RecoveryToLast time.Duration `json:"recovery_to_last_ns"`
	Log            []LogEntry    `json:"log"`
}

// outageHandler answers 503 to everything for outage from the first
// request, then hands requests to next; it logs every request.
type outageHandler struct {
	next   http.Handler
	outage time.Duration

	mu    sync.Mutex
	start time.Time
	log   []LogEntry
}

func (o *outageHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	now := time.Now()
	if o.start.IsZero() {
		o.start = now
	}
	at := now.Sub(o.start)
	o.mu.Unlock()
	status := http.StatusServiceUnavailable
	if at < o.outage {
		w.WriteHeader(status)
	} else {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		o.next.ServeHTTP(rec, r)
		status = rec.status
	}
	o.mu.Lock()
	o.log = append(o.log, LogEntry{At: at, Status: status})
	o.mu.Unlock()
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// runOutage runs the outage experiment on h for strategy j.
func runOutage(ctx context.Context, h *harness, p ContentionParams, j activities.Jitter, outage time.Duration, tag string) (OutageRun, error) {
	srv := testsuite.NewServer(testsuite.Options{Capacity: p.Capacity, CapacityWindow: p.Window})
	oh := &outageHandler{next: srv, outage: outage}
	h.Target.Set(oh)
	defer h.Target.Set(okHandler())
	run := OutageRun{Strategy: j, Outage: outage}
	var cr ContentionRun
	if err := startAndWait(ctx, h, p, readyLoad(h, p, j), "outage-"+tag, &cr); err != nil {
		return run, err
	}
	run.Failed = cr.Failed
	oh.mu.Lock()
	run.Log = append([]LogEntry(nil), oh.log...)
	oh.mu.Unlock()
	for _, l := range run.Log {
		if l.At < outage {
			run.DuringOutage++
			continue
		}
		run.After++
		if l.Status >= 200 && l.Status <= 299 {
			run.Successes++
			run.RecoveryToLast = max(run.RecoveryToLast, l.At-outage)
		}
	}
	return run, nil
}
