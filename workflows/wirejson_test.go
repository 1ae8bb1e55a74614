package workflows_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestWireJSONOfOperationTypes pins the JSON that Accepted, the poll
// activity's input (poll.Monitor), RetryOptions, backoff.Backoff,
// WebhookPoll, poll.StatusRule and Notification (an update's
// argument: one that names no call is the JSON of before KeyDigest) write
// to Temporal's history and
// send between workflow and activity: byte for byte, zero fields omitted,
// durations as strings. It also decodes each golden document, and the
// same with durations as nanoseconds (histories written before), back to
// the same value.
func TestWireJSONOfOperationTypes(t *testing.T) {
	var acc workflows.Accepted
	acc.Operation, acc.Method, acc.URL, acc.IdempotencyKey = "refund", "POST", "https://api.example.com/refunds", "key-1"
	acc.StartStatus, acc.RetryAfter, acc.Waited, acc.Monitor = 202, 2*time.Second, time.Second, "https://api.example.com/operations/7"
	acc.StatusDocument, acc.ResultURL, acc.State, acc.Polls = true, "https://api.example.com/refunds/7", "InProgress", 3
	const accJSON = `{"operation":"refund","method":"POST","url":"https://api.example.com/refunds","idempotency_key":"key-1","start_status":202,"retry_after":"2s","waited":"1s","monitor":"https://api.example.com/operations/7","status_document":true,"result_url":"https://api.example.com/refunds/7","state":"InProgress","polls":3}`
	const accNanos = `{"operation":"refund","method":"POST","url":"https://api.example.com/refunds","idempotency_key":"key-1","start_status":202,"retry_after":2000000000,"waited":1000000000,"monitor":"https://api.example.com/operations/7","status_document":true,"result_url":"https://api.example.com/refunds/7","state":"InProgress","polls":3}`

	var mon poll.Monitor
	mon.Operation, mon.IdempotencyKey, mon.Method, mon.URL = "refund", "key-1", "POST", "https://api.example.com/refunds"
	mon.Monitor, mon.StatusDocument, mon.ResultURL = "https://api.example.com/operations/7", true, "https://api.example.com/refunds/7"
	mon.StartStatus, mon.RetryAfter = 202, 2*time.Second
	mon.Backoff = poll.Backoff(time.Second, time.Minute)
	mon.Cancel = true
	mon.Status = &poll.StatusRule{StatusField: "state", Succeeded: []string{"succeeded"}, Failed: []string{"failed"}, Canceled: []string{"canceled"}}
	const monJSON = `{"operation":"refund","idempotency_key":"key-1","method":"POST","url":"https://api.example.com/refunds","monitor":"https://api.example.com/operations/7","status_document":true,"result_url":"https://api.example.com/refunds/7","start_status":202,"retry_after":"2s","backoff":{"initial_interval":"1s","backoff_coefficient":2,"maximum_interval":"1m0s","jitter":"equal"},"cancel":true,"status":{"field":"state","succeeded":["succeeded"],"failed":["failed"],"canceled":["canceled"]}}`
	const monNanos = `{"operation":"refund","idempotency_key":"key-1","method":"POST","url":"https://api.example.com/refunds","monitor":"https://api.example.com/operations/7","status_document":true,"result_url":"https://api.example.com/refunds/7","start_status":202,"retry_after":2000000000,"backoff":{"initial_interval":1000000000,"backoff_coefficient":2,"maximum_interval":60000000000,"jitter":"equal"},"cancel":true,"status":{"field":"state","succeeded":["succeeded"],"failed":["failed"],"canceled":["canceled"]}}`

	var retry workflows.RetryOptions
	retry.InitialInterval, retry.BackoffCoefficient, retry.MaximumInterval = 200*time.Millisecond, 1.5, 10*time.Second
	retry.MaximumAttempts, retry.Jitter = 7, workflows.JitterDecorrelated
	const retryJSON = `{"initial_interval":"200ms","backoff_coefficient":1.5,"maximum_interval":"10s","maximum_attempts":7,"jitter":"decorrelated"}`

	var bo backoff.Backoff
	bo.InitialInterval, bo.BackoffCoefficient, bo.MaximumInterval, bo.Jitter = 200*time.Millisecond, 2, 10*time.Second, "full"
	const backoffJSON = `{"initial_interval":"200ms","backoff_coefficient":2,"maximum_interval":"10s","jitter":"full"}`

	var in input.Input
	in.Operation, in.Method, in.URL, in.IdempotencyKey = "charge", "POST", "https://api.example.com/charges", "key-2"
	in.Backoff, in.MaximumAttempts, in.Follow, in.StartWait = bo, 5, true, 2*time.Second
	const inJSON = `{"operation":"charge","method":"POST","url":"https://api.example.com/charges","idempotency_key":"key-2","backoff":{"initial_interval":"200ms","backoff_coefficient":2,"maximum_interval":"10s","jitter":"full"},"maximum_attempts":5,"follow":true,"start_wait":"2s"}`

	wp := workflows.WebhookPoll{URL: "https://api.example.com/v1/charges/{id}", After: 5 * time.Minute, StatusField: "state",
		Succeeded: []string{"succeeded"}, Failed: []string{"failed"}, Canceled: []string{"canceled"}, Confirm: true,
		Interval: time.Second, MaximumInterval: time.Minute}
	const pollJSON = `{"url":"https://api.example.com/v1/charges/{id}","after":"5m0s","status_field":"state","succeeded":["succeeded"],"failed":["failed"],"canceled":["canceled"],"confirm":true,"interval":"1s","maximum_interval":"1m0s"}`

	req := workflows.Request{Operation: "charge", URL: "https://api.example.com/charges", Retry: retry,
		Webhook: &workflows.WebhookOptions{Poll: &workflows.WebhookPoll{URL: "https://api.example.com/c/{id}", Succeeded: []string{"ok"}}}}
	const reqJSON = `{"operation":"charge","url":"https://api.example.com/charges","retry":{"initial_interval":"200ms","backoff_coefficient":1.5,"maximum_interval":"10s","maximum_attempts":7,"jitter":"decorrelated"},"webhook":{"poll":{"url":"https://api.example.com/c/{id}","succeeded":["ok"]}}}`

	note := workflows.Notification{ID: "evt_1", Type: "refund.succeeded", Operation: "refund", Scheme: "stripe",
		Received: time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC), Body: []byte(`{"id":"evt_1"}`)}
	const noteJSON = `{"id":"evt_1","type":"refund.succeeded","operation":"refund","scheme":"stripe","received":"2026-12-06T05:00:00Z","body":{"id":"evt_1"}}`
	keyed := note
	keyed.KeyDigest = idemkey.Digest("refund-order-7-first")
	keyedJSON := `{"id":"evt_1","type":"refund.succeeded","operation":"refund","key_digest":"` + keyed.KeyDigest + `","scheme":"stripe","received":"2026-12-06T05:00:00Z","body":{"id":"evt_1"}}`

	tests := []struct {
		name  string
		value any    // marshalled: must give want
		want  string // the bytes today's code writes
		nanos string // the same with durations as nanoseconds, if any
		into  func() any
	}{
		{"accepted zero", workflows.Accepted{}, `{"url":"","monitor":""}`, "", func() any { return new(workflows.Accepted) }},
		{"accepted all", acc, accJSON, accNanos, func() any { return new(workflows.Accepted) }},
		{"response accepted", workflows.Response{Status: 200, Accepted: &acc}, `{"status":200,"body_bytes":0,"replayed":false,"attempt":0,"idempotency_key":"","accepted":` + accJSON + `}`, "", func() any { return new(workflows.Response) }},
		{"failure accepted", workflows.Failure{Attempt: 2, Accepted: &acc}, `{"attempt":2,"accepted":` + accJSON + `}`, "", func() any { return new(workflows.Failure) }},
		{"monitor zero", poll.Monitor{}, `{"url":"","monitor":""}`, "", func() any { return new(poll.Monitor) }},
		{"monitor all", mon, monJSON, monNanos, func() any { return new(poll.Monitor) }},
		{"retry zero", workflows.RetryOptions{}, `{}`, "", func() any { return new(workflows.RetryOptions) }},
		{"retry all", retry, retryJSON, `{"initial_interval":200000000,"backoff_coefficient":1.5,"maximum_interval":10000000000,"maximum_attempts":7,"jitter":"decorrelated"}`, func() any { return new(workflows.RetryOptions) }},
		{"backoff zero", backoff.Backoff{}, `{}`, "", func() any { return new(backoff.Backoff) }},
		{"backoff all", bo, backoffJSON, `{"initial_interval":200000000,"backoff_coefficient":2,"maximum_interval":10000000000,"jitter":"full"}`, func() any { return new(backoff.Backoff) }},
		{"input", in, inJSON, `{"operation":"charge","method":"POST","url":"https://api.example.com/charges","idempotency_key":"key-2","backoff":{"initial_interval":200000000,"backoff_coefficient":2,"maximum_interval":10000000000,"jitter":"full"},"maximum_attempts":5,"follow":true,"start_wait":2000000000}`, func() any { return new(input.Input) }},
		{"webhook poll zero", workflows.WebhookPoll{}, `{"url":""}`, "", func() any { return new(workflows.WebhookPoll) }},
		{"webhook poll all", wp, pollJSON, `{"url":"https://api.example.com/v1/charges/{id}","after":300000000000,"status_field":"state","succeeded":["succeeded"],"failed":["failed"],"canceled":["canceled"],"confirm":true,"interval":1000000000,"maximum_interval":60000000000}`, func() any { return new(workflows.WebhookPoll) }},
		{"status rule zero", poll.StatusRule{}, `{"field":""}`, "", func() any { return new(poll.StatusRule) }},
		{"status rule all", *mon.Status, `{"field":"state","succeeded":["succeeded"],"failed":["failed"],"canceled":["canceled"]}`, "", func() any { return new(poll.StatusRule) }},
		{"status rule of a webhook poll", poll.StatusRule(wp), `{"field":"state","succeeded":["succeeded"],"failed":["failed"],"canceled":["canceled"]}`, "", func() any { return new(poll.StatusRule) }},
		{"request", req, reqJSON, "", func() any { return new(workflows.Request) }},
		{"notification naming no call", note, noteJSON, "", func() any { return new(workflows.Notification) }},
		{"notification naming its call", keyed, keyedJSON, "", func() any { return new(workflows.Notification) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.value)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
			for _, doc := range []string{tt.want, tt.nanos} {
				if doc == "" {
					continue
				}
				v := tt.into()
				require.NoError(t, json.Unmarshal([]byte(doc), v))
				again, err := json.Marshal(v)
				require.NoError(t, err)
				assert.Equal(t, tt.want, string(again), "decoded from %s", doc)
			}
		})
	}
}
