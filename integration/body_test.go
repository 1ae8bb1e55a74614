package integration_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// These tests check, on the dev server and through the worker and starter
// binaries, the hardening of secrets, URLs, results and request bodies, and
// the waits for keys in flight with default options.

// TestResultOverPayloadLimit: a 201 whose JSON body is one string
// of '<' just under MaxResponseBytes (1 MiB), which JSON encodes 6 times
// longer, past Temporal's 2 MiB payload limit: the workflow succeeds on
// the first attempt with the body omitted as too large, its size and
// SHA-256 those of the server's body; the same workflow ID run again gets
// the same from the stored response. The work is done once.
func TestResultOverPayloadLimit(t *testing.T) {
	t.Parallel()
	const open, end = `{"html":"`, `"}`
	size := defaults.MaxResponseBytes - 64
	big := []byte(open + strings.Repeat("<", size-len(open)-len(end)) + end)
	sum := sha256.Sum256(big)
	wantSHA := hex.EncodeToString(sum[:])
	var works atomic.Int32
	srv := testsuite.StartServer(t, testsuite.Options{Work: func(*http.Request, []byte) (int, []byte) {
		works.Add(1)
		return http.StatusCreated, big
	}})
	tq := uniqueName(t, "tq")
	startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}})
	wid := uniqueName(t, "report")
	ctx := ctxT(t, 2*time.Minute)
	req := workflows.Request{Operation: "render", URL: srv.URL + "/reports", Body: body}
	for _, rerun := range []bool{false, true} {
		began := time.Now()
		run, resp, err := call(t, ctx, tq, wid, req)
		if err != nil {
			t.Fatalf("run (again: %v) failed: %v", rerun, err)
		}
		if resp.Status != 201 || resp.Attempt != 1 || resp.Replayed != rerun {
			t.Errorf("run (again: %v): status %d on attempt %d, replayed %v; want 201 on attempt 1, replayed %v", rerun, resp.Status, resp.Attempt, resp.Replayed, rerun)
		}
		if !resp.BodyOmitted || resp.OmittedReason != "too large" || resp.Body != nil || resp.RawBody != nil {
			t.Errorf("run (again: %v): body omitted %v (%q), %d body bytes kept; want it omitted as \"too large\"", rerun, resp.BodyOmitted, resp.OmittedReason, len(resp.Body)+len(resp.RawBody))
		}
		if resp.BodyBytes != int64(len(big)) || resp.BodySHA256 != wantSHA {
			t.Errorf("run (again: %v): body_bytes %d, body_sha256 %s; want the server's %d, %s", rerun, resp.BodyBytes, resp.BodySHA256, len(big), wantSHA)
		}
		var completed int
		for _, ev := range history(t, ctx, wid, run.GetRunID()) {
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
				completed++
				if n := proto.Size(a.GetResult()); n > 64<<10 {
					t.Errorf("the activity's result in history is %d bytes", n)
				}
			}
		}
		if completed != 1 {
			t.Errorf("%d ActivityTaskCompleted events; want 1", completed)
		}
		t.Logf("run (again: %v) took %s", rerun, time.Since(began).Round(time.Millisecond))
	}
	if n := works.Load(); n != 1 {
		t.Errorf("the server did the work %d times; want once", n)
	}
	checkStats(t, srv.Stats(), testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 1, Replays: 1, InFlight: 0, Failures: 0})
}

