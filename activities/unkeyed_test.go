package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// unkeyedAPI is a payments API that knows nothing of idempotency keys:
// every POST it processes makes a payment, and GET ?client_reference=
// lists the payments that carry it. posts scripts what each POST gets:
// "ok" (201 and the payment), "drop" (closed before anything was done),
// "cut" (processed, then closed without an answer), "408" (processed,
// then a 408 with X-Should-Retry: true) or "409" (refused, nothing done:
// the reference is already used); past the script, "ok". lookups scripts
// what each lookup gets: 0 (the answer) or a status without a body. The
// answer is the list above, or what get returns if a test set it with
// answerLookups (an envelope, a route that ignores its filter, a search
// that lags).
type unkeyedAPI struct {
	*httptest.Server
	mu       sync.Mutex
	payments []map[string]any
	posts    []string
	lookups  []int
	get      func(r *http.Request, payments []map[string]any) (int, any)
	raw      [][]byte // every POST's body, as received
	urls     []string // every POST's URL
	nLookups int
}

func newUnkeyedAPI(t *testing.T, posts []string, lookups ...int) *unkeyedAPI {
	api := &unkeyedAPI{posts: posts, lookups: lookups}
	api.Server = httptest.NewServer(http.HandlerFunc(api.serve))
	t.Cleanup(api.Close)
	return api
}

// answerLookups makes get the answer to every lookup past the scripted
// statuses: its status, and its value in JSON unless nil.
func (api *unkeyedAPI) answerLookups(get func(r *http.Request, payments []map[string]any) (int, any)) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.get = get
}

// add stores a payment made elsewhere (by hand, by an earlier run).
func (api *unkeyedAPI) add(p map[string]any) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.payments = append(api.payments, p)
}

