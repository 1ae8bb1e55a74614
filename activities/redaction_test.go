package activities_test

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

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
		Credentials:    map[string]activities.Credential{srv.URL: {Header: http.Header{"Authorization": {"Bearer " + token}}}},
	}
	for _, code := range []int{400, 500} {
		for name, part := range parts {
			n := len(part(token))
			for _, asJSON := range []string{"0", "1"} {
				// The echo starts so that the cut falls after each of its bytes.
				for at := cut - n; at <= cut; at++ {
					t.Run(fmt.Sprintf("%d/%s/json=%s/at=%d", code, name, asJSON, at), func(t *testing.T) {
						r := req(fmt.Sprintf("%s/pay?status=%d&part=%s&json=%s&at=%d", srv.URL, code, strings.ReplaceAll(name, " ", "+"), asJSON, at))
						_, logs, err := run(t, cfg, r)
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
			resp, logs, err := run(t, cfg, req(srv.URL+tt.path))
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
				Credentials: map[string]activities.Credential{srv.URL: {Header: http.Header{
					"Authorization": {"Bearer " + token}, "X-Api-Key": {digits}, "X-Partner": {odd}, "X-Partner-Key": {quoted},
				}}},
			}
			resp, logs, err := run(t, cfg, req(srv.URL))
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

// TestEncodedBodiesAreRedacted (hardening 3, item 5): a workflow may not
// ask for a content coding (the bytes would defeat redaction), and a body
// that arrives encoded anyway is decoded before redaction, or withheld
// when its coding is not one the activity can decode.
func TestEncodedBodiesAreRedacted(t *testing.T) {
	t.Run("Accept-Encoding from the workflow is refused", func(t *testing.T) {
		for _, name := range []string{"Accept-Encoding", "accept-encoding"} {
			srv := newRecorder(t, status(201, `{}`))
			r := req(srv.URL)
			r.Headers = map[string]string{name: "gzip"}
			_, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, r)
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeInvalidRequest, appErr.Type())
			assert.Contains(t, appErr.Message(), "Accept-Encoding")
			assert.Zero(t, srv.count(), "nothing sent")
		}
	})
	encode := map[string]func([]byte) []byte{
		"gzip":    func(b []byte) []byte { return encodeAs("gzip", b) },
		"deflate": func(b []byte) []byte { return encodeAs("deflate", b) },
		"br":      func(b []byte) []byte { return encodeAs("br", b) }, // not decodable here
		"raw-deflate": func(b []byte) []byte {
			var buf bytes.Buffer
			w, _ := flate.NewWriter(&buf, flate.DefaultCompression)
			_, _ = w.Write(b)
			_ = w.Close()
			return buf.Bytes()
		},
	}
	tests := []struct {
		name, coding string
		status       int
		wantBody     bool // the decoded body, redacted, is in the result or snippet
	}{
		{"gzip 201", "gzip", 201, true},
		{"deflate 201", "deflate", 201, true},
		{"raw deflate 201", "raw-deflate", 201, true},
		{"br 201", "br", 201, false},
		{"gzip 401", "gzip", 401, true},
		{"br 401", "br", 401, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				plain := []byte(`{"echo":"` + r.Header.Get("Authorization") + `","ok":true}`)
				coding := strings.TrimPrefix(tt.coding, "raw-")
				w.Header().Set("Content-Encoding", coding)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = w.Write(encode[tt.coding](plain))
			})
			// The client never decompresses (as a user's HTTPClient with
			// DisableCompression would): the server encodes unasked.
			cfg := activities.Config{
				AllowedOrigins: []string{srv.URL},
				Credentials:    map[string]activities.Credential{srv.URL: {Header: http.Header{"Authorization": {"Bearer " + token}}}},
				HTTPClient:     &http.Client{Transport: &http.Transport{DisableCompression: true}},
			}
			resp, logs, err := run(t, cfg, req(srv.URL))
			assertNoPiece(t, err, resp, logs, token)
			if tt.status == 201 {
				require.NoError(t, err)
				if tt.wantBody {
					assert.JSONEq(t, `{"echo":"Bearer [REDACTED]","ok":true}`, string(resp.Body))
					assert.True(t, resp.BodyRedacted)
				} else {
					assert.True(t, resp.BodyOmitted)
					assert.Contains(t, resp.OmittedReason, "encoded")
					assert.Nil(t, resp.Body)
					assert.Nil(t, resp.RawBody)
				}
				return
			}
			d, ok := workflows.AsFailure(err)
			require.True(t, ok)
			if tt.wantBody {
				assert.Contains(t, d.Body, `"ok":true`)
			} else {
				assert.NotContains(t, d.Body, "ok")
			}
		})
	}
}

