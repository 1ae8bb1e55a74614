package integration_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/examples/payment"
	"github.com/idemhttp/temporal-idempotent-http/harness/interop"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestOwnWorker runs the README's worker of your own
// (examples/ownworker: package host's settings and wiring and the
// payment.Charge workflow, on a worker its main creates) as two
// processes of one task queue, with an origins file naming three
// payments APIs that each check their credential, and a webhook
// provider:
//
//   - OAuth 2.0 client credentials: the token endpoint is oidc-provider
//     (interop/node/oauth-server.js, from the interop set); the API in
//     front of the reference server checks every bearer token by the
//     provider's introspection endpoint (RFC 7662), as the API's own
//     client, and answers 401 invalid_token to any other;
//   - mutual TLS: the reference server requires a client certificate of
//     a CA made here (tls.cert_file, key_file, ca_file);
//   - a static key (headers.Authorization from an environment variable,
//     with the prefix "Bearer "), checked in front of the reference
//     server, which also takes only 2 requests a second and answers 429
//     beyond;
//   - the webhook provider (the same static key): the reference server
//     whose operations report their end by Standard Webhooks to the
//     receiver of one process (--webhook-addr, WEBHOOK_SECRETS), with a
//     forged copy of each event.
//
// It proves the "done when": each API refuses a request without
// its credential; 8 payments to each of the three APIs each return a
// Receipt whose PaymentID is the API's one record for the workflow's
// key (no duplicate charge), every HTTP activity ran on its origin's
// own task queue, and both processes completed some; the shared rate is
// in force: the throttling API's queue has a rate limit written by the
// governor, as `temporal task-queue config get` shows it; the receiver
// took the signed webhook, which ended the awaiting workflow, and
// refused the forged copy; and run() in examples/ownworker/main.go is
// at most 20 lines (the issue asks for about 15).
func TestOwnWorker(t *testing.T) {
	t.Parallel()
	const (
		perOrigin = 8 // payments per credential origin
		capacity  = 2 // requests a second the static-key API takes
	)
	began := time.Now()
	ctx := ctxT(t, 3*time.Minute)
	dir := t.TempDir()

	// The program under test, and the size of its run().
	if err := itest.BuildCommands(ctx, dir, "./examples/ownworker"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "ownworker")
	if n := runLines(t); n > 20 {
		t.Errorf("run() in examples/ownworker/main.go has %d lines; want at most 20 (the issue asks for about 15)", n)
	} else {
		t.Logf("run() in examples/ownworker/main.go: %d lines", n)
	}

	// OAuth 2.0: oidc-provider issues the worker's tokens; the API asks
	// it about each one.
	clientSecret, apiSecret := "cs_"+randomB64(24), "api_"+randomB64(24)
	provider := interop.Start(t, "oauth-server", interop.Options{Env: []string{
		"TOKEN_TTL=300", "CLIENT_SECRET=" + clientSecret, "API_SECRET=" + apiSecret,
	}})
	oauth := &introspectGate{h: testsuite.NewServer(testsuite.Options{}), issuer: provider.URL, apiSecret: apiSecret}
	oauthURL := serve(t, oauth)

	// Mutual TLS with a CA made here.
	pki := newTestPKI(t, dir)
	mtls := testsuite.StartServer(t, testsuite.Options{TLSCertificate: &pki.server, ClientCAs: pki.pool})

	// The static key, and an API that takes capacity requests a second:
	// its throttles are what the governor learns the shared rate from.
	payKey := "sk_live_" + randomB64(24)
	static := &keyGate{h: testsuite.NewServer(testsuite.Options{Capacity: capacity}), accept: map[string]bool{"Bearer " + payKey: true}, counts: map[string]int{}}
	staticURL := serve(t, static)

	// The webhook provider, signing for the receiver of process a.
	hookPort, err := itest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	hookSecretValue := hookSecret("standard-webhooks")
	hookSrv := testsuite.NewServer(testsuite.Options{Webhooks: &testsuite.Webhooks{
		URL: "http://" + itest.HostPort(hookPort) + "/webhooks", Scheme: "standard-webhooks",
		Secret: hookSecretValue, Duration: time.Second, Forged: 1, RetryFor: time.Minute,
	}})
	hooks := &keyGate{h: hookSrv, accept: map[string]bool{"Bearer " + payKey: true}, counts: map[string]int{}}
	hookSrv.URL = serve(t, hooks)

	// Each API refuses a request without its credential: what the
	// payments below prove is that the worker sent it.
	noCert := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}}}
	for _, p := range []struct {
		name, url, auth string
		hc              *http.Client
	}{
		{"OAuth 2.0, a token not the provider's", oauthURL, "Bearer at_" + randomB64(24), http.DefaultClient},
		{"mTLS, no client certificate", mtls.URL, "", noCert},
		{"static key, another key", staticURL, "Bearer sk_live_" + randomB64(24), http.DefaultClient},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/payments", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", randomHex(16))
		if p.auth != "" {
			req.Header.Set("Authorization", p.auth)
		}
		resp, err := p.hc.Do(req)
		switch {
		case err != nil && p.hc == noCert && strings.Contains(err.Error(), "certificate required"):
			// The server refused the handshake.
		case err != nil:
			t.Errorf("%s: %v; want a refusal by the API", p.name, err)
		default:
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: answered %s; want 401 or 403", p.name, resp.Status)
			}
		}
	}

	originsFile := filepath.Join(dir, "origins.toml")
	writeSecretFile(t, originsFile, fmt.Sprintf(`# The payments APIs of TestOwnWorker; no secret written here.
[origin.%[1]q.oauth2]
token_url = "%[2]s/token"
client_id = "payments-worker"
client_secret_env = "OWN_OAUTH_CLIENT_SECRET"
auth_style = "header"

[origin.%[3]q.tls]
cert_file = %[4]q
key_file = %[5]q
ca_file = %[6]q

[origin.%[7]q.headers]
Authorization = { env = "OWN_PAY_KEY", prefix = "Bearer " }

[origin.%[8]q.headers]
Authorization = { env = "OWN_PAY_KEY", prefix = "Bearer " }
`, oauthURL, provider.URL, mtls.URL, pki.certFile, pki.keyFile, pki.caFile, staticURL, hookSrv.URL))

	// Two processes of one task queue, the shared rate on by default;
	// a serves the webhook receiver.
	tq := uniqueName(t, "tq")
	env := slices.Concat(dev.Env(), []string{
		"OWN_OAUTH_CLIENT_SECRET=" + clientSecret, "OWN_PAY_KEY=" + payKey,
		"API_TOKEN=", "API_TOKEN_ORIGIN=", "ALLOW_ORIGINS=", "CONVENTIONS=", "ORIGINS_FILE=", "TASK_QUEUE=", "METRICS_ADDR=",
		"SHARED_RATE=", "WEBHOOK_ADDR=", "WEBHOOK_SECRETS=", "WEBHOOK_SCHEME=", "CALLBACK_BASE_URL=", "CALLBACK_SECRETS=", "WORKER_IDENTITY=",
	})
	type process struct {
		id string
		p  *itest.Process
	}
	var procs []process
	for _, w := range []struct {
		name    string
		webhook bool
	}{{"a", true}, {"b", false}} {
		id := uniqueName(t, "worker-"+w.name)
		args, penv := []string{"--origins", originsFile, "--task-queue", tq, "--identity", id}, env
		if w.webhook {
			args = append(args, "--webhook-addr", itest.HostPort(hookPort))
			penv = append(slices.Clone(env), "WEBHOOK_SECRETS="+hookSecretValue)
		}
		p := itest.StartT(t, itest.Spec{Name: "ownworker " + w.name, Path: bin, Env: penv, Args: args})
		procs = append(procs, process{id, p})
	}
	tails := func() string {
		var b strings.Builder
		for _, pr := range procs {
			fmt.Fprintf(&b, "\n%s %s:\n%s", pr.p.Name, pr.p.State(), pr.p.Tail(8<<10))
		}
		return b.String()
	}
	for _, pr := range procs {
		if err := itest.WaitForPollers(ctxT(t, 60*time.Second), tc, tq, pr.id); err != nil {
			t.Fatalf("%v%s", err, tails())
		}
		starts := logRecords(pr.p.Output(), "worker starting")
		if len(starts) != 1 || starts[0]["shared_rate"] != true {
			t.Errorf("%s: start lines %v; want one with shared_rate true", pr.p.Name, starts)
		}
	}
	t.Logf("both processes poll %s after %s", tq, time.Since(began).Round(100*time.Millisecond))

	// The webhook's workflow first: its operation takes a second, while
	// the payments run.
	hook := &hookCall{wid: uniqueName(t, "hooked"), srv: hookSrv}
	startHookCalls(t, ctx, tq, []*hookCall{hook}, hookOptions(nil))

	// The payments: perOrigin to each API, all at once.
	type charge struct {
		origin  string
		wid     string
		receipt payment.Receipt
		err     error
	}
	apis := []struct {
		name, url string
		srv       *testsuite.Server
	}{
		{"OAuth 2.0", oauthURL, oauth.h},
		{"mTLS", mtls.URL, mtls},
		{"static key", staticURL, static.h.(*testsuite.Server)},
	}
	var charges []*charge
	for _, api := range apis {
		for i := range perOrigin {
			charges = append(charges, &charge{origin: api.url, wid: uniqueName(t, fmt.Sprintf("order-%d", i))})
		}
	}
	var wg sync.WaitGroup
	for i, c := range charges {
		wg.Go(func() {
			run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: c.wid, TaskQueue: tq, WorkflowExecutionTimeout: 2 * time.Minute},
				payment.Charge, payment.Order{ID: c.wid, Cents: 1000 + i, Card: "tok_visa", APIURL: c.origin})
			if err == nil {
				err = run.Get(ctx, &c.receipt)
			}
			c.err = err
		})
	}
	wg.Wait()
	for _, c := range charges {
		if c.err != nil {
			t.Fatalf("payment %s to %s: %v%s", c.wid, c.origin, c.err, tails())
		}
	}
	t.Logf("%d payments done after %s", len(charges), time.Since(began).Round(100*time.Millisecond))

	// One record per payment at each API, the receipt's PaymentID its ID.
	for _, api := range apis {
		ids := map[string][]string{} // key → record IDs
		for _, r := range api.srv.Records() {
			ids[r.IdempotencyKey] = append(ids[r.IdempotencyKey], r.ID)
		}
		n := 0
		for _, c := range charges {
			if c.origin != api.url {
				continue
			}
			n++
			got := ids[keyOf(c.wid, "charge")]
			if len(got) != 1 || c.receipt.PaymentID != got[0] || c.receipt.Declined {
				t.Errorf("%s: payment %s has records %v and receipt %+v; want one record, whose ID is the PaymentID", api.name, c.wid, got, c.receipt)
			}
		}
		if st := api.srv.Stats(); st.Records != n || st.Mismatches != 0 {
			t.Errorf("%s: %d records, %d mismatches for %d payments; want one record each (stats %+v)", api.name, st.Records, st.Mismatches, n, st)
		}
	}
	if ok := oauth.passed.Load(); ok < perOrigin {
		t.Errorf("the OAuth API let %d requests through with a token the provider says is active; want at least %d", ok, perOrigin)
	}
	if n := providerTokenRequests(t, provider.URL); n < 2 {
		t.Errorf("oidc-provider got %d token requests; want at least 2 (one per process, at its start)", n)
	}
	if n := static.refusals(); n != 1 {
		t.Errorf("the static-key API refused %d requests; want 1 (the probe with another key)", n)
	}
	if n := static.count("Bearer " + payKey); n < perOrigin {
		t.Errorf("the static-key API got %d requests with the key; want at least %d", n, perOrigin)
	}

	// Every HTTP activity ran on its origin's queue; both processes
	// completed some.
	completedBy := map[string]int{}
	var elsewhere []string // "workflow: queue" of an activity not on its origin's queue
	for _, c := range charges {
		oq, err := workflows.OriginTaskQueue(tq, c.origin)
		if err != nil {
			t.Fatal(err)
		}
		startedBy := map[int64]string{}
		for _, ev := range history(t, ctx, c.wid, "") {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetTaskQueue().GetName() != oq {
				elsewhere = append(elsewhere, c.wid+": "+a.GetTaskQueue().GetName())
			}
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
				startedBy[ev.GetEventId()] = a.GetIdentity()
			}
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
				completedBy[startedBy[a.GetStartedEventId()]]++
			}
		}
	}
	if len(elsewhere) > 0 {
		t.Errorf("%d of %d payments scheduled their activity on a queue other than their origin's (%s@ORIGIN): %v", len(elsewhere), len(charges), tq, elsewhere)
	}
	t.Logf("activities completed per process: %v", completedBy)
	for _, pr := range procs {
		if completedBy[pr.id] == 0 {
			t.Errorf("%s (%s) completed no payment's activity (per process: %v); want both to", pr.p.Name, pr.id, completedBy)
		}
	}

	// The shared rate in force: the static-key API throttled, and the
	// governor set its queue's rate limit, as the CLI shows it.
	if st := static.h.(*testsuite.Server).Stats(); st.Failures == 0 {
		t.Errorf("the static-key API answered no 429 (stats %+v): the governor had nothing to learn", st)
	}
	staticQueue, err := workflows.OriginTaskQueue(tq, staticURL)
	if err != nil {
		t.Fatal(err)
	}
	var cfg queueConfig
	err = itest.Eventually(ctxT(t, 30*time.Second), 500*time.Millisecond, func() error {
		cfg = taskQueueConfig(ctx, t, staticQueue)
		if m := cfg.QueueRateLimit.Metadata; m.UpdateIdentity != governor.Identity || cfg.QueueRateLimit.RateLimit.RequestsPerSecond <= 0 {
			return fmt.Errorf("queue rate limit %v/s set by %q", cfg.QueueRateLimit.RateLimit.RequestsPerSecond, m.UpdateIdentity)
		}
		return nil
	})
	if err != nil {
		t.Errorf("`temporal task-queue config get --task-queue %s --task-queue-type activity` shows no limit of the governor %q within 30 s: %v%s", staticQueue, governor.Identity, err, tails())
	} else if rps := cfg.QueueRateLimit.RateLimit.RequestsPerSecond; rps > 2*capacity {
		t.Errorf("the governor's limit is %v/s; want at most %d/s, twice the API's capacity", rps, 2*capacity)
	}
	t.Logf("temporal task-queue config get (%s): %v/s by %s (%q)", staticQueue, cfg.QueueRateLimit.RateLimit.RequestsPerSecond,
		cfg.QueueRateLimit.Metadata.UpdateIdentity, cfg.QueueRateLimit.Metadata.Reason)

	// The receiver took the signed webhook, which ended the workflow, and
	// refused the forged copy.
	waitHookCalls(ctx, []*hookCall{hook})
	checkHookOutcome(t, hook, workflows.SourceWebhook)
	waitDelivered(t, ctx, hookSrv)
	if st := hookSrv.Stats(); st.Records != 1 || st.WebhooksDelivered < 1 || st.WebhooksRejected != 1 {
		t.Errorf("webhook provider: %d records, %d deliveries answered 2xx, %d 4xx; want 1, at least 1 (the signed event), 1 (the forged copy) (stats %+v)",
			st.Records, st.WebhooksDelivered, st.WebhooksRejected, st)
	}
	t.Logf("TestOwnWorker took %s", time.Since(began).Round(100*time.Millisecond))
}

