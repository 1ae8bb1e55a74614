package chaos

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/reconcile"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestCheckWay: the ways and key places a campaign takes, the key place an
// unkeyed way gets by default, and the errors that say what to set.
func TestCheckWay(t *testing.T) {
	for _, tc := range []struct {
		name      string
		way       Way
		keyIn     string
		wantKeyIn string
		wantErr   string
	}{
		{"keyed, header", WayKeyed, "", "", ""},
		{"keyed, body", WayKeyed, KeyInBody, KeyInBody, ""},
		{"keyed, query", WayKeyed, KeyInQuery, KeyInQuery, ""},
		{"plain takes the body", WayPlain, "", KeyInBody, ""},
		{"lookup, body", WayLookup, KeyInBody, KeyInBody, ""},
		{"at most once takes the body", WayAtMostOnce, "", KeyInBody, ""},
		{"lookup in the query", WayLookup, KeyInQuery, "", `its key goes in "body:client_reference"`},
		{"unknown way", Way("retry"), "", "", `Config.Way "retry": want one of`},
		{"bad key place", WayKeyed, "cookie:k", "", "Config.KeyIn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Way: tc.way, KeyIn: tc.keyIn}
			err := c.checkWay()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("checkWay() = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.KeyIn != tc.wantKeyIn {
				t.Errorf("KeyIn %q, want %q", c.KeyIn, tc.wantKeyIn)
			}
		})
	}
}

// TestWayRequests: each way's API and each operation's call: the key
// where the server reads it, the way's Reconcile, and the names that let
// campaigns share a cluster.
func TestWayRequests(t *testing.T) {
	const base = "http://127.0.0.1:9"
	for _, tc := range []struct {
		way        Way
		keyIn      string
		reconcile  workflows.Reconcile
		ignoreKeys bool
		prefix     string
	}{
		{WayKeyed, "", workflows.Reconcile{}, false, "chaos-33"},
		{WayKeyed, KeyInQuery, workflows.Reconcile{}, false, "chaos-keyed-query-33"},
		{WayPlain, "", workflows.Reconcile{}, true, "chaos-plain-body-33"},
		{WayLookup, "", workflows.Reconcile{Lookup: base + "/payments?client_reference={key}"}, true, "chaos-lookup-body-33"},
		{WayAtMostOnce, "", workflows.Reconcile{AtMostOnce: true}, true, "chaos-at-most-once-body-33"},
	} {
		t.Run(tc.way.String()+"-"+tc.keyIn, func(t *testing.T) {
			c := Config{Way: tc.way, KeyIn: tc.keyIn, Plan: Plan{Seed: 33}, ScheduleToClose: 10 * time.Minute, APIProcessingTime: time.Millisecond}
			if err := c.checkWay(); err != nil {
				t.Fatal(err)
			}
			req := c.request(base, 7)
			if req.KeyIn != c.KeyIn || req.Reconcile != tc.reconcile {
				t.Errorf("KeyIn %q, Reconcile %+v; want %q, %+v", req.KeyIn, req.Reconcile, c.KeyIn, tc.reconcile)
			}
			if err := req.Reconcile.Validate("Reconcile", req.URL); err != nil {
				t.Errorf("the way's Reconcile does not validate: %v", err)
			}
			if !json.Valid(req.Body) || req.URL != base+"/payments" {
				t.Errorf("URL %s, body %s", req.URL, req.Body)
			}
			wantClose := 10 * time.Minute
			if tc.way == WayAtMostOnce {
				wantClose = reconcile.MinDecisionWait
			}
			if req.ScheduleToCloseTimeout != wantClose {
				t.Errorf("ScheduleToCloseTimeout %s, want %s", req.ScheduleToCloseTimeout, wantClose)
			}
			if got := c.prefix(); got != tc.prefix {
				t.Errorf("prefix %q, want %q", got, tc.prefix)
			}
			o := c.apiOptions()
			if o.Dialect.IgnoreKeys != tc.ignoreKeys || o.Dialect.KeyIn != c.KeyIn {
				t.Errorf("API dialect %+v: IgnoreKeys want %v, KeyIn want %q", o.Dialect, tc.ignoreKeys, c.KeyIn)
			}
			if want := map[bool]string{true: ClientReference}[tc.ignoreKeys]; o.Lookup != want {
				t.Errorf("API lookup %q, want %q", o.Lookup, want)
			}
			if err := o.Validate(); err != nil {
				t.Errorf("API options: %v", err)
			}
		})
	}
}

// TestPlainAPIRecordsTheBodyKey: the way's API without keys reads the key
// the operations put in their body, so that Verify counts records per key
// and a lookup finds them.
func TestPlainAPIRecordsTheBodyKey(t *testing.T) {
	c := Config{Way: WayLookup}
	if err := c.checkWay(); err != nil {
		t.Fatal(err)
	}
	srv := testsuite.StartServer(t, c.apiOptions())
	for range 2 {
		resp, err := http.Post(srv.URL+"/payments", "application/json", strings.NewReader(`{"order":1,"client_reference":"k1"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	recs := srv.Records()
	if len(recs) != 2 || recs[0].IdempotencyKey != "k1" || recs[1].IdempotencyKey != "k1" {
		t.Fatalf("records %+v: want two, both with key k1", recs)
	}
}