// TestRedirectQueryValuesRedacted (hardening 3, item 6): a same-origin 307
// to a presigned URL is followed; when that URL answers with an error,
// none of its query values reach the message, the details or the logs.
func TestRedirectQueryValuesRedacted(t *testing.T) {
	const signature = "fe5f80f77d5fa3beca038a248ff027d0445342fe"
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/pay":
			w.Header().Set("Location", "/v2/pay?X-Amz-Signature="+signature+"&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE")
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "/v2/pay":
			w.WriteHeader(http.StatusBadRequest)
		case "/v2/slow":
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	for _, path := range []string{"/pay"} {
		for _, final := range []int32{1, 5} {
			r := req(srv.URL + path)
			r.MaximumAttempts = final
			_, logs, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, r)
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeHTTPClientError, appErr.Type())
			assert.Contains(t, appErr.Message(), "/v2/pay?X-Amz-Signature=REDACTED")
			assertNoPiece(t, err, nil, logs, signature, "AKIAIOSFODNN7EXAMPLE")
		}
	}
	t.Run("the request's own query values", func(t *testing.T) {
		r := req(srv.URL + "/v2/slow?sig=" + signature)
		_, logs, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, r)
		appErr := appError(t, err)
		assert.Equal(t, workflows.ErrTypeHTTPRetryableStatus, appErr.Type())
		assertNoPiece(t, err, nil, logs, signature)
	})
}

// TestEncodedBodiesLayeredCutOrUnknown: a body coded in layers, cut in
// transit or in a coding the activity does not know is never a success that
// leaks or hides a credential; what an adversarial review of the decoding
// found, each failing before its fix: a body gzipped twice (the HTTP client
// used to undo one layer and drop Content-Encoding, hiding the other); a
// close-delimited coded body cut in transit (reported as a success); a
// thousand layers of deflate (a decompressor each, 85 MiB); a server's
// words in Content-Encoding shown in the Failure.
func TestEncodedBodiesLayeredCutOrUnknown(t *testing.T) {
	cfg := func(url string) activities.Config {
		return activities.Config{
			AllowedOrigins: []string{url},
			Credentials:    map[string]activities.Credential{url: {Header: http.Header{"Authorization": {"Bearer " + token}}}},
		}
	}
	echo := []byte(`{"id":"pay_1","echo":"Bearer ` + token + `"}`)
	t.Run("gzip twice", func(t *testing.T) {
		wire := encodeAs("gzip", encodeAs("gzip", echo))
		srv := newRecorder(t, rawResponse(201, fmt.Sprintf("Content-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n", len(wire)), wire))
		resp, logs, err := run(t, cfg(srv.URL), req(srv.URL))
		require.NoError(t, err)
		assertNoPiece(t, err, resp, logs, token)
		assert.JSONEq(t, `{"id":"pay_1","echo":"Bearer [REDACTED]"}`, string(resp.Body))
	})
	t.Run("close-delimited deflate cut in transit", func(t *testing.T) {
		enc := encodeAs("deflate", []byte(`{"note":"`+strings.Repeat("abcdefghij", 300)+`"}`))
		srv := newRecorder(t, rawResponse(201, "Content-Type: application/json\r\nContent-Encoding: deflate\r\nConnection: close\r\n", enc[:len(enc)/2]))
		resp, _, err := run(t, cfg(srv.URL), req(srv.URL))
		require.Nil(t, resp, "a 201 cut in transit is not a success")
		assert.Equal(t, workflows.ErrTypeNetworkError, appError(t, err).Type())
	})
	t.Run("more layers than decoded", func(t *testing.T) {
		wire := echo
		for range 1000 {
			wire = encodeAs("deflate", wire)
		}
		ce := strings.TrimSuffix(strings.Repeat("deflate,", 1000), ",")
		srv := newRecorder(t, rawResponse(201, fmt.Sprintf("Content-Type: application/json\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n", ce, len(wire)), wire))
		resp, logs, err := run(t, cfg(srv.URL), req(srv.URL))
		require.NoError(t, err)
		assertNoPiece(t, err, resp, logs, token)
		assert.True(t, resp.BodyOmitted)
		assert.Equal(t, "encoded", resp.OmittedReason)
	})
	t.Run("a server's words as the coding", func(t *testing.T) {
		srv := newRecorder(t, rawResponse(400, "Content-Encoding: "+strings.ToLower(token)+"\r\nContent-Length: 2\r\n", []byte("xx")))
		_, logs, err := run(t, cfg(srv.URL), req(srv.URL))
		assertNoPiece(t, err, nil, logs, strings.ToLower(token))
		d, ok := workflows.AsFailure(err)
		require.True(t, ok)
		assert.Contains(t, d.Body, "unknown coding")
	})
}

// TestUnparsableLocationQuery: the HTTP client's own error quotes a
// Location it cannot parse, query value and all; it is redacted too.
func TestUnparsableLocationQuery(t *testing.T) {
	for _, code := range []int{302, 307} {
		srv := newRecorder(t, status(code, "", "Location", "/pay/%zz?session_token=LEAKEDQUERYVALUE"))
		r := req(srv.URL)
		r.MaximumAttempts = 1
		_, logs, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, r)
		appError(t, err)
		assertNoPiece(t, err, nil, logs, "LEAKEDQUERYVALUE")
	}
}