func (api *unkeyedAPI) serve(w http.ResponseWriter, r *http.Request) {
	api.mu.Lock()
	defer api.mu.Unlock()
	if r.Method == http.MethodGet {
		api.nLookups++
		if len(api.lookups) > 0 {
			st := api.lookups[0]
			api.lookups = api.lookups[1:]
			if st != 0 {
				w.WriteHeader(st)
				return
			}
		}
		var st int
		var v any
		if api.get != nil {
			st, v = api.get(r, api.payments)
		} else {
			st, v = http.StatusOK, withReference(api.payments, r.URL.Query().Get("client_reference"))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st)
		if v != nil {
			_ = json.NewEncoder(w).Encode(v)
		}
		return
	}
	b, _ := io.ReadAll(r.Body)
	api.raw = append(api.raw, b)
	api.urls = append(api.urls, r.URL.String())
	step := "ok"
	if len(api.posts) > 0 {
		step, api.posts = api.posts[0], api.posts[1:]
	}
	switch step {
	case "drop":
		hijackClose(w)
		return
	case "409":
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error":"client_reference already used"}`))
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

// withReference returns the payments whose client_reference is ref.
func withReference(payments []map[string]any, ref string) []map[string]any {
	list := []map[string]any{}
	for _, p := range payments {
		if p["client_reference"] == ref {
			list = append(list, p)
		}
	}
	return list
}

func hijackClose(w http.ResponseWriter) {
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		_ = conn.Close()
	}
}

func (api *unkeyedAPI) count() (payments, lookups int) {
	api.mu.Lock()
	defer api.mu.Unlock()
	return len(api.payments), api.nLookups
}

// runCall runs one call of req through workflows.Call in Temporal's test
// environment, origin allowed, with conv as its convention if not nil.
func runCall(t *testing.T, origin string, conv *activities.Convention, req workflows.Request) (*workflows.Response, error) {
	t.Helper()
	env := testsuite.NewEnv(t)
	cfg := activities.Config{AllowedOrigins: []string{origin}, Uniform: func() float64 { return 0.5 }}
	if conv != nil {
		cfg.Conventions = map[string]activities.Convention{origin: *conv}
	}
	testsuite.Register(t, env, nil, cfg)
	wf := func(ctx workflow.Context) (*workflows.Response, error) { return workflows.Call(ctx, req) }
	env.RegisterWorkflow(wf)
	env.ExecuteWorkflow(wf)
	require.True(t, env.IsWorkflowCompleted())
	var resp *workflows.Response
	err := env.GetWorkflowError()
	if err == nil {
		require.NoError(t, env.GetWorkflowResult(&resp))
	}
	return resp, err
}

// lookupCall is a charge whose key is the body's client_reference,
// reconciled by the lookup GET /payments?client_reference={key}.
func lookupCall(url string) workflows.Request {
	return workflows.Request{
		Operation: "charge", URL: url + "/payments", Body: json.RawMessage(`{"amount":4200}`),
		KeyIn: "body:client_reference", ScheduleToCloseTimeout: time.Minute,
		Reconcile: workflows.Reconcile{Lookup: url + "/payments?client_reference={key}"},
	}
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

// TestKeyWhereTheAPIReadsIt (#41 item 1): the key goes in a header, a
// body member or a query parameter, by the origin's convention or the
// call's KeyIn; the body is sent byte for byte but for the inserted
// member, and every attempt carries the same key in the same place.
func TestKeyWhereTheAPIReadsIt(t *testing.T) {
	body := "{\"amount\": 4200,\n \"metadata\": {\"order\": \"o<1>\"}}"
	for _, tt := range []struct {
		name, convIn, callIn string
		wantBody, wantQuery  string
		wantHeader           string
	}{
		{"header by default", "", "", body, "", "Idempotency-Key"},
		{"another header by the call", "", "header:PayPal-Request-Id", body, "", "Paypal-Request-Id"},
		{"top-level member by the origin", "body:idempotency_key", "", "{\"amount\": 4200,\n \"metadata\": {\"order\": \"o<1>\"},\"idempotency_key\":\"KEY\"}", "", ""},
		{"nested member by the call", "", "body:metadata.idempotency_key", "{\"amount\": 4200,\n \"metadata\": {\"order\": \"o<1>\",\"idempotency_key\":\"KEY\"}}", "", ""},
		{"call wins over origin", "body:idempotency_key", "body:ClientToken", "{\"amount\": 4200,\n \"metadata\": {\"order\": \"o<1>\"},\"ClientToken\":\"KEY\"}", "", ""},
		{"query parameter", "query:requestId", "", body, "requestId=KEY", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := newUnkeyedAPI(t, []string{"drop", "ok"})
			var conv *activities.Convention
			if tt.convIn != "" {
				c := activities.IETFConvention()
				c.KeyIn = tt.convIn
				conv = &c
			}
			resp, err := runCall(t, api.URL, conv, workflows.Request{
				Operation: "charge", URL: api.URL + "/payments?mode=x", Body: json.RawMessage(body), KeyIn: tt.callIn,
			})
			require.NoError(t, err)
			key := resp.IdempotencyKey
			require.Len(t, api.raw, 2, "a dropped attempt, then one that went through")
			for i := range api.raw {
				assert.Equal(t, strings.ReplaceAll(tt.wantBody, "KEY", key), string(api.raw[i]), "attempt %d", i+1)
				wantURL := "/payments?mode=x"
				if tt.wantQuery != "" {
					wantURL += "&" + strings.ReplaceAll(tt.wantQuery, "KEY", key)
				}
				assert.Equal(t, wantURL, api.urls[i], "attempt %d", i+1)
			}
		})
	}
}

// TestKeyInBadInput (#41, done when): a body key on a call without a
// body, a path the body does not have, a member the body already sets,
// and a query parameter the URL already has are refused before anything
// is sent, naming what to change.
func TestKeyInBadInput(t *testing.T) {
	for _, tt := range []struct {
		name, body, url, keyIn, want string
	}{
		{"no body", "", "/payments", "body:idempotency_key", "needs a JSON object body"},
		{"array body", `[1]`, "/payments", "body:idempotency_key", "not a JSON object"},
		{"missing path", `{"a":1}`, "/payments", "body:metadata.idempotency_key", "has no member metadata"},
		{"member already set", `{"idempotency_key":"mine"}`, "/payments", "body:idempotency_key", "already has idempotency_key"},
		{"parameter already set", `{}`, "/payments?requestId=mine", "query:requestId", "already has the query parameter requestId"},
		{"bad place", `{}`, "/payments", "cookie:k", "is not header, body or query"},
		{"lookup with a header key", `{}`, "/payments", "header:X-Ref", "Lookup needs the key where the API keeps it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := newUnkeyedAPI(t, nil)
			r := workflows.Request{Operation: "charge", URL: api.URL + tt.url, KeyIn: tt.keyIn}
			if tt.body != "" {
				r.Body = json.RawMessage(tt.body)
			}
			if strings.HasPrefix(tt.name, "lookup") {
				r.Reconcile.Lookup = api.URL + "/payments?client_reference={key}"
			}
			_, err := runCall(t, api.URL, nil, r)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), workflows.ErrTypeInvalidRequest)
			n, _ := api.count()
			assert.Zero(t, n, "nothing sent")
		})
	}
}

