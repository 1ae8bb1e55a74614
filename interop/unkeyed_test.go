package interop_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/chaos"
	"github.com/idemhttp/temporal-idempotent-http/harness/cluster"
	"github.com/idemhttp/temporal-idempotent-http/harness/interop"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// The rows of an API without idempotency keys (issue 41): json-server
// (npm), a plain REST server that stores whatever is POSTed to a
// collection and filters it with ?field=value, behind Toxiproxy
// (Shopify's fault proxy, built from tools/go.mod), which loses answers
// after json-server made the record, and requests before it saw them.
// workflows.Call runs in Temporal's test environment, one call after the
// other, the key in the body (KeyIn "body:client_reference"), three ways,
// each against a fresh collection: plain retries, a lookup, at most once.

const (
	// unkeyedCalls is the calls of each way.
	unkeyedCalls = 30
	// answerLostShare is the share of connections whose answers
	// Toxiproxy drops after json-server processed the request (a
	// downstream limit_data of 0 bytes: the connection is closed at the
	// first byte of the answer).
	answerLostShare = 0.4
	// requestLostShare is the share of connections whose requests never
	// reach json-server (an upstream limit_data of 0 bytes).
	requestLostShare = 0.1
	// jsonServerPackage is the npm package (interop/node/package.json).
	jsonServerPackage = "json-server"
)

// unkeyedWay is one way of calling the API: a row of the table.
type unkeyedWay struct {
	name string
	// reconcile is the call's Reconcile, its lookup at base.
	reconcile func(base string) workflows.Reconcile
	shown     string
}

var unkeyedWays = []unkeyedWay{
	{"plain retries", func(string) workflows.Reconcile { return workflows.Reconcile{} }, "none"},
	{"lookup", func(base string) workflows.Reconcile {
		return workflows.Reconcile{Lookup: base + "/payments?client_reference={key}"}
	}, "`Lookup: …/payments?client_reference={key}`"},
	{"at most once", func(string) workflows.Reconcile { return workflows.Reconcile{AtMostOnce: true} }, "`AtMostOnce: true`"},
}

// unkeyedRow is what one way measured.
type unkeyedRow struct {
	way                                      unkeyedWay
	calls, succeeded, byLookup               int
	awaitingMade, awaitingNotMade, otherErrs int
	records, duplicated, extra               int
	posts, lookups                           int
	elapsed                                  time.Duration
	ok                                       bool
}

var unkeyedResults struct {
	mu        sync.Mutex
	rows      []unkeyedRow
	versions  string
	toxiproxy string
}

func unkeyedMarkdown() string {
	unkeyedResults.mu.Lock()
	defer unkeyedResults.mu.Unlock()
	if len(unkeyedResults.rows) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## An API without keys: reconcile by lookup\n\n"+
		"json-server %s (npm; a plain REST server that knows nothing of idempotency keys: every POST makes a record, GET `/payments?client_reference=…` filters) "+
		"behind Toxiproxy %s (interop/unkeyed_test.go). Each way: %d calls of `workflows.Call` in Temporal's test environment, one after the other, against a fresh collection, "+
		"the key in the body (`KeyIn: \"body:client_reference\"`), one worker transport (keep-alive connections reused across calls), at most 20 attempts. "+
		"Before each call Toxiproxy draws anew, for every connection, open or not: on %.0f%% the answer is lost after json-server made the record "+
		"(downstream `limit_data` of 0 bytes), on %.0f%% the request never reaches it (upstream `limit_data` of 0 bytes; it wins where both act); lookups go through the same proxy and may be cut too. "+
		"Records counted in json-server's collection by key; a duplicate is a call with more than one record. POSTs and lookups are the ones json-server logged.\n\n",
		unkeyedResults.versions, unkeyedResults.toxiproxy, unkeyedCalls, answerLostShare*100, requestLostShare*100)
	b.WriteString("| way | Reconcile | succeeded | of which by lookup | AwaitingDecision: record made / not made | records | duplicates (extra records) | POSTs / lookups at json-server | wall | |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range unkeyedResults.rows {
		mark := "✓"
		if !r.ok {
			mark = "✗"
		}
		awaiting := fmt.Sprintf("%d / %d", r.awaitingMade, r.awaitingNotMade)
		if r.otherErrs > 0 {
			awaiting += fmt.Sprintf(" (%d other errors)", r.otherErrs)
		}
		fmt.Fprintf(&b, "| %s | %s | %d of %d | %d | %s | %d | %d (%d) | %d / %d | %.1f s | %s |\n",
			r.way.name, r.way.shown, r.succeeded, r.calls, r.byLookup, awaiting, r.records, r.duplicated, r.extra, r.posts, r.lookups, r.elapsed.Seconds(), mark)
	}
	return b.String()
}

