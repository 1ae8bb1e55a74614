package longrunning

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
)

// The readers of the presets of activities/longrunning.go, with their
// defaults.
var (
	azureDocument = Document{Field: "status", Succeeded: []string{"Succeeded"}, Failed: []string{"Failed"},
		Canceled: []string{"Canceled"}, Error: "error", Result: "result"}
	googleDone = Done{Field: "done", Error: "error", Result: "response"}
	webhook    = Rule(poll.StatusRule{StatusField: "state", Succeeded: []string{"paid"}, Failed: []string{"declined"}})
)

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// TestRead: each style reads what the monitor's answer means.
func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		style Style
		a     Answer
		want  Reading
	}{
		{"code 202", StatusCode{}, Answer{Status: 202}, Reading{State: Running}},
		{"code 202 moved", StatusCode{}, Answer{Status: 202, Header: header("Location", "/op/2")}, Reading{State: Running, Next: "/op/2"}},
		{"code 200", StatusCode{}, Answer{Status: 200, Body: []byte(`{"status":"Failed"}`)}, Reading{State: Ended}},
		{"code 201", StatusCode{}, Answer{Status: 201}, Reading{State: Ended}},
		{"code 303", StatusCode{}, Answer{Status: 303, Header: header("Location", "/r/1")}, Reading{State: Ended, Next: "/r/1"}},
		{"document running", azureDocument, Answer{Status: 200, Body: []byte(`{"status":"InProgress"}`)}, Reading{State: Running, Name: "InProgress"}},
		{"document succeeded", azureDocument, Answer{Status: 200, Body: []byte(`{"status":"succeeded","result":{"id":1}}`)},
			Reading{State: Succeeded, Name: "succeeded", Detail: json.RawMessage(`{"id":1}`)}},
		{"document succeeded, no result", azureDocument, Answer{Status: 200, Body: []byte(`{"status":"Succeeded"}`)}, Reading{State: Succeeded, Name: "Succeeded"}},
		{"document failed", azureDocument, Answer{Status: 200, Body: []byte(`{"status":"Failed","error":{"code":"X"}}`)},
			Reading{State: Failed, Name: "Failed", Detail: json.RawMessage(`{"code":"X"}`)}},
		{"document canceled", azureDocument, Answer{Status: 200, Body: []byte(`{"status":"CANCELED"}`)}, Reading{State: Canceled, Name: "CANCELED"}},
		{"document unreadable", azureDocument, Answer{Status: 200, Body: []byte(`{"state":"x"}`)}, Reading{}},
		{"document 202 unreadable", azureDocument, Answer{Status: 202, Body: []byte(`not json`)}, Reading{State: Running}},
		{"document 303", azureDocument, Answer{Status: 303, Header: header("Location", "/r/1")}, Reading{State: Ended, Next: "/r/1"}},
		{"done false", googleDone, Answer{Status: 200, Body: []byte(`{"name":"operations/1","done":false}`)}, Reading{State: Running, Name: "done: false"}},
		{"done absent", googleDone, Answer{Status: 200, Body: []byte(`{"name":"operations/1"}`)}, Reading{State: Running, Name: "done: false"}},
		{"done succeeded", googleDone, Answer{Status: 200, Body: []byte(`{"done":true,"response":{"id":1}}`)},
			Reading{State: Succeeded, Name: "done: true", Detail: json.RawMessage(`{"id":1}`)}},
		{"done null error", googleDone, Answer{Status: 200, Body: []byte(`{"done":true,"error":null}`)}, Reading{State: Succeeded, Name: "done: true"}},
		{"done failed", googleDone, Answer{Status: 200, Body: []byte(`{"done":true,"error":{"code":9}}`)},
			Reading{State: Failed, Name: "done: true, error", Detail: json.RawMessage(`{"code":9}`)}},
		{"done cancelled", googleDone, Answer{Status: 200, Body: []byte(`{"done":true,"error":{"code":1}}`)},
			Reading{State: Canceled, Name: "done: true, error CANCELLED", Detail: json.RawMessage(`{"code":1}`)}},
		{"done not a bool", googleDone, Answer{Status: 200, Body: []byte(`{"done":"yes"}`)}, Reading{}},
		{"done not an object", googleDone, Answer{Status: 200, Body: []byte(`[]`)}, Reading{}},
		{"done 202 unreadable", googleDone, Answer{Status: 202, Body: []byte(`[]`)}, Reading{State: Running}},
		{"rule succeeded", webhook, Answer{Status: 200, Body: []byte(`{"state":"PAID","error":"x"}`)}, Reading{State: Succeeded, Name: "PAID"}},
		{"rule failed, whole document", webhook, Answer{Status: 200, Body: []byte(`{"state":"declined"}`)}, Reading{State: Failed, Name: "declined"}},
		{"rule no cancelled state", webhook, Answer{Status: 200, Body: []byte(`{"state":"canceled"}`)}, Reading{State: Running, Name: "canceled"}},
		{"rule 303", webhook, Answer{Status: 303, Header: header("Location", "/payments/1")}, Reading{State: Elsewhere, Next: "/payments/1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.style.Read(tc.a))
		})
	}
}

