package activities_test

// Review of #41 (branch review-41): failing tests that show where a call
// that reconciles sends again without a lookup's "not found" or a person's
// unpause, or takes for its result a record that is not its own.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// scriptedAPI is a keyless payments API whose GET (the lookup) answers
// what get returns, and whose POSTs follow posts ("ok", "drop": closed
// before anything was done, "cut": done then closed, "408": done then a
// 408 with X-Should-Retry: true).
type scriptedAPI struct {
	*httptest.Server
	mu       sync.Mutex
	posts    []string
	payments []map[string]any
	lookups  int
	get      func(r *http.Request, payments []map[string]any) (int, any)
}

func newScriptedAPI(t *testing.T, posts []string, get func(*http.Request, []map[string]any) (int, any)) *scriptedAPI {
	api := &scriptedAPI{posts: posts, get: get}
	api.Server = httptest.NewServer(http.HandlerFunc(api.serve))
	t.Cleanup(api.Close)
	return api
}

func (api *scriptedAPI) serve(w http.ResponseWriter, r *http.Request) {
	api.mu.Lock()
	defer api.mu.Unlock()
	if r.Method == http.MethodGet {
		api.lookups++
		st, v := api.get(r, api.payments)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st)
		if v != nil {
			_ = json.NewEncoder(w).Encode(v)
		}
		return
	}
	b, _ := io.ReadAll(r.Body)
	step := "ok"
	if len(api.posts) > 0 {
		step, api.posts = api.posts[0], api.posts[1:]
	}
	if step == "drop" {
		hijackClose(w)
		return
	}
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	m["id"] = "pay_" + string(rune('0'+len(api.payments)+1))
	api.payments = append(api.payments, m)
	switch step {
	case "cut":
		hijackClose(w)
		return
	case "408":
		w.Header().Set("X-Should-Retry", "true")
		w.WriteHeader(http.StatusRequestTimeout)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(m)
}

func (api *scriptedAPI) count() (payments, lookups int) {
	api.mu.Lock()
	defer api.mu.Unlock()
	return len(api.payments), api.lookups
}

func runCall(t *testing.T, url string, r workflows.Request) (*workflows.Response, error) {
	t.Helper()
	env := testsuite.NewEnv(t)
	testsuite.Register(t, env, nil, activities.Config{AllowedOrigins: []string{url}, Uniform: func() float64 { return 0.5 }})
	wf := func(ctx workflow.Context) (*workflows.Response, error) { return workflows.Call(ctx, r) }
	env.RegisterWorkflow(wf)
	env.ExecuteWorkflow(wf)
	require.True(t, env.IsWorkflowCompleted())
	if err := env.GetWorkflowError(); err != nil {
		return nil, err
	}
	var resp *workflows.Response
	require.NoError(t, env.GetWorkflowResult(&resp))
	return resp, nil
}

func lookupCall(url string) workflows.Request {
	return workflows.Request{
		Operation: "charge", URL: url + "/payments", Body: json.RawMessage(`{"amount":4200}`),
		KeyIn: "body:client_reference", ScheduleToCloseTimeout: time.Minute,
		Reconcile: workflows.Reconcile{Lookup: url + "/payments?client_reference={key}"},
	}
}

// TestReview41LookupEnvelopeIsNotARecord: the lookup answers a list
// envelope ({"data": [], "has_more": false}, Stripe's and most APIs'
// shape) and Items was left out. reconcile.Read takes any JSON object as
// "the record": the call reports success (Reconciled "lookup") though the
// dropped POST made no payment, and it is never sent: a lost payment
// reported as made.
func TestReview41LookupEnvelopeIsNotARecord(t *testing.T) {
	api := newScriptedAPI(t, []string{"drop", "ok"}, func(_ *http.Request, ps []map[string]any) (int, any) {
		return 200, map[string]any{"object": "list", "data": []any{}, "has_more": false}
	})
	_, err := runCall(t, api.URL, lookupCall(api.URL))
	payments, _ := api.count()
	assertLookupFailed(t, err)
	assert.Zero(t, payments, "a lookup that cannot be read stops the call before its first POST")
}

// TestReview41LookupRecordOfAnotherKey: the lookup route ignores the
// filter (a misspelt or unsupported query parameter) and answers the one
// payment it has, another customer's. Read never checks that the record
// carries the call's key: that payment becomes this call's result, and
// this call's payment is never made.
func TestReview41LookupRecordOfAnotherKey(t *testing.T) {
	api := newScriptedAPI(t, []string{"drop", "ok"}, func(_ *http.Request, ps []map[string]any) (int, any) {
		list := []map[string]any{}
		for _, p := range ps {
			list = append(list, p) // the filter is ignored
		}
		return 200, list
	})
	api.payments = append(api.payments, map[string]any{"id": "pay_other", "client_reference": "someone-else", "amount": 1})
	_, err := runCall(t, api.URL, lookupCall(api.URL))
	assertLookupFailed(t, err)
	payments, _ := api.count()
	assert.Equal(t, 1, payments, "only the other customer's payment: none taken as this call's, none made blind")
}

