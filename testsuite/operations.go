package testsuite

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// AsyncStyle is a convention the reference server plays for long-running
// operations (Async.Style); the activities package's LongRunning presets
// of the same names follow them.
type AsyncStyle string

// The styles.
const (
	// AsyncLocation (the default): 202 with Location: /operations/{id};
	// the monitor answers 202 while running, 200 with the record once
	// succeeded, 422 with {"error": …} once failed, 410 once cancelled
	// (RFC 9110; activities.AcceptedLocation).
	AsyncLocation AsyncStyle = "location"
	// AsyncSeeOther: as AsyncLocation, but the ended monitor answers 303
	// See Other to /results/{id}, which answers the record.
	AsyncSeeOther AsyncStyle = "see-other"
	// AsyncAzure: 202 with Azure-AsyncOperation: /operations/{id}?api-version=…
	// and Location: /results/{id}?api-version=…; the monitor answers 200
	// {"status": "InProgress" | "Succeeded" | "Failed" | "Canceled",
	// "error": …}; the result is at Location (activities.AzureAsyncOperation).
	AsyncAzure AsyncStyle = "azure"
	// AsyncOperationLocation: 202 with Operation-Location:
	// /operations/{id}?api-version=…; the monitor answers 200 {"status":
	// "NotStarted" | "Running" | "Succeeded" (with "result") | "Failed" |
	// "Canceled"} (activities.OperationLocation).
	AsyncOperationLocation AsyncStyle = "operation-location"
	// AsyncGoogle: 200 with the Operation {"name": "operations/{id}",
	// "done": false}; GET /v1/operations/{id} answers it, with "response"
	// or "error" once done; POST /v1/operations/{id}:cancel cancels
	// (activities.GoogleOperation(server URL + "/v1/")).
	AsyncGoogle AsyncStyle = "google"
)

// Async makes the reference server's work long-running (Options.Async):
// each new key's request to a path it covers (Paths) is accepted, its
// record made at once, and the operation followed at the monitor the
// Style names, which answers "running" for Duration after the
// acceptance, then the State (never, if Endless). A replayed key gets the same acceptance,
// naming the same monitor. Every operation can be cancelled: DELETE on
// its monitor, or Google's POST :cancel.
type Async struct {
	// Style is the convention played: AsyncLocation (default),
	// AsyncSeeOther, AsyncAzure, AsyncOperationLocation or AsyncGoogle.
	Style AsyncStyle
	// Paths, if set, are the paths whose operations are long-running:
	// a request whose path is one of them or below it ("/refunds" covers
	// /refunds and /refunds/r_1/reverse, not /refundsX) is accepted, every
	// other path is answered at once, as without Async (Options.Work, or
	// the record), so that one server plays a synchronous payment and a
	// 202 refund side by side. Each starts with "/" (Options.Validate).
	// Default: every path.
	Paths []string
	// Duration is how long an operation runs (default 0: it has ended at
	// the first poll).
	Duration time.Duration
	// RetryAfter is the Retry-After, in seconds, of the acceptance and of
	// every answer while running (0: none is sent).
	RetryAfter int
	// State is the state operations end in: workflows.StateSucceeded
	// (default), StateFailed or StateCanceled.
	State workflows.State
	// Endless, if set, makes every operation run until it is cancelled
	// (State and Duration are then unused): a call that follows one ends
	// with workflows.ErrTypeOperationStillRunning at its deadline.
	Endless bool
	// FlakyPolls, if positive, answers every FlakyPolls-th request to a
	// monitor 503 with Retry-After: 1, as an overloaded API would.
	FlakyPolls int
}

// validate checks Paths and State (Options.Validate).
func (a *Async) validate() error {
	for _, p := range a.Paths {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("testsuite: Options.Async.Paths: %q does not start with /: write the path as the requests carry it, e.g. /refunds", p)
		}
	}
	switch a.State {
	case "", workflows.StateSucceeded, workflows.StateFailed, workflows.StateCanceled:
		return nil
	}
	return fmt.Errorf("testsuite: Options.Async.State %q: want %s, %s or %s (an operation that never ends: Async.Endless)", a.State, workflows.StateSucceeded, workflows.StateFailed, workflows.StateCanceled)
}

// covers reports whether a's operations include path (Async.Paths).
func (a *Async) covers(path string) bool {
	if len(a.Paths) == 0 {
		return true
	}
	for _, p := range a.Paths {
		p = strings.TrimSuffix(p, "/")
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// async reports whether the work of r is a long-running operation
// (Options.Async, for r's path).
func (s *Server) async(r *http.Request) bool {
	return s.opts.Async != nil && s.opts.Async.covers(r.URL.Path)
}

// apiVersion is the query parameter the Azure styles put in their URLs.
const apiVersion = "?api-version=2024-01-01"

// operation is an accepted operation.
type operation struct {
	id       string
	result   json.RawMessage // the record
	accepted time.Time
	canceled bool
}

// state is op's state at now: running, succeeded, failed or canceled.
func (s *Server) state(op *operation, now time.Time) string {
	a := s.opts.Async
	switch {
	case op.canceled:
		return string(workflows.StateCanceled)
	case a.Endless || now.Sub(op.accepted) < a.Duration:
		return "running"
	case a.State == "":
		return string(workflows.StateSucceeded)
	}
	return string(a.State)
}

// accept makes the acceptance of a new operation whose result is the
// record answer b (its work is done: the record exists).
func (s *Server) accept(r *http.Request, b []byte, now time.Time) (int, []byte, http.Header) {
	a := s.opts.Async
	s.mu.Lock()
	if s.ops == nil {
		s.ops = map[string]*operation{}
	}
	s.stats.Operations++
	op := &operation{id: fmt.Sprintf("op_%d", s.stats.Operations), result: json.RawMessage(b), accepted: now}
	s.ops[op.id] = op
	s.mu.Unlock()
	base := "http://" + r.Host
	h := http.Header{}
	if a.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(a.RetryAfter))
	}
	status := http.StatusAccepted
	var body any = map[string]string{"id": op.id, "status": "Accepted"}
	switch a.Style {
	case AsyncAzure:
		h.Set("Azure-AsyncOperation", base+"/operations/"+op.id+apiVersion)
		h.Set("Location", base+"/results/"+op.id+apiVersion)
	case AsyncOperationLocation:
		h.Set("Operation-Location", base+"/operations/"+op.id+apiVersion)
	case AsyncGoogle:
		status, body = http.StatusOK, map[string]any{"name": "operations/" + op.id, "done": false}
	default:
		h.Set("Location", base+"/operations/"+op.id)
	}
	out, _ := json.Marshal(body)
	return status, out, h
}

