package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// actionsAPI is the API of the actions section, one behaviour per
// scenario (its mode), answering each call (the "call" member of its
// body, the workflow ID) alike whichever client sends it: the ready
// workflow's HTTP activity or the plain activity.
type actionsAPI struct {
	mode string
	// retries is how many failures (status fail) a call gets before its
	// 201 (mode "retries"); polls how many GETs of its monitor it takes
	// until the 200 (mode "follow").
	retries, polls, fail int

	mu sync.Mutex
	// posts and gets count each call's requests.
	posts, gets map[string]int
	// records are the records made per client_reference (mode
	// "lookup"): a second means a duplicate.
	records map[string][]json.RawMessage
	// posted is closed when a call's first POST has its answer (mode
	// "webhook": the event may go then).
	posted map[string]chan struct{}
	// requests counts every request.
	requests int
}

// The modes of actionsAPI.
const (
	apiOK      = "ok"      // every POST 201
	apiRetries = "retries" // retries × fail (503, 425), then 201
	apiFollow  = "follow"  // 202 + Location, the monitor 202 until polls, then 200
	apiWebhook = "webhook" // 201 {"id": …, "status": "processing"}, its POST announced
	apiLookup  = "lookup"  // the first POST of a client_reference cut after its record; GET lookup
)

func newActionsAPI(mode string, retries, polls, fail int) *actionsAPI {
	return &actionsAPI{mode: mode, retries: retries, polls: polls, fail: fail, posts: map[string]int{}, gets: map[string]int{},
		records: map[string][]json.RawMessage{}, posted: map[string]chan struct{}{}}
}

// expect readies the announcement of call's first POST (postedCh).
func (a *actionsAPI) expect(call string) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch, ok := a.posted[call]
	if !ok {
		ch = make(chan struct{})
		a.posted[call] = ch
	}
	return ch
}

// stats returns the requests taken and the records made (mode lookup).
func (a *actionsAPI) stats() (requests, records int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.records {
		records += len(r)
	}
	return a.requests, records
}

func (a *actionsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	w.Header().Set("Content-Type", "application/json")
	a.mu.Lock()
	a.requests++
	a.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/ops/"):
		a.poll(w, strings.TrimPrefix(r.URL.Path, "/ops/"))
	case r.Method == http.MethodGet && r.URL.Path == "/payments":
		a.lookup(w, r.URL.Query().Get("client_reference"))
	case r.Method == http.MethodPost:
		a.post(w, r, body)
	default:
		http.NotFound(w, r)
	}
}

// post answers a call's POST by the mode.
func (a *actionsAPI) post(w http.ResponseWriter, r *http.Request, body []byte) {
	var in struct {
		Call string `json:"call"`
		Ref  string `json:"client_reference"`
	}
	_ = json.Unmarshal(body, &in)
	a.mu.Lock()
	a.posts[in.Call]++
	n := a.posts[in.Call]
	var announce chan struct{}
	if n == 1 {
		announce = a.posted[in.Call]
	}
	var record json.RawMessage
	if a.mode == apiLookup {
		record = json.RawMessage(fmt.Sprintf(`{"id":"pay_%s_%d","client_reference":%q,"amount":42}`, in.Call, n, in.Ref))
		a.records[in.Ref] = append(a.records[in.Ref], record)
	}
	a.mu.Unlock()
	if announce != nil {
		defer close(announce)
	}
	switch a.mode {
	case apiRetries:
		if n <= a.retries {
			w.WriteHeader(a.fail)
			_, _ = fmt.Fprintf(w, `{"error":%q}`, http.StatusText(a.fail))
			return
		}
	case apiFollow:
		w.Header().Set("Location", "http://"+r.Host+"/ops/"+in.Call)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusAccepted)
		_, _ = fmt.Fprintf(w, `{"id":%q,"status":"running"}`, in.Call)
		return
	case apiWebhook:
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":"pi_%s","object":"payment_intent","status":"processing"}`, in.Call)
		return
	case apiLookup:
		if len(a.recordsOf(in.Ref)) == 1 {
			// The work is done, the answer lost: an unknown outcome.
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(record)
		return
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"id":"rec_%s","status":"created","amount":42,"currency":"EUR"}`, in.Call)
}

func (a *actionsAPI) recordsOf(ref string) []json.RawMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.records[ref]
}

// poll answers a GET of call's monitor: 202 with Retry-After: 1 until
// its polls-th, then 200 with the result.
func (a *actionsAPI) poll(w http.ResponseWriter, call string) {
	a.mu.Lock()
	a.gets[call]++
	n := a.gets[call]
	a.mu.Unlock()
	if n < a.polls {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusAccepted)
		_, _ = fmt.Fprintf(w, `{"id":%q,"status":"running","poll":%d}`, call, n)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, `{"id":%q,"status":"succeeded","polls":%s}`, call, strconv.Itoa(n))
}

// lookup answers GET /payments?client_reference=ref: the records made
// with ref, a JSON array.
func (a *actionsAPI) lookup(w http.ResponseWriter, ref string) {
	recs := a.recordsOf(ref)
	out := []byte("[")
	for i, r := range recs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, r...)
	}
	out = append(out, ']')
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}
