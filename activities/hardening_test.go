package activities_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/request"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// pieces returns the 8-byte pieces of secrets (every run of
// activities.MinCredentialBytes consecutive bytes) that occur in s.
func pieces(s string, secrets ...string) []string {
	var found []string
	for _, sec := range secrets {
		for i := 0; i+8 <= len(sec); i++ {
			if strings.Contains(s, sec[i:i+8]) {
				found = append(found, sec[i:i+8])
			}
		}
	}
	return found
}

// jsonText returns every string, key and number of the JSON document b,
// decoded (escapes resolved), one per line; "" when b is not one JSON
// document (escapes mean nothing in other text).
func jsonText(b []byte) string {
	if !json.Valid(b) {
		return ""
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return ""
	}
	var sb strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			sb.WriteString(v + "\n")
		case json.Number:
			sb.WriteString(v.String() + "\n")
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				sb.WriteString(k + "\n")
				walk(e)
			}
		}
	}
	walk(v)
	return sb.String()
}

// exposed returns, by place, every text the activity let out of one attempt:
// the error message, the Failure (every field), the result (as
// encoded, and its body, raw body and headers decoded) and each log line
// (as written and decoded).
func exposed(err error, resp *workflows.Response, logs string) map[string]string {
	out := map[string]string{}
	if err != nil {
		out["error"] = err.Error()
		if d, ok := workflows.AsFailure(err); ok {
			enc, _ := json.Marshal(d)
			out["details"] = fmt.Sprintf("%+v", d) + "\n" + string(enc) + "\n" + jsonText(enc) + jsonText([]byte(d.Body))
		}
	}
	if resp != nil {
		enc, _ := json.Marshal(resp)
		out["result"] = string(enc) + "\n" + jsonText(enc) + jsonText(resp.Body) + string(resp.Body) + "\n" + string(resp.RawBody) + fmt.Sprint(resp.Headers)
	}
	for i, line := range strings.Split(logs, "\n") {
		if line != "" {
			out[fmt.Sprintf("log line %d", i+1)] = line + "\n" + jsonText([]byte(line))
		}
	}
	return out
}

