package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// runCheck runs `starter check-keys args --json` and decodes its report.
func runCheck(t *testing.T, args ...string) (checkReport, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"check-keys", "--json"}, args...), &stdout, &stderr)
	require.Empty(t, stderr.String(), "nothing on stderr but bad flags")
	var rep checkReport
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), stdout.String())
	assert.Equal(t, code, rep.ExitCode, "the report's exit code is the command's")
	return rep, code
}

// TestCheckKeysVerdicts runs the subcommand against the reference server
// in its dialects and key places: the verdict, the exit code, the records
// the requests made, and the third request with a changed body.
func TestCheckKeysVerdicts(t *testing.T) {
	ietfIn := func(keyIn string) testsuite.Dialect {
		d := testsuite.IETFDialect()
		d.KeyIn = keyIn
		return d
	}
	plainIn := func(keyIn string) testsuite.Dialect {
		d := testsuite.PlainDialect()
		d.KeyIn = keyIn
		return d
	}
	for _, tc := range []struct {
		name    string
		dialect testsuite.Dialect
		script  []testsuite.Step
		args    []string
		verdict string
		code    int
		records int
		// changed is the third request's outcome and status ("" when
		// it is not sent).
		changed       string
		changedStatus int
		reason        string // in the reason
		requests      int
		unread        bool // the server found no key where it reads it
	}{
		{name: "IETF, header key: replay, changed body refused 422", dialect: testsuite.IETFDialect(),
			args:    []string{"--body", `{"amount":42}`},
			verdict: verdictReplay, code: 0, records: 1, changed: "refused", changedStatus: 422, reason: "marked Idempotent-Replayed: true", requests: 3},
		{name: "IETF, body key", dialect: ietfIn("body:idempotency_key"),
			args:    []string{"--body", `{"amount":42}`, "--key-in", "body:idempotency_key"},
			verdict: verdictReplay, code: 0, records: 1, changed: "refused", changedStatus: 422, requests: 3},
		{name: "IETF, nested body key", dialect: ietfIn("body:metadata.idempotency_key"),
			args:    []string{"--body", `{"amount":42,"metadata":{}}`, "--key-in", "body:metadata.idempotency_key"},
			verdict: verdictReplay, code: 0, records: 1, changed: "refused", changedStatus: 422, requests: 3},
		{name: "IETF, query key", dialect: ietfIn("query:requestId"),
			args:    []string{"--body", `{"amount":42}`, "--key-in", "query:requestId"},
			verdict: verdictReplay, code: 0, records: 1, changed: "refused", changedStatus: 422, requests: 3},
		{name: "IETF, another key header", dialect: ietfIn("header:PayPal-Request-Id"),
			args:    []string{"--body", `{"amount":42}`, "--key-in", "header:PayPal-Request-Id"},
			verdict: verdictReplay, code: 0, records: 1, changed: "refused", changedStatus: 422, requests: 3},
		{name: "Stripe: replay, changed body refused 400", dialect: testsuite.StripeDialect(),
			args:    []string{"--body", `{"amount":42}`},
			verdict: verdictReplay, code: 0, records: 1, changed: "refused", changedStatus: 400, requests: 3},
		{name: "Express: replay by the body, no marker; changed body refused 417", dialect: testsuite.ExpressDialect(),
			args:    []string{"--body", `{"amount":42}`},
			verdict: verdictReplay, code: 0, records: 1, changed: "refused", changedStatus: 417, reason: "byte for byte", requests: 3},
		{name: "IETF without a body: no third request", dialect: testsuite.IETFDialect(),
			verdict: verdictReplay, code: 0, records: 1, requests: 2},
		{name: "IETF, --changed-body=false", dialect: testsuite.IETFDialect(),
			args:    []string{"--body", `{"amount":42}`, "--changed-body=false"},
			verdict: verdictReplay, code: 0, records: 1, requests: 2},
		{name: "plain: second record", dialect: testsuite.PlainDialect(),
			args:    []string{"--body", `{"amount":42}`},
			verdict: verdictSecondRecord, code: 3, records: 2, reason: `(id "rec_1", then "rec_2")`, requests: 2},
		{name: "plain, body key: second record", dialect: plainIn("body:idempotency_key"),
			args:    []string{"--body", `{"amount":42}`, "--key-in", "body:idempotency_key"},
			verdict: verdictSecondRecord, code: 3, records: 2, requests: 2},
		{name: "IETF wants the key in the body, sent in the header: inconclusive", dialect: ietfIn("body:idempotency_key"),
			args:    []string{"--body", `{"amount":42}`},
			verdict: verdictInconclusive, code: 1, records: 0, reason: "400 Bad Request, not a 2xx", requests: 1, unread: true},
		{name: "first answer 503: inconclusive", dialect: testsuite.IETFDialect(), script: []testsuite.Step{testsuite.Fail(503)},
			args:    []string{"--body", `{"amount":42}`},
			verdict: verdictInconclusive, code: 1, records: 0, reason: "503 Service Unavailable", requests: 1},
		{name: "second answer 503: inconclusive", dialect: testsuite.IETFDialect(), script: []testsuite.Step{{}, testsuite.Fail(503)},
			args:    []string{"--body", `{"amount":42}`},
			verdict: verdictInconclusive, code: 1, records: 1, reason: "a server error", requests: 2},
		// A cut is not sent again by net/http behind the check's back (a
		// reused connection would be, with its Idempotency-Key header, and
		// the check would see the replay).
		{name: "second answer cut: inconclusive, not re-sent", dialect: testsuite.IETFDialect(), script: []testsuite.Step{{}, testsuite.CutAfterWork()},
			args:    []string{"--body", `{"amount":42}`},
			verdict: verdictInconclusive, code: 1, records: 1, reason: "the second request failed", requests: 2},
		{name: "second answer cut, no body: not re-sent", dialect: testsuite.IETFDialect(), script: []testsuite.Step{{}, testsuite.CutAfterWork()},
			verdict: verdictInconclusive, code: 1, records: 1, reason: "the second request failed", requests: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{Dialect: tc.dialect})
			srv.Script(tc.script...)
			rep, code := runCheck(t, append([]string{"--url", srv.URL + "/payments"}, tc.args...)...)
			assert.Equal(t, tc.verdict, rep.Verdict, rep.Reason)
			assert.Equal(t, tc.code, code)
			assert.Contains(t, rep.Reason, tc.reason)
			st := srv.Stats()
			assert.Equal(t, tc.records, st.Records, "records made")
			assert.Equal(t, tc.requests, st.Requests, "requests received")
			if tc.unread {
				assert.Zero(t, st.DistinctKeys, "no key where the server reads it")
				return
			}
			assert.Equal(t, 1, st.DistinctKeys, "one key")
			for _, l := range srv.Log() {
				assert.Equal(t, rep.Key, l.IdempotencyKey, "the key the server read is the one reported")
			}
			if tc.changed == "" {
				if rep.ChangedBody != nil {
					assert.NotEmpty(t, rep.ChangedBody.Skipped, "no third request")
				}
				return
			}
			require.NotNil(t, rep.ChangedBody)
			assert.Equal(t, tc.changed, rep.ChangedBody.Outcome, rep.ChangedBody.Note)
			require.NotNil(t, rep.ChangedBody.Answer)
			assert.Equal(t, tc.changedStatus, rep.ChangedBody.Answer.Status)
			assert.Equal(t, 1, st.Mismatches, "the server saw the key misused")
		})
	}
}