// TestReconcileByLookup (#41 item 2): against an API that ignores keys,
// a lookup comes before every request: an attempt whose answer was cut
// after the API made the payment is followed by the lookup, not by a
// second POST: found, its record is the result; not found, the POST is
// sent; more than one, no result; a failing lookup is retried, never the
// POST. Without Reconcile, the same script makes two payments (the
// defect the lookup prevents).
func TestReconcileByLookup(t *testing.T) {
	lookup := func(url string) workflows.Reconcile {
		return workflows.Reconcile{Lookup: url + "/payments?client_reference={key}"}
	}
	for _, tt := range []struct {
		name        string
		posts       []string
		lookups     []int
		noReconcile bool
		payments    int
		lookupsMade int
		reconciled  string
		errType     string
		unknown     bool
		preexisting int
	}{
		{"without reconcile: a second payment", []string{"cut", "ok"}, nil, true, 2, 0, "", "", false, 0},
		{"found after a cut answer", []string{"cut"}, nil, false, 1, 2, "lookup", "", false, 0},
		{"not found after a dropped request", []string{"drop", "ok"}, nil, false, 1, 2, "", "", false, 0},
		{"lookup fails, then finds", []string{"cut"}, []int{503, 0}, false, 1, 3, "lookup", "", false, 0},
		{"lookup refused: final, nothing sent again", []string{"cut"}, []int{0, 403}, false, 1, 2, "", workflows.ErrTypeLookupFailed, true, 0},
		{"an earlier run's payment: found first", nil, nil, false, 1, 1, "lookup", "", false, 1},
		{"two records: ambiguous", nil, nil, false, 2, 1, "", workflows.ErrTypeLookupAmbiguous, true, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := newUnkeyedAPI(t, tt.posts, tt.lookups...)
			r := workflows.Request{
				Operation: "charge", URL: api.URL + "/payments", Body: json.RawMessage(`{"amount":4200}`),
				KeyIn: "body:client_reference", ScheduleToCloseTimeout: time.Minute,
			}
			if !tt.noReconcile {
				r.Reconcile = lookup(api.URL)
			}
			env := testsuite.NewEnv(t)
			testsuite.Register(t, env, nil, activities.Config{AllowedOrigins: []string{api.URL}, Uniform: func() float64 { return 0.5 }})
			wf := func(ctx workflow.Context) (*workflows.Response, error) {
				// Payments already carrying the key (an earlier run's, or
				// made by hand).
				k := workflows.Key(ctx, "charge")
				api.mu.Lock()
				for i := range tt.preexisting {
					api.payments = append(api.payments, map[string]any{"id": fmt.Sprintf("pay_hand%d", i), "client_reference": k})
				}
				api.mu.Unlock()
				return workflows.Call(ctx, r)
			}
			env.RegisterWorkflow(wf)
			env.ExecuteWorkflow(wf)
			require.True(t, env.IsWorkflowCompleted())
			payments, lookups := api.count()
			assert.Equal(t, tt.payments, payments, "payments at the API")
			assert.Equal(t, tt.lookupsMade, lookups, "lookups")
			err := env.GetWorkflowError()
			if tt.errType != "" {
				require.Error(t, err)
				d, ok := workflows.AsFailure(err)
				require.True(t, ok)
				assert.Equal(t, tt.errType, d.Type, err.Error())
				assert.Equal(t, tt.unknown, d.OutcomeUnknown)
				return
			}
			require.NoError(t, err)
			var resp workflows.Response
			require.NoError(t, env.GetWorkflowResult(&resp))
			assert.Equal(t, tt.reconciled, resp.Reconciled)
			k, ok := keyplace.BodyKey(resp.Body, "client_reference")
			assert.True(t, ok, "the result is the payment: %s", resp.Body)
			assert.Equal(t, resp.IdempotencyKey, k)
		})
	}
}

