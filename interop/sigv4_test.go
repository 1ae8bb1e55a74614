package interop_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/idemhttp/temporal-idempotent-http/harness/interop"
	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
)

// The SigV4 rows: internal/credential's SigV4 source (AWS's Go signer)
// against AWS's JavaScript signer (@smithy/signature-v4) on the same
// requests, and against servers that check signatures: s3rver (a fake S3)
// and a verifier built on the JavaScript signer (interop/node/sigv4.js).

const (
	v4KeyID   = "AKIDINTEROPEXAMPLE"
	v4Secret  = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYINTEROPKEY"
	v4TempID  = "ASIAINTEROPEXAMPLE" // a session key: its requests carry v4Token
	v4Token   = "FwoGZXIvYXdzEBYaDInteropSessionToken//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8Y"
	s3rverKey = "S3RVER" // s3rver's built-in access key ID and secret
)

// v4Pins are the known differences between the two signers: a case of
// this name signs differently, for this reason (the test fails if they
// come to agree).
var v4Pins = map[string]string{
	"Cache-Control and Pragma headers": "the JavaScript signer never signs Cache-Control, Pragma, Connection, From, Referer, TE and a few more (ALWAYS_UNSIGNABLE_HEADERS); the Go signer signs every header but Authorization, User-Agent, Expect, Transfer-Encoding and X-Amzn-Trace-Id. Each signature verifies (a service re-signs over the SignedHeaders the request lists)",
}

// v4RedactorFunc adapts a function to credential.Redactor.
type v4RedactorFunc func(string)

func (f v4RedactorFunc) Add(s string) { f(s) }

var sigv4Results struct {
	mu   sync.Mutex
	rows []string // Markdown rows of the signer comparison
	srv  []string // Markdown rows of the servers
}

func sigv4Row(to *[]string, row string) {
	sigv4Results.mu.Lock()
	defer sigv4Results.mu.Unlock()
	*to = append(*to, row)
}

func sigv4Markdown() string {
	sigv4Results.mu.Lock()
	defer sigv4Results.mu.Unlock()
	if len(sigv4Results.rows)+len(sigv4Results.srv) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## AWS Signature V4\n\ninternal/credential's SigV4 source (AWS's Go signer, aws-sdk-go-v2) against AWS's JavaScript signer, @smithy/signature-v4 %s with @aws-crypto/sha256-js %s (interop/sigv4_test.go, interop/node/sigv4.js): each request signed by both at the same X-Amz-Date, Authorization compared byte for byte. A pinned case is a known difference (the test fails if it changes).\n\n", libVersion("@smithy/signature-v4"), libVersion("@aws-crypto/sha256-js"))
	b.WriteString("| request | session token | Authorization | |\n|---|---|---|---|\n")
	b.WriteString(strings.Join(sigv4Results.rows, "\n") + "\n")
	fmt.Fprintf(&b, "\nThe same source against servers: s3rver %s (a fake S3; it checks the access key ID, the date and that X-Amz-Content-Sha256 is there, but does **not** verify Signature V4 signatures or tokens: a wrong secret is accepted, pinned) and a verifier that re-signs each request it receives with the JavaScript signer and compares (403 SignatureDoesNotMatch, InvalidToken, XAmzContentSHA256Mismatch as AWS answers).\n\n", libVersion("s3rver"))
	b.WriteString("| server | request | expected | got | |\n|---|---|---|---|---|\n")
	b.WriteString(strings.Join(sigv4Results.srv, "\n") + "\n")
	return b.String()
}

// v4Case is one request signed by both signers.
type v4Case struct {
	name, method, url, service string
	header                     map[string]string
	body                       []byte
}