// assertNoPiece fails when a piece of a secret is in any exposed text.
func assertNoPiece(t *testing.T, err error, resp *workflows.Response, logs string, secrets ...string) {
	t.Helper()
	for where, text := range exposed(err, resp, logs) {
		if p := pieces(text, secrets...); len(p) > 0 {
			t.Errorf("%s holds pieces %q of a credential:\n%s", where, p, text)
		}
	}
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestErrorSnippetRedactedBeforeTruncation (hardening issue, class 1): a
// server echoing the worker's token (whole, or a part of it) where the
// 1 KiB error snippet is cut leaves no piece of it in the error message,
// the Failure or any log line, for the token split at every offset.
func TestErrorSnippetRedactedBeforeTruncation(t *testing.T) {
	const cut = 1024
	parts := map[string]func(tok string) string{
		"whole token":         func(tok string) string { return tok },
		"first 12 bytes":      func(tok string) string { return tok[:12] },
		"last 12 bytes":       func(tok string) string { return tok[len(tok)-12:] },
		"Authorization value": func(tok string) string { return "Bearer " + tok },
	}
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code, _ := strconv.Atoi(q.Get("status"))
		at, _ := strconv.Atoi(q.Get("at"))
		echo := parts[q.Get("part")](strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		var body string
		if q.Get("json") == "1" {
			head := `{"error":"`
			body = head + strings.Repeat("x", at-len(head)) + echo + strings.Repeat("y", 300) + `"}`
		} else {
			body = strings.Repeat("x", at) + echo + strings.Repeat("y", 300)
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	})
	cfg := activities.Config{
		AllowedOrigins: []string{srv.URL},
		Credentials:    map[string]http.Header{srv.URL: {"Authorization": {"Bearer " + token}}},
	}
	for _, code := range []int{400, 500} {
		for name, part := range parts {
			n := len(part(token))
			for _, asJSON := range []string{"0", "1"} {
				// The echo starts so that the cut falls after each of its bytes.
				for at := cut - n; at <= cut; at++ {
					t.Run(fmt.Sprintf("%d/%s/json=%s/at=%d", code, name, asJSON, at), func(t *testing.T) {
						r := req(fmt.Sprintf("%s/pay?status=%d&part=%s&json=%s&at=%d", srv.URL, code, strings.ReplaceAll(name, " ", "+"), asJSON, at))
						_, err, logs := run(t, cfg, r)
						require.Error(t, err)
						d, ok := workflows.AsFailure(err)
						require.True(t, ok)
						assert.Equal(t, code, d.Status)
						assert.NotEmpty(t, d.Body)
						assert.LessOrEqual(t, len(d.Body), cut, "the snippet is cut")
						assertNoPiece(t, err, nil, logs, token)
					})
				}
			}
		}
	}
}

// TestServerURLSecretsRedacted (class 3): user info and query values in a
// URL the server sends (a redirect's Location, a presigned URL in a 201's
// Location or Content-Location) are redacted in Failure.Location,
// the message, the logs and Response.Headers; a same-origin 307 to a URL
// with user info is not followed.
func TestServerURLSecretsRedacted(t *testing.T) {
	const (
		password  = "hunter2hunter2"
		accessKey = "AKIAIOSFODNN7EXAMPLE"
		signature = "fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024"
		oauth     = "ya29.a0AfH6SMBx3Qz"
	)
	presigned := "https://deploy:" + password + "@files.example.net/obj/9?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" + accessKey +
		"%2F20261202%2Fus-east-1&X-Amz-Signature=" + signature + "#frag-" + oauth
	var srv *recorder
	srv = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/found":
			w.Header().Set("Location", presigned)
			w.WriteHeader(http.StatusFound)
		case "/see-other":
			w.Header().Set("Location", "/receipts/9?access_token="+oauth+"&sig="+signature)
			w.WriteHeader(http.StatusSeeOther)
		case "/temp-userinfo":
			w.Header().Set("Location", strings.Replace(srv.URL, "://", "://admin:"+password+"@", 1)+"/final?token="+oauth)
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "/perm-elsewhere":
			w.Header().Set("Location", presigned)
			w.WriteHeader(http.StatusPermanentRedirect)
		case "/created":
			w.Header().Set("Location", presigned)
			w.Header().Set("Content-Location", "https://u:"+password+"@cdn.example.net/r?k="+accessKey)
			w.WriteHeader(http.StatusCreated)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	})
	secrets := []string{password, accessKey, signature, oauth}
	tests := []struct {
		path     string
		wantHost string // what of the Location stays readable
	}{
		{"/found", "files.example.net/obj/9"},
		{"/see-other", "/receipts/9"},
		{"/temp-userinfo", "/final"},
		{"/perm-elsewhere", "files.example.net/obj/9"},
		{"/created", "files.example.net/obj/9"},
	}
	cfg := activities.Config{AllowedOrigins: []string{srv.URL}, ResultHeaders: []string{"Location", "Content-Location"}}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			before := srv.count()
			resp, err, logs := run(t, cfg, req(srv.URL+tt.path))
			assert.Equal(t, 1, srv.count()-before, "not followed")
			assertNoPiece(t, err, resp, logs, secrets...)
			if tt.path == "/created" {
				require.NoError(t, err)
				assert.Contains(t, resp.Headers["Location"], tt.wantHost)
				assert.Contains(t, resp.Headers["Location"], "X-Amz-Signature=REDACTED")
				assert.Contains(t, resp.Headers["Content-Location"], "cdn.example.net/r?k=REDACTED")
				return
			}
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeRedirectNotFollowed, appErr.Type())
			d, ok := workflows.AsFailure(err)
			require.True(t, ok)
			assert.Contains(t, d.Location, tt.wantHost)
			assert.Contains(t, d.Location, "REDACTED")
			assert.Contains(t, appErr.Message(), tt.wantHost)
		})
	}
}