// TestAtMostOnceWithoutPause (#41 item 3): an AtMostOnce call never sends
// again after an attempt of unknown outcome: where the activity cannot
// pause (Temporal's test environment) it ends as AwaitingDecision with
// the outcome unknown; an attempt that sent nothing (connection refused)
// is still retried on its own.
func TestAtMostOnceWithoutPause(t *testing.T) {
	for _, tt := range []struct {
		name     string
		posts    []string
		payments int
		posted   int
		errType  string
	}{
		{"cut after the payment", []string{"cut", "ok"}, 1, 1, workflows.ErrTypeAwaitingDecision},
		{"a 503 may be a gateway's after the work", nil, 0, 1, workflows.ErrTypeAwaitingDecision},
		{"first try succeeds", []string{"ok"}, 1, 1, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := newUnkeyedAPI(t, tt.posts)
			url := api.URL
			if tt.posts == nil {
				gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					api.mu.Lock()
					api.raw = append(api.raw, nil)
					api.mu.Unlock()
					w.WriteHeader(503)
				}))
				t.Cleanup(gw.Close)
				url = gw.URL
			}
			env := testsuite.NewEnv(t)
			testsuite.Register(t, env, nil, activities.Config{AllowedOrigins: []string{url}, Uniform: func() float64 { return 0.5 }})
			r := workflows.Request{Operation: "charge", URL: url + "/payments", Body: json.RawMessage(`{"amount":1}`), Reconcile: workflows.Reconcile{AtMostOnce: true}}
			wf := func(ctx workflow.Context) (*workflows.Response, error) { return workflows.Call(ctx, r) }
			env.RegisterWorkflow(wf)
			env.ExecuteWorkflow(wf)
			payments, _ := api.count()
			assert.Equal(t, tt.payments, payments)
			assert.Len(t, api.raw, tt.posted, "requests sent")
			err := env.GetWorkflowError()
			if tt.errType == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			d, ok := workflows.AsFailure(err)
			require.True(t, ok)
			assert.Equal(t, tt.errType, d.Type)
			assert.True(t, d.OutcomeUnknown)
			assert.Contains(t, err.Error(), "temporal activity unpause")
		})
	}
}

// TestKeyInBodySigned (#41 item 1): a key inserted into the body or the
// query is in place before the AWS Signature V4 is computed: the
// reference server, which verifies with AWS's own Go signer, accepts
// every attempt and stores the body with the key.
func TestKeyInBodySigned(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	for _, keyIn := range []string{"body:ClientToken", "query:ClientToken"} {
		t.Run(keyIn, func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{
				Dialect: testsuite.StripeDialect(), SigV4Credentials: &creds, SigV4Service: "execute-api", SigV4Region: "eu-west-1",
			})
			srv.Script(testsuite.Fail(503))
			env := testsuite.NewEnv(t)
			testsuite.Register(t, env, srv, activities.Config{
				AllowedOrigins: []string{srv.URL},
				Credentials: map[string]activities.Credential{srv.URL: {SigV4: &activities.SigV4{
					Service: "execute-api", Region: "eu-west-1",
					Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }),
				}}},
			})
			r := workflows.Request{Operation: "launch", URL: srv.URL + "/instances", Body: json.RawMessage(`{"ImageId":"ami-1"}`), KeyIn: keyIn}
			wf := func(ctx workflow.Context) (*workflows.Response, error) { return workflows.Call(ctx, r) }
			env.RegisterWorkflow(wf)
			env.ExecuteWorkflow(wf)
			require.NoError(t, env.GetWorkflowError())
			var resp workflows.Response
			require.NoError(t, env.GetWorkflowResult(&resp))
			assert.Equal(t, 201, resp.Status)
			st := srv.Stats()
			assert.Zero(t, st.Unauthorized, "every attempt's signature verified")
			require.Len(t, srv.Records(), 1)
			if keyIn == "body:ClientToken" {
				want := `{"ImageId":"ami-1","ClientToken":"` + resp.IdempotencyKey + `"}`
				assert.Equal(t, hexSHA256([]byte(want)), srv.Records()[0].BodySHA256, "the body with the key, as signed")
			}
		})
	}
}

