package activities_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestPollUncleanLocationNotShown (issue 30, item 14, found by FuzzPoll):
// a monitor's 303 whose Location does not parse cleanly (invalid UTF-8
// before what was a query) never shows the rest whole, in the error's
// message, the Failure's Reason or its URL: it is cut where it stops
// being a URL (redact.URL).
func TestPollUncleanLocationNotShown(t *testing.T) {
	for _, loc := range []string{
		"/results/1\xff\xffig=" + qsecret, // the fuzzer's: followed, then answered 303 again
		"/results/1%FF%FFig=" + qsecret,
		"/results/1%3Fsig=" + qsecret,
		"https://elsewhere.example/r\xff\xffsig=" + qsecret, // not followed
	} {
		t.Run(loc, func(t *testing.T) {
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", loc)
				w.WriteHeader(http.StatusSeeOther)
			})
			a, err := activities.New(activities.Config{AllowedOrigins: []string{srv.URL}, Admission: activities.Admission{Off: true}})
			require.NoError(t, err)
			var s sdktestsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			a.Register(env)
			in := poll.Monitor{Accepted: poll.Accepted{Operation: "refund", Method: http.MethodPost, URL: srv.URL + "/refunds", Monitor: srv.URL + "/operations/1"}}
			_, err = env.ExecuteActivity(poll.ActivityName, in)
			require.Error(t, err)
			d, ok := workflows.AsFailure(err)
			require.True(t, ok, "a Failure: %v", err)
			enc, _ := json.Marshal(d)
			for where, text := range map[string]string{"error": err.Error(), "Failure": string(enc), "Reason": d.Reason, "URL": d.URL} {
				assert.NotContains(t, text, qsecret[:8], "%s shows what follows the unclean byte", where)
			}
			assert.True(t, strings.Contains(err.Error(), redact.CutURL), "the cut is said: %s", err)
		})
	}
}

// TestWebhookPollURLWithQuery: a WebhookPoll.URL with a query, which the
// workflow wrote (and Temporal's history holds, as it holds Request.URL),
// is polled as written, its placeholders filled there too (escaped as
// query values); it is not held to the origin's
// Convention.LongRunning.KeepQuery, which guards the monitors a server
// names.
func TestWebhookPollURLWithQuery(t *testing.T) {
	for _, tc := range []struct {
		name, id, poll, want string
	}{
		{"a parameter after the placeholder", "ch_1", "/charges/{id}?expand=latest_charge", "/charges/ch_1?expand=latest_charge"},
		{"Stripe's expand[]", "ch_1", "/charges/{id}?expand[]=latest_charge", "/charges/ch_1?expand[]=latest_charge"},
		{"a placeholder in the query", "ch 1&status=x", "/charges?id={id}", "/charges?id=ch+1%26status%3Dx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var polled []string
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					w.WriteHeader(http.StatusCreated)
					_, _ = fmt.Fprintf(w, `{"id":%q,"status":"processing"}`, tc.id)
					return
				}
				mu.Lock()
				polled = append(polled, r.URL.RequestURI())
				mu.Unlock()
				_, _ = fmt.Fprintf(w, `{"id":%q,"status":"succeeded"}`, tc.id)
			})
			env := testsuite.Register(t, nil, &testsuite.Server{URL: srv.URL}, activities.Config{})
			req := workflows.Request{Operation: "charge", Method: http.MethodPost, URL: srv.URL + "/charges", Body: []byte(`{}`),
				Webhook: &workflows.WebhookOptions{Succeeded: []string{"charge.succeeded"}, Timeout: 10 * time.Minute,
					Poll: &workflows.WebhookPoll{URL: srv.URL + tc.poll, After: time.Minute, Succeeded: []string{"succeeded"}}}}
			require.NoError(t, req.Validate())
			env.ExecuteWorkflow(workflows.WorkflowName, req)
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var resp workflows.Response
			require.NoError(t, env.GetWorkflowResult(&resp))
			require.NotNil(t, resp.Outcome)
			assert.Equal(t, workflows.SourcePoll, resp.Outcome.Source)
			assert.Equal(t, workflows.StateSucceeded, resp.Outcome.State)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{tc.want}, polled)
		})
	}
}
