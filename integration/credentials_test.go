package integration_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestCredentialsWorkerOrigins runs one worker binary with an origins file
// giving four reference servers four credential schemes: OAuth 2.0 client
// credentials (tokens of its own token endpoint, 3 s long), mutual TLS
// (client certificates of a CA made here), AWS Signature V4 (keys and
// session token from the environment, verified by the server) and a static
// API key in a header file, rotated mid-run by rewriting the file (no
// signal): once the server has seen the new key it refuses the old one,
// and the calls after it all succeed. Every server echoes the credential
// headers it got in its answers. Every call succeeds with one record per
// key. Then the OAuth client is revoked: the next call fails with
// CredentialUnavailable, final, after one token request. No 8-byte piece
// of any secret (the client secret, every token issued, both API keys,
// the AWS secret key and session token, the client private key) is in any
// workflow's history, the worker's log or the spans it exported.
func TestCredentialsWorkerOrigins(t *testing.T) {
	t.Parallel()
	const perOrigin = 12 // calls per origin before the rotation; the static origin gets as many after it
	dir := t.TempDir()
	ctx := ctxT(t, 8*time.Minute)
	var secrets secretSet

	// OAuth 2.0: the token endpoint is the server's own; every token it
	// issues is tapped to be searched for.
	clientSecret := "cs_" + randomB64(24)
	secrets.add("OAuth client secret", clientSecret)
	oauth := &tokenTap{h: testsuite.NewServer(testsuite.Options{
		OAuthClients: map[string]string{"e2e-client": clientSecret}, OAuthTokenLifetime: 3 * time.Second, Work: echoWork,
	})}
	oauthURL := serve(t, oauth)

	// Mutual TLS with a CA made here.
	pki := newTestPKI(t, dir)
	secrets.add("client private key (PEM body)", pki.keyBody)
	secrets.add("client private key (PEM body, one line)", strings.ReplaceAll(pki.keyBody, "\n", ""))
	mtls := testsuite.StartServer(t, testsuite.Options{TLSCertificate: &pki.server, ClientCAs: pki.pool, Work: echoWork})

	// AWS Signature V4, keys in the worker's environment.
	awsCreds := aws.Credentials{AccessKeyID: "AKIAE2E" + strings.ToUpper(randomHex(6)), SecretAccessKey: randomB64(30), SessionToken: "IQoJb3JpZ2luX2VjE" + randomB64(90)}
	secrets.add("AWS secret access key", awsCreds.SecretAccessKey)
	secrets.add("AWS session token", awsCreds.SessionToken)
	sigv4 := testsuite.StartServer(t, testsuite.Options{
		SigV4Credentials: &awsCreds, SigV4Service: "execute-api", SigV4Region: "eu-west-1", Work: echoWork,
	})

	// A static API key in a file, rotated below.
	oldKey, newKey := "sk_live_"+randomB64(24), "sk_live_"+randomB64(24)
	secrets.add("old API key", oldKey)
	secrets.add("new API key", newKey)
	keyFile := filepath.Join(dir, "stripe-key")
	writeSecretFile(t, keyFile, "Bearer "+oldKey+"\n")
	gate := &keyGate{h: testsuite.NewServer(testsuite.Options{Work: echoWork}), accept: map[string]bool{"Bearer " + oldKey: true}, counts: map[string]int{}}
	staticURL := serve(t, gate)

	originsFile := filepath.Join(dir, "origins.toml")
	writeSecretFile(t, originsFile, fmt.Sprintf(`# Four origins, four schemes; no secret written here.
# retry_refused = "0s": a refused client fails the call at once (the
# default asks again for 5 minutes while an operator fixes the file).
[origin.%[1]q]
retry_refused = "0s"
[origin.%[1]q.oauth2]
token_url = "%[1]s/oauth/token"
client_id = "e2e-client"
client_secret_env = "E2E_OAUTH_CLIENT_SECRET"
auth_style = "params"

[origin.%[2]q.tls]
cert_file = %[3]q
key_file = %[4]q
ca_file = %[5]q

[origin.%[6]q.aws_sigv4]
service = "execute-api"
region = "eu-west-1"

[origin.%[7]q.headers]
Authorization = { file = %[8]q }
`, oauthURL, mtls.URL, pki.certFile, pki.keyFile, pki.caFile, sigv4.URL, staticURL, keyFile))

	recv := startOTLPReceiver(t)
	tq := uniqueName(t, "tq")
	env := []string{
		"E2E_OAUTH_CLIENT_SECRET=" + clientSecret,
		"AWS_ACCESS_KEY_ID=" + awsCreds.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + awsCreds.SecretAccessKey, "AWS_SESSION_TOKEN=" + awsCreds.SessionToken,
		"AWS_PROFILE=", "AWS_DEFAULT_PROFILE=", "AWS_REGION=", "AWS_DEFAULT_REGION=", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "no-aws-credentials"),
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_TRACES_EXPORTER=", "OTEL_SDK_DISABLED=", "OTEL_SERVICE_NAME=", "OTEL_RESOURCE_ATTRIBUTES=",
		"LOG_LEVEL=debug",
	}
	wp := startWorkerWith(t, workerOptions{TaskQueue: tq}, env, "--origins", originsFile)

	var runs runList
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\nworker:\n%s", append(args, wp.Tail(16<<10))...)
	}

	// Round 1: every origin at once, 4 calls at a time per origin.
	if err := runs.callMany(ctx, tq, map[string]int{oauthURL: perOrigin / 2, mtls.URL: perOrigin, sigv4.URL: perOrigin, staticURL: perOrigin}, 4); err != nil {
		fail("round 1: %v", err)
	}
	// Round 2 of the OAuth origin after its first token expired: the
	// worker must fetch another (not a timing assertion: the test waits
	// for the expiry, then counts fetches).
	firstTokenAt := oauth.firstIssued()
	if firstTokenAt.IsZero() {
		fail("the OAuth origin's server issued no token in round 1")
	}
	select {
	case <-time.After(time.Until(firstTokenAt.Add(3*time.Second + 500*time.Millisecond))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if err := runs.callMany(ctx, tq, map[string]int{oauthURL: perOrigin - perOrigin/2}, 3); err != nil {
		fail("round 2 (OAuth after its first token expired): %v", err)
	}

	// The rotation: the file is rewritten in place, no signal. The server
	// accepts both keys until it sees the new one, then only the new one.
	gate.allow("Bearer " + newKey)
	writeSecretFile(t, keyFile, "Bearer "+newKey+"\n")
	// One call at a time until a request carries the new key (the file is
	// checked at most once a second); each must succeed.
	for probes := 1; gate.count("Bearer "+newKey) == 0; probes++ {
		if err := runs.callMany(ctx, tq, map[string]int{staticURL: 1}, 1); err != nil {
			fail("call %d while the key file is rotated: %v", probes, err)
		}
		if ctx.Err() != nil {
			fail("no request carried the new key after %d calls: %v", probes, ctx.Err())
		}
	}
	gate.refuse("Bearer " + oldKey)
	if err := runs.callMany(ctx, tq, map[string]int{staticURL: perOrigin}, 4); err != nil {
		fail("after the rotation (the server refuses the old key): %v", err)
	}

	// The OAuth client revoked: its token is refused (401 invalid_token),
	// the new token it asks for too (401 invalid_client): the call fails
	// with the credential error, without a retry storm.
	oauthSrv := oauth.h.(*testsuite.Server)
	before := oauthSrv.Stats()
	oauthSrv.RevokeClient("e2e-client")
	err := runs.call(ctx, tq, oauthURL)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != workflows.ErrTypeCredentialUnavailable {
		fail("a call after the OAuth client was revoked: %v; want a %s", err, workflows.ErrTypeCredentialUnavailable)
	}
	if msg := appErr.Error(); !strings.Contains(msg, "invalid_client") || strings.Contains(msg, "REDACTED") {
		t.Errorf("the revoked client's error %q: want the token endpoint's invalid_client, nothing redacted", msg)
	}
	after := oauthSrv.Stats()
	if n := after.TokenRequests - before.TokenRequests; n < 1 || n > 5 {
		t.Errorf("%d token requests after the revocation; want 1 to 5 (one per attempt at most)", n)
	}
	t.Logf("after the revocation: %v; %d token requests, %d API requests", err,
		after.TokenRequests-before.TokenRequests, after.Requests-before.Requests)

	// One record per key at each server, every successful call's.
	for _, o := range []struct {
		name   string
		origin string
		stats  testsuite.Stats
		recs   []testsuite.Record
	}{
		{"OAuth", oauthURL, oauth.h.(*testsuite.Server).Stats(), oauth.h.(*testsuite.Server).Records()},
		{"mTLS", mtls.URL, mtls.Stats(), mtls.Records()},
		{"SigV4", sigv4.URL, sigv4.Stats(), sigv4.Records()},
		{"static key", staticURL, gate.h.(*testsuite.Server).Stats(), gate.h.(*testsuite.Server).Records()},
	} {
		want := runs.keys(o.origin)
		got := map[string]int{}
		for _, r := range o.recs {
			got[r.IdempotencyKey]++
		}
		for k := range want {
			if got[k] != 1 {
				t.Errorf("%s: %d records for key %s; want 1", o.name, got[k], k)
			}
		}
		if len(o.recs) != len(want) || o.stats.Failures != 0 || o.stats.Mismatches != 0 {
			t.Errorf("%s: %d records for %d calls, stats %+v; want one per call", o.name, len(o.recs), len(want), o.stats)
		}
		if o.name != "OAuth" && o.stats.Unauthorized != 0 {
			// A token may reach the server just after its expiry, then is
			// refreshed once: only the OAuth origin may see refusals.
			t.Errorf("%s: %d requests refused for want of the credential", o.name, o.stats.Unauthorized)
		}
	}
	oauthStats := oauth.h.(*testsuite.Server).Stats()
	tokens := oauth.issued()
	if len(tokens) < 2 {
		t.Errorf("the OAuth server issued %d tokens; want at least 2 (one expired before round 2)", len(tokens))
	}
	for _, tok := range tokens {
		secrets.add("an issued OAuth token", tok)
	}
	if n := gate.count("Bearer " + oldKey); n < perOrigin {
		t.Errorf("the static origin got %d requests with the old key; want at least %d (before the rotation)", n, perOrigin)
	}
	if late := gate.oldAfterNew("Bearer "+oldKey, "Bearer "+newKey); late != 0 {
		t.Errorf("%d requests carried the old key after one had carried the new key", late)
	}
	if n := gate.count("Bearer " + newKey); n < perOrigin+1 {
		t.Errorf("the static origin got %d requests with the new key; want at least %d", n, perOrigin+1)
	}
	if n := gate.refusals(); n != 0 {
		t.Errorf("the static origin refused %d requests", n)
	}

	// Every history of the run, with every payload decoded.
	var hist bytes.Buffer
	for _, r := range runs.all() {
		hist.Write(dump(t, messages(history(t, ctx, r.workflowID, r.runID))...))
	}
	// The echoes made it into the results, redacted: the search below is
	// of text that held the secrets.
	for _, echo := range []string{"authorized with Bearer [REDACTED]", "(session [REDACTED])", "Credential=" + awsCreds.AccessKeyID + "/"} {
		if !bytes.Contains(hist.Bytes(), []byte(echo)) {
			t.Errorf("the histories do not hold %q, an echoed credential: the search below proves less", echo)
		}
	}

	// The spans: the worker exports them every 100 ms; wait for the HTTP
	// client spans of every attempt, then stop the worker (which flushes).
	n := len(runs.all())
	err = itest.Eventually(ctx, 200*time.Millisecond, func() error {
		var posts int
		for _, r := range recv.received() {
			if r.span.GetName() == "POST" {
				posts++
			}
		}
		if posts < n {
			return fmt.Errorf("%d HTTP client spans received for %d calls", posts, n)
		}
		return nil
	})
	if err != nil {
		fail("spans: %v", err)
	}
	if err := wp.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	var spans bytes.Buffer
	for _, r := range recv.received() {
		b, err := protojson.Marshal(r.span)
		if err != nil {
			t.Fatal(err)
		}
		spans.Write(b)
		spans.WriteByte('\n')
		for _, kv := range r.span.GetAttributes() {
			spans.WriteString(kv.GetValue().GetStringValue())
			spans.WriteByte('\n')
		}
		for _, ev := range r.span.GetEvents() {
			for _, kv := range ev.GetAttributes() {
				spans.WriteString(kv.GetValue().GetStringValue())
				spans.WriteByte('\n')
			}
		}
	}
	logs := wp.Output()
	if len(logRecords(logs, "worker starting")) != 1 {
		t.Errorf("the worker's log has no start line: the search below proves nothing:\n%s", logs)
	}

	for _, s := range secrets.all() {
		checkNoSecret(t, "the workflows' histories ("+s.what+")", hist.Bytes(), s.value)
		checkNoSecret(t, "the worker's log ("+s.what+")", []byte(logs), s.value)
		checkNoSecret(t, "the worker's spans ("+s.what+")", spans.Bytes(), s.value)
	}
	t.Logf("%d calls (%d per origin, %d more with the rotated key); %d OAuth tokens issued in %d token requests, %d bearer refusals; "+
		"searched %d secrets in %d KiB of history, %d KiB of log, %d spans",
		n, perOrigin, gate.count("Bearer "+newKey), len(tokens), oauthStats.TokenRequests, oauthStats.Unauthorized,
		len(secrets.all()), hist.Len()>>10, len(logs)>>10, len(recv.received()))
}

// echoWork answers a new key 201 with the credential headers the request
// carried, as a careless API might echo them.
func echoWork(r *http.Request, _ []byte) (int, []byte) {
	b, _ := json.Marshal(map[string]any{"status": "succeeded", "echo": "authorized with " + r.Header.Get("Authorization") +
		" (session " + r.Header.Get("X-Amz-Security-Token") + ")"})
	return http.StatusCreated, b
}

// serve serves h on a loopback HTTP server until the test ends, and
// returns its URL.
func serve(t testing.TB, h http.Handler) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	if c, ok := h.(interface{ close() }); ok {
		t.Cleanup(c.close)
	}
	return s.URL
}