// TestReconcileSeesEveryCut: net/http's transport sends a request again by
// itself when a reused connection breaks and the request is replayable,
// which a POST with an Idempotency-Key header and a body it can read again
// is: a call that reconciles would never see the cut, and an API without
// keys would make a second payment. Its requests are never replayable: the
// second call's cut ends as AwaitingDecision with one payment made.
func TestReconcileSeesEveryCut(t *testing.T) {
	for _, body := range []string{`{"amount":1}`, ""} {
		t.Run("body "+body, func(t *testing.T) { seesEveryCut(t, json.RawMessage(body)) })
	}
}

func seesEveryCut(t *testing.T, body json.RawMessage) {
	if len(body) == 0 {
		body = nil
	}
	api := newUnkeyedAPI(t, []string{"ok", "cut", "ok"})
	env := testsuite.NewEnv(t)
	testsuite.Register(t, env, nil, activities.Config{AllowedOrigins: []string{api.URL}})
	wf := func(ctx workflow.Context) (string, error) {
		for _, op := range []string{"first", "second"} {
			_, err := workflows.Call(ctx, workflows.Request{
				Operation: op, URL: api.URL + "/payments", Body: body,
				Reconcile: workflows.Reconcile{AtMostOnce: true},
			})
			if err != nil {
				d, _ := workflows.AsFailure(err)
				return op + ": " + d.Type, nil
			}
		}
		return "both succeeded", nil
	}
	env.RegisterWorkflow(wf)
	env.ExecuteWorkflow(wf)
	require.NoError(t, env.GetWorkflowError())
	var got string
	require.NoError(t, env.GetWorkflowResult(&got))
	payments, _ := api.count()
	assert.Equal(t, "second: "+workflows.ErrTypeAwaitingDecision, got)
	assert.Equal(t, 2, payments, "the cut request was not sent again behind the call's back")
}

// TestReconcileByLookupActivity (#41 item 2): for an API without a lookup
// route, the call's own activity finds the record, asked before the
// first request and after each of unknown outcome: found, it is the
// result; not found, the request is sent; failing, the call fails
// LookupFailed and nothing is sent again.
func TestReconcileByLookupActivity(t *testing.T) {
	for _, tt := range []struct {
		name       string
		posts      []string
		fail       bool
		payments   int
		posted     int
		reconciled string
		errType    string
	}{
		{"found", []string{"cut"}, false, 1, 1, "lookup", ""},
		{"not found: sent again", []string{"drop", "ok"}, false, 1, 2, "", ""},
		{"the lookup fails", []string{"cut"}, true, 1, 1, "", workflows.ErrTypeLookupFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := newUnkeyedAPI(t, tt.posts)
			env := testsuite.NewEnv(t)
			testsuite.Register(t, env, nil, activities.Config{AllowedOrigins: []string{api.URL}})
			// FindPayment is the user's own lookup: here it reads the API's
			// store, as a user's would read a database or a report.
			var calls atomic.Int32
			find := func(_ context.Context, key string) (*workflows.Response, error) {
				// The first lookup, before the first request, answers;
				// the one after the cut fails.
				if calls.Add(1) > 1 && tt.fail {
					return nil, errors.New("the report is not ready")
				}
				api.mu.Lock()
				defer api.mu.Unlock()
				if found := withReference(api.payments, key); len(found) > 0 {
					b, err := json.Marshal(found[0])
					return &workflows.Response{Status: 200, Body: b}, err
				}
				return nil, nil
			}
			env.RegisterActivityWithOptions(find, activity.RegisterOptions{Name: "FindPayment"})
			r := workflows.Request{
				Operation: "charge", URL: api.URL + "/payments", Body: json.RawMessage(`{"amount":4200}`),
				KeyIn: "body:client_reference", Reconcile: workflows.Reconcile{LookupActivity: "FindPayment"},
				Retry: workflows.RetryOptions{MaximumAttempts: 3},
			}
			wf := func(ctx workflow.Context) (*workflows.Response, error) { return workflows.Call(ctx, r) }
			env.RegisterWorkflow(wf)
			env.ExecuteWorkflow(wf)
			payments, _ := api.count()
			assert.Equal(t, tt.payments, payments, "payments at the API")
			assert.Len(t, api.raw, tt.posted, "requests sent")
			err := env.GetWorkflowError()
			if tt.errType != "" {
				require.Error(t, err)
				d, ok := workflows.AsFailure(err)
				require.True(t, ok, "%v", err)
				assert.Equal(t, tt.errType, d.Type)
				assert.True(t, d.OutcomeUnknown)
				return
			}
			require.NoError(t, err)
			var resp workflows.Response
			require.NoError(t, env.GetWorkflowResult(&resp))
			assert.Equal(t, tt.reconciled, resp.Reconciled)
			assert.NotEmpty(t, resp.IdempotencyKey)
		})
	}
}