// TestStart: where a start answer names its monitor, and where a
// succeeded operation's result is.
func TestStart(t *testing.T) {
	azure := []string{"Azure-Asyncoperation", "Location"}
	for _, tc := range []struct {
		name        string
		h           http.Header
		names       []string
		header, raw string
	}{
		{"first present", header("Location", "/l", "Azure-AsyncOperation", "/a"), azure, "Azure-Asyncoperation", "/a"},
		{"fallback", header("Location", "/l"), azure, "Location", "/l"},
		{"none", header("Operation-Location", "/o"), azure, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			header, raw := MonitorHeader(tc.h, tc.names)
			assert.Equal(t, tc.header, header)
			assert.Equal(t, tc.raw, raw)
		})
	}
	for _, tc := range []struct {
		method, monitor string
		h               http.Header
		want            Final
	}{
		{http.MethodPut, "Azure-Asyncoperation", header("Location", "/l"), FinalOriginal},
		{http.MethodPatch, "Location", nil, FinalOriginal},
		{http.MethodPost, "Azure-Asyncoperation", header("Location", "/l"), FinalLocation},
		{http.MethodPost, "Azure-Asyncoperation", nil, FinalDocument},
		{http.MethodPost, "Location", header("Location", "/l"), FinalDocument},
		{http.MethodPost, "", header("Location", "/l"), FinalLocation},
		{http.MethodDelete, "Azure-Asyncoperation", header("Location", "/l"), FinalDocument},
	} {
		assert.Equal(t, tc.want, FinalVia(tc.method, tc.h, tc.monitor), "%s via %s", tc.method, tc.monitor)
	}
	for _, tc := range []struct {
		body, base, want string
		ok               bool
	}{
		{`{"name":"operations/1"}`, "https://x.example/v1/", "https://x.example/v1/operations/1", true},
		{`{"name":"/operations/1"}`, "https://x.example/v1", "https://x.example/v1/operations/1", true},
		{`{"name":""}`, "https://x.example/v1/", "", false},
		{`{"name":1}`, "https://x.example/v1/", "", false},
	} {
		got, ok := Named([]byte(tc.body), "name", tc.base)
		assert.Equal(t, tc.want, got, tc.body)
		assert.Equal(t, tc.ok, ok, tc.body)
	}
}

// TestCancel: the cancel request goes to the monitor with the suffix on
// its path, its query kept.
func TestCancel(t *testing.T) {
	method, target, ok := Cancel{Method: http.MethodPost, Suffix: ":cancel"}.Request("https://x.example/v1/operations/1?api-version=1")
	assert.True(t, ok)
	assert.Equal(t, http.MethodPost, method)
	assert.Equal(t, "https://x.example/v1/operations/1:cancel?api-version=1", target)
	_, _, ok = Cancel{}.Request("https://x.example/v1/operations/1")
	assert.False(t, ok, "no cancel request")
}