// serveOperation answers the requests to monitors and results
// (/operations/{id}, /results/{id}, /v1/operations/{id}[:cancel]); it
// reports whether r was one.
func (s *Server) serveOperation(w http.ResponseWriter, r *http.Request) bool {
	path := strings.TrimPrefix(r.URL.Path, "/v1")
	var id string
	var result bool
	switch {
	case strings.HasPrefix(path, "/operations/"):
		id = strings.TrimPrefix(path, "/operations/")
	case strings.HasPrefix(path, "/results/"):
		id, result = strings.TrimPrefix(path, "/results/"), true
	default:
		return false
	}
	cancel := r.Method == http.MethodDelete || r.Method == http.MethodPost && strings.HasSuffix(id, ":cancel")
	id = strings.TrimSuffix(id, ":cancel")
	now := s.now()
	s.mu.Lock()
	s.stats.Requests++
	op := s.ops[id]
	if cancel {
		s.stats.Cancels++
		if op != nil && s.state(op, now) == "running" {
			op.canceled = true
		}
	} else {
		s.stats.Polls++
	}
	flaky := s.opts.Async.FlakyPolls > 0 && s.stats.Polls%s.opts.Async.FlakyPolls == 0 && !cancel
	var st string
	if op != nil {
		st = s.state(op, now)
	}
	s.mu.Unlock()
	switch {
	case op == nil:
		jsonError(http.StatusNotFound, "no such operation").write(w, Dialect{})
	case cancel:
		write(w, http.StatusOK, "application/json", []byte("{}\n"))
	case flaky:
		a := failure(Fail(http.StatusServiceUnavailable, "1"))
		a.write(w, Dialect{})
	case result && st == "running":
		// Azure's Location answers 202 until the operation ends.
		if s.opts.Async.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(s.opts.Async.RetryAfter))
		}
		write(w, http.StatusAccepted, "application/json", []byte("{}\n"))
	case result:
		if st != string(workflows.StateSucceeded) {
			jsonError(http.StatusNotFound, "no result: the operation is "+st).write(w, Dialect{})
			return true
		}
		write(w, http.StatusOK, "application/json", op.result)
	default:
		s.monitor(w, r, op, st)
	}
	return true
}

// monitor answers a poll of op, whose state is st, as the style does.
func (s *Server) monitor(w http.ResponseWriter, r *http.Request, op *operation, st string) {
	a := s.opts.Async
	if st == "running" && a.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(a.RetryAfter))
	}
	failure := map[string]any{"code": "OperationFailed", "message": "the reference server failed the operation as told (Async.State)"}
	doc := map[string]any{"id": op.id}
	status := http.StatusOK
	switch a.Style {
	case AsyncAzure, AsyncOperationLocation:
		names := map[string]string{"running": "InProgress", string(workflows.StateSucceeded): "Succeeded", string(workflows.StateFailed): "Failed", string(workflows.StateCanceled): "Canceled"}
		if a.Style == AsyncOperationLocation {
			names["running"] = "Running"
		}
		doc["status"] = names[st]
		switch st {
		case string(workflows.StateFailed):
			doc["error"] = failure
		case string(workflows.StateSucceeded):
			if a.Style == AsyncOperationLocation {
				doc["result"] = op.result
			}
		}
	case AsyncGoogle:
		doc = map[string]any{"name": "operations/" + op.id, "done": st != "running"}
		switch st {
		case string(workflows.StateSucceeded):
			doc["response"] = op.result
		case string(workflows.StateFailed):
			doc["error"] = map[string]any{"code": 9, "message": failure["message"]}
		case string(workflows.StateCanceled):
			doc["error"] = map[string]any{"code": 1, "message": "CANCELLED"}
		}
	default:
		switch st {
		case "running":
			status, doc["status"] = http.StatusAccepted, "running"
		case string(workflows.StateSucceeded):
			if a.Style == AsyncSeeOther {
				w.Header().Set("Location", "http://"+r.Host+"/results/"+op.id)
				write(w, http.StatusSeeOther, "application/json", []byte("{}\n"))
				return
			}
			write(w, http.StatusOK, "application/json", op.result)
			return
		case string(workflows.StateFailed):
			status, doc["error"] = http.StatusUnprocessableEntity, failure
		case string(workflows.StateCanceled):
			status, doc["error"] = http.StatusGone, "the operation was cancelled"
		}
	}
	b, _ := json.Marshal(doc)
	write(w, status, "application/json", append(b, '\n'))
}
