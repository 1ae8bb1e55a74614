package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/registered"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// WebhooksParams is the setup of the webhooks section.
type WebhooksParams struct {
	// VerifyEvents deliveries per row and round of part 1, VerifyRounds
	// rounds in rotating order.
	VerifyEvents int `json:"verify_events"`
	VerifyRounds int `json:"verify_rounds"`
	// Workflows await a webhook in each delivery mode of part 2
	// (sequential, then Concurrency at once).
	Workflows   int `json:"workflows"`
	Concurrency int `json:"concurrency"`
	// Sinks are the running workflows of part 3; Deliveries per mechanism
	// and round, MechRounds rounds in rotating order, per mode.
	Sinks      int `json:"sinks"`
	Deliveries int `json:"deliveries"`
	MechRounds int `json:"mech_rounds"`
}

// defaultWebhooks: 5 rounds of 5000 deliveries per row (the receiver takes
// about 170 µs per delivery on one core: about 25 s for part 1); 200
// workflows per mode of part 2; 2 rounds of 100 deliveries per mechanism
// and mode over 40 running workflows.
var defaultWebhooks = WebhooksParams{
	VerifyEvents: 5000, VerifyRounds: 5,
	Workflows: 200, Concurrency: 8,
	Sinks: 40, Deliveries: 100, MechRounds: 2,
}

// The bench's webhook secrets and event types.
const (
	whStripeSecret   = "whsec_bench_stripe_0123456789abcdef"
	whStandardSecret = "whsec_YmVuY2gtc3RhbmRhcmQtd2ViaG9va3Mta2V5LTMyYg==" // base64 of a 32-byte key
	whHMACSecret     = "bench-hmac-secret-0123456789abcdef"
	whSucceeded      = "payment_intent.succeeded"
	whOperation      = "charge"
)

// webhookEvent is a Stripe-like payment_intent event of about 1 KiB
// (Stripe's shape, its fields and lengths), whose
// data.object.metadata names workflowID and operation, as the start
// request's metadata (workflows.WebhookMetadata) makes a provider's events
// do. With clientSecret, data.object carries a "client_secret" as Stripe's
// payment intents do, which the receiver redacts before history.
func webhookEvent(id, workflowID, operation string, created int64, clientSecret bool) []byte {
	pi := "pi_3QbEnchWebhook" + fmt.Sprintf("%08d", created%1e8)
	obj := map[string]any{
		"id": pi, "object": "payment_intent", "amount": 2000, "amount_capturable": 0, "amount_received": 2000,
		"application": nil, "capture_method": "automatic", "confirmation_method": "automatic", "created": created,
		"currency": "usd", "customer": "cus_QbEnchCustomer01", "description": "Order 1234 (bench)",
		"latest_charge": "ch_3QbEnchCharge0000001", "livemode": false,
		"metadata":       map[string]string{"workflow_id": workflowID, "operation": operation, "order_id": "ord_1234"},
		"payment_method": "pm_1QbEnchPaymentMethod01", "payment_method_types": []string{"card"},
		"receipt_email": "customer@example.com", "setup_future_usage": nil,
		"shipping": map[string]any{"name": "Jenny Rosen", "address": map[string]string{
			"line1": "510 Townsend St", "city": "San Francisco", "state": "CA", "postal_code": "94103", "country": "US"}},
		"statement_descriptor": nil, "status": "succeeded",
	}
	if clientSecret {
		obj["client_secret"] = pi + "_secret_QbEnchClientSecretValue0123"
	}
	ev := map[string]any{
		"id": id, "object": "event", "api_version": "2024-06-20", "created": created,
		"data": map[string]any{"object": obj}, "livemode": false, "pending_webhooks": 1,
		"request": map[string]any{"id": "req_QbEnchRequest01", "idempotency_key": "bench-" + workflowID},
		"type":    whSucceeded,
	}
	b, _ := json.Marshal(ev)
	return b
}

// signWebhook returns the headers that sign body in scheme ("stripe",
// "standard-webhooks" or "hmac") with the bench's secret of that scheme,
// at ts, for the event id, as the providers send them (package
// internal/signature's rules, which the verifiers share).
func signWebhook(scheme, id string, ts int64, body []byte) (http.Header, error) {
	h := http.Header{"Content-Type": {"application/json"}}
	switch scheme {
	case "stripe":
		h.Set(signature.StripeSignature, signature.Stripe(ts, body, whStripeSecret))
	case "standard-webhooks":
		key, err := signature.StandardKey(whStandardSecret)
		if err != nil {
			return nil, err
		}
		h.Set(signature.StandardID, id)
		h.Set(signature.StandardTimestamp, fmt.Sprint(ts))
		h.Set(signature.StandardSignature, signature.Standard(key, id, ts, body))
	case "hmac":
		h.Set(signature.HMACSignature, signature.HMACHex(whHMACSecret, body))
	default:
		return nil, fmt.Errorf("unknown scheme %q", scheme)
	}
	return h, nil
}