// TestCheckKeysReport: the human report says what was sent where, both
// statuses, the verdict and what to do, and labels the third request.
func TestCheckKeysReport(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dialect testsuite.Dialect
		code    int
		want    []string
	}{
		{"IETF", testsuite.IETFDialect(), 0, []string{
			"check-keys  POST " + "URL/payments\n",
			"in the header Idempotency-Key\n",
			"body        13 bytes\n",
			"first       201 Created, ",
			"second      201 Created, ",
			"marked replayed",
			"verdict     replay: the second answer (201 Created) is marked Idempotent-Replayed: true\n",
			"            => honours keys: safe to retry\n",
			`reused key, changed body (a third request, same key, "_check" added to the body): refused: 422 Unprocessable Entity, as the IETF draft says`,
			"third       422 Unprocessable Entity",
		}},
		{"plain", testsuite.PlainDialect(), 3, []string{
			"verdict     second record: the second answer is a 201 Created with another body: the API processed the request again (id \"rec_1\", then \"rec_2\")\n",
			"            => does NOT honour keys: set Reconcile (Lookup or AtMostOnce) for this origin, see docs/unknown-outcomes.md\n",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{Dialect: tc.dialect})
			var stdout, stderr bytes.Buffer
			code := run([]string{"check-keys", "--url", srv.URL + "/payments", "--body", `{"amount":42}`}, &stdout, &stderr)
			assert.Equal(t, tc.code, code)
			assert.Empty(t, stderr.String())
			out := strings.ReplaceAll(stdout.String(), srv.URL, "URL")
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
			t.Log("\n" + stdout.String())
		})
	}
}

