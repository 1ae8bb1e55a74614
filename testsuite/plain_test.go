package testsuite_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// TestPlainDialect: a server that ignores keys does the work for every
// request, whatever key it carries, and keeps every request body.
func TestPlainDialect(t *testing.T) {
	type step struct {
		key, body string
		status    int
	}
	tests := []struct {
		name      string
		keyIn     string
		steps     []step
		wantKeys  []string // Record.IdempotencyKey of each record
		wantStats testsuite.Stats
	}{
		{"one key twice, two records", "", []step{{"k1", `{"a":1}`, 201}, {"k1", `{"a":1}`, 201}}, []string{"k1", "k1"},
			testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 2}},
		{"one key, another body: no misuse", "", []step{{"k1", `{"a":1}`, 201}, {"k1", `{"a":2}`, 201}}, []string{"k1", "k1"},
			testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 2}},
		{"no key: no missing-key answer", "", []step{{"", `{"a":1}`, 201}, {"", `{"a":1}`, 201}}, []string{"", ""},
			testsuite.Stats{Requests: 2, Records: 2}},
		{"a malformed quoted key is a key as written", "", []step{{`"k1`, `{"a":1}`, 201}}, []string{`"k1`},
			testsuite.Stats{Requests: 1, DistinctKeys: 1, Records: 1}},
		{"invalid JSON: 400, no record", "", []step{{"k1", `{"a":`, 400}, {"k1", `{"a":1}`, 201}}, []string{"k1"},
			testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 1}},
		{"the key read from the body, unused", "body:ref", []step{{"", `{"ref":"r1"}`, 201}, {"", `{"ref":"r1"}`, 201}}, []string{"r1", "r1"},
			testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := testsuite.PlainDialect()
			d.KeyIn = tt.keyIn
			srv := testsuite.StartServer(t, testsuite.Options{Dialect: d})
			var bodies []string
			for i, s := range tt.steps {
				a := post(t, srv.URL+"/payments", s.key, s.body)
				assert.Equal(t, s.status, a.status, "step %d: %s", i, a.body)
				assert.False(t, a.replayed, "step %d: never a replay", i)
				if a.status == 201 {
					assert.NotContains(t, bodies, a.body, "step %d: a fresh record", i)
					bodies = append(bodies, a.body)
				}
			}
			recs := srv.Records()
			var keys []string
			for _, r := range recs {
				keys = append(keys, r.IdempotencyKey)
				assert.NotEmpty(t, r.Request, "%s: the request body is kept", r.ID)
			}
			assert.Equal(t, tt.wantKeys, keys)
			assert.Equal(t, tt.wantStats, srv.Stats())
		})
	}
}

// TestPlainDialectConcurrent: two requests with one key at once are both
// processed: no in-flight answer.
func TestPlainDialectConcurrent(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{Dialect: testsuite.PlainDialect(), ProcessingTime: 100 * time.Millisecond})
	var wg sync.WaitGroup
	got := make([]answer, 2)
	for i := range got {
		wg.Go(func() { got[i] = post(t, srv.URL+"/payments", "k1", `{"a":1}`) })
	}
	wg.Wait()
	assert.Equal(t, []int{201, 201}, []int{got[0].status, got[1].status})
	assert.Equal(t, testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 2}, srv.Stats())
}

// lookup sends GET url and returns the status, content type and the IDs
// of the records listed.
func lookup(t *testing.T, url string) (status int, ctype string, ids []string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return resp.StatusCode, resp.Header.Get("Content-Type"), nil
	}
	var recs []testsuite.Record
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&recs))
	require.NotNil(t, recs, "an array, [] when empty")
	ids = []string{}
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), ids
}