// TestConfiguredCredentialHeaderInAnyCase (class 4): a credential
// configured as "x-api-key" is sent once, as X-Api-Key, and a request that
// sets that header in any spelling is refused as InvalidRequest before
// anything is sent.
func TestConfiguredCredentialHeaderInAnyCase(t *testing.T) {
	const apiKey = "ak_live_7c1f9e2d4b"
	srv := newRecorder(t, status(201, `{}`))
	cfg := activities.Config{
		AllowedOrigins: []string{srv.URL},
		Credentials:    map[string]http.Header{srv.URL: {"x-api-key": {apiKey}, "x-tenant": {"tenant-000042"}}},
	}
	t.Run("sent once, canonical", func(t *testing.T) {
		_, err, _ := run(t, cfg, req(srv.URL))
		require.NoError(t, err)
		got, _ := srv.last()
		assert.Equal(t, []string{apiKey}, got.Header["X-Api-Key"])
		assert.Equal(t, []string{"tenant-000042"}, got.Header["X-Tenant"])
	})
	for _, name := range []string{"X-Api-Key", "x-api-key", "X-API-KEY", "X-Tenant", "x-TENANT"} {
		t.Run(name, func(t *testing.T) {
			before := srv.count()
			r := req(srv.URL)
			r.Headers = map[string]string{name: "from-the-workflow"}
			_, err, _ := run(t, cfg, r)
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeInvalidRequest, appErr.Type())
			assert.True(t, appErr.NonRetryable())
			assert.Equal(t, before, srv.count(), "nothing sent")
		})
	}
}

// TestBinaryResultNearTheBound (class 5): around the size where the base64
// of a binary body passes Config.MaxResultBytes, the encoded result never
// passes it; a body kept is byte for byte, a body omitted is identified.
func TestBinaryResultNearTheBound(t *testing.T) {
	const bound = 8 << 10
	var kept, omitted int
	lastKept := true
	for n := 5800; n <= 6400; n += 25 {
		body := strings.Repeat("\xfe", n) // never JSON
		srv := newRecorder(t, status(201, body, "Content-Type", "application/octet-stream"))
		resp, err, _ := run(t, activities.Config{AllowedOrigins: []string{srv.URL}, MaxResultBytes: bound}, req(srv.URL))
		require.NoError(t, err)
		enc, err := json.Marshal(resp)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(enc), bound, "size %d", n)
		assert.Equal(t, int64(n), resp.BodyBytes)
		if resp.BodyOmitted {
			omitted++
			assert.Equal(t, "too large", resp.OmittedReason)
			assert.Equal(t, hexSHA256([]byte(body)), resp.BodySHA256)
			lastKept = false
			continue
		}
		kept++
		assert.True(t, lastKept, "size %d kept after a smaller one was omitted", n)
		assert.Equal(t, body, string(resp.RawBody))
	}
	assert.Positive(t, kept, "the range starts below the bound")
	assert.Positive(t, omitted, "the range ends above the bound")
}

// TestResultHeadersCountTowardsTheBound (class 5): response headers copied
// into the result (each up to 4 KiB, six times longer once JSON-escaped)
// count towards Config.MaxResultBytes too, with a body or without.
func TestResultHeadersCountTowardsTheBound(t *testing.T) {
	const bound = 8 << 10
	long := strings.Repeat("<", 4<<10)
	tests := []struct {
		name string
		body string
	}{
		{"no body", ""},
		{"a small JSON body", `{"id":"rec_1"}`},
		{"a body near the bound", `"` + strings.Repeat("a", 6<<10) + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, status(201, tt.body, "Location", "/records/"+long, "X-Request-Id", long, "Content-Type", "application/json"))
			resp, err, _ := run(t, activities.Config{AllowedOrigins: []string{srv.URL}, MaxResultBytes: bound}, req(srv.URL))
			require.NoError(t, err)
			enc, err := json.Marshal(resp)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(enc), bound)
			assert.Equal(t, 201, resp.Status)
			assert.Equal(t, int64(len(tt.body)), resp.BodyBytes)
		})
	}
}