// runLines is the number of lines of run()'s body in
// examples/ownworker/main.go, between its braces.
func runLines(t *testing.T) int {
	t.Helper()
	root, err := itest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, "examples", "ownworker", "main.go"), nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "run" {
			return fset.Position(fn.Body.Rbrace).Line - fset.Position(fn.Body.Lbrace).Line - 1
		}
	}
	t.Fatal("examples/ownworker/main.go has no func run")
	return 0
}

// introspectGate passes to a reference server the requests whose bearer
// token oidc-provider (interop/node/oauth-server.js) says is active and
// was issued to the worker's client, asking its introspection endpoint
// (RFC 7662) as the API's own client (payments-api); it answers the
// others 401 invalid_token.
type introspectGate struct {
	h         *testsuite.Server
	issuer    string
	apiSecret string
	passed    atomic.Int64
}

func (g *introspectGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/stats" || r.URL.Path == "/healthz" {
		g.h.ServeHTTP(w, r)
		return
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !g.active(r.Context(), tok) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		http.Error(w, `{"error":"invalid_token"}`, http.StatusUnauthorized)
		return
	}
	g.passed.Add(1)
	g.h.ServeHTTP(w, r)
}

// active asks the provider whether tok is an active token of the
// worker's client.
func (g *introspectGate) active(ctx context.Context, tok string) bool {
	return interop.Introspect(ctx, http.DefaultClient, g.issuer, g.apiSecret, tok) == "payments-worker"
}

