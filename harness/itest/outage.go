package itest

import (
	"net/http"
	"sync"
	"time"
)

// Outage is an API that is down, then recovers: it answers 503 without
// Retry-After to every request for Duration from the first request it
// gets, then hands requests to Next. It logs every request's time (from
// the first request) and status. It is safe for concurrent use.
type Outage struct {
	Next     http.Handler
	Duration time.Duration

	mu    sync.Mutex
	start time.Time
	log   []OutageEntry
}

// OutageEntry is one request an Outage got.
type OutageEntry struct {
	// At is the time since the first request.
	At     time.Duration
	Status int
}

// ServeHTTP answers r as Outage says.
func (o *Outage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	now := time.Now()
	if o.start.IsZero() {
		o.start = now
	}
	at := now.Sub(o.start)
	o.mu.Unlock()
	status := http.StatusServiceUnavailable
	if at < o.Duration {
		w.WriteHeader(status)
	} else {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		o.Next.ServeHTTP(rec, r)
		status = rec.status
	}
	o.mu.Lock()
	o.log = append(o.log, OutageEntry{At: at, Status: status})
	o.mu.Unlock()
}

// Began returns when the first request came (zero before it).
func (o *Outage) Began() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.start
}

// Log returns the requests so far.
func (o *Outage) Log() []OutageEntry {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]OutageEntry(nil), o.log...)
}

// statusRecorder keeps the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