// jsonServer is json-server serving a db file of its own.
type jsonServer struct {
	URL  string
	proc *itest.Process
}

// startJSONServer starts json-server on a free loopback port with a fresh
// db file holding an empty payments collection.
func startJSONServer(t *testing.T) *jsonServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := interop.Install(ctx, t.Logf); err != nil {
		t.Fatal(err)
	}
	dir, err := interop.NodeDir()
	if err != nil {
		t.Fatal(err)
	}
	// Its command, by package.json's bin: a path, or a map of names.
	var pkg struct {
		Bin json.RawMessage `json:"bin"`
	}
	var bin string
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", jsonServerPackage, "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &pkg)
	}
	if err == nil && json.Unmarshal(pkg.Bin, &bin) != nil {
		var bins map[string]string
		_ = json.Unmarshal(pkg.Bin, &bins)
		bin = bins[jsonServerPackage]
	}
	if err != nil || bin == "" {
		t.Fatalf("json-server is not installed in %s/node_modules (%v, bin %s): run scripts/install-interop.sh", dir, err, pkg.Bin)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "db.json")
	if err := os.WriteFile(db, []byte(`{"payments": []}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := itest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p := itest.StartT(t, itest.Spec{
		Name: "json-server", Path: node, Dir: dir,
		Args: []string{filepath.Join(dir, "node_modules", jsonServerPackage, bin), "--host", "127.0.0.1", "--port", strconv.Itoa(port), db},
	})
	s := &jsonServer{URL: "http://" + itest.HostPort(port), proc: p}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := itest.WaitHTTP(wctx, s.URL+"/payments"); err != nil {
		t.Fatalf("json-server not up: %v; its output:\n%s", err, p.Tail(4<<10))
	}
	return s
}

// payments returns every record of the collection, as json-server lists
// them, by client_reference.
func (s *jsonServer) payments(t *testing.T) map[string][]json.RawMessage {
	t.Helper()
	var list []json.RawMessage
	s.get(t, "/payments", &list)
	byKey := map[string][]json.RawMessage{}
	for _, r := range list {
		var m struct {
			Ref string `json:"client_reference"`
		}
		if err := json.Unmarshal(r, &m); err != nil {
			t.Fatalf("json-server record %s: %v", r, err)
		}
		byKey[m.Ref] = append(byKey[m.Ref], r)
	}
	return byKey
}

// get GETs path of json-server directly (not through the proxy) into v.
func (s *jsonServer) get(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", path, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

var (
	jsonServerPost   = regexp.MustCompile(`POST /payments `)
	jsonServerLookup = regexp.MustCompile(`GET /payments\?client_reference=`)
)

// counts returns the POSTs and lookups json-server logged (morgan's dev
// format, a line per answered request, colored whatever the terminal).
func (s *jsonServer) counts() (posts, lookups int) {
	out := s.proc.Output()
	return len(jsonServerPost.FindAllString(out, -1)), len(jsonServerLookup.FindAllString(out, -1))
}

// toxiproxyServer is toxiproxy-server, started for the test.
type toxiproxyServer struct {
	client  *toxiproxy.Client
	version string
}

func startToxiproxy(t *testing.T) *toxiproxyServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	binDir, err := cluster.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := chaos.BuildToxiproxy(ctx, binDir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	port, err := itest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	api := itest.HostPort(port)
	p := itest.StartT(t, itest.Spec{
		Name: "toxiproxy-server", Path: bin,
		Args: []string{"-host", "127.0.0.1", "-port", strconv.Itoa(port)},
		// Toxiproxy logs every connection at info.
		Env: []string{"LOG_LEVEL=warn"},
	})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := itest.WaitHTTP(wctx, "http://"+api+"/version"); err != nil {
		t.Fatalf("toxiproxy-server not up on %s: %v; its output:\n%s", api, err, p.Tail(4<<10))
	}
	return &toxiproxyServer{client: toxiproxy.NewClient(api), version: toolsVersion("github.com/Shopify/toxiproxy/v2")}
}

// toolsVersion is module's version in tools/go.mod.
func toolsVersion(module string) string {
	dir, err := itest.ToolsDir()
	if err != nil {
		return "?"
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "?"
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + `\s+(v\S+)`).FindSubmatch(b)
	if m == nil {
		return "?"
	}
	return string(m[1])
}

// cutProxy is a Toxiproxy proxy in front of json-server with the two
// toxics that lose answers and requests.
type cutProxy struct {
	px  *toxiproxy.Proxy
	URL string
	// rng draws where each redraw cuts answers (seeded: the same
	// draws each run; what they hit depends on timing).
	rng *mrand.Rand
}

// minCutBytes and maxCutBytes bound where a downstream cut falls in the
// answers of a connection after a redraw. json-server 0.17.4 answers a
// lookup that finds nothing in 395 bytes and a POST in about 600: a call
// asking the lookup then posting is cut mostly in the POST's answer,
// after json-server made the record, sometimes in the lookup's.
const (
	minCutBytes = 300
	maxCutBytes = 1000
)

var cutToxics = []struct {
	name, stream string
	share        float32
}{
	{"answer-lost", "downstream", answerLostShare},
	{"request-lost", "upstream", requestLostShare},
}

func (ts *toxiproxyServer) proxy(t *testing.T, name, upstream string) *cutProxy {
	t.Helper()
	port, err := itest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	listen := itest.HostPort(port)
	px, err := ts.client.CreateProxy(name, listen, strings.TrimPrefix(upstream, "http://"))
	if err != nil {
		t.Fatalf("creating the proxy %s -> %s: %v", listen, upstream, err)
	}
	t.Cleanup(func() { _ = px.Delete() })
	for _, c := range cutToxics {
		if _, err := px.AddToxic(c.name, "limit_data", c.stream, c.share, toxiproxy.Attributes{"bytes": 0}); err != nil {
			t.Fatalf("toxic %s: %v", c.name, err)
		}
	}
	return &cutProxy{px: px, URL: "http://" + listen, rng: mrand.New(mrand.NewPCG(41, uint64(len(name))))}
}

// redraw makes Toxiproxy draw again, for every open connection, whether
// each toxic acts on it (a connection opened later draws when it opens):
// without it, a keep-alive connection that drew "no cut" would carry
// every later call.
func (c *cutProxy) redraw(t *testing.T) {
	t.Helper()
	for _, x := range cutToxics {
		bytes := 0
		if x.stream == "downstream" {
			// Past a lookup's answer, or not: a call asks the lookup
			// before its POST, so an answer lost at its first byte
			// would be the lookup's, never the POST's after json-server
			// made the record.
			bytes = minCutBytes + c.rng.IntN(maxCutBytes-minCutBytes)
		}
		if _, err := c.px.UpdateToxic(x.name, x.share, toxiproxy.Attributes{"bytes": bytes}); err != nil {
			t.Fatalf("redrawing %s: %v", x.name, err)
		}
	}
}

// unkeyedCall is one call and how it ended.
type unkeyedCall struct {
	key  string
	resp *workflows.Response
	err  error
}

// TestUnkeyedJSONServer (#41, interop): against json-server, which makes
// a record of every POST, answers lost after the record was made turn
// plain retries into duplicates (at least one, or the test proves
// nothing); a Lookup on the same origin makes exactly one record per
// call, every call succeeding, those that found their record by the
// lookup marked Reconciled "lookup" with the record json-server stores as
// the result; AtMostOnce makes no duplicate, each call succeeding or
// ending AwaitingDecision with its outcome unknown, its record made or
// not.
func TestUnkeyedJSONServer(t *testing.T) {
	t.Parallel()
	ts := startToxiproxy(t)
	unkeyedResults.mu.Lock()
	unkeyedResults.toxiproxy = ts.version
	unkeyedResults.versions = libVersion(jsonServerPackage)
	unkeyedResults.mu.Unlock()
	for i, way := range unkeyedWays {
		t.Run(way.name, func(t *testing.T) {
			row := unkeyedRow{way: way, calls: unkeyedCalls}
			defer func() {
				row.ok = !t.Failed()
				unkeyedResults.mu.Lock()
				unkeyedResults.rows = append(unkeyedResults.rows, row)
				unkeyedResults.mu.Unlock()
			}()
			js := startJSONServer(t)
			cp := ts.proxy(t, fmt.Sprintf("json-server-%d", i), js.URL)
			calls := runUnkeyed(t, cp, way, &row)
			checkUnkeyed(t, js, way, calls, &row)
			row.posts, row.lookups = js.counts()
			t.Logf("%s: %d of %d succeeded (%d by lookup); AwaitingDecision %d with the record made, %d without; %d records, %d calls with duplicates (%d extra); json-server logged %d POSTs, %d lookups; %.1f s",
				way.name, row.succeeded, row.calls, row.byLookup, row.awaitingMade, row.awaitingNotMade, row.records, row.duplicated, row.extra, row.posts, row.lookups, row.elapsed.Seconds())
		})
	}
}

// runUnkeyed runs the way's calls through cp, one after the other, each
// in an environment of its own, all on one worker transport.
func runUnkeyed(t *testing.T, cp *cutProxy, way unkeyedWay, row *unkeyedRow) []unkeyedCall {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	cfg := activities.Config{AllowedOrigins: []string{cp.URL}, HTTPClient: &http.Client{Transport: tr}}
	run := make([]byte, 4)
	_, _ = rand.Read(run)
	start := time.Now()
	var calls []unkeyedCall
	for i := range unkeyedCalls {
		cp.redraw(t)
		// A key of each call's own, told to it: json-server's records
		// are counted by it, calls that failed included.
		key := fmt.Sprintf("pay-%s-%02d", hex.EncodeToString(run), i)
		req := workflows.Request{
			Operation: "charge", URL: cp.URL + "/payments", IdempotencyKey: key,
			Body:      json.RawMessage(fmt.Sprintf(`{"amount": %d, "currency": "eur", "order": "o-%d"}`, 100+i, i)),
			KeyIn:     "body:client_reference",
			Reconcile: way.reconcile(cp.URL),
			// An attempt is cut 0.46 likely (1 - 0.6 × 0.9): 20 make a
			// call that never gets through unlikely (2e-7); a way
			// without an answer lost after the record was made in its
			// first attempts too (0.64^30 = 2e-6).
			Retry:                  workflows.RetryOptions{MaximumAttempts: 20},
			ScheduleToCloseTimeout: time.Hour,
		}
		env := testsuite.NewEnv(t)
		env.SetTestTimeout(time.Minute)
		testsuite.Register(t, env, nil, cfg)
		wf := func(ctx workflow.Context) (*workflows.Response, error) { return workflows.Call(ctx, req) }
		env.RegisterWorkflow(wf)
		env.ExecuteWorkflow(wf)
		if !env.IsWorkflowCompleted() {
			t.Fatalf("call %d (%s) did not complete", i, key)
		}
		c := unkeyedCall{key: key, err: env.GetWorkflowError()}
		if c.err == nil {
			if err := env.GetWorkflowResult(&c.resp); err != nil {
				t.Fatal(err)
			}
		}
		calls = append(calls, c)
	}
	row.elapsed = time.Since(start)
	return calls
}

// checkUnkeyed checks each call against json-server's collection.
func checkUnkeyed(t *testing.T, js *jsonServer, way unkeyedWay, calls []unkeyedCall, row *unkeyedRow) {
	t.Helper()
	byKey := js.payments(t)
	for _, recs := range byKey {
		row.records += len(recs)
	}
	for _, c := range calls {
		recs := byKey[c.key]
		delete(byKey, c.key)
		if len(recs) > 1 {
			row.duplicated++
			row.extra += len(recs) - 1
		}
		if c.err != nil {
			f, ok := workflows.AsFailure(c.err)
			switch {
			case ok && f.Type == workflows.ErrTypeAwaitingDecision && f.OutcomeUnknown && len(recs) == 1:
				row.awaitingMade++
			case ok && f.Type == workflows.ErrTypeAwaitingDecision && f.OutcomeUnknown && len(recs) == 0:
				row.awaitingNotMade++
			default:
				row.otherErrs++
			}
			if way.reconcile("").AtMostOnce && ok && f.Type == workflows.ErrTypeAwaitingDecision && f.OutcomeUnknown && len(recs) <= 1 {
				continue
			}
			t.Errorf("%s: %v (%d records: %s)\njson-server's lines of the key:\n%s", c.key, c.err, len(recs), recs, js.linesOf(c.key))
			continue
		}
		row.succeeded++
		r := c.resp
		if r.Reconciled == "lookup" {
			row.byLookup++
		}
		if way.reconcile("").IsZero() {
			if len(recs) < 1 {
				t.Errorf("%s succeeded with no record at json-server", c.key)
			}
			continue
		}
		if len(recs) != 1 {
			t.Errorf("%s: %d records, want 1 (attempt %d, status %d, reconciled %q): %s\njson-server's lines of the key:\n%s",
				c.key, len(recs), r.Attempt, r.Status, r.Reconciled, recs, js.linesOf(c.key))
			continue
		}
		// The result is the record json-server stores: its 201 to the
		// POST, or the one record its lookup listed (200).
		var id struct {
			ID json.Number `json:"id"`
		}
		_ = json.Unmarshal(recs[0], &id)
		var stored any
		js.get(t, "/payments/"+id.ID.String(), &stored)
		var got any
		if err := json.Unmarshal(r.Body, &got); err != nil || !reflect.DeepEqual(got, stored) {
			t.Errorf("%s: the result's body %s is not the stored record %s (%v)", c.key, r.Body, recs[0], err)
		}
		if r.IdempotencyKey != c.key || r.Replayed {
			t.Errorf("%s: result with key %q, replayed %v", c.key, r.IdempotencyKey, r.Replayed)
		}
		switch {
		case r.Status == http.StatusCreated && r.Reconciled == "":
		case r.Status == http.StatusOK && r.Reconciled == "lookup" && r.Attempt > 1:
		default:
			t.Errorf("%s: status %d, reconciled %q at attempt %d: want json-server's 201 to the POST, or its 200 to a later attempt's lookup marked \"lookup\"", c.key, r.Status, r.Reconciled, r.Attempt)
		}
	}
	if len(byKey) > 0 {
		t.Errorf("records of no call: %v", byKey)
	}
	switch {
	case way.reconcile("").IsZero():
		if row.succeeded != len(calls) {
			t.Errorf("plain retries: %d of %d calls succeeded", row.succeeded, len(calls))
		}
		if row.duplicated == 0 {
			t.Errorf("plain retries made no duplicate in %d calls: no answer was lost after json-server made its record, and the other ways prove nothing", len(calls))
		}
	case way.reconcile("").Lookup != "":
		if row.succeeded != len(calls) || row.duplicated != 0 || row.records != len(calls) {
			t.Errorf("lookup: %d of %d succeeded, %d records, %d duplicated; want every call to succeed with exactly one record", row.succeeded, len(calls), row.records, row.duplicated)
		}
		if row.byLookup == 0 {
			t.Errorf("lookup: no result came from the lookup in %d calls: no answer was lost after the record was made", len(calls))
		}
	default:
		if row.duplicated != 0 {
			t.Errorf("at most once: %d calls with duplicates", row.duplicated)
		}
		if row.awaitingMade == 0 {
			t.Errorf("at most once: no call ended AwaitingDecision with its record made in %d calls: no answer was lost after the record was made", len(calls))
		}
		if row.succeeded+row.awaitingMade+row.awaitingNotMade != len(calls) {
			t.Errorf("at most once: %d succeeded, %d AwaitingDecision, of %d calls", row.succeeded, row.awaitingMade+row.awaitingNotMade, len(calls))
		}
	}
}

// linesOf returns json-server's log lines that name key (its lookups).
func (s *jsonServer) linesOf(key string) string {
	var out bytes.Buffer
	for _, l := range strings.Split(s.proc.Output(), "\n") {
		if strings.Contains(l, key) {
			out.WriteString(l + "\n")
		}
	}
	return out.String()
}