func (g *introspectGate) close() { g.h.Close() }

// providerTokenRequests is how many requests oidc-provider's token
// endpoint got (its harness's GET /__stats).
func providerTokenRequests(t *testing.T, issuer string) int {
	t.Helper()
	resp, err := http.Get(issuer + "/__stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		TokenRequests int `json:"token_requests"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("oidc-provider /__stats: %v", err)
	}
	return st.TokenRequests
}

// queueConfig is what `temporal task-queue config get --output json`
// prints of a queue's rate limit.
type queueConfig struct {
	QueueRateLimit struct {
		RateLimit struct {
			RequestsPerSecond float64 `json:"requestsPerSecond"`
		} `json:"rateLimit"`
		Metadata struct {
			Reason         string `json:"reason"`
			UpdateIdentity string `json:"updateIdentity"`
		} `json:"metadata"`
	} `json:"queueRateLimit"`
}

// taskQueueConfig runs the Temporal CLI's `task-queue config get` for the
// activity queue of taskQueue on the dev server; a queue without a config
// is the zero queueConfig (the CLI prints nothing).
func taskQueueConfig(ctx context.Context, t *testing.T, taskQueue string) queueConfig {
	t.Helper()
	cmd := exec.CommandContext(ctx, bins.Temporal, "task-queue", "config", "get", "--task-queue", taskQueue, "--task-queue-type", "activity",
		"--output", "json", "--address", dev.HostPort, "--namespace", dev.Namespace)
	cmd.Env = append(os.Environ(), dev.Env()...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("temporal task-queue config get: %v\n%s%s", err, stdout.Bytes(), stderr.Bytes())
	}
	var cfg queueConfig
	if out := bytes.TrimSpace(stdout.Bytes()); len(out) > 0 {
		if err := json.Unmarshal(out, &cfg); err != nil {
			t.Fatalf("temporal task-queue config get printed %q: %v", out, err)
		}
	}
	return cfg
}
