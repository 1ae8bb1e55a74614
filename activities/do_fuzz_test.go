package activities_test

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// echo returns what the server echoes of the credentials it received:
// mode selects which credential and how it is written.
func echo(r *http.Request, mode byte, n int) string {
	auth := r.Header.Get("Authorization")
	tok := strings.TrimPrefix(auth, "Bearer ")
	key := r.Header.Get("X-Api-Key")
	switch mode % 8 {
	case 1:
		return auth
	case 2:
		return tok
	case 3: // a prefix of at least 8 bytes
		if tok == "" {
			return ""
		}
		return tok[:min(len(tok), 8+n%len(tok))]
	case 4: // every character escaped, as a JSON encoder may write it
		var b strings.Builder
		for _, c := range tok {
			fmt.Fprintf(&b, `\u%04x`, c)
		}
		return b.String()
	case 5: // the digits credential, raw (a JSON number where the body is JSON)
		return key
	case 6:
		enc, _ := json.Marshal(auth + " " + key)
		return string(enc)
	case 7:
		return "https://user:" + tok + "@files.example.net/x?sig=" + key
	}
	return ""
}

// FuzzDo drives the activity with generated requests against a server
// answering with generated statuses, headers (Location, Retry-After,
// Stripe-Should-Retry …) and bodies that echo the worker's credentials at
// generated offsets and in generated forms, cut short or not, in content
// codings asked for or not, after a same-origin 307 to a presigned URL or
// not. Invariants: no panic; no 8-byte piece of a credential, nor of a
// query value of a URL the server sent, in an error message,
// Failure, result or log line, whatever headers the request sets;
// success only on a 2xx whose body arrived whole; every result encodes
// within MaxResultBytes; an invalid request (or one to an origin not
// allowed) sends nothing.
func FuzzDo(f *testing.F) {
	const (
		tok    = "tok_fuzz_4e5d6c7b8a9f"
		digits = "5551234567890123"
		bound  = 4 << 10
	)
	var (
		mu      sync.Mutex
		cur     fuzzAnswer
		sent    int
		answers []fuzzAnswer
		// gotBody and gotURL are what the last request carried.
		gotBody []byte
		gotURL  string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		gotBody, gotURL = b, r.URL.String()
		a := cur
		sent++
		if !strings.HasPrefix(r.URL.Path, "/hop/") {
			answers = append(answers, a)
		}
		mu.Unlock()
		a.write(w, r)
	}))
	f.Cleanup(srv.Close)
	a, err := activities.New(activities.Config{
		AllowedOrigins:   []string{srv.URL},
		Credentials:      map[string]activities.Credential{srv.URL: {Header: http.Header{"Authorization": {"Bearer " + tok}, "X-Api-Key": {digits}}}},
		MaxResponseBytes: 2 << 10,
		MaxResultBytes:   bound,
		MaxRetryAfter:    time.Minute,
		ResultHeaders:    []string{"Content-Type", "Location", "Content-Location", "X-Request-Id", "Idempotent-Replayed"},
		// Admission on, fast enough not to slow the fuzzer down, and never
		// waiting inside an attempt: when the fuzzed 429s and 503s hold the
		// origin back, attempts end NotAdmitted, which must send nothing.
		Admission: activities.Admission{InitialRate: 1000, MinRate: 100, MaxWait: time.Nanosecond},
	})
	if err != nil {
		f.Fatal(err)
	}
	var logs syncBuffer
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := suite.NewTestActivityEnvironment()
	a.Register(env)

	type seed struct {
		method                   byte
		path, query, hName, hVal string
		key                      string
		body                     string
		status                   uint16
		headers                  string
		respBody                 string
		echoAt                   uint16
		echoMode                 byte
	}
	pad := strings.Repeat("x", 1020)
	for _, s := range []seed{
		{0, "payments", "", "", "", "", `{"amount":42}`, 201, "Content-Type: application/json", `{"id":"rec_1"}`, 0, 0},
		{1, "payments", "a=1", "X-Note", "n", "k-1", `{"a":"<&>"}`, 201, "Content-Type: application/json", `{"echo":""}`, 9, 2},
		{1, "p", "", "", "", "", `{}`, 201, "", `{"n":,"ok":true}`, 5, 5},
		{1, "p", "", "", "", "", `{}`, 201, "", `{"e":"","ok":true}`, 6, 4},
		{1, "p", "", "", "", "", `{}`, 400, "", pad, 1015, 2},
		{1, "p", "", "", "", "", `{}`, 500, "Retry-After: 1", pad, 1018, 3},
		{1, "p", "", "", "", "", `{}`, 503, "Retry-After: 2\nRetry-After: Wed, 02 Dec 2026 00:00:09 GMT", `{"error":"busy"}`, 0, 1 | 0x08},
		{1, "p", "", "", "", "", `{}`, 409, "Stripe-Should-Retry: true", `{"error":{"code":"idempotency_key_in_use"}}`, 0, 0},
		{1, "p", "", "", "", "", `{}`, 302, "Location: https://u:p@evil.example/x?X-Amz-Signature=abcdef0123456789", "", 0, 7},
		{1, "p", "", "", "", "", `{}`, 307, "Location: /p2", "", 0, 0x10 | 2},
		{1, "p", "", "", "", "", `{}`, 201, "Location: $ECHO", "", 0, 7},
		{1, "p", "", "", "", "", `{}`, 201, "Content-Type: application/octet-stream", strings.Repeat("\xfe", 3000), 0, 0},
		{1, "p", "", "", "", "", `{}`, 200, "", `"` + strings.Repeat("<", 1900) + `"`, 0, 0},
		{1, "p", "", "X-Api-Key", "x", "", `{}`, 201, "", "", 0, 0},
		{1, "p", "", "x-api-key", "x", "", `{}`, 201, "", "", 0, 0},
		{1, "p", "", "Authorization", "Bearer x", "", `{}`, 201, "", "", 0, 0},
		{1, "p", "", "X-Note", "a\x01b", "", `{}`, 201, "", "", 0, 0},
		{1, "!http://user:pw@127.0.0.1:1/x", "", "", "", "", `{}`, 201, "", "", 0, 0},
		{1, "!https://bücher.example/x", "", "", "", "", `{}`, 201, "", "", 0, 0},
		{5, "p", "", "", "", "", `{}`, 201, "", "", 0, 0},
		{1, "p", "", "", "", "bad key", `{"a":`, 201, "", "", 0, 0},
		{1, "p", "", "", "", "", "{\n \"a\" : 1 }\n", 425, "X-Should-Retry: false", "too early", 0, 0},
		// Found by fuzzing: JSON with invalid UTF-8 in a string made the
		// result impossible to encode (a success turned into an error).
		{0, "0", "", "", "0", "", "", 201, "0", "{\"\":\"\xa8\"}", 0, 0},
		// Headers alone over the bound.
		{1, "p", "", "", "", "", `{}`, 201, "Location: /" + strings.Repeat("l", 3000) + "\nX-Request-Id: " + strings.Repeat("<", 3000), "", 0, 0},
		{1, "p", "", "", "", "", `{}`, 201, "Content-Type: " + strings.Repeat("<", 3000), `{"a":1}`, 0, 0},
		// An escaped echo in a body that is not one JSON document stays as
		// written: escapes mean nothing outside JSON (no 8-byte piece).
		{1, "p", "", "", "", "", `{}`, 201, "", `""0`, 1, 4},
		// Hardening, third round: a 2xx whose body breaks off; bodies in a
		// content coding asked for by the client (gzip), or not (deflate,
		// br), echoing the token; a workflow asking for gzip itself; a
		// same-origin 307 to a presigned URL, then an error or a success;
		// server-sent URLs with query values.
		{1, "p", "", "", "", "", `{}`, 201, "Content-Type: application/json", `{"id":"rec_1","echo":""}`, 19, 0x20 | 2},
		{1, "p", "", "", "", "", `{}`, 200, "", `{"echo":""}`, 9, 0x40 | 1},
		{1, "p", "", "", "", "", `{}`, 201, "", `{"echo":""}`, 9, 0x80 | 2},
		{1, "p", "", "", "", "", `{}`, 401, "", `{"echo":""}`, 9, 0xc0 | 1},
		{1, "p", "", "Accept-Encoding", "gzip", "", `{}`, 201, "", `{"echo":""}`, 9, 0x40 | 1},
		{1, "hop/pay", "", "", "", "", `{}`, 400, "", `{"error":"bad"}`, 0, 0},
		{1, "hop/pay", "", "", "", "", `{}`, 503, "", "", 0, 0},
		{1, "hop/pay", "", "", "", "", `{}`, 201, "Location: /r/1?sig=$QV\nContent-Location: https://cdn.example.net/o?X-Amz-Signature=$QV", "", 0, 0},
		{1, "p", "", "", "", "", `{}`, 302, "Location: https://elsewhere.example/x?X-Amz-Credential=$QV", "", 0, 0},
		// Keys in the body or the query (issue 41).
		{1, "p", "", "keyin:body:idempotency_key", "", "", `{"amount":1}`, 201, "", `{"id":"rec_1"}`, 0, 0},
		{1, "p", "", "keyin:body:meta.ref", "", "k-2", "{\"meta\": {\"a\":[1]} }", 503, "", "", 0, 0},
		{1, "p", "a=1", "keyin:query:requestId", "", "", `{}`, 201, "", "", 0, 0},
		{1, "p", "", "keyin:body:idempotency_key", "", "", `[1]`, 201, "", "", 0, 0},
	} {
		f.Add(s.method, s.path, s.query, s.hName, s.hVal, s.key, []byte(s.body), s.status, s.headers, []byte(s.respBody), s.echoAt, s.echoMode)
	}

	methods := []string{"", "POST", "PUT", "PATCH", "DELETE", "GET", "post"}
	f.Fuzz(func(t *testing.T, method byte, path, query, hName, hVal, key string, body []byte, status uint16, headers string, respBody []byte, echoAt uint16, echoMode byte) {
		if !utf8.Valid(body) {
			// It cannot be encoded as activity input: a workflow refuses it
			// before scheduling (workflows.Call), and Temporal could not
			// store it.
			return
		}
		r := input.Input{
			Operation: "fuzz", Method: methods[int(method)%len(methods)],
			URL: srv.URL + "/" + path, Body: json.RawMessage(body), IdempotencyKey: cmp.Or(key, "fuzz-key"),
		}
		if strings.HasPrefix(path, "!") {
			r.URL = path[1:]
		}
		if query != "" {
			r.URL += "?" + query
		}
		if place, ok := strings.CutPrefix(hName, "keyin:"); ok {
			// The key where the API reads it (Request.KeyIn): every
			// request that leaves carries it there.
			r.KeyIn = place
		} else if hName != "" {
			r.Headers = map[string]string{hName: hVal}
		}
		mu.Lock()
		st := int(status) // a status outside 200–599 is folded into it
		if st < 200 || st > 599 {
			st = 200 + st%400
		}
		cur = fuzzAnswer{status: st, headers: headers, body: respBody, echoAt: int(echoAt), echoMode: echoMode}
		before := sent
		answers = answers[:0]
		mu.Unlock()
		logs.take()

		var resp *workflows.Response
		dog := time.AfterFunc(20*time.Second, func() {
			panic(fmt.Sprintf("the attempt did not end in 20 s: %#v, answer headers %q, body %q", r, headers, respBody))
		})
		val, err := env.ExecuteActivity(input.ActivityName, r)
		dog.Stop()
		if err == nil {
			resp = new(workflows.Response)
			if derr := val.Get(resp); derr != nil {
				t.Fatalf("result does not decode: %v", derr)
			}
		}
		mu.Lock()
		n, got, lastBody, lastURL := sent-before, append([]fuzzAnswer(nil), answers...), gotBody, gotURL
		mu.Unlock()
		if place, perr := keyplace.Parse(r.KeyIn); perr == nil && n > 0 && !strings.HasPrefix(path, "hop/") {
			switch place.In {
			case keyplace.Body:
				if k, ok := keyplace.BodyKey(lastBody, place.Name); !ok || k != r.IdempotencyKey {
					t.Fatalf("KeyIn %s: the request's body %q does not carry the key %q there", r.KeyIn, lastBody, r.IdempotencyKey)
				}
			case keyplace.Query:
				if u, uerr := url.Parse(lastURL); uerr != nil || u.Query().Get(place.Name) != r.IdempotencyKey {
					t.Fatalf("KeyIn %s: the request's URL %q does not carry the key %q there", r.KeyIn, lastURL, r.IdempotencyKey)
				}
			}
		}
		text := logs.take()

		secrets := []string{tok, digits}
		if !qvInPath(headers) && len(pieces(strings.Join([]string{path, query, hName, hVal, key, string(body), strings.ReplaceAll(headers, "$QV", ""), string(respBody)}, "\n"), qsecret)) == 0 {
			secrets = append(secrets, qsecret) // not in the input: only a server-sent URL holds it
		}
		assertNoPiece(t, err, resp, text, secrets...)
		if err == nil {
			if len(got) == 0 {
				t.Fatalf("success without an answer (%d requests)", n)
			}
			last := got[len(got)-1]
			if last.status < 200 || last.status > 299 || last.cut() {
				t.Fatalf("success after answers %+v (the last cut: %v)", got, last.cut())
			}
			if resp.Status != last.status {
				t.Fatalf("result status %d, server answered %+v", resp.Status, got)
			}
			enc, merr := json.Marshal(resp)
			if merr != nil || len(enc) > bound {
				t.Fatalf("encoded result is %d bytes (bound %d), %v", len(enc), bound, merr)
			}
			return
		}
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) {
			t.Fatalf("not an ApplicationError: %T %v", err, err)
		}
		if _, ok := workflows.AsFailure(err); !ok {
			t.Fatalf("no Failure, not the activity's own error: %v", err)
		}
		switch appErr.Type() {
		case workflows.ErrTypeInvalidRequest, workflows.ErrTypeOriginNotAllowed, workflows.ErrTypeNotAdmitted:
			if n != 0 {
				t.Fatalf("%s, but %d requests were sent: %v", appErr.Type(), n, err)
			}
		}
	})
}
