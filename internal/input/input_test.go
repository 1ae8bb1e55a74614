package input

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
)

// The JSON of the activity input as activities.Request encoded it before
// Input replaced it (captured with json.Marshal on that type): Input must
// write the same bytes, or histories recorded before would no longer
// replay and other SDKs writing this input would break.
const (
	// A body that re-encoding would change travels as a JSON string.
	legacyFull = `{"operation":"charge","method":"PUT","url":"https://api.example.com/charges?x=1\u0026y=\u003c2\u003e","body":"{ \"order\": \"o-1\", \"amount\": 4200, \"note\": \"\u003cb\u003e\u0026\u003c/b\u003e\" }","headers":{"Accept-Language":"fr","X-Note":"a\u003cb\u003e\u0026c"},"idempotency_key":"ed0695de-e029-54c5-a378-1a3168729b36","backoff":{"initial_interval":"1.5s","backoff_coefficient":1.5,"maximum_interval":"1m30s","jitter":"decorrelated"},"maximum_attempts":7}`
	// A compact body travels as the document itself.
	legacyCompact = `{"operation":"charge","method":"PUT","url":"https://api.example.com/charges?x=1\u0026y=\u003c2\u003e","body":{"order":"o-1","amount":4200},"headers":{"Accept-Language":"fr","X-Note":"a\u003cb\u003e\u0026c"},"idempotency_key":"ed0695de-e029-54c5-a378-1a3168729b36","backoff":{"initial_interval":"1.5s","backoff_coefficient":1.5,"maximum_interval":"1m30s","jitter":"decorrelated"},"maximum_attempts":7}`
	// Zero fields are left out (backoff too).
	legacyMinimal = `{"url":"https://a.example/","idempotency_key":"k"}`
)

func fullInput(body string) Input {
	return Input{
		Operation: "charge", Method: "PUT", URL: "https://api.example.com/charges?x=1&y=<2>",
		Body:           json.RawMessage(body),
		Headers:        map[string]string{"X-Note": "a<b>&c", "Accept-Language": "fr"},
		IdempotencyKey: "ed0695de-e029-54c5-a378-1a3168729b36",
		Backoff: backoff.Backoff{
			InitialInterval: 1500 * time.Millisecond, BackoffCoefficient: 1.5,
			MaximumInterval: time.Minute + 30*time.Second, Jitter: "decorrelated",
		},
		MaximumAttempts: 7,
	}
}

func TestInputJSONMatchesLegacyRequest(t *testing.T) {
	cases := []struct {
		name string
		in   Input
		want string
	}{
		{"full, body kept as text", fullInput(`{ "order": "o-1", "amount": 4200, "note": "<b>&</b>" }`), legacyFull},
		{"full, compact body", fullInput(`{"order":"o-1","amount":4200}`), legacyCompact},
		{"minimal", Input{URL: "https://a.example/", IdempotencyKey: "k"}, legacyMinimal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := json.Marshal(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("encoding changed:\n got %s\nwant %s", got, c.want)
			}
			var back Input
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, c.in) {
				t.Fatalf("round trip: got %+v, want %+v", back, c.in)
			}
		})
	}
}

// TestInputDecodesOldHistory decodes activity input as the first recorded
// history holds it (workflows/testdata/seed_history.json): durations as
// nanoseconds, the body as plain JSON, no maximum_attempts.
func TestInputDecodesOldHistory(t *testing.T) {
	const old = `{"operation":"charge","method":"POST","url":"http://127.0.0.1:41601/payments","body":{"order":"order-1","amount":4200},"idempotency_key":"ed0695de-e029-54c5-a378-1a3168729b36","backoff":{"initial_interval":200000000,"backoff_coefficient":2,"maximum_interval":10000000000,"jitter":"full"}}`
	var in Input
	if err := json.Unmarshal([]byte(old), &in); err != nil {
		t.Fatal(err)
	}
	want := Input{
		Operation: "charge", Method: "POST", URL: "http://127.0.0.1:41601/payments",
		Body:           json.RawMessage(`{"order":"order-1","amount":4200}`),
		IdempotencyKey: "ed0695de-e029-54c5-a378-1a3168729b36",
		Backoff:        backoff.Backoff{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, Jitter: "full"},
	}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("got %+v, want %+v", in, want)
	}

	// The second history (seed_history_v2.json): string durations, fields
	// in another order, a body that travels as text.
	const v2 = `{"operation":"charge","method":"POST","url":"http://127.0.0.1:36547/payments","idempotency_key":"ed0695de-e029-54c5-a378-1a3168729b36","backoff":{"backoff_coefficient":2,"jitter":"full","initial_interval":"1s","maximum_interval":"10s"},"maximum_attempts":5,"body":"{ \"order\": \"order-1\", \"amount\": 4200, \"note\": \"\u003cb\u003e\u0026\u003c/b\u003e\" }"}`
	in = Input{}
	if err := json.Unmarshal([]byte(v2), &in); err != nil {
		t.Fatal(err)
	}
	want = Input{
		Operation: "charge", Method: "POST", URL: "http://127.0.0.1:36547/payments",
		Body:            json.RawMessage(`{ "order": "order-1", "amount": 4200, "note": "<b>&</b>" }`),
		IdempotencyKey:  "ed0695de-e029-54c5-a378-1a3168729b36",
		Backoff:         backoff.Backoff{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, Jitter: "full"},
		MaximumAttempts: 5,
	}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("got %+v, want %+v", in, want)
	}
}

func TestSummary(t *testing.T) {
	tests := []struct{ method, url, op, want string }{
		{"POST", "https://api.example.com/payments?x=1", "charge", "POST api.example.com/payments (charge)"},
		{"PUT", "http://127.0.0.1:8081/orders/7", "", "PUT 127.0.0.1:8081/orders/7"},
	}
	for _, tt := range tests {
		if got := Summary(tt.method, tt.url, tt.op); got != tt.want {
			t.Errorf("Summary(%q, %q, %q) = %q, want %q", tt.method, tt.url, tt.op, got, tt.want)
		}
	}
}
