package activities_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
)

// TestMonitorHeaderInResultHeadersIsRedactedAsAURL: an operator who adds
// the convention's monitor header (Operation-Location) to
// Config.ResultHeaders must not get in Response.Headers the signature
// that made the worker seal the monitor (Accepted.Sealed): a URL a server
// sends is stored with its query values redacted, whatever header holds it.
func TestMonitorHeaderInResultHeadersIsRedactedAsAURL(t *testing.T) {
	const sig = "sv2024sig_Q1w2E3r4T5y6U7i8"
	for _, h := range []string{"Operation-Location", "Azure-AsyncOperation"} {
		t.Run(h, func(t *testing.T) {
			api := newRecorder(t, status(http.StatusAccepted, "", h, "/operations/1?api-version=2024-01-01&sig="+sig))
			c := activities.IETFConvention()
			c.LongRunning = activities.OperationLocation()
			if h == "Azure-AsyncOperation" {
				c.LongRunning = activities.AzureAsyncOperation()
			}
			cfg := activities.Config{AllowedOrigins: []string{api.URL}, SealKeys: [][]byte{bytes.Repeat([]byte{3}, 32)},
				ResultHeaders: []string{"Content-Type", h}, Conventions: map[string]activities.Convention{api.URL: c}}
			r := req(api.URL + "/transfers")
			r.Follow = true
			resp, logs, err := run(t, cfg, r)
			require.NoError(t, err)
			require.NotNil(t, resp.Accepted)
			require.NotEmpty(t, resp.Accepted.Sealed, "the signature made the monitor travel sealed")
			assert.Contains(t, resp.Headers, http.CanonicalHeaderKey(h))
			assertNoPiece(t, err, resp, logs, sig)
		})
	}
}