// writeSecretFile writes content to path, readable by its owner only.
func writeSecretFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// randomB64 returns n random bytes in unpadded base64url.
func randomB64(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// secretSet is what must not leak, each with a name for the error.
type secretSet struct {
	mu sync.Mutex
	s  []namedSecret
}

type namedSecret struct{ what, value string }

func (s *secretSet) add(what, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.s = append(s.s, namedSecret{what, value})
}

func (s *secretSet) all() []namedSecret {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]namedSecret(nil), s.s...)
}

// tokenTap passes requests to a reference server and keeps every access
// token its token endpoint issues, and when the first was.
type tokenTap struct {
	h      http.Handler
	mu     sync.Mutex
	tokens []string
	first  time.Time
}

func (tt *tokenTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/oauth/token" {
		tt.h.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	tt.h.ServeHTTP(rec, r)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if json.Unmarshal(rec.Body.Bytes(), &tok) == nil && tok.AccessToken != "" {
		tt.mu.Lock()
		tt.tokens = append(tt.tokens, tok.AccessToken)
		if tt.first.IsZero() {
			tt.first = time.Now()
		}
		tt.mu.Unlock()
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (tt *tokenTap) close() { tt.h.(*testsuite.Server).Close() }

func (tt *tokenTap) issued() []string {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return append([]string(nil), tt.tokens...)
}

func (tt *tokenTap) firstIssued() time.Time {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.first
}

// keyGate passes to a reference server the requests whose Authorization
// is accepted, answers the others 401, and keeps the Authorization of
// every request in order.
type keyGate struct {
	h       http.Handler
	mu      sync.Mutex
	accept  map[string]bool
	counts  map[string]int
	order   []string
	refused int
}

func (g *keyGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/stats" || r.URL.Path == "/healthz" {
		g.h.ServeHTTP(w, r)
		return
	}
	auth := r.Header.Get("Authorization")
	g.mu.Lock()
	g.counts[auth]++
	g.order = append(g.order, auth)
	ok := g.accept[auth]
	if !ok {
		g.refused++
	}
	g.mu.Unlock()
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_api_key"}`))
		return
	}
	g.h.ServeHTTP(w, r)
}