// benchVerifier is the receiver's Verifier of scheme, with the bench's
// secret.
func benchVerifier(scheme string) (webhooks.Verifier, error) {
	switch scheme {
	case "stripe":
		return webhooks.StripeVerifier(whStripeSecret)
	case "standard-webhooks":
		return webhooks.StandardWebhooksVerifier(whStandardSecret)
	case "hmac":
		return webhooks.HMACVerifier(webhooks.HMACOptions{Secrets: []string{whHMACSecret}})
	}
	return nil, fmt.Errorf("unknown scheme %q", scheme)
}

// stubClient is a client.Client whose UpdateWorkflow returns a handle
// completed at once: the receiver's own cost, Temporal excluded. Every
// other method is the nil interface's (not called).
type stubClient struct {
	client.Client
	updates atomic.Int64
}

func (s *stubClient) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	s.updates.Add(1)
	return stubHandle{workflowID: o.WorkflowID, updateID: o.UpdateID}, nil
}

type stubHandle struct{ workflowID, updateID string }

func (h stubHandle) WorkflowID() string { return h.workflowID }
func (h stubHandle) RunID() string      { return "" }
func (h stubHandle) UpdateID() string   { return h.updateID }
func (h stubHandle) Get(_ context.Context, v any) error {
	if p, ok := v.(*string); ok {
		*p = "ended: " + string(workflows.StateSucceeded)
	}
	return nil
}

// newStubReceiver is a Receiver of scheme delivering to a stubClient,
// logging nowhere.
func newStubReceiver(scheme string) (*webhooks.Receiver, *stubClient, error) {
	v, err := benchVerifier(scheme)
	if err != nil {
		return nil, nil, err
	}
	c := &stubClient{}
	rc, err := webhooks.NewReceiver(webhooks.Config{Client: c, Verifier: v, Logger: slog.New(slog.DiscardHandler)})
	return rc, c, err
}

// bareRead is the baseline handler: read the body, answer 200.
var bareRead = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	w.WriteHeader(http.StatusOK)
})

// signedDelivery is one provider POST: its body and headers.
type signedDelivery struct {
	body   []byte
	header http.Header
}

// makeDeliveries signs n events for scheme, of unique IDs (prefix and
// index), each naming workflow wf-<i>.
func makeDeliveries(scheme, prefix string, n int, clientSecret bool) ([]signedDelivery, error) {
	ts := time.Now().Unix()
	ds := make([]signedDelivery, n)
	for i := range ds {
		id := fmt.Sprintf("evt_%s_%07d", prefix, i)
		body := webhookEvent(id, fmt.Sprintf("wf-%d", i), whOperation, ts, clientSecret)
		h, err := signWebhook(scheme, id, ts, body)
		if err != nil {
			return nil, err
		}
		ds[i] = signedDelivery{body: body, header: h}
	}
	return ds, nil
}

// serveDeliveries drives h.ServeHTTP with an httptest request per
// delivery and returns the number of answers other than 200.
func serveDeliveries(h http.Handler, ds []signedDelivery) int {
	bad := 0
	for _, d := range ds {
		req := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(d.body))
		req.Header = d.header
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			bad++
		}
	}
	return bad
}

// VerifyRow is one row of part 1: a handler (or the MAC alone) over the
// same kind of deliveries, GOMAXPROCS 1.
type VerifyRow struct {
	Name   string `json:"name"`
	Scheme string `json:"scheme,omitempty"`
	// NsPerEvent and CPUNsPerEvent per round; Ratios the round's ns ÷ the
	// bare read's of the same round.
	NsPerEvent    []float64 `json:"ns_per_event"`
	CPUNsPerEvent []float64 `json:"cpu_ns_per_event"`
	Ratios        []float64 `json:"ratios,omitempty"`
	// Medians over the rounds, and events/s of the median.
	MedianNs      float64 `json:"median_ns_per_event"`
	MedianCPUNs   float64 `json:"median_cpu_ns_per_event"`
	Ratio         float64 `json:"ratio,omitempty"`
	EventsPerSec  float64 `json:"events_per_second"`
	AllocsPerOp   float64 `json:"allocs_per_event"`
	BytesPerOp    float64 `json:"bytes_per_event"`
	Delivered     int64   `json:"delivered"`
	NotOK         int     `json:"not_ok"`
	BodyBytes     int     `json:"body_bytes"`
	ClientSecret  bool    `json:"client_secret,omitempty"`
	ReceiverRow   bool    `json:"receiver,omitempty"`
	allocs, bytes []float64
}

// finish computes the medians and ratios of r.
func (r *VerifyRow) finish() {
	r.MedianNs, r.MedianCPUNs = median(r.NsPerEvent), median(r.CPUNsPerEvent)
	if len(r.Ratios) > 0 {
		r.Ratio = median(r.Ratios)
	}
	if r.MedianNs > 0 {
		r.EventsPerSec = 1e9 / r.MedianNs
	}
	r.AllocsPerOp, r.BytesPerOp = median(r.allocs), median(r.bytes)
}

// VerifyResult is part 1.
type VerifyResult struct {
	Events int `json:"events"`
	Rounds int `json:"rounds"`
	// Rows: the bare read (baseline), HMAC-SHA256 alone, the receiver per
	// scheme, and the receiver with a client_secret in the body.
	Rows []VerifyRow `json:"rows"`
}