// TestCheckKeysConflictRedacted: an API that remembers a key but refuses
// it (409) is a conflict, exit 4; the credentials sent, in --header and
// in the URL's query, are nowhere in the report, even where the answer
// echoes them.
func TestCheckKeysConflictRedacted(t *testing.T) {
	const token, apiKey, queryKey = "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "ak_9f8e7d6c5b4a", "qk_0123456789"
	var n atomic.Int32
	var mu sync.Mutex
	var keys []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token || r.Header.Get("X-Api-Key") != apiKey || r.URL.Query().Get("api_key") != queryKey {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"pay_1","authorization":"Bearer `+token+`"}`)
			return
		}
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"error":"key `+r.Header.Get("Idempotency-Key")+` already used by Bearer `+token+` with `+apiKey+` at ?api_key=`+queryKey+`"}`)
	}))
	t.Cleanup(api.Close)
	args := []string{"check-keys", "--url", api.URL + "/payments?api_key=" + queryKey + "&tenant=t1", "--body", `{"amount":42}`,
		"--header", "Authorization: Bearer " + token, "--header", "X-Api-Key: " + apiKey, "--header", "X-Tenant: acme"}
	for _, asJSON := range []bool{false, true} {
		var stdout, stderr bytes.Buffer
		a := args
		if asJSON {
			a = append([]string{"check-keys", "--json"}, args[1:]...)
		}
		n.Store(0)
		code := run(a, &stdout, &stderr)
		out := stdout.String() + stderr.String()
		assert.Equal(t, 4, code, out)
		for _, secret := range []string{token, apiKey, queryKey} {
			assert.NotContains(t, out, secret)
		}
		assert.Contains(t, out, "Authorization: [REDACTED]")
		assert.Contains(t, out, "X-Api-Key: [REDACTED]")
		assert.Contains(t, out, "X-Tenant: acme")
		assert.Contains(t, out, "api_key=REDACTED")
		assert.Contains(t, out, "already used by [REDACTED] with [REDACTED] at ?api_key=[REDACTED]", "the refusal's body is shown, redacted")
		if asJSON {
			var rep checkReport
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
			assert.Equal(t, verdictConflict, rep.Verdict)
			assert.Equal(t, 409, rep.Second.Status)
			assert.Contains(t, rep.Reason, "409 Conflict")
			assert.Equal(t, adviceConflict, rep.Advice)
		} else {
			assert.Contains(t, out, "verdict     conflict: the second answer refused the same request with the same key: 409 Conflict\n")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, keys, 4)
	assert.Equal(t, keys[0], keys[1], "one key per run")
	assert.NotEqual(t, keys[1], keys[2], "a fresh key per run")
}

