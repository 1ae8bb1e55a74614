package capture_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/examples/capture"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// README: test

func TestCapture(t *testing.T) {
	secret := newSecret()
	t.Setenv("WEBHOOK_SECRETS", secret)
	t.Setenv("STRIPE_WEBHOOK_SECRET", "whsec_stripe_test_2b7f")
	c := devServer(t) // a Temporal dev server (harness/itest)
	hooks, err := capture.Receivers(c)
	require.NoError(t, err)
	receiver := httptest.NewServer(hooks)
	defer receiver.Close()
	api := testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{
		URL: receiver.URL + "/webhooks/standard", Secret: secret, Duration: time.Second,
		Deliveries: 3, Shuffle: true, Forged: 1, Stale: 1, // at least once, out of order, attacked
	}})
	w := worker.New(c, "payments", worker.Options{})
	require.NoError(t, capture.Register(w, api.URL))
	require.NoError(t, w.Start())
	defer w.Stop()

	run, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: "order-1", TaskQueue: "payments"},
		capture.Capture, capture.Payment{Order: "order-1", Cents: 4200, APIURL: api.URL})
	require.NoError(t, err)
	var r capture.Receipt
	require.NoError(t, run.Get(t.Context(), &r))
	require.Equal(t, workflows.SourceWebhook, r.Source)
	require.Equal(t, "op_1", r.PaymentID)
	require.Equal(t, 1, api.Stats().Records) // charged once
}

// README: end

// TestCaptureDeclined: a declined payment is the provider's answer, from
// its Stripe-signed webhook, not a workflow failure.
func TestCaptureDeclined(t *testing.T) {
	t.Setenv("WEBHOOK_SECRETS", newSecret())
	t.Setenv("STRIPE_WEBHOOK_SECRET", "whsec_stripe_test_2b7f")
	c := devServer(t)
	hooks, err := capture.Receivers(c)
	require.NoError(t, err)
	receiver := httptest.NewServer(hooks)
	defer receiver.Close()
	api := testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{
		URL: receiver.URL + "/webhooks/stripe", Scheme: "stripe", Secret: "whsec_stripe_test_2b7f",
		State: workflows.StateFailed, Deliveries: 2, Forged: 1,
	}})
	w := worker.New(c, "payments-declined", worker.Options{})
	require.NoError(t, capture.Register(w, api.URL))
	require.NoError(t, w.Start())
	defer w.Stop()
	run, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: "order-2", TaskQueue: "payments-declined"},
		capture.Capture, capture.Payment{Order: "order-2", Cents: 4200, APIURL: api.URL})
	require.NoError(t, err)
	var r capture.Receipt
	require.NoError(t, run.Get(t.Context(), &r))
	require.True(t, r.Declined)
	require.Equal(t, workflows.SourceWebhook, r.Source)
	require.False(t, r.At.IsZero())
	require.Equal(t, 1, api.Stats().Records)
}

// newSecret is a Standard Webhooks secret: "whsec_" and 24 random bytes.
func newSecret() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// devServer builds the Temporal CLI pinned by tools/go.mod into <repo>/bin
// (seconds on a warm build cache) and starts a dev server for t.
func devServer(t *testing.T) client.Client {
	t.Helper()
	root, err := itest.RepoRoot()
	require.NoError(t, err)
	cli := filepath.Join(root, "bin", "temporal")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	require.NoError(t, itest.BuildCLI(ctx, cli), "building the Temporal CLI")
	return itest.StartDevServerT(t, itest.DevServerOptions{CLI: cli}).Client()
}