// row returns the row named name.
func (v *VerifyResult) row(name string) (VerifyRow, bool) {
	for _, r := range v.Rows {
		if r.Name == name {
			return r, true
		}
	}
	return VerifyRow{}, false
}

// Names of part 1's rows.
const (
	rowBare         = "bare read, 200 (baseline)"
	rowMAC          = "HMAC-SHA256 of the body alone"
	rowClientSecret = "receiver, stripe, body with client_secret (scrubbed)"
)

// runVerify is part 1: with GOMAXPROCS 1 (restored after), rounds of
// p.VerifyEvents deliveries per row, the rows in rotating order.
func runVerify(p WebhooksParams, logf func(string, ...any)) (*VerifyResult, error) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	type rowRun struct {
		row    *VerifyRow
		scheme string
		secret bool
		h      http.Handler
		stub   *stubClient
	}
	res := &VerifyResult{Events: p.VerifyEvents, Rounds: p.VerifyRounds}
	var runs []rowRun
	add := func(name, scheme string, secret, receiver bool) error {
		rr := rowRun{row: &VerifyRow{Name: name, Scheme: scheme, ClientSecret: secret, ReceiverRow: receiver}, scheme: scheme, secret: secret}
		switch {
		case receiver:
			rc, stub, err := newStubReceiver(scheme)
			if err != nil {
				return err
			}
			rr.h, rr.stub = rc, stub
		case name == rowBare:
			rr.h = bareRead
		}
		runs = append(runs, rr)
		return nil
	}
	for _, a := range []struct {
		name, scheme     string
		secret, receiver bool
	}{
		{rowBare, "stripe", false, false},
		{rowMAC, "stripe", false, false},
		{"receiver, standard-webhooks", "standard-webhooks", false, true},
		{"receiver, stripe", "stripe", false, true},
		{"receiver, hmac", "hmac", false, true},
		{rowClientSecret, "stripe", true, true},
	} {
		if err := add(a.name, a.scheme, a.secret, a.receiver); err != nil {
			return nil, err
		}
	}
	key := []byte(whHMACSecret)
	for round := range p.VerifyRounds {
		bareNs := 0.0
		for k := range runs {
			rr := runs[(k+round)%len(runs)]
			ds, err := makeDeliveries(rr.scheme, fmt.Sprintf("r%d_%d", round, k), p.VerifyEvents, rr.secret)
			if err != nil {
				return nil, err
			}
			rr.row.BodyBytes = len(ds[0].body)
			var before int64
			if rr.stub != nil {
				before = rr.stub.updates.Load()
			}
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			cpu0, t0 := cpuTime(), time.Now()
			if rr.h == nil {
				var sink byte
				for _, d := range ds {
					sink ^= signature.MAC(key, d.body)[0]
				}
				_ = sink
			} else {
				rr.row.NotOK += serveDeliveries(rr.h, ds)
			}
			wall, cpu := time.Since(t0), cpuTime()-cpu0
			runtime.ReadMemStats(&m1)
			n := float64(len(ds))
			rr.row.NsPerEvent = append(rr.row.NsPerEvent, float64(wall.Nanoseconds())/n)
			rr.row.CPUNsPerEvent = append(rr.row.CPUNsPerEvent, float64(cpu.Nanoseconds())/n)
			rr.row.allocs = append(rr.row.allocs, float64(m1.Mallocs-m0.Mallocs)/n)
			rr.row.bytes = append(rr.row.bytes, float64(m1.TotalAlloc-m0.TotalAlloc)/n)
			if rr.stub != nil {
				rr.row.Delivered += rr.stub.updates.Load() - before
			}
		}
		// Ratios against the bare read of the same round.
		for _, rr := range runs {
			if rr.row.Name == rowBare {
				bareNs = rr.row.NsPerEvent[round]
			}
		}
		for _, rr := range runs {
			if rr.row.Name != rowBare && bareNs > 0 {
				rr.row.Ratios = append(rr.row.Ratios, rr.row.NsPerEvent[round]/bareNs)
			}
		}
	}
	for _, rr := range runs {
		rr.row.finish()
		if rr.row.ReceiverRow && (rr.row.NotOK > 0 || rr.row.Delivered != int64(p.VerifyEvents*p.VerifyRounds)) {
			return nil, fmt.Errorf("webhooks: %s: %d answers other than 200, %d of %d events delivered", rr.row.Name, rr.row.NotOK, rr.row.Delivered, p.VerifyEvents*p.VerifyRounds)
		}
		res.Rows = append(res.Rows, *rr.row)
		ratio := "—"
		if rr.row.Name != rowBare {
			ratio = fmt.Sprintf("%.2f", rr.row.Ratio)
		}
		logf("webhooks: %-55s %8.0f ns/event (CPU %6.0f), %7.0f events/s, ÷ bare read %s, %.0f allocs, %.0f B", rr.row.Name, rr.row.MedianNs,
			rr.row.MedianCPUNs, rr.row.EventsPerSec, ratio, rr.row.AllocsPerOp, rr.row.BytesPerOp)
	}
	return res, nil
}