// TestExactBodyBytes: a body with spaces and <, > and & goes from
// the starter's --body to the API byte for byte, and the worker logs its
// SHA-256 on success.
func TestExactBodyBytes(t *testing.T) {
	t.Parallel()
	const exact = `{ "note" : "<b>&amp;</b>" ,  "amount": 4200 }`
	sum := sha256.Sum256([]byte(exact))
	wantSHA := hex.EncodeToString(sum[:])
	srv := testsuite.StartServer(t, testsuite.Options{})
	tq := uniqueName(t, "tq")
	wp := startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}})
	wid := uniqueName(t, "payment")
	ctx := ctxT(t, 2*time.Minute)
	res := runStarter(t, ctx, tq, "--url", srv.URL+"/payments", "--body", exact, "--workflow-id", wid)
	if res.Code != 0 {
		t.Fatalf("the starter exited %d; want 0", res.Code)
	}
	key := keyOf(wid, "call")
	if out := parseStarterOutput(t, res); out.Status != 201 || out.IdempotencyKey != key {
		t.Errorf("starter output %+v: want 201 with key %s", out, key)
	}
	recs := srv.Records()
	if len(recs) != 1 {
		t.Fatalf("records %+v; want one", recs)
	}
	if got := string(recs[0].Request); got != exact {
		t.Errorf("the API received\n%s\nwant\n%s", got, exact)
	}
	if recs[0].BodySHA256 != wantSHA || recs[0].IdempotencyKey != key {
		t.Errorf("record: body_sha256 %s, key %s; want %s, %s", recs[0].BodySHA256, recs[0].IdempotencyKey, wantSHA, key)
	}
	if err := wp.WaitOutput(ctx, "HTTP request succeeded"); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, rec := range logRecords(wp.Output(), "HTTP request succeeded") {
		if rec["key"] != key {
			continue
		}
		found = true
		if rec["body_sha256"] != wantSHA {
			t.Errorf("the worker logged body_sha256 %v; want %s", rec["body_sha256"], wantSHA)
		}
	}
	if !found {
		t.Errorf("no success line with key %s in the worker's log:\n%s", key, wp.Tail(8<<10))
	}
}

// TestCutBodyRetried (hardening, third round, item 1): the API
// creates the record and stores its 201, but the connection breaks off
// halfway through the body. Through the worker binary and the starter, the
// workflow retries with the same key and succeeds with the whole stored
// body (attempt 2, replayed); the work is done once. Before, it succeeded
// on attempt 1 with the body omitted ("incomplete").
func TestCutBodyRetried(t *testing.T) {
	t.Parallel()
	full := []byte(`{"id":"pay_1","amount":4200,"status":"succeeded","note":"` + strings.Repeat("n", 2000) + `"}`)
	api := testsuite.NewServer(testsuite.Options{Work: func(*http.Request, []byte) (int, []byte) {
		return http.StatusCreated, full
	}})
	var first atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !first.CompareAndSwap(false, true) {
			api.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, r)
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		body := rec.Body.Bytes()
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", rec.Code, http.StatusText(rec.Code))
		h := rec.Header().Clone()
		h.Set("Content-Length", fmt.Sprint(len(body)))
		_ = h.Write(buf)
		_, _ = buf.WriteString("\r\n")
		_, _ = buf.Write(body[:len(body)/2])
		_ = buf.Flush()
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(api.Close)
	tq := uniqueName(t, "tq")
	startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}})
	wid := uniqueName(t, "cut")
	res := runStarter(t, ctxT(t, 2*time.Minute), tq, "--url", srv.URL+"/payments", "--body", `{"amount":4200}`, "--workflow-id", wid)
	if res.Code != 0 {
		t.Fatalf("starter exited with %d; want a success", res.Code)
	}
	out := parseStarterOutput(t, res)
	if out.Status != 201 || out.Attempts != 2 || !out.Replayed || out.BodyOmitted {
		t.Errorf("status %d on attempt %d, replayed %v, body omitted %v; want 201 on attempt 2, replayed, with its body", out.Status, out.Attempts, out.Replayed, out.BodyOmitted)
	}
	if string(out.Body) != string(full) {
		t.Errorf("body is %d bytes; want the whole stored body of %d bytes", len(out.Body), len(full))
	}
	checkStats(t, api.Stats(), testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 1, Replays: 1, InFlight: 0, Failures: 0})
}