// TestLookup: GET PATH?LOOKUP=VALUE lists the records made at PATH whose
// request had VALUE at the path Lookup, in the order made, in every
// dialect.
func TestLookup(t *testing.T) {
	type req struct{ path, key, body string }
	tests := []struct {
		name    string
		dialect testsuite.Dialect
		lookup  string
		posts   []req
		get     string // path and query
		want    []string
	}{
		{"no match", testsuite.PlainDialect(), "client_reference",
			[]req{{"/payments", "", `{"client_reference":"r1"}`}},
			"/payments?client_reference=r2", []string{}},
		{"nothing made yet", testsuite.PlainDialect(), "client_reference", nil,
			"/payments?client_reference=r1", []string{}},
		{"one match", testsuite.PlainDialect(), "client_reference",
			[]req{{"/payments", "", `{"client_reference":"r1"}`}, {"/payments", "", `{"client_reference":"r2"}`}},
			"/payments?client_reference=r2", []string{"rec_2"}},
		{"two matches, in the order made (a retry that ignored its key)", testsuite.PlainDialect(), "client_reference",
			[]req{{"/payments", "k1", `{"client_reference":"r1"}`}, {"/payments", "", `{"client_reference":"r2"}`}, {"/payments", "k1", `{"client_reference":"r1"}`}},
			"/payments?client_reference=r1", []string{"rec_1", "rec_3"}},
		{"nested path", testsuite.PlainDialect(), "metadata.ref",
			[]req{{"/payments", "", `{"metadata":{"ref":"r1"}}`}, {"/payments", "", `{"ref":"r1"}`}, {"/payments", "", `{"metadata":{"ref":"r1","x":1}}`}},
			"/payments?metadata.ref=r1", []string{"rec_1", "rec_3"}},
		{"only the records made at the path", testsuite.PlainDialect(), "ref",
			[]req{{"/refunds", "", `{"ref":"r1"}`}, {"/payments", "", `{"ref":"r1"}`}},
			"/payments?ref=r1", []string{"rec_2"}},
		{"a member that is not a string is not found", testsuite.PlainDialect(), "ref",
			[]req{{"/payments", "", `{"ref":1}`}},
			"/payments?ref=1", []string{}},
		{"escaped value", testsuite.PlainDialect(), "ref",
			[]req{{"/payments", "", `{"ref":"a b&c"}`}},
			"/payments?ref=a+b%26c", []string{"rec_1"}},
		{"ietf: a replay makes no record to find", testsuite.IETFDialect(), "ref",
			[]req{{"/payments", "k1", `{"ref":"r1"}`}, {"/payments", "k1", `{"ref":"r1"}`}, {"/payments", "k2", `{"ref":"r1"}`}},
			"/payments?ref=r1", []string{"rec_1", "rec_2"}},
		{"stripe: requests without a key are found", testsuite.StripeDialect(), "ref",
			[]req{{"/payments", "", `{"ref":"r1"}`}, {"/payments", "", `{"ref":"r1"}`}},
			"/payments?ref=r1", []string{"rec_1", "rec_2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{Dialect: tt.dialect, Lookup: tt.lookup})
			for i, p := range tt.posts {
				a := post(t, srv.URL+p.path, p.key, p.body)
				require.Equal(t, 201, a.status, "post %d: %s", i, a.body)
			}
			before := srv.Stats()
			status, ctype, ids := lookup(t, srv.URL+tt.get)
			assert.Equal(t, 200, status)
			assert.Equal(t, "application/json", ctype)
			assert.Equal(t, tt.want, ids)
			st := srv.Stats()
			assert.Equal(t, 1, st.Lookups)
			assert.Equal(t, before.Requests+1, st.Requests)
			assert.Equal(t, before.Records, st.Records, "a lookup makes no record")
			log := srv.Log()
			require.NotEmpty(t, log)
			assert.Equal(t, 200, log[len(log)-1].Status, "logged")
		})
	}
}

// TestLookupOtherGETs: a GET without the lookup's parameter, or on a
// server without Lookup, is answered as before: 405.
func TestLookupOtherGETs(t *testing.T) {
	with := testsuite.StartServer(t, testsuite.Options{Dialect: testsuite.PlainDialect(), Lookup: "ref"})
	without := testsuite.StartServer(t, testsuite.Options{Dialect: testsuite.PlainDialect()})
	for _, srv := range []*testsuite.Server{with, without} {
		require.Equal(t, 201, post(t, srv.URL+"/payments", "", `{"ref":"r1"}`).status)
	}
	for _, tt := range []struct {
		name string
		url  string
	}{
		{"another parameter", with.URL + "/payments?other=r1"},
		{"no parameter", with.URL + "/payments"},
		{"no Lookup", without.URL + "/payments?ref=r1"},
	} {
		status, _, _ := lookup(t, tt.url)
		assert.Equal(t, http.StatusMethodNotAllowed, status, tt.name)
	}
	assert.Equal(t, 0, with.Stats().Lookups)
	status, _, ids := lookup(t, with.URL+"/payments?ref=r1")
	assert.Equal(t, 200, status)
	assert.Equal(t, []string{"rec_1"}, ids)
}

// TestLookupAnswers: a lookup lists the work's answers: Options.Work's
// when set, a JSON string for one that is not JSON; a scripted failure
// answers a lookup as any request.
func TestLookupAnswers(t *testing.T) {
	var n atomic.Int32
	srv := testsuite.StartServer(t, testsuite.Options{Dialect: testsuite.PlainDialect(), Lookup: "ref", Work: func(*http.Request, []byte) (int, []byte) {
		if n.Add(1) == 1 {
			return 201, []byte(`{"id":"pay_1"}` + "\n")
		}
		return 201, []byte("created")
	}})
	post(t, srv.URL+"/payments", "", `{"ref":"r1"}`)
	post(t, srv.URL+"/payments", "", `{"ref":"r1"}`)
	srv.Script(testsuite.Fail(503))
	resp, err := http.Get(srv.URL + "/payments?ref=r1")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode, "the script comes first")
	got := post(t, srv.URL+"/payments", "", `{}`)
	require.Equal(t, 201, got.status)
	r, err := http.Get(srv.URL + "/payments?ref=r1")
	require.NoError(t, err)
	defer r.Body.Close()
	var raw json.RawMessage
	require.NoError(t, json.NewDecoder(r.Body).Decode(&raw))
	assert.JSONEq(t, `[{"id":"pay_1"},"created"]`, string(raw))
	assert.Equal(t, testsuite.Stats{Requests: 5, Records: 3, Lookups: 1, Failures: 1}, srv.Stats())
}