// TestRedactionKeepsJSONValid (class 6): a token echoed inside a JSON
// string, also written with escapes or next to quotes and backslashes, is
// redacted inside the string: the result succeeds, its body stays valid
// JSON with its other values, and no piece of the token is in it. A
// credential written as a number outside any string, or raw across the
// quotes of strings, cannot be redacted: the body is omitted as
// "credential".
func TestRedactionKeepsJSONValid(t *testing.T) {
	const (
		digits = "8675309867530986"
		odd    = `pk"<&>\live01` // a credential JSON must escape
		quoted = `k1","k2":"x`   // a credential written raw across strings
	)
	escapeAll := func(s string) string {
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		return b.String()
	}
	escapeEvery3rd := func(s string) string {
		var b strings.Builder
		for i, r := range s {
			if i%3 == 0 {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	oddJSON, _ := json.Marshal(odd)
	tests := []struct {
		name     string
		body     string
		omitted  bool
		redacted bool
	}{
		{"in a string", `{"echo":"` + token + `","keep":"me"}`, false, true},
		{"every character escaped", `{"echo":"` + escapeAll(token) + `","keep":"me"}`, false, true},
		{"every third character escaped", `{"echo":"` + escapeEvery3rd(token) + `","keep":"me"}`, false, true},
		{"between quotes and backslashes", `{"echo":"\"\\` + token + `\\\"","keep":"me"}`, false, true},
		{"as a key", `{"` + token + `":"x","keep":"me"}`, false, true},
		{"prefix only, in an array", `["` + token[:12] + `",{"keep":"me"}]`, false, true},
		{"a credential JSON escapes", `{"echo":` + string(oddJSON) + `,"keep":"me"}`, false, true},
		{"the digits credential in a string", `{"echo":"` + digits + `","keep":"me"}`, false, true},
		{"the digits credential as a number", `{"n":` + digits + `,"keep":"me"}`, true, false},
		{"the digits credential inside a longer number", `{"n":1` + digits + `2,"keep":"me"}`, true, false},
		{"a credential with quotes written raw across strings", `{"a":"` + quoted + `yz","keep":"me"}`, true, false},
		{"no credential", `{"id":"rec_1","keep":"me"}`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.True(t, json.Valid([]byte(tt.body)), tt.body)
			srv := newRecorder(t, status(201, tt.body, "Content-Type", "application/json"))
			cfg := activities.Config{
				AllowedOrigins: []string{srv.URL},
				Credentials: map[string]http.Header{srv.URL: {
					"Authorization": {"Bearer " + token}, "X-Api-Key": {digits}, "X-Partner": {odd}, "X-Partner-Key": {quoted},
				}},
			}
			resp, err, logs := run(t, cfg, req(srv.URL))
			require.NoError(t, err, "redaction never turns a success into a failure")
			assertNoPiece(t, nil, resp, logs, token, digits, odd, quoted)
			assert.Equal(t, int64(len(tt.body)), resp.BodyBytes)
			if tt.omitted {
				assert.True(t, resp.BodyOmitted)
				assert.Equal(t, "credential", resp.OmittedReason)
				assert.Empty(t, resp.Body)
				assert.Equal(t, hexSHA256([]byte(tt.body)), resp.BodySHA256)
				return
			}
			require.True(t, json.Valid(resp.Body), "valid JSON: %s", resp.Body)
			assert.Equal(t, tt.redacted, resp.BodyRedacted)
			assert.Contains(t, string(resp.Body), `"keep":"me"`, "the rest of the body is kept")
			if tt.redacted {
				assert.Contains(t, jsonText(resp.Body), "[REDACTED]")
				assert.Equal(t, hexSHA256([]byte(tt.body)), resp.BodySHA256)
			} else {
				assert.Equal(t, tt.body, string(resp.Body), "byte for byte")
			}
		})
	}
}

// TestLatin1JSONBodyIsKeptRaw (class 6): a 2xx whose JSON holds invalid
// UTF-8 in a string (a server writing Latin-1) cannot travel through
// Temporal as JSON byte for byte: it is a success with the bytes in
// RawBody (credentials redacted), never an error encoding the result.
func TestLatin1JSONBodyIsKeptRaw(t *testing.T) {
	for name, body := range map[string]string{
		"Latin-1 name":      "{\"name\":\"Jos\xe9\"}",
		"with the token":    "{\"name\":\"Jos\xe9\",\"echo\":\"" + token + "\"}",
		"lone continuation": "[\"\xa8\"]",
	} {
		t.Run(name, func(t *testing.T) {
			srv := newRecorder(t, status(201, body, "Content-Type", "application/json"))
			cfg := activities.Config{AllowedOrigins: []string{srv.URL}, Credentials: map[string]http.Header{srv.URL: {"Authorization": {"Bearer " + token}}}}
			resp, err, logs := run(t, cfg, req(srv.URL))
			require.NoError(t, err, "a 2xx is a success")
			assertNoPiece(t, nil, resp, logs, token)
			assert.Empty(t, resp.Body)
			assert.Equal(t, strings.ReplaceAll(body, token, "[REDACTED]"), string(resp.RawBody))
			assert.Equal(t, int64(len(body)), resp.BodyBytes)
		})
	}
}

// TestNewRefusesShortCredentials (class 6): a credential shorter than 8
// bytes (after its auth scheme) cannot be redacted without rewriting
// unrelated text, so New refuses it; 8 bytes are enough.
func TestNewRefusesShortCredentials(t *testing.T) {
	const origin = "https://api.example.com"
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	tests := []struct {
		name, header, value string
		ok                  bool
	}{
		{"bearer of 3", "Authorization", "Bearer abc", false},
		{"bearer of 7", "Authorization", "Bearer abcdefg", false},
		{"bearer of 8", "Authorization", "Bearer abcdefgh", true},
		{"scheme only", "Authorization", "Bearer", false},
		{"api key of 7", "X-Api-Key", "1234567", false},
		{"api key of 8", "X-Api-Key", "12345678", true},
		{"api key of spaces", "X-Api-Key", "        ", false},
		{"basic of a short pair", "Authorization", basic("u", "p"), false},
		{"basic", "Authorization", basic("merchant", "s3cr3t-pass"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := activities.New(activities.Config{
				AllowedOrigins: []string{origin},
				Credentials:    map[string]http.Header{origin: {tt.header: {tt.value}}},
			})
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "shorter than 8 bytes")
		})
	}
}

// TestRequestDecodesPlainJSONBody (class 7): activity input written before
// bodies travelled in their exact form has the body as plain JSON; it
// still decodes, to that JSON's text; the exact form round-trips.
func TestRequestDecodesPlainJSONBody(t *testing.T) {
	for in, want := range map[string]string{
		`{"url":"https://x.example/p","idempotency_key":"k","body":{"amount":42}}`:    `{"amount":42}`,
		`{"url":"https://x.example/p","idempotency_key":"k","body":[1, 2]}`:           `[1, 2]`,
		`{"url":"https://x.example/p","idempotency_key":"k","body":"{\"a\": \"<\"}"}`: `{"a": "<"}`,
		`{"url":"https://x.example/p","idempotency_key":"k","body":null}`:             ``,
	} {
		var r request.Input
		require.NoError(t, json.Unmarshal([]byte(in), &r), in)
		assert.Equal(t, want, string(r.Body), in)
		assert.Equal(t, "k", r.IdempotencyKey)
		enc, err := json.Marshal(r)
		require.NoError(t, err)
		var again request.Input
		require.NoError(t, json.Unmarshal(enc, &again))
		assert.Equal(t, want, string(again.Body), "round trip of %s", enc)
	}
}

// TestInputAndAnswerHardening (classes 8–11): what the old activity sent or
// classified wrongly: control characters other than CR, LF and NUL in
// header values, three spellings of one header name, bodies over 256 KiB,
// NUL in operation names, hosts that are not ASCII (all refused before
// anything is sent); 425 Too Early (retried); several Retry-After headers
// (the longest valid one wins).
func TestInputAndAnswerHardening(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		srv := newRecorder(t, status(201, `{}`))
		cfg := activities.Config{AllowedOrigins: []string{srv.URL, "http://xn--bcher-kva.example"}}
		with := func(f func(*request.Input)) request.Input {
			r := req(srv.URL + "/payments")
			f(&r)
			return r
		}
		tests := []struct {
			name string
			req  request.Input
			want string
		}{
			{"ESC in a header value", with(func(r *request.Input) { r.Headers = map[string]string{"X-Note": "a\x1b[31mb"} }), "control character"},
			{"DEL in a header value", with(func(r *request.Input) { r.Headers = map[string]string{"X-Note": "a\x7fb"} }), "control character"},
			{"vertical tab in a header value", with(func(r *request.Input) { r.Headers = map[string]string{"X-Note": "a\vb"} }), "control character"},
			{"three spellings of one header", with(func(r *request.Input) {
				r.Headers = map[string]string{"X-Note": "a", "x-note": "b", "X-NOTE": "c"}
			}), "differ only in case"},
			{"body one byte over 256 KiB", with(func(r *request.Input) { r.Body = json.RawMessage(`"` + strings.Repeat("a", 256<<10-1) + `"`) }), "at most 262144"},
			{"operation with NUL", with(func(r *request.Input) { r.Operation = "charge\x00refund" }), "NUL"},
			{"non-ASCII host", with(func(r *request.Input) { r.URL = "http://bücher.example/pay" }), "punycode"},
			{"percent-encoded non-ASCII host", with(func(r *request.Input) { r.URL = "http://b%C3%BCcher.example/pay" }), "punycode"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := srv.count()
				_, err, _ := run(t, cfg, tt.req)
				appErr := appError(t, err)
				assert.Equal(t, workflows.ErrTypeInvalidRequest, appErr.Type(), appErr.Message())
				assert.True(t, appErr.NonRetryable())
				assert.Contains(t, appErr.Message(), tt.want)
				assert.Equal(t, before, srv.count(), "nothing sent")
			})
		}
		t.Run("body of exactly 256 KiB", func(t *testing.T) {
			body := `"` + strings.Repeat("a", 256<<10-2) + `"`
			_, err, _ := run(t, cfg, with(func(r *request.Input) { r.Body = json.RawMessage(body) }))
			require.NoError(t, err)
			_, got := srv.last()
			assert.Equal(t, body, string(got))
		})
	})
	t.Run("answers", func(t *testing.T) {
		tests := []struct {
			name      string
			status    int
			header    http.Header
			wantType  string
			wantDelay time.Duration // 0: any backoff
		}{
			{"425 Too Early is retried", 425, nil, workflows.ErrTypeHTTPRetryableStatus, 0},
			{"425 with Retry-After", 425, http.Header{"Retry-After": {"3"}}, workflows.ErrTypeHTTPRetryableStatus, 3 * time.Second},
			{"several Retry-After: the longest valid", 503, http.Header{"Retry-After": {"2", "garbage", "7"}}, workflows.ErrTypeHTTPRetryableStatus, 7 * time.Second},
			{"several Retry-After: garbage first", 429, http.Header{"Retry-After": {"soon", "4"}}, workflows.ErrTypeHTTPRetryableStatus, 4 * time.Second},
			{"several Retry-After: a date and seconds", 503, http.Header{"Retry-After": {"1", time.Now().Add(9 * time.Second).UTC().Format(http.TimeFormat)}}, workflows.ErrTypeHTTPRetryableStatus, 9 * time.Second},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				srv := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
					for k, vs := range tt.header {
						for _, v := range vs {
							w.Header().Add(k, v)
						}
					}
					w.WriteHeader(tt.status)
				})
				_, err, _ := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, req(srv.URL))
				appErr := appError(t, err)
				assert.Equal(t, tt.wantType, appErr.Type(), appErr.Message())
				assert.False(t, appErr.NonRetryable(), appErr.Message())
				if tt.wantDelay > 0 {
					assert.InDelta(t, tt.wantDelay, appErr.NextRetryDelay(), float64(1100*time.Millisecond), appErr.Message())
				} else {
					assert.Positive(t, appErr.NextRetryDelay())
				}
			})
		}
	})
}