var v4Cases = []v4Case{
	{name: "GET, no query", method: "GET", url: "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/payments", service: "execute-api"},
	{name: "GET, query out of order with escapes", method: "GET", url: "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/payments?z=1&a=b%20c&a=a&empty=&k%2Fey=v%2B1", service: "execute-api"},
	{name: "POST JSON with Idempotency-Key", method: "POST", url: "https://fn.lambda-url.eu-west-1.on.aws/charge", service: "lambda", header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"}, body: []byte(`{"amount":100,"currency":"EUR","note":"café ☕"}`)},
	{name: "the same body with a trailing newline", method: "POST", url: "https://fn.lambda-url.eu-west-1.on.aws/charge", service: "lambda", header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"}, body: []byte("{\"amount\":100,\"currency\":\"EUR\",\"note\":\"café ☕\"}\n")},
	{name: "header values with runs of spaces", method: "POST", url: "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/payments", service: "execute-api", header: map[string]string{"X-Note": "  a   b  ", "Content-Type": "application/json"}, body: []byte(`{}`)},
	{name: "path with spaces and unicode", method: "GET", url: "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/a%20b/caf%C3%A9", service: "execute-api"},
	{name: "S3 PUT, path as sent", method: "PUT", url: "https://bucket.s3.eu-west-1.amazonaws.com/dir/a%20b+c.json", service: "s3", header: map[string]string{"Content-Type": "application/json"}, body: []byte(`{"k":"v"}`)},
	{name: "S3 GET, empty body", method: "GET", url: "https://bucket.s3.eu-west-1.amazonaws.com/dir/key.json", service: "s3"},
	{name: "Cache-Control and Pragma headers", method: "GET", url: "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/payments", service: "execute-api", header: map[string]string{"Cache-Control": "no-cache", "Pragma": "no-cache"}},
}

// startSigV4 starts interop/node/sigv4.js with the verifier's keys.
func startSigV4(t *testing.T) *interop.Server {
	t.Helper()
	keys, _ := json.Marshal(map[string]map[string]string{
		v4KeyID:  {"secret": v4Secret},
		v4TempID: {"secret": v4Secret, "token": v4Token},
	})
	return interop.Start(t, "sigv4", interop.Options{Env: []string{"ACCESS_KEYS=" + string(keys)}})
}

// signGo signs a request of c with the SigV4 source; it returns the
// request and the secrets given to the redactor.
func signGo(t *testing.T, c v4Case, service, region, id, secret, token string, body []byte) (*http.Request, []string) {
	t.Helper()
	var added []string
	src, err := credential.NewSigV4(service, region, credentials.NewStaticCredentialsProvider(id, secret, token), v4RedactorFunc(func(s string) { added = append(added, s) }), credential.Names{})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(c.method, c.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	if err := src.Apply(context.Background(), req, body); err != nil {
		t.Fatal(err)
	}
	return req, added
}

func TestSigV4AgainstJavaScriptSigner(t *testing.T) {
	srv := startSigV4(t)
	type jsCase struct {
		Method          string              `json:"method"`
		Hostname        string              `json:"hostname"`
		Path            string              `json:"path"`
		Query           map[string][]string `json:"query"`
		Headers         map[string]string   `json:"headers"`
		Body            string              `json:"body,omitempty"`
		Service         string              `json:"service"`
		Region          string              `json:"region"`
		Date            string              `json:"date"`
		AccessKeyID     string              `json:"accessKeyId"`
		SecretAccessKey string              `json:"secretAccessKey"`
		SessionToken    string              `json:"sessionToken,omitempty"`
	}
	var (
		goReqs []*http.Request
		js     []jsCase
		names  []string
		tokens []bool
	)
	for _, c := range v4Cases {
		for _, withToken := range []bool{false, true} {
			id, token := v4KeyID, ""
			if withToken {
				id, token = v4TempID, v4Token
			}
			req, added := signGo(t, c, c.service, "eu-west-1", id, v4Secret, token, c.body)
			if !v4Contains(added, v4Secret) || (withToken && !v4Contains(added, v4Token)) {
				t.Errorf("%s: the secret key or token was not given to the redactor", c.name)
			}
			// What goes on the wire, less what the signer sets.
			h := map[string]string{"host": req.URL.Host}
			if len(c.body) > 0 {
				h["content-length"] = fmt.Sprint(len(c.body))
			}
			for k, v := range c.header {
				h[strings.ToLower(k)] = v
			}
			jc := jsCase{Method: c.method, Hostname: req.URL.Hostname(), Path: req.URL.EscapedPath(), Query: req.URL.Query(), Headers: h,
				Service: c.service, Region: "eu-west-1", Date: req.Header.Get("X-Amz-Date"), AccessKeyID: id, SecretAccessKey: v4Secret, SessionToken: token}
			if c.body != nil {
				jc.Body = base64.StdEncoding.EncodeToString(c.body)
			}
			goReqs, js, names, tokens = append(goReqs, req), append(js, jc), append(names, c.name), append(tokens, withToken)
		}
	}
	in, _ := json.Marshal(js)
	resp, err := http.Post(srv.URL+"/__sign", "application/json", bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var signed []map[string]string
	if err := json.Unmarshal(out, &signed); err != nil || len(signed) != len(js) {
		t.Fatalf("sigv4.js /__sign answered %s: %.500s", resp.Status, out)
	}
	for i, req := range goReqs {
		got, want := req.Header.Get("Authorization"), signed[i]["authorization"]
		same := got == want
		for _, h := range []string{"x-amz-date", "x-amz-security-token", "x-amz-content-sha256"} {
			if req.Header.Get(h) != signed[i][h] {
				same = false
				t.Errorf("%s (token %v): %s: Go %q, JavaScript %q", names[i], tokens[i], h, req.Header.Get(h), signed[i][h])
			}
		}
		pin, pinned := v4Pins[names[i]]
		verdict := "✓ identical"
		switch {
		case same && pinned:
			t.Errorf("%s (token %v): the signers now agree; the pin (%s) is stale", names[i], tokens[i], pin)
			verdict = "✗ identical, pinned as different"
		case !same && pinned:
			verdict = "differs (pinned): " + pin
		case !same:
			t.Errorf("%s (token %v): Authorization differs:\n    Go %s\n    JS %s", names[i], tokens[i], got, want)
			verdict = "✗ differs"
		}
		tok := map[bool]string{false: "no", true: "yes"}[tokens[i]]
		sigv4Row(&sigv4Results.rows, fmt.Sprintf("| %s %s (%s) | %s | %s | `%s` |", req.Method, req.URL.EscapedPath(), names[i], tok, verdict, signedHeadersOf(got)))
	}
}

func signedHeadersOf(auth string) string {
	_, rest, _ := strings.Cut(auth, "SignedHeaders=")
	h, _, _ := strings.Cut(rest, ",")
	return h
}

func v4Contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// v4Call is one request to a server that checks signatures.
type v4Call struct {
	server, name               string
	method, path               string
	service, id, secret, token string
	body                       []byte
	header                     map[string]string   // sent besides Content-Type and Idempotency-Key
	tamper                     func(*http.Request) // after signing
	wantStatus                 int
	wantCode                   string // the S3 error code, if any
	pinned                     string // a known weakness of the server
}

func TestSigV4AgainstVerifyingServers(t *testing.T) {
	srv := startSigV4(t)
	body := []byte(`{"amount":100,"currency":"EUR"}` + "\n")
	calls := []v4Call{
		{server: "s3rver", name: "PUT object", method: "PUT", path: "/interop/pay/1.json", service: "s3", id: s3rverKey, secret: s3rverKey, body: body, wantStatus: 200},
		{server: "s3rver", name: "GET it back (same bytes)", method: "GET", path: "/interop/pay/1.json", service: "s3", id: s3rverKey, secret: s3rverKey, wantStatus: 200},
		{server: "s3rver", name: "PUT with a session token", method: "PUT", path: "/interop/pay/2.json", service: "s3", id: s3rverKey, secret: s3rverKey, token: v4Token, body: body, wantStatus: 200, pinned: "s3rver ignores X-Amz-Security-Token"},
		{server: "s3rver", name: "unknown access key ID", method: "GET", path: "/interop/pay/1.json", service: "s3", id: "AKIDUNKNOWN", secret: s3rverKey, wantStatus: 403, wantCode: "InvalidAccessKeyId"},
		{server: "s3rver", name: "wrong secret", method: "GET", path: "/interop/pay/1.json", service: "s3", id: s3rverKey, secret: "not-the-secret-key", wantStatus: 200, pinned: "s3rver 3.7.1 does not verify Signature V4 (\"Signature version 4 calculation is unimplemented\"): it accepts any signature from a known key ID; AWS answers 403 SignatureDoesNotMatch"},
		{server: "verifier", name: "POST JSON", method: "POST", path: "/verify/prod/payments?z=1&a=b%20c", service: "execute-api", id: v4KeyID, secret: v4Secret, body: body, wantStatus: 200},
		{server: "verifier", name: "GET, no body", method: "GET", path: "/verify/prod/payments/1", service: "execute-api", id: v4KeyID, secret: v4Secret, wantStatus: 200},
		{server: "verifier", name: "S3-style PUT (X-Amz-Content-Sha256)", method: "PUT", path: "/verify/bucket/a%20b.json", service: "s3", id: v4KeyID, secret: v4Secret, body: body, wantStatus: 200},
		{server: "verifier", name: "POST with a session token", method: "POST", path: "/verify/prod/payments", service: "execute-api", id: v4TempID, secret: v4Secret, token: v4Token, body: body, wantStatus: 200},
		{server: "verifier", name: "Cache-Control signed (the JavaScript signer would not)", method: "GET", path: "/verify/prod/payments", service: "execute-api", id: v4KeyID, secret: v4Secret,
			wantStatus: 200, header: map[string]string{"Cache-Control": "no-cache", "Pragma": "no-cache"}},
		{server: "verifier", name: "wrong secret", method: "POST", path: "/verify/prod/payments", service: "execute-api", id: v4KeyID, secret: "not-the-secret-key", body: body, wantStatus: 403, wantCode: "SignatureDoesNotMatch"},
		{server: "verifier", name: "session key without its token", method: "POST", path: "/verify/prod/payments", service: "execute-api", id: v4TempID, secret: v4Secret, body: body, wantStatus: 403, wantCode: "InvalidToken"},
		{server: "verifier", name: "body changed after signing (newline dropped)", method: "POST", path: "/verify/prod/payments", service: "execute-api", id: v4KeyID, secret: v4Secret, body: body,
			tamper: func(r *http.Request) {
				b := bytes.TrimSuffix(body, []byte("\n"))
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			}, wantStatus: 403, wantCode: "SignatureDoesNotMatch"},
		{server: "verifier", name: "signed header changed after signing", method: "POST", path: "/verify/prod/payments", service: "execute-api", id: v4KeyID, secret: v4Secret, body: body,
			tamper: func(r *http.Request) { r.Header.Set("Idempotency-Key", "another-key") }, wantStatus: 403, wantCode: "SignatureDoesNotMatch"},
	}
	hc := &http.Client{}
	for _, c := range calls {
		u, err := url.Parse(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		vc := v4Case{method: c.method, url: u.String(), header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": "9f8e7d6c-interop"}}
		for k, v := range c.header {
			vc.header[k] = v
		}
		req, _ := signGo(t, vc, c.service, "us-east-1", c.id, c.secret, c.token, c.body)
		if c.tamper != nil {
			c.tamper(req)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.server, c.name, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code := ""
		if resp.StatusCode >= 300 {
			_, rest, _ := strings.Cut(string(got), "<Code>")
			code, _, _ = strings.Cut(rest, "</Code>")
		}
		ok := resp.StatusCode == c.wantStatus && code == c.wantCode
		if c.method == "GET" && c.server == "s3rver" && c.wantStatus == 200 && !bytes.Equal(got, body) {
			ok = false
			t.Errorf("%s %s: got back %q, want the bytes put %q", c.server, c.name, got, body)
		}
		if !ok {
			t.Errorf("%s %s: %s %s, want %d %s: %.300s", c.server, c.name, resp.Status, code, c.wantStatus, c.wantCode, got)
		}
		mark := map[bool]string{true: "✓", false: "✗"}[ok]
		want := strings.TrimSpace(fmt.Sprintf("%d %s", c.wantStatus, c.wantCode))
		gotS := strings.TrimSpace(fmt.Sprintf("%d %s", resp.StatusCode, code))
		sigv4Row(&sigv4Results.srv, fmt.Sprintf("| %s | %s %s (%s) | %s | %s %s | %s |", c.server, c.method, strings.SplitN(c.path, "?", 2)[0], c.name, want, mark, gotS, c.pinned))
	}
}