// The tests below come from the review of #41 (found by review); each
// states what is now guaranteed.

// TestLookupEnvelopeIsNotARecord: a lookup's answer is a record only if
// it carries the call's key: a list envelope ({"data": [], "has_more":
// false}, Stripe's and most APIs' shape) read without Items is no
// record, and no "not found" either: the call fails LookupFailed, final,
// before its first POST, never reporting a payment that was not made.
func TestLookupEnvelopeIsNotARecord(t *testing.T) {
	api := newUnkeyedAPI(t, []string{"drop", "ok"})
	api.answerLookups(func(*http.Request, []map[string]any) (int, any) {
		return 200, map[string]any{"object": "list", "data": []any{}, "has_more": false}
	})
	_, err := runCall(t, api.URL, nil, lookupCall(api.URL))
	payments, _ := api.count()
	assertLookupFailed(t, err)
	assert.Zero(t, payments, "a lookup that cannot be read stops the call before its first POST")
}

// TestLookupRecordOfAnotherKeyIsRefused: a lookup route that ignores its
// filter (a misspelt or unsupported query parameter) and answers another
// customer's payment fails the call LookupFailed, final: that payment is
// never taken for this call's result, and no payment is made blind.
func TestLookupRecordOfAnotherKeyIsRefused(t *testing.T) {
	api := newUnkeyedAPI(t, []string{"drop", "ok"})
	api.answerLookups(func(_ *http.Request, ps []map[string]any) (int, any) {
		return 200, append([]map[string]any{}, ps...) // the filter is ignored
	})
	api.add(map[string]any{"id": "pay_other", "client_reference": "someone-else", "amount": 1})
	_, err := runCall(t, api.URL, nil, lookupCall(api.URL))
	assertLookupFailed(t, err)
	payments, _ := api.count()
	assert.Equal(t, 1, payments, "only the other customer's payment: none taken as this call's, none made blind")
}

// TestLookup404RouteIsNotNotFound: a 404 is "not found" only from a
// per-record route ({key} in the path); from a list route it means the
// route is wrong (a typo, /payment for /payments): the call fails
// LookupFailed, final, after one lookup, and no POST is sent.
func TestLookup404RouteIsNotNotFound(t *testing.T) {
	api := newUnkeyedAPI(t, []string{"cut", "ok"})
	api.answerLookups(func(r *http.Request, _ []map[string]any) (int, any) {
		if r.URL.Path != "/payments" {
			return 404, map[string]any{"error": "no route " + r.URL.Path}
		}
		return 200, []any{}
	})
	r := lookupCall(api.URL)
	r.Reconcile.Lookup = api.URL + "/payment?client_reference={key}"
	_, err := runCall(t, api.URL, nil, r)
	payments, lookups := api.count()
	assertLookupFailed(t, err)
	assert.Equal(t, 1, lookups)
	assert.Zero(t, payments, "a 404 from a route that does not exist is no \"not found\": nothing is sent")
}