// TestReview41Lookup404RouteIsNotNotFound: a lookup URL with a typo
// (/payment instead of /payments) gets the router's 404, which Read takes
// for "no record": after an answer cut once the payment was made, the
// POST is sent again, a second payment, with nothing to tell the
// operator that the lookup never worked.
func TestReview41Lookup404RouteIsNotNotFound(t *testing.T) {
	api := newScriptedAPI(t, []string{"cut", "ok"}, func(r *http.Request, ps []map[string]any) (int, any) {
		if r.URL.Path != "/payments" {
			return 404, map[string]any{"error": "no route " + r.URL.Path}
		}
		return 200, []any{}
	})
	r := lookupCall(api.URL)
	r.Reconcile.Lookup = api.URL + "/payment?client_reference={key}"
	_, err := runCall(t, api.URL, r)
	payments, lookups := api.count()
	assertLookupFailed(t, err)
	assert.Equal(t, 1, lookups)
	assert.Zero(t, payments, "a 404 from a route that does not exist is no \"not found\": nothing is sent")
}

// TestReview41AdvisedRetryOf408IsUnknown: a 408 may come from a gateway
// while the API goes on (unknownStatus says so), but decide's advice rule
// marks a retry advised by X-Should-Retry: true as unknown only for a
// 5xx: a 408 with that header leaves prev.Unknown false, so an AtMostOnce
// call sends again without a person's decision.
func TestReview41AdvisedRetryOf408IsUnknown(t *testing.T) {
	api := newScriptedAPI(t, []string{"408", "ok"}, func(*http.Request, []map[string]any) (int, any) { return 200, []any{} })
	_, err := runCall(t, api.URL, workflows.Request{
		Operation: "charge", URL: api.URL + "/payments", Body: json.RawMessage(`{"amount":1}`),
		Reconcile: workflows.Reconcile{AtMostOnce: true},
	})
	payments, _ := api.count()
	assert.Equal(t, 1, payments, "AtMostOnce sent again after a 408 (outcome unknown) because of a retry advice header")
	if assert.Error(t, err) {
		d, _ := workflows.AsFailure(err)
		assert.Equal(t, workflows.ErrTypeAwaitingDecision, d.Type)
	}
}

// TestReview41RunAgainAdviceSendsBlind: ErrTypeLookupFailed (and the
// other final errors of a reconciling call) tell the caller to "run the
// same workflow ID again". For an API without keys the same key protects
// nothing, and the new run's first attempt has no progress (Unknown
// false): it POSTs at once, without asking the lookup first: a second
// payment for a first that had gone through.
func TestReview41RunAgainAdviceSendsBlind(t *testing.T) {
	first := true
	api := newScriptedAPI(t, []string{"cut", "ok"}, func(r *http.Request, ps []map[string]any) (int, any) {
		if first {
			first = false
			return 403, map[string]any{"error": "lookup scope missing"}
		}
		list := []map[string]any{}
		for _, p := range ps {
			if p["client_reference"] == r.URL.Query().Get("client_reference") {
				list = append(list, p)
			}
		}
		return 200, list
	})
	_, err := runCall(t, api.URL, lookupCall(api.URL))
	require.Error(t, err)
	d, _ := workflows.AsFailure(err)
	require.Equal(t, workflows.ErrTypeLookupFailed, d.Type)
	require.Contains(t, err.Error(), "run the same workflow ID again")
	// The operator fixes the lookup's scope and follows the advice.
	_, err = runCall(t, api.URL, lookupCall(api.URL))
	payments, lookups := api.count()
	assert.NoError(t, err)
	assert.Equal(t, 1, payments, "the run the error advised made a second payment without asking the lookup (lookups: %d)", lookups)
}

