package bench

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	sdktestsuite "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// TestWebhookEvent: a Stripe-like event of about 1 KiB that names the
// workflow and operation where the receiver looks by default.
func TestWebhookEvent(t *testing.T) {
	for _, secret := range []bool{false, true} {
		b := webhookEvent("evt_1", "wf-7", "charge", 1767225600, secret)
		if n := len(b); n < 900 || n > 1300 {
			t.Errorf("client_secret %v: %d bytes, want about 1 KiB", secret, n)
		}
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Data struct {
				Object struct {
					ClientSecret string            `json:"client_secret"`
					Metadata     map[string]string `json:"metadata"`
				} `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		md := ev.Data.Object.Metadata
		if ev.ID != "evt_1" || ev.Type != whSucceeded || md["workflow_id"] != "wf-7" || md["operation"] != "charge" {
			t.Errorf("event %s", b)
		}
		if (ev.Data.Object.ClientSecret != "") != secret {
			t.Errorf("client_secret %v: %q", secret, ev.Data.Object.ClientSecret)
		}
	}
}

// TestSignWebhookVerifies: the bench's signatures verify with the
// library's verifiers, and a changed body does not.
func TestSignWebhookVerifies(t *testing.T) {
	now := time.Now()
	for _, scheme := range receiverSchemes {
		v, err := benchVerifier(scheme)
		if err != nil {
			t.Fatal(err)
		}
		body := webhookEvent("evt_2", "wf-1", "charge", now.Unix(), false)
		h, err := signWebhook(scheme, "evt_2", now.Unix(), body)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := v.Verify(h, body, now)
		if err != nil {
			t.Fatalf("%s: %v", scheme, err)
		}
		if ev.ID != "evt_2" || ev.Type != whSucceeded {
			t.Errorf("%s: %+v", scheme, ev)
		}
		tampered := append([]byte(nil), body...)
		tampered[len(tampered)-3] ^= 1
		if _, err := v.Verify(h, tampered, now); err == nil {
			t.Errorf("%s: a changed body verified", scheme)
		}
	}
	if _, err := signWebhook("nope", "x", 0, nil); err == nil {
		t.Error("an unknown scheme signed")
	}
}

// TestStubReceiverDelivers: part 1 measures the delivering path (every
// answer 200, one update per event), and a bad signature is refused.
func TestStubReceiverDelivers(t *testing.T) {
	for _, scheme := range receiverSchemes {
		for _, secret := range []bool{false, true} {
			rc, stub, err := newStubReceiver(scheme)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := makeDeliveries(scheme, "t", 5, secret)
			if err != nil {
				t.Fatal(err)
			}
			if bad := serveDeliveries(rc, ds); bad != 0 || stub.updates.Load() != 5 {
				t.Errorf("%s: %d not 200, %d updates", scheme, bad, stub.updates.Load())
			}
			// The same events again: answered from the receiver's memo.
			if bad := serveDeliveries(rc, ds); bad != 0 || stub.updates.Load() != 5 {
				t.Errorf("%s, again: %d not 200, %d updates", scheme, bad, stub.updates.Load())
			}
			forged := []signedDelivery{{body: ds[0].body, header: ds[1].header}}
			if bad := serveDeliveries(rc, forged); bad != 1 || stub.updates.Load() != 5 {
				t.Errorf("%s: a forged delivery: %d not 200, %d updates", scheme, bad, stub.updates.Load())
			}
		}
	}
	if bad := serveDeliveries(bareRead, []signedDelivery{{body: []byte("{}")}}); bad != 0 {
		t.Error("the bare read did not answer 200")
	}
}

// TestRunVerifyMiniature: a tiny part 1 has every row, delivers every
// event, and restores GOMAXPROCS. No timing is asserted.
func TestRunVerifyMiniature(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	res, err := runVerify(WebhooksParams{VerifyEvents: 20, VerifyRounds: 2}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOMAXPROCS(0) != procs {
		t.Errorf("GOMAXPROCS %d after, was %d", runtime.GOMAXPROCS(0), procs)
	}
	if len(res.Rows) != 6 {
		t.Fatalf("%d rows", len(res.Rows))
	}
	for _, r := range res.Rows {
		if len(r.NsPerEvent) != 2 || r.MedianNs <= 0 || r.EventsPerSec <= 0 {
			t.Errorf("%s: %+v", r.Name, r)
		}
		if r.Name != rowBare && len(r.Ratios) != 2 {
			t.Errorf("%s: ratios %v", r.Name, r.Ratios)
		}
		if r.ReceiverRow && (r.Delivered != 40 || r.NotOK != 0) {
			t.Errorf("%s: delivered %d, not ok %d", r.Name, r.Delivered, r.NotOK)
		}
	}
	if _, ok := res.row(rowClientSecret); !ok {
		t.Error("no client_secret row")
	}
}

func TestVerifyRowFinish(t *testing.T) {
	r := VerifyRow{NsPerEvent: []float64{30, 10, 20}, CPUNsPerEvent: []float64{1, 2, 3}, Ratios: []float64{2, 4}, allocs: []float64{5}, bytes: []float64{7}}
	r.finish()
	if r.MedianNs != 20 || r.MedianCPUNs != 2 || r.Ratio != 3 || r.EventsPerSec != 5e7 || r.AllocsPerOp != 5 || r.BytesPerOp != 7 {
		t.Fatalf("%+v", r)
	}
}

func TestLatStats(t *testing.T) {
	if latStats(nil) != (LatStats{}) {
		t.Fatal("empty")
	}
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i-10)*time.Millisecond) // −9 … 90 ms, unsorted
	}
	s := latStats(ds)
	ms := time.Millisecond
	want := LatStats{N: 100, Min: -9 * ms, P50: 40 * ms, P95: 85 * ms, P99: 89 * ms, Max: 90 * ms, Mean: 40500 * time.Microsecond}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	if ds[0] != 90*ms {
		t.Fatal("latStats sorted its input")
	}
}

// TestRunConcurrently: every index once, never more than conc at a time.
func TestRunConcurrently(t *testing.T) {
	var mu sync.Mutex
	in, peak := 0, 0
	seen := make([]int, 50)
	lat, errs, _ := runConcurrently(t.Context(), 50, 4, func(context.Context, int) error { return nil })
	if len(lat) != 50 || len(errs) != 50 {
		t.Fatalf("%d latencies, %d errors", len(lat), len(errs))
	}
	lat, errs, _ = runConcurrently(t.Context(), 50, 4, func(_ context.Context, i int) error {
		mu.Lock()
		in++
		peak = max(peak, in)
		seen[i]++
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		in--
		mu.Unlock()
		return nil
	})
	if len(lat) != 50 || len(errs) != 50 || peak > 4 || peak < 1 {
		t.Fatalf("%d latencies, %d errors, peak %d", len(lat), len(errs), peak)
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("index %d ran %d times", i, n)
		}
	}
}

// TestSinkWorkflow: the part 3 workflow takes each event ID once, by
// signal or update, and refuses a repeated update in its validator.
func TestSinkWorkflow(t *testing.T) {
	var s sdktestsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(sinkWorkflow, workflow.RegisterOptions{Name: sinkWorkflowName})
	n1, n2 := notification("evt_a", "w"), notification("evt_b", "w")
	var rejected error
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(sinkSignalName, n1)
		env.SignalWorkflow(sinkSignalName, n1)
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(sinkUpdateName, "u1", &sdktestsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("update rejected: %v", err) }, OnComplete: func(any, error) {}}, n2)
		env.UpdateWorkflow(sinkUpdateName, "u2", &sdktestsuite.TestUpdateCallback{
			OnAccept: func() { t.Error("a repeated event was accepted") }, OnReject: func(err error) { rejected = err }, OnComplete: func(any, error) {}}, n2)
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(sinkStopSignal, nil) }, 3*time.Second)
	env.ExecuteWorkflow(sinkWorkflowName)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var taken int
	if err := env.GetWorkflowResult(&taken); err != nil || taken != 2 {
		t.Fatalf("taken %d, %v", taken, err)
	}
	if rejected == nil || !strings.Contains(rejected.Error(), "already taken") {
		t.Fatalf("the repeated update: %v", rejected)
	}
}

// TestWriteWebhooks renders a result: the claims rows, the tables and the
// summary sentence.
func TestWriteWebhooks(t *testing.T) {
	ms := time.Millisecond
	run := func(name string, conc int, p50 time.Duration, perSec float64) DeliveryRun {
		return DeliveryRun{Name: name, Concurrency: conc, Deliveries: 200, Latency: LatStats{N: 200, P50: p50, P95: 2 * p50, P99: 3 * p50, Max: 4 * p50}, PerSecond: perSec}
	}
	wh := &WebhooksResult{Params: defaultWebhooks, Start: 5 * time.Second,
		Verify: &VerifyResult{Events: 100, Rounds: 1, Rows: []VerifyRow{
			{Name: rowBare, MedianNs: 2000, EventsPerSec: 500000, BodyBytes: 1050, NsPerEvent: []float64{2000}},
			{Name: rowMAC, MedianNs: 3000, Ratio: 1.5},
			{Name: "receiver, standard-webhooks", MedianNs: 40000, EventsPerSec: 25000, Ratio: 20},
			{Name: "receiver, stripe", MedianNs: 40000, EventsPerSec: 25000, Ratio: 20},
			{Name: "receiver, hmac", MedianNs: 40000, EventsPerSec: 25000, Ratio: 20},
			{Name: rowClientSecret, MedianNs: 80000, EventsPerSec: 12500, Ratio: 40, BodyBytes: 1100},
		}},
		Latency: []DeliveryRun{run("receiver, stripe", 1, 20*ms, 45), run("receiver, stripe", 8, 40*ms, 150)},
		Mech: &MechResult{Sinks: 40,
			Runs: []DeliveryRun{run(mechUpdate, 1, 15*ms, 60), run(mechSignal, 1, 5*ms, 180), run(mechSignalWithStart, 1, 6*ms, 160),
				run(mechUpdate, 8, 30*ms, 250), run(mechSignal, 8, 10*ms, 700), run(mechSignalWithStart, 8, 12*ms, 600)},
			History: []HistoryDelta{{Mechanism: mechUpdate, First: 5, Duplicate: 0, Taken: 1}, {Mechanism: mechSignal, First: 4, Duplicate: 4, Taken: 1},
				{Mechanism: mechSignalWithStart, First: 4, Duplicate: 4, Taken: 1}}},
	}
	var b strings.Builder
	writeWebhooksClaims(&b, wh)
	writeWebhooks(&b, wh)
	out := b.String()
	for _, want := range []string{"| 10a |", "stripe 25000/s", "| 10b |", "| 10c |", "| 10d |", "Update 0 events (first delivery 5); Signal 4 (first 4) | Update: 0 | yes |",
		"Update: 15.0 ms p50", "Signal: 5.0 ms p50", "## 10. Webhooks", "A Signal's p50 is 0.33 × an Update's", "Update 5 events per delivery, 0 per duplicate", "2.00 ×"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	wh.Mech.History[0].Duplicate = 1
	b.Reset()
	writeWebhooksClaims(&b, wh)
	if !strings.Contains(b.String(), "MISSED") {
		t.Error("a duplicate update that added an event is not missed")
	}
}

func TestCloseVsAnswer(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		s    LatStats
		want string
	}{
		{LatStats{}, "not measured"},
		{LatStats{N: 3, P50: -3 * ms, Max: -ms}, "every workflow had closed before the 2xx reached the provider (p50 3.0 ms before, the latest 1.0 ms before)"},
		{LatStats{N: 3, P50: -3 * ms, Max: 2 * ms}, "closed 3.0 ms before the 2xx reached the provider (p50; the latest 2.0 ms after it)"},
		{LatStats{N: 3, P50: 4 * ms, Max: 5 * ms}, "closed 4.0 ms after the 2xx (p50)"},
	} {
		if got := closeVsAnswer(c.s); !strings.Contains(got, c.want) {
			t.Errorf("%+v: %q, want %q", c.s, got, c.want)
		}
	}
}