// LatStats summarises latencies: nearest-rank percentiles (values may be
// negative: the time from an answer to a completion that came first).
type LatStats struct {
	N    int           `json:"n"`
	Min  time.Duration `json:"min_ns"`
	P50  time.Duration `json:"p50_ns"`
	P95  time.Duration `json:"p95_ns"`
	P99  time.Duration `json:"p99_ns"`
	Max  time.Duration `json:"max_ns"`
	Mean time.Duration `json:"mean_ns"`
}

func latStats(ds []time.Duration) LatStats {
	if len(ds) == 0 {
		return LatStats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration { return s[max(int(math.Ceil(p*float64(len(s))))-1, 0)] }
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return LatStats{N: len(s), Min: s[0], P50: rank(0.50), P95: rank(0.95), P99: rank(0.99), Max: s[len(s)-1], Mean: sum / time.Duration(len(s))}
}

// DeliveryRun is one mode of part 2 (sequential or concurrent) or one
// mechanism and mode of part 3.
type DeliveryRun struct {
	Name        string         `json:"name"`
	Concurrency int            `json:"concurrency"`
	Deliveries  int            `json:"deliveries"`
	Failed      int            `json:"failed"`
	Outcomes    map[string]int `json:"outcomes,omitempty"`
	Latency     LatStats       `json:"latency"`
	Elapsed     time.Duration  `json:"elapsed_ns"`
	PerSecond   float64        `json:"per_second"`
	// ToCompletion (part 2): per workflow, its close time at the server
	// minus when the receiver's 2xx reached the provider (negative: the
	// workflow had closed first); NotClosed counts workflows not closed.
	ToCompletion LatStats `json:"to_completion,omitzero"`
	NotClosed    int      `json:"not_closed,omitempty"`
	// Latencies are every delivery's, in order (raw data); Completions
	// every closed workflow's close − 2xx (part 2).
	Latencies   []time.Duration `json:"latencies_ns,omitempty"`
	Completions []time.Duration `json:"close_minus_answer_ns,omitempty"`
}

// finish computes the run's statistics.
func (d *DeliveryRun) finish() {
	d.Latency = latStats(d.Latencies)
	if d.Elapsed > 0 {
		d.PerSecond = float64(d.Deliveries) / d.Elapsed.Seconds()
	}
}

// runConcurrently runs do(i) for i in [0, n) with conc at a time and
// returns each's latency and error, and the wall time.
func runConcurrently(ctx context.Context, n, conc int, do func(ctx context.Context, i int) error) ([]time.Duration, []error, time.Duration) {
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range max(conc, 1) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				errs[i] = do(ctx, i)
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	return lat, errs, time.Since(start)
}

// HistoryDelta is what one delivery added to a workflow's history.
type HistoryDelta struct {
	Mechanism string `json:"mechanism"`
	// First: the first delivery of an event; Duplicate: the same delivery
	// again (the same update ID, or the same signal).
	First          int      `json:"first"`
	FirstTypes     []string `json:"first_types"`
	Duplicate      int      `json:"duplicate"`
	DuplicateTypes []string `json:"duplicate_types,omitempty"`
	// DuplicateError is the duplicate delivery's error, if any.
	DuplicateError string `json:"duplicate_error,omitempty"`
	// Taken is the events the workflow's handler took after both
	// deliveries (1: the duplicate was not taken again).
	Taken int `json:"taken"`
}

// MechResult is part 3.
type MechResult struct {
	Sinks   int            `json:"sinks"`
	Runs    []DeliveryRun  `json:"runs"`
	History []HistoryDelta `json:"history"`
	// DuplicateUpdate is the latency of an UpdateWorkflow repeating a
	// completed update's ID (the server answers from the stored outcome).
	DuplicateUpdate LatStats `json:"duplicate_update"`
}

// run returns the run named name at conc.
func (m *MechResult) run(name string, conc int) (DeliveryRun, bool) {
	for _, r := range m.Runs {
		if r.Name == name && r.Concurrency == conc {
			return r, true
		}
	}
	return DeliveryRun{}, false
}

func (m *MechResult) history(name string) (HistoryDelta, bool) {
	for _, h := range m.History {
		if h.Mechanism == name {
			return h, true
		}
	}
	return HistoryDelta{}, false
}

// WebhooksResult is the webhooks section.
type WebhooksResult struct {
	Params WebhooksParams `json:"params"`
	Verify *VerifyResult  `json:"verify,omitempty"`
	// Latency is part 2: the sequential and concurrent deliveries through
	// the receiver to workflows awaiting their webhook.
	Latency []DeliveryRun `json:"latency,omitempty"`
	// Start is how long the part 2 workflows took to start and reach their
	// wait.
	Start time.Duration `json:"start_ns,omitempty"`
	Mech  *MechResult   `json:"mechanisms,omitempty"`
}

// The mechanisms of part 3.
const (
	mechUpdate          = "UpdateWorkflow (WaitForStage Completed)"
	mechSignal          = "SignalWorkflow"
	mechSignalWithStart = "SignalWithStartWorkflow (running workflow)"
)

var mechanisms = []string{mechUpdate, mechSignal, mechSignalWithStart}

// The bench-only workflow of part 3: it takes notifications by Update
// and by Signal, each event ID once, and counts them; it runs until
// stopped.
const (
	sinkWorkflowName = "BenchWebhookSink"
	sinkUpdateName   = "deliver"
	sinkSignalName   = "deliver"
	sinkStopSignal   = "stop"
	sinkCountQuery   = "taken"
)

func sinkWorkflow(ctx workflow.Context) (int, error) {
	seen := map[string]bool{}
	take := func(n workflows.Notification) string {
		if seen[n.ID] {
			return "duplicate"
		}
		seen[n.ID] = true
		return "taken"
	}
	if err := workflow.SetQueryHandler(ctx, sinkCountQuery, func() (int, error) { return len(seen), nil }); err != nil {
		return 0, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, sinkUpdateName, func(ctx workflow.Context, n workflows.Notification) (string, error) {
		return take(n), nil
	}, workflow.UpdateHandlerOptions{Validator: func(n workflows.Notification) error {
		if seen[n.ID] {
			return fmt.Errorf("event %s already taken", n.ID)
		}
		return nil
	}}); err != nil {
		return 0, err
	}
	sig, stop := workflow.GetSignalChannel(ctx, sinkSignalName), workflow.GetSignalChannel(ctx, sinkStopSignal)
	for done := false; !done; {
		s := workflow.NewSelector(ctx)
		s.AddReceive(sig, func(c workflow.ReceiveChannel, _ bool) {
			var n workflows.Notification
			c.Receive(ctx, &n)
			take(n)
		})
		s.AddReceive(stop, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			done = true
		})
		s.Select(ctx)
	}
	return len(seen), nil
}