// TestCheckKeysBadInput: bad flags are refused before anything is sent,
// with exit 2 and a message that says what to write; a malformed
// --header is not echoed (it may hold a credential).
func TestCheckKeysBadInput(t *testing.T) {
	var hits atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(api.Close)
	u := api.URL + "/payments"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing --url", []string{"--body", "{}"}, "--url is required"},
		{"not an http URL", []string{"--url", "ftp://example.com/x"}, "want an absolute http or https URL"},
		{"relative URL", []string{"--url", "/payments"}, "want an absolute http or https URL"},
		{"bad --key-in", []string{"--url", u, "--key-in", "cookie:sid"}, `"cookie" is not header, body or query`},
		{"--key-in without a name", []string{"--url", u, "--key-in", "body:"}, "is empty"},
		{"--key-in without a place", []string{"--url", u, "--key-in", "idempotency_key"}, "want header:NAME, body:PATH or query:NAME"},
		{"a header name that is no token", []string{"--url", u, "--key-in", "header:Idem(Key)"}, "is not a header name"},
		{"body key without a body", []string{"--url", u, "--key-in", "body:idempotency_key"}, "needs a JSON object --body"},
		{"body key in an array body", []string{"--url", u, "--key-in", "body:idempotency_key", "--body", "[1,2]"}, "not a JSON object"},
		{"body key already in the body", []string{"--url", u, "--key-in", "body:k", "--body", `{"k":"mine"}`}, "leave it out of the body"},
		{"body key under a missing member", []string{"--url", u, "--key-in", "body:metadata.k", "--body", `{}`}, "has no member metadata"},
		{"query key already in the URL", []string{"--url", u + "?requestId=1", "--key-in", "query:requestId"}, "leave it out of the URL"},
		{"body not JSON", []string{"--url", u, "--body", "{amount:"}, "request body is not valid JSON"},
		{"method GET", []string{"--url", u, "--method", "GET"}, "use POST, PUT, PATCH or DELETE"},
		{"header without a colon", []string{"--url", u, "--header", "Authorization Bearer sk_live_abcdef"}, "--header number 1 is not 'Name: value'"},
		{"the key header in --header", []string{"--url", u, "--header", "idempotency-key: mine"}, "sends the key there itself"},
		{"Content-Length in --header", []string{"--url", u, "--header", "Content-Length: 3"}, "it is computed from the body"},
		{"a control character in a header value", []string{"--url", u, "--header", "X-A: a\x01b"}, "control character"},
		{"an argument", []string{"--url", u, "extra"}, `unexpected argument "extra"`},
		{"no timeout", []string{"--url", u, "--timeout", "0s"}, "want a positive duration"},
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"check-keys"}, tc.args...), &stdout, &stderr)
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr.String(), tc.want)
			assert.NotContains(t, stderr.String(), "sk_live_abcdef")
			assert.Empty(t, stdout.String())
		})
	}
	assert.Zero(t, hits.Load(), "nothing sent")
}

// TestCheckKeysHelp: -h prints the subcommand's usage (exit codes
// included) and exits 0; the starter's own usage names the subcommand.
func TestCheckKeysHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 0, run([]string{"check-keys", "-h"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "Usage: starter check-keys --url URL")
	assert.Contains(t, stderr.String(), "Exit codes: 0 replay")
	assert.Contains(t, stderr.String(), "run it\nagainst a sandbox")
	stderr.Reset()
	run([]string{"-h"}, &stdout, &stderr)
	assert.Contains(t, stderr.String(), "starter check-keys --url URL [flags]")
}

