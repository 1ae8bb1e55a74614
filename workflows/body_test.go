package workflows_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestOversizedResultsStayUnderThePayloadLimit (class 5): a 201 whose body
// would pass Temporal's payload limit once encoded (JSON escaping makes a
// string of '<' six times longer, base64 a binary body 4/3) is a success
// with the body omitted, identified by its size and SHA-256, and the
// encoded result stays within Config.MaxResultBytes; the ready workflow in
// the test environment returns it.
func TestOversizedResultsStayUnderThePayloadLimit(t *testing.T) {
	lt := []byte(`{"html":"` + strings.Repeat("<", 1<<20-16) + `"}`)
	require.LessOrEqual(t, len(lt), defaults.MaxResponseBytes, "within MaxResponseBytes: only the encoding is too large")
	bin := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		b[0] = 0xff // never valid JSON
		return b
	}
	tests := []struct {
		name        string
		body        []byte
		ctype       string
		maxResult   int
		wantOmitted bool
	}{
		{"1 MiB of < in one JSON string", lt, "application/json", 0, true},
		{"1 MiB of binary under the default bound", bin(1 << 20), "application/octet-stream", 0, false},
		{"binary whose base64 fits", bin(180 << 10), "application/octet-stream", 256 << 10, false},
		{"binary whose base64 does not fit", bin(200 << 10), "application/octet-stream", 256 << 10, true},
		{"JSON of < that fits unescaped but not escaped", []byte(`"` + strings.Repeat("<", 100<<10) + `"`), "application/json", 256 << 10, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRawServer(t, answer(201, string(tt.body), "Content-Type", tt.ctype))
			cfg := activities.Config{AllowedOrigins: []string{srv.URL}, MaxResultBytes: tt.maxResult}
			bound := tt.maxResult
			if bound == 0 {
				bound = defaults.MaxResultBytes
			}
			env, _, _ := loggedEnv(t, cfg)
			env.ExecuteWorkflow(workflows.WorkflowName, workflows.Request{Operation: "report", URL: srv.URL + "/reports", Body: json.RawMessage(`{}`)})
			require.NoError(t, env.GetWorkflowError())
			var resp workflows.Response
			require.NoError(t, env.GetWorkflowResult(&resp))
			assert.Equal(t, 201, resp.Status)
			assert.Equal(t, int64(len(tt.body)), resp.BodyBytes)

			enc, err := json.Marshal(resp)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(enc), bound, "json.Marshal of the result")
			p, err := converter.GetDefaultDataConverter().ToPayload(resp)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(p.GetData()), bound, "the payload Temporal stores")

			if tt.wantOmitted {
				assert.True(t, resp.BodyOmitted)
				assert.Equal(t, "too large", resp.OmittedReason)
				assert.Equal(t, sha(tt.body), resp.BodySHA256, "SHA-256 of what the server sent")
				assert.Empty(t, resp.Body)
				assert.Empty(t, resp.RawBody)
				return
			}
			assert.False(t, resp.BodyOmitted)
			assert.Equal(t, tt.body, []byte(resp.RawBody), "kept byte for byte")
		})
	}
}

// TestBodyReachesTheServerByteForByte (class 7): a json.RawMessage body with
// spaces, newlines, <, >, &, U+2028 and U+2029 reaches the server exactly as
// given, through workflows.Call and through the ready workflow, and the
// body_sha256 logged (the activity's success line, the workflow's failure
// line) is the SHA-256 of those bytes.
func TestBodyReachesTheServerByteForByte(t *testing.T) {
	bodies := map[string]string{
		"pretty with HTML characters": "{\n  \"note\": \"a < b > c & d\",\n\t\"amount\" : 42 \n}\n",
		"line separators":             "{\"memo\":\"one\u2028two\u2029three\"}",
		"escapes kept as written":     `{"s":"\u003c\/tag\u003e \u00e9 \ud83d\ude00","n":1.50,"e":1E+2}`,
		"a bare JSON string":          `"<&>"`,
		"a number":                    ` 1e3 `,
		"null":                        `null`,
		"array with spaces":           `[ 1 , "x" , true ]`,
	}
	for name, body := range bodies {
		for _, via := range []string{"Call", "ready workflow"} {
			for _, status := range []int{201, 400} {
				t.Run(fmt.Sprintf("%s/%s/%d", name, via, status), func(t *testing.T) {
					srv := newRawServer(t, answer(status, `{"ok":true}`))
					env, logs, _ := loggedEnv(t, activities.Config{AllowedOrigins: []string{srv.URL}})
					req := workflows.Request{Operation: "charge", URL: srv.URL + "/payments", Body: json.RawMessage(body)}
					if via == "Call" {
						env.ExecuteWorkflow(func(ctx workflow.Context) error {
							_, err := workflows.Call(ctx, req)
							return err
						})
					} else {
						env.ExecuteWorkflow(workflows.WorkflowName, req)
					}
					got, _ := srv.requests()
					require.Len(t, got, 1)
					assert.Equal(t, body, string(got[0]), "the bytes on the wire")
					want := sha([]byte(body))
					if status == 201 {
						require.NoError(t, env.GetWorkflowError())
						lines := logLines(t, logs, "HTTP request succeeded")
						require.Len(t, lines, 1)
						assert.Equal(t, want, lines[0]["body_sha256"])
						return
					}
					require.Error(t, env.GetWorkflowError())
					lines := logLines(t, logs, "idempotent HTTP call failed")
					require.Len(t, lines, 1)
					assert.Equal(t, want, lines[0]["body_sha256"])
				})
			}
		}
	}
}