// TestAdvisedRetryOf408IsUnknown: a 408 may come from a gateway while the
// API goes on, so a 408 the server advises to retry (X-Should-Retry:
// true) is an attempt of unknown outcome, as a 5xx is: an AtMostOnce
// call does not send again and ends AwaitingDecision.
func TestAdvisedRetryOf408IsUnknown(t *testing.T) {
	api := newUnkeyedAPI(t, []string{"408", "ok"})
	_, err := runCall(t, api.URL, nil, workflows.Request{
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

// TestRunAgainAsksTheLookupFirst: a reconciling call's final error
// (here LookupFailed) advises to "run the same workflow ID again"; the
// run that follows the advice asks the lookup before its first request,
// so for an API without keys it finds the payment the first run's cut
// attempt made instead of making a second one.
func TestRunAgainAsksTheLookupFirst(t *testing.T) {
	// The first lookup is refused (the lookup's scope missing); the
	// lookups after it answer.
	api := newUnkeyedAPI(t, []string{"cut", "ok"}, 403)
	_, err := runCall(t, api.URL, nil, lookupCall(api.URL))
	require.Error(t, err)
	d, _ := workflows.AsFailure(err)
	require.Equal(t, workflows.ErrTypeLookupFailed, d.Type)
	require.Contains(t, err.Error(), "run the same workflow ID again")
	// The operator fixes the lookup's scope and follows the advice.
	_, err = runCall(t, api.URL, nil, lookupCall(api.URL))
	payments, lookups := api.count()
	assert.NoError(t, err)
	assert.Equal(t, 1, payments, "the run the error advised made a second payment without asking the lookup (lookups: %d)", lookups)
}

// TestRedirectKeepsQueryKey: a key the activity puts in the query (KeyIn
// "query:…") is on the request a 307 redirects to as well, so the API
// never takes the redirected request without its key.
func TestRedirectKeepsQueryKey(t *testing.T) {
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
	resp, err := runCall(t, srv.URL, nil, workflows.Request{
		Operation: "charge", URL: srv.URL + "/v1/payments", Body: json.RawMessage(`{"amount":1}`), KeyIn: "query:requestId",
	})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.True(t, strings.Contains(got[1], "requestId="+resp.IdempotencyKey), "the redirected request carries no key: %s", got[1])
}

// TestFollowWithOriginReconcileIsNotReportedDone: an origin's
// Convention.Reconcile on a Follow call (refused, as Request.Reconcile
// with Follow is) never turns the lookup's record of an operation still
// running, after an answer cut once it was started, into the call's
// final result.
func TestFollowWithOriginReconcileIsNotReportedDone(t *testing.T) {
	api := newUnkeyedAPI(t, []string{"cut"})
	api.answerLookups(func(r *http.Request, ps []map[string]any) (int, any) {
		list := []map[string]any{}
		for _, p := range withReference(ps, r.URL.Query().Get("client_reference")) {
			q := map[string]any{"status": "running"}
			for k, v := range p {
				q[k] = v
			}
			list = append(list, q)
		}
		return 200, list
	})
	conv := activities.IETFConvention()
	conv.KeyIn = "body:client_reference"
	conv.Reconcile = workflows.Reconcile{Lookup: api.URL + "/payments?client_reference={key}"}
	resp, err := runCall(t, api.URL, &conv, workflows.Request{
		Operation: "export", URL: api.URL + "/payments", Body: json.RawMessage(`{"amount":1}`), Follow: &workflows.FollowOptions{},
	})
	if err != nil {
		return // refused or failed: not reported done
	}
	assert.Fail(t, "a followed operation still running was returned as the final result", "%s (Reconciled %q)", resp.Body, resp.Reconciled)
}

// TestLookupCarriesTheCallsHeaders: the lookup carries the call's own
// headers, which may scope the API's records (Stripe-Account for a
// connected account, a tenant or API-version header): it searches the
// account the payment was made in, finds it after a cut answer, and the
// payment is not made again.
func TestLookupCarriesTheCallsHeaders(t *testing.T) {
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
	_, err := runCall(t, srv.URL, nil, r)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, payments, 1, "the lookup asked without the call's X-Account header, found nothing, and paid again")
}

// TestUnknownOutcomeSurvivesANotFound: a lookup's "not found" does not
// make an earlier attempt's outcome known: a lookup that lags (an
// eventually consistent search, which docs/unknown-outcomes.md warns
// of) says "not found" for the payment the cut attempt made, the POST
// sent again is refused by the API's unique reference (409), and the
// call's failure still says OutcomeUnknown, so that no caller takes the
// payment for not made and pays another way.
func TestUnknownOutcomeSurvivesANotFound(t *testing.T) {
	// The cut attempt makes the payment; every POST after is refused,
	// its client_reference already used.
	api := newUnkeyedAPI(t, append([]string{"cut"}, slices.Repeat([]string{"409"}, 100)...))
	api.answerLookups(func(*http.Request, []map[string]any) (int, any) {
		return 200, []any{} // the search index lags
	})
	_, err := runCall(t, api.URL, nil, lookupCall(api.URL))
	require.Error(t, err)
	d, ok := workflows.AsFailure(err)
	require.True(t, ok)
	payments, _ := api.count()
	assert.Equal(t, 1, payments)
	assert.True(t, d.OutcomeUnknown, "the first attempt's payment was made; the failure says the outcome is known: %s (%v)", d.Type, err)
}