// TestCheckKeysJudge: the classification of the second answer against
// the first, answer by answer.
func TestCheckKeysJudge(t *testing.T) {
	p := checkPlan{replayed: "Idempotent-Replayed"}
	ok := func(status int, body string, h ...string) answer {
		a := answer{status: status, body: []byte(body), header: http.Header{}}
		for i := 0; i+1 < len(h); i += 2 {
			a.header.Set(h[i], h[i+1])
		}
		return a
	}
	first := ok(201, `{"id":"p1","amount":42}`)
	for _, tc := range []struct {
		name          string
		first, second answer
		verdict, want string
	}{
		{"marked", first, ok(201, `{"id":"p1","amount":42}`, "Idempotent-Replayed", "true"), verdictReplay, "marked Idempotent-Replayed: true"},
		{"marked, other body", first, ok(200, `{}`, "Idempotent-Replayed", "TRUE"), verdictReplay, "200 OK"},
		{"marker false, same body", first, ok(201, `{"id":"p1","amount":42}`, "Idempotent-Replayed", "false"), verdictReplay, "byte for byte"},
		{"same body, another 2xx", first, ok(200, `{"id":"p1","amount":42}`), verdictReplay, "200 OK after 201 Created"},
		{"same JSON, re-encoded", first, ok(201, `{"amount": 42, "id": "p1"}`), verdictReplay, "re-encoded"},
		{"another id", first, ok(201, `{"id":"p2","amount":42}`), verdictSecondRecord, `(id "p1", then "p2")`},
		{"another body, not JSON", ok(200, "done 1"), ok(200, "done 2"), verdictSecondRecord, "another body"},
		{"409", first, ok(409, `<pre>Conflict</pre>`), verdictConflict, "409 Conflict"},
		{"422", first, ok(422, `{}`), verdictConflict, "422 Unprocessable Entity"},
		{"400 speaking of idempotency", first, ok(400, `{"error":{"type":"idempotency_error"}}`), verdictConflict, "400 Bad Request"},
		{"400 saying the key was used", first, ok(400, `{"message":"request key already used"}`), verdictConflict, "400"},
		{"400 of something else", first, ok(400, `{"message":"amount too large"}`), verdictInconclusive, "does not say the key was used"},
		{"429", first, ok(429, ``), verdictInconclusive, "rate-limits"},
		{"401", first, ok(401, `idempotency`), verdictInconclusive, "a credential was refused"},
		{"500", first, ok(500, ``), verdictInconclusive, "a server error"},
		{"302", first, ok(302, ``), verdictInconclusive, "follows no redirect"},
		{"first 400 speaking of the key", ok(400, `{"title":"Idempotency-Key is missing"}`), answer{}, verdictInconclusive, "it speaks of the key"},
		{"first failed", answer{err: errors.New("connection refused")}, answer{}, verdictInconclusive, "the first request failed: connection refused"},
		{"second failed", first, answer{err: io.ErrUnexpectedEOF}, verdictInconclusive, "the second request failed: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, r := p.judge(tc.first, tc.second)
			assert.Equal(t, tc.verdict, v, r)
			assert.Contains(t, r, tc.want)
		})
	}
}

// TestChanged: the third request's body is the first's with a member
// added, byte for byte otherwise.
func TestChanged(t *testing.T) {
	for _, tc := range []struct{ body, want, member, err string }{
		{`{"amount":42}`, `{"amount":42,"_check":1}`, "_check", ""},
		{`{ }`, `{ "_check":1}`, "_check", ""},
		{"{\"a\":1}\n", "{\"a\":1,\"_check\":1}\n", "_check", ""},
		{`{"_check":0,"_check2":0}`, `{"_check":0,"_check2":0,"_check3":1}`, "_check3", ""},
		{``, ``, "", "no JSON object body"},
		{`[1]`, ``, "", "no JSON object body"},
		{`null`, ``, "", "no JSON object body"},
	} {
		got, member, err := changed([]byte(tc.body))
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, tc.body)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, string(got))
		assert.Equal(t, tc.member, member)
	}
}