// TestReview41RedirectKeepsQueryKey: send follows a 307 to Location as
// written: a key the activity put in the query (KeyIn "query:…") is not
// on the redirected request, which the API then takes without a key
// (or, reconciling, stores without the reference its lookup searches).
func TestReview41RedirectKeepsQueryKey(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.String())
		mu.Unlock()
		if r.URL.Path == "/v1/payments" {
			w.Header().Set("Location", "/v2/payments")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"pay_1"}`))
	}))
	t.Cleanup(srv.Close)
	resp, err := runCall(t, srv.URL, workflows.Request{
		Operation: "charge", URL: srv.URL + "/v1/payments", Body: json.RawMessage(`{"amount":1}`), KeyIn: "query:requestId",
	})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.True(t, strings.Contains(got[1], "requestId="+resp.IdempotencyKey), "the redirected request carries no key: %s", got[1])
}

// TestReview41FollowWithOriginReconcile: Request.Reconcile is refused with
// Follow ("cannot be combined with Follow or Webhook yet"), but the
// origin's Convention.Reconcile is applied to a Follow call unchecked:
// after an answer cut once the operation was started, the lookup's
// record of the operation still running comes back without Accepted, so
// followStart takes it for "the result at once" and the call returns
// success for an operation that has not finished (and may yet fail).
func TestReview41FollowWithOriginReconcile(t *testing.T) {
	api := newScriptedAPI(t, []string{"cut"}, func(r *http.Request, ps []map[string]any) (int, any) {
		list := []map[string]any{}
		for _, p := range ps {
			if p["client_reference"] == r.URL.Query().Get("client_reference") {
				q := map[string]any{"status": "running"}
				for k, v := range p {
					q[k] = v
				}
				list = append(list, q)
			}
		}
		return 200, list
	})
	conv := activities.IETFConvention()
	conv.KeyIn = "body:client_reference"
	conv.Reconcile = workflows.Reconcile{Lookup: api.URL + "/payments?client_reference={key}"}
	env := testsuite.NewEnv(t)
	testsuite.Register(t, env, nil, activities.Config{AllowedOrigins: []string{api.URL}, Conventions: map[string]activities.Convention{api.URL: conv}})
	r := workflows.Request{Operation: "export", URL: api.URL + "/payments", Body: json.RawMessage(`{"amount":1}`), Follow: &workflows.FollowOptions{}}
	wf := func(ctx workflow.Context) (*workflows.Response, error) { return workflows.Call(ctx, r) }
	env.RegisterWorkflow(wf)
	env.ExecuteWorkflow(wf)
	require.True(t, env.IsWorkflowCompleted())
	if err := env.GetWorkflowError(); err != nil {
		return // refused or failed: not reported done
	}
	var resp workflows.Response
	require.NoError(t, env.GetWorkflowResult(&resp))
	assert.Fail(t, "a followed operation still running was returned as the final result", "%s (Reconciled %q)", resp.Body, resp.Reconciled)
}

// TestReview41LookupCarriesTheCallsHeaders: the lookup is a bare GET
// (reconcile.go: lp.req has no Headers): a header the call sets that
// scopes the API's records (Stripe-Account for a connected account, a
// tenant or API-version header) is not on it, so the lookup searches
// another account, finds nothing, and the payment is made again.
func TestReview41LookupCarriesTheCallsHeaders(t *testing.T) {
	var mu sync.Mutex
	type pay struct{ account, ref string }
	var payments []pay
	posts := []string{"cut", "ok"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		acct := r.Header.Get("X-Account")
		if r.Method == http.MethodGet {
			list := []map[string]any{}
			for _, p := range payments {
				if p.account == acct && p.ref == r.URL.Query().Get("client_reference") {
					list = append(list, map[string]any{"id": "pay", "client_reference": p.ref})
				}
			}
			_ = json.NewEncoder(w).Encode(list)
			return
		}
		var m map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		ref, _ := m["client_reference"].(string)
		payments = append(payments, pay{acct, ref})
		step := posts[0]
		posts = posts[1:]
		if step == "cut" {
			hijackClose(w)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"pay"}`))
	}))
	t.Cleanup(srv.Close)
	r := lookupCall(srv.URL)
	r.Headers = map[string]string{"X-Account": "acct_connected"}
	_, err := runCall(t, srv.URL, r)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, payments, 1, "the lookup asked without the call's X-Account header, found nothing, and paid again")
}

// TestReview41UnknownOutcomeSurvivesANotFound: settle clears
// prev.Unknown as soon as the lookup says "not found", before the POST is
// sent again. A lookup that lags (an eventually consistent search, which
// docs/unknown-outcomes.md warns of) says "not found" for the payment the
// cut attempt made; the POST sent again is refused by the API's unique
// reference (409): the call fails as a plain client error with
// OutcomeUnknown false, telling the caller the payment was not made
// though it was: a caller that charges another way then pays twice.
func TestReview41UnknownOutcomeSurvivesANotFound(t *testing.T) {
	var mu sync.Mutex
	made := 0
	posts := []string{"cut", "dup"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodGet {
			_, _ = w.Write([]byte(`[]`)) // the search index lags
			return
		}
		step := posts[0]
		posts = posts[1:]
		if step == "cut" {
			made++
			hijackClose(w)
			return
		}
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error":"client_reference already used"}`))
	}))
	t.Cleanup(srv.Close)
	_, err := runCall(t, srv.URL, lookupCall(srv.URL))
	require.Error(t, err)
	d, ok := workflows.AsFailure(err)
	require.True(t, ok)
	assert.Equal(t, 1, made)
	assert.True(t, d.OutcomeUnknown, "the first attempt's payment was made; the failure says the outcome is known: %s (%v)", d.Type, err)
}

// assertLookupFailed: err is the call's final LookupFailed.
func assertLookupFailed(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	d, ok := workflows.AsFailure(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, workflows.ErrTypeLookupFailed, d.Type, err.Error())
	assert.False(t, d.Retryable)
}