func (g *keyGate) close() { g.h.(*testsuite.Server).Close() }

func (g *keyGate) allow(auth string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.accept[auth] = true
}

func (g *keyGate) refuse(auth string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.accept, auth)
}

func (g *keyGate) count(auth string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.counts[auth]
}

func (g *keyGate) refusals() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused
}

// oldAfterNew counts the requests with old after the first with cur.
func (g *keyGate) oldAfterNew(old, cur string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	seenNew, n := false, 0
	for _, a := range g.order {
		switch {
		case a == cur:
			seenNew = true
		case a == old && seenNew:
			n++
		}
	}
	return n
}

// testPKI is a CA, a server certificate for 127.0.0.1 it signed, and a
// client certificate and key it signed, written to files.
type testPKI struct {
	pool                      *x509.CertPool
	server                    tls.Certificate
	certFile, keyFile, caFile string
	keyBody                   string // the base64 lines of the client key's PEM
}

func newTestPKI(t testing.TB, dir string) testPKI {
	t.Helper()
	caKey := newKey(t)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "idemhttp e2e test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	srvDER, srvKey := issue(2, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	cliDER, cliKey := issue(3, "e2e-client", x509.ExtKeyUsageClientAuth)
	p := testPKI{pool: x509.NewCertPool(), server: tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}}
	p.pool.AddCert(ca)
	p.certFile, p.keyFile, p.caFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), filepath.Join(dir, "ca.pem")
	pkcs8, err := x509.MarshalPKCS8PrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	writeSecretFile(t, p.certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cliDER})))
	writeSecretFile(t, p.keyFile, string(keyPEM))
	writeSecretFile(t, p.caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	lines := strings.Split(strings.TrimSpace(string(keyPEM)), "\n")
	p.keyBody = strings.Join(lines[1:len(lines)-1], "\n")
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// runList is every workflow a test started, by the origin it called.
type runList struct {
	mu   sync.Mutex
	runs []startedRun
}

type startedRun struct {
	origin, workflowID, runID string
	failed                    bool
}

func (l *runList) all() []startedRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]startedRun(nil), l.runs...)
}