// whRun is the webhooks section's worker and API on h's dev server.
type whRun struct {
	h    *harness
	tq   string
	w    worker.Worker
	api  *httptest.Server
	logf func(string, ...any)
	// starts counts the start POSTs the API took.
	starts atomic.Int64
}

// startWebhooksWorker starts the API (it answers each start POST 201
// {"id": "pi_N", "status": "processing"}) and a worker of the section's
// own: the HTTP activity allowing the API, the ready workflow and
// sinkWorkflow.
func startWebhooksWorker(h *harness, tq string, logf func(string, ...any)) (*whRun, error) {
	r := &whRun{h: h, tq: tq, logf: logf}
	r.api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		if req.Method != http.MethodPost {
			http.NotFound(w, req)
			return
		}
		n := r.starts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"pi_%d","object":"payment_intent","status":"processing"}`, n)
	}))
	acts, err := activities.New(activities.Config{
		AllowedOrigins: []string{r.api.URL},
		HTTPClient:     &http.Client{Transport: newTransport()},
		Admission:      activities.Admission{Off: true},
	})
	if err != nil {
		r.api.Close()
		return nil, err
	}
	r.w = worker.New(h.Client, tq, workerOptions)
	r.w.RegisterActivityWithOptions(registered.Of(acts).Do, activity.RegisterOptions{Name: input.ActivityName})
	workflows.Register(r.w)
	r.w.RegisterWorkflowWithOptions(sinkWorkflow, workflow.RegisterOptions{Name: sinkWorkflowName})
	if err := r.w.Start(); err != nil {
		r.api.Close()
		return nil, fmt.Errorf("starting the webhooks worker: %w", err)
	}
	return r, nil
}

func (r *whRun) Close() {
	r.w.Stop()
	r.api.Close()
}

// awaitingRequest is the ready workflow's request of workflow wfID: start
// a charge whose metadata names the workflow and operation, and await its
// webhook.
func (r *whRun) awaitingRequest(wfID string) workflows.Request {
	body, _ := json.Marshal(map[string]any{"amount": 2000, "currency": "usd",
		"metadata": map[string]string{"workflow_id": wfID, "operation": whOperation}})
	return workflows.Request{Operation: whOperation, Method: http.MethodPost, URL: r.api.URL + "/charges", Body: body,
		Webhook: &workflows.WebhookOptions{Succeeded: []string{whSucceeded}, Failed: []string{"payment_intent.payment_failed"}, Timeout: 10 * time.Minute}}
}

// startWorkflows starts the workflows ids (startConcurrency at a time,
// eager start) of wf with args(id).
func (r *whRun) startWorkflows(ctx context.Context, ids []string, wf string, args func(id string) []any) error {
	_, errs, _ := runConcurrently(ctx, len(ids), startConcurrency, func(ctx context.Context, i int) error {
		_, err := r.h.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: r.tq, EnableEagerStart: true}, wf, args(ids[i])...)
		return err
	})
	return errors.Join(errs...)
}

// quiet waits until none of ids has a pending activity or workflow task
// (the ready workflows wait for their webhook), at most limit.
func (r *whRun) quiet(ctx context.Context, ids []string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		busy := atomic.Int64{}
		_, errs, _ := runConcurrently(ctx, len(ids), 16, func(ctx context.Context, i int) error {
			d, err := r.h.Client.DescribeWorkflowExecution(ctx, ids[i], "")
			if err != nil {
				return err
			}
			if len(d.GetPendingActivities()) > 0 || d.GetPendingWorkflowTask() != nil {
				busy.Add(1)
			}
			return nil
		})
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if busy.Load() == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("webhooks: %d of %d workflows still busy after %s", busy.Load(), len(ids), limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// latency is part 2: p.Workflows ready workflows await a webhook per
// mode; one signed Stripe event per workflow goes through the real
// receiver (an HTTP server around webhooks.NewReceiver with the dev
// server's client), sequentially, then p.Concurrency at once.
func (r *whRun) latency(ctx context.Context, p WebhooksParams, logDir string) ([]DeliveryRun, time.Duration, error) {
	logFile, err := os.Create(filepath.Join(logDir, "webhooks-receiver.log"))
	if err != nil {
		return nil, 0, err
	}
	defer logFile.Close()
	v, err := benchVerifier("stripe")
	if err != nil {
		return nil, 0, err
	}
	rc, err := webhooks.NewReceiver(webhooks.Config{Client: r.h.Client, Verifier: v,
		Logger: slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, 0, err
	}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	provider := &http.Client{Transport: newTransport(), Timeout: 30 * time.Second}

	tag := fmt.Sprint(time.Now().UnixNano())
	modes := []int{1, p.Concurrency}
	ids := make([][]string, len(modes))
	var all []string
	for m := range modes {
		for i := range p.Workflows {
			ids[m] = append(ids[m], fmt.Sprintf("wh-%s-c%d-%d", tag, modes[m], i))
		}
		all = append(all, ids[m]...)
	}
	t0 := time.Now()
	if err := r.startWorkflows(ctx, all, workflows.WorkflowName, func(id string) []any { return []any{r.awaitingRequest(id)} }); err != nil {
		return nil, 0, err
	}
	for r.starts.Load() < int64(len(all)) {
		if time.Since(t0) > 2*time.Minute {
			return nil, 0, fmt.Errorf("webhooks: only %d of %d workflows started their operation", r.starts.Load(), len(all))
		}
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := r.quiet(ctx, all, time.Minute); err != nil {
		return nil, 0, err
	}
	started := time.Since(t0)
	r.logf("webhooks: %d workflows await their webhook after %s", len(all), started.Round(time.Millisecond))
	time.Sleep(time.Second)

	var out []DeliveryRun
	for m, conc := range modes {
		ts := time.Now().Unix()
		ds := make([]signedDelivery, len(ids[m]))
		for i, id := range ids[m] {
			evID := fmt.Sprintf("evt_%s_c%d_%d", tag, conc, i)
			body := webhookEvent(evID, id, whOperation, ts, false)
			h, err := signWebhook("stripe", evID, ts, body)
			if err != nil {
				return nil, 0, err
			}
			ds[i] = signedDelivery{body: body, header: h}
		}
		answered := make([]time.Time, len(ds))
		outcomes := make([]string, len(ds))
		lat, errs, elapsed := runConcurrently(ctx, len(ds), conc, func(ctx context.Context, i int) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/webhooks/stripe", bytes.NewReader(ds[i].body))
			if err != nil {
				return err
			}
			req.Header = ds[i].header.Clone()
			resp, err := provider.Do(req)
			if err != nil {
				return err
			}
			var ans struct {
				Status string `json:"status"`
			}
			err = json.NewDecoder(resp.Body).Decode(&ans)
			resp.Body.Close()
			answered[i], outcomes[i] = time.Now(), ans.Status
			if resp.StatusCode != http.StatusOK || err != nil {
				return fmt.Errorf("answered %d (%s)", resp.StatusCode, ans.Status)
			}
			return nil
		})
		run := DeliveryRun{Name: "receiver, stripe", Concurrency: conc, Deliveries: len(ds), Elapsed: elapsed, Outcomes: map[string]int{}}
		for i := range ds {
			if errs[i] != nil || outcomes[i] != "delivered" {
				run.Failed++
			}
			run.Outcomes[outcomes[i]]++
			run.Latencies = append(run.Latencies, lat[i])
		}
		run.finish()
		// The workflows' close times at the server.
		if err := waitClosed(ctx, r.h.Client, ids[m], 30*time.Second); err != nil {
			r.logf("webhooks: %v", err)
		}
		closed := make([]time.Duration, len(ids[m]))
		_, derrs, _ := runConcurrently(ctx, len(ids[m]), 16, func(ctx context.Context, i int) error {
			d, err := r.h.Client.DescribeWorkflowExecution(ctx, ids[m][i], "")
			if err != nil {
				return err
			}
			info := d.GetWorkflowExecutionInfo()
			if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED || info.GetCloseTime() == nil || answered[i].IsZero() {
				return fmt.Errorf("workflow %s: %s", ids[m][i], info.GetStatus())
			}
			closed[i] = info.GetCloseTime().AsTime().Sub(answered[i])
			return nil
		})
		var toDone []time.Duration
		for i, err := range derrs {
			if err != nil {
				run.NotClosed++
			} else {
				toDone = append(toDone, closed[i])
			}
		}
		run.ToCompletion, run.Completions = latStats(toDone), toDone
		r.logf("webhooks: receiver → workflow, concurrency %d: %d events, %d failed, p50 %s p95 %s p99 %s, %.1f events/s; close − 2xx p50 %s p95 %s (%d not closed)",
			conc, run.Deliveries, run.Failed, ms(run.Latency.P50), ms(run.Latency.P95), ms(run.Latency.P99), run.PerSecond,
			ms(run.ToCompletion.P50), ms(run.ToCompletion.P95), run.NotClosed)
		out = append(out, run)
	}
	return out, started, nil
}

// ms formats d in milliseconds, to 0.1 ms.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// waitClosed waits until every workflow of ids is closed, at most limit.
func waitClosed(ctx context.Context, c client.Client, ids []string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		open := atomic.Int64{}
		_, errs, _ := runConcurrently(ctx, len(ids), 16, func(ctx context.Context, i int) error {
			d, err := c.DescribeWorkflowExecution(ctx, ids[i], "")
			if err != nil {
				return err
			}
			if d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				open.Add(1)
			}
			return nil
		})
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if open.Load() == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d workflows still running after %s", open.Load(), len(ids), limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// notification is the payload of part 3's deliveries: what the receiver
// hands a workflow for a ~1 KiB event.
func notification(id, wfID string) workflows.Notification {
	now := time.Now()
	return workflows.Notification{ID: id, Type: whSucceeded, Operation: whOperation, Scheme: "stripe", Sent: now.Truncate(time.Second), Received: now,
		Body: webhookEvent(id, wfID, whOperation, now.Unix(), false)}
}

// deliver delivers n to workflow wfID by mechanism.
func (r *whRun) deliver(ctx context.Context, mechanism, wfID string, n workflows.Notification) error {
	c := r.h.Client
	switch mechanism {
	case mechUpdate:
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{UpdateID: "webhook/stripe/" + n.ID, WorkflowID: wfID,
			UpdateName: sinkUpdateName, Args: []any{n}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err != nil {
			return err
		}
		var s string
		return h.Get(ctx, &s)
	case mechSignal:
		return c.SignalWorkflow(ctx, wfID, "", sinkSignalName, n)
	case mechSignalWithStart:
		_, err := c.SignalWithStartWorkflow(ctx, wfID, sinkSignalName, n,
			client.StartWorkflowOptions{ID: wfID, TaskQueue: r.tq}, sinkWorkflowName)
		return err
	}
	return fmt.Errorf("unknown mechanism %q", mechanism)
}

// settled waits until wfID has no pending workflow task and its history
// length stayed the same over 200 ms, and returns that length.
func (r *whRun) settled(ctx context.Context, wfID string) (int64, error) {
	prev := int64(-1)
	for range 100 {
		d, err := r.h.Client.DescribeWorkflowExecution(ctx, wfID, "")
		if err != nil {
			return 0, err
		}
		n := d.GetWorkflowExecutionInfo().GetHistoryLength()
		if d.GetPendingWorkflowTask() == nil && n == prev {
			return n, nil
		}
		prev = n
		time.Sleep(100 * time.Millisecond)
	}
	return 0, fmt.Errorf("webhooks: workflow %s did not settle", wfID)
}

// eventTypes returns the types of wfID's history events after event
// number after.
func (r *whRun) eventTypes(ctx context.Context, wfID string, after int64) ([]string, error) {
	it := r.h.Client.GetWorkflowHistory(ctx, wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []string
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, err
		}
		if e.GetEventId() > after {
			out = append(out, e.GetEventType().String())
		}
	}
	return out, nil
}

// historyDelta delivers one event to a fresh sink by mechanism, then the
// same delivery again, and counts the history events each added.
func (r *whRun) historyDelta(ctx context.Context, mechanism, wfID string) (HistoryDelta, error) {
	hd := HistoryDelta{Mechanism: mechanism}
	l0, err := r.settled(ctx, wfID)
	if err != nil {
		return hd, err
	}
	n := notification("evt_history_"+wfID, wfID)
	if err := r.deliver(ctx, mechanism, wfID, n); err != nil {
		return hd, err
	}
	l1, err := r.settled(ctx, wfID)
	if err != nil {
		return hd, err
	}
	if err := r.deliver(ctx, mechanism, wfID, n); err != nil {
		hd.DuplicateError = err.Error()
	}
	l2, err := r.settled(ctx, wfID)
	if err != nil {
		return hd, err
	}
	hd.First, hd.Duplicate = int(l1-l0), int(l2-l1)
	types, err := r.eventTypes(ctx, wfID, l0)
	if err != nil {
		return hd, err
	}
	if len(types) >= hd.First {
		hd.FirstTypes, hd.DuplicateTypes = types[:hd.First], types[hd.First:]
	}
	v, err := r.h.Client.QueryWorkflow(ctx, wfID, "", sinkCountQuery)
	if err != nil {
		return hd, err
	}
	if err := v.Get(&hd.Taken); err != nil {
		return hd, err
	}
	return hd, nil
}

// mechanisms is part 3: the raw cost of each delivery mechanism to p.Sinks
// running sinkWorkflows, sequentially and p.Concurrency at once, in
// rotating order; then the history each adds per delivery and duplicate.
func (r *whRun) mechanisms(ctx context.Context, p WebhooksParams) (*MechResult, error) {
	res := &MechResult{Sinks: p.Sinks}
	tag := fmt.Sprint(time.Now().UnixNano())
	var sinks []string
	for i := range p.Sinks {
		sinks = append(sinks, fmt.Sprintf("sink-%s-%d", tag, i))
	}
	probes := map[string]string{}
	for i, m := range mechanisms {
		probes[m] = fmt.Sprintf("sink-%s-probe-%d", tag, i)
	}
	all := append(slices.Clone(sinks), probes[mechUpdate], probes[mechSignal], probes[mechSignalWithStart])
	if err := r.startWorkflows(ctx, all, sinkWorkflowName, func(string) []any { return nil }); err != nil {
		return nil, err
	}
	if err := r.quiet(ctx, all, time.Minute); err != nil {
		return nil, err
	}
	seq := 0
	for _, conc := range []int{1, p.Concurrency} {
		runs := map[string]*DeliveryRun{}
		for _, m := range mechanisms {
			runs[m] = &DeliveryRun{Name: m, Concurrency: conc}
		}
		for round := range p.MechRounds {
			for k := range mechanisms {
				m := mechanisms[(k+round)%len(mechanisms)]
				if err := r.quiet(ctx, sinks, 30*time.Second); err != nil {
					return nil, err
				}
				base := seq
				seq += p.Deliveries
				ns := make([]workflows.Notification, p.Deliveries)
				for i := range ns {
					ns[i] = notification(fmt.Sprintf("evt_%s_%d", tag, base+i), sinks[(base+i)%len(sinks)])
				}
				lat, errs, elapsed := runConcurrently(ctx, len(ns), conc, func(ctx context.Context, i int) error {
					return r.deliver(ctx, m, sinks[(base+i)%len(sinks)], ns[i])
				})
				run := runs[m]
				run.Deliveries += len(ns)
				run.Elapsed += elapsed
				run.Latencies = append(run.Latencies, lat...)
				for _, err := range errs {
					if err != nil {
						run.Failed++
						r.logf("webhooks: %s: %v", m, err)
					}
				}
			}
		}
		for _, m := range mechanisms {
			run := runs[m]
			run.finish()
			res.Runs = append(res.Runs, *run)
			r.logf("webhooks: %-42s concurrency %d: %d deliveries, %d failed, p50 %s p95 %s p99 %s, %.1f/s", m, conc, run.Deliveries, run.Failed,
				ms(run.Latency.P50), ms(run.Latency.P95), ms(run.Latency.P99), run.PerSecond)
		}
	}
	// Duplicate updates: the first 50 update IDs of the sequential run again.
	if err := r.quiet(ctx, sinks, 30*time.Second); err != nil {
		return nil, err
	}
	first := 0 // round 0 of the sequential runs starts with the updates
	dups := min(50, p.Deliveries)
	lat, errs, _ := runConcurrently(ctx, dups, 1, func(ctx context.Context, i int) error {
		id := first + i
		return r.deliver(ctx, mechUpdate, sinks[id%len(sinks)], notification(fmt.Sprintf("evt_%s_%d", tag, id), sinks[id%len(sinks)]))
	})
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("duplicate updates: %w", err)
	}
	res.DuplicateUpdate = latStats(lat)
	for _, m := range mechanisms {
		hd, err := r.historyDelta(ctx, m, probes[m])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m, err)
		}
		res.History = append(res.History, hd)
		r.logf("webhooks: %-42s adds %d events (%s); a duplicate %d (%s); the workflow took %d", m, hd.First, strings.Join(hd.FirstTypes, ", "),
			hd.Duplicate, strings.Join(hd.DuplicateTypes, ", "), hd.Taken)
	}
	for _, id := range all {
		_ = r.h.Client.SignalWorkflow(ctx, id, "", sinkStopSignal, nil)
	}
	return res, nil
}

// runWebhooks runs the webhooks section: part 1 in this process on one
// core (Temporal excluded), parts 2 and 3 on h's dev server with a worker
// of the section's own.
func runWebhooks(ctx context.Context, h *harness, p WebhooksParams, logDir string, logf func(string, ...any)) (*WebhooksResult, error) {
	res := &WebhooksResult{Params: p}
	var err error
	if res.Verify, err = runVerify(p, logf); err != nil {
		return res, err
	}
	r, err := startWebhooksWorker(h, h.TaskQueue+"-webhooks", logf)
	if err != nil {
		return res, err
	}
	defer r.Close()
	if res.Latency, res.Start, err = r.latency(ctx, p, logDir); err != nil {
		return res, err
	}
	res.Mech, err = r.mechanisms(ctx, p)
	return res, err
}