// keys returns the idempotency keys of the calls to origin.
func (l *runList) keys(origin string) map[string]bool {
	keys := map[string]bool{}
	for _, r := range l.all() {
		if r.origin == origin && !r.failed {
			keys[keyOf(r.workflowID, "charge")] = true
		}
	}
	return keys
}

// callMany runs the ready workflow calls[origin] times for each origin,
// at most par at a time per origin, each with its own workflow ID, and
// returns the first failure.
func (l *runList) callMany(ctx context.Context, taskQueue string, calls map[string]int, par int) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for origin, n := range calls {
		sem := make(chan struct{}, par)
		for range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if err := l.call(ctx, taskQueue, origin); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// call runs the ready workflow once to its end, a charge at origin.
func (l *runList) call(ctx context.Context, taskQueue, origin string) error {
	wid := "TestCredentialsWorkerOrigins-charge-" + randomHex(6)
	req := workflows.Request{Operation: "charge", URL: origin + "/payments", Body: body}
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: wid, TaskQueue: taskQueue, WorkflowExecutionTimeout: 5 * time.Minute,
		StaticSummary: input.Summary("POST", req.URL, req.Operation),
	}, workflows.WorkflowName, req)
	if err != nil {
		return fmt.Errorf("starting %s: %w", wid, err)
	}
	l.mu.Lock()
	l.runs = append(l.runs, startedRun{origin: origin, workflowID: wid, runID: run.GetRunID()})
	l.mu.Unlock()
	var resp workflows.Response
	if err := run.Get(ctx, &resp); err != nil {
		l.mu.Lock()
		for i := range l.runs {
			if l.runs[i].workflowID == wid {
				l.runs[i].failed = true
			}
		}
		l.mu.Unlock()
		return fmt.Errorf("%s (%s): %w", wid, origin, err)
	}
	if resp.Status != http.StatusCreated {
		return fmt.Errorf("%s (%s): status %d, want 201", wid, origin, resp.Status)
	}
	return nil
}
