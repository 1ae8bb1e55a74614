package activities_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
)

// TestBinaryResultNearTheBound (class 5): around the size where the base64
// of a binary body passes Config.MaxResultBytes, the encoded result never
// passes it; a body kept is byte for byte, a body omitted is identified.
func TestBinaryResultNearTheBound(t *testing.T) {
	const bound = 8 << 10
	var kept, omitted int
	lastKept := true
	for n := 5800; n <= 6400; n += 25 {
		body := strings.Repeat("\xfe", n) // never JSON
		srv := newRecorder(t, status(201, body, "Content-Type", "application/octet-stream"))
		resp, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}, MaxResultBytes: bound}, req(srv.URL))
		require.NoError(t, err)
		enc, err := json.Marshal(resp)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(enc), bound, "size %d", n)
		assert.Equal(t, int64(n), resp.BodyBytes)
		if resp.BodyOmitted {
			omitted++
			assert.Equal(t, "too large", resp.OmittedReason)
			assert.Equal(t, hexSHA256([]byte(body)), resp.BodySHA256)
			lastKept = false
			continue
		}
		kept++
		assert.True(t, lastKept, "size %d kept after a smaller one was omitted", n)
		assert.Equal(t, body, string(resp.RawBody))
	}
	assert.Positive(t, kept, "the range starts below the bound")
	assert.Positive(t, omitted, "the range ends above the bound")
}

// TestResultHeadersCountTowardsTheBound (class 5): response headers copied
// into the result (each up to 4 KiB, six times longer once JSON-escaped)
// count towards Config.MaxResultBytes too, with a body or without.
func TestResultHeadersCountTowardsTheBound(t *testing.T) {
	const bound = 8 << 10
	long := strings.Repeat("<", 4<<10)
	tests := []struct {
		name string
		body string
	}{
		{"no body", ""},
		{"a small JSON body", `{"id":"rec_1"}`},
		{"a body near the bound", `"` + strings.Repeat("a", 6<<10) + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, status(201, tt.body, "Location", "/records/"+long, "X-Request-Id", long, "Content-Type", "application/json"))
			resp, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}, MaxResultBytes: bound}, req(srv.URL))
			require.NoError(t, err)
			enc, err := json.Marshal(resp)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(enc), bound)
			assert.Equal(t, 201, resp.Status)
			assert.Equal(t, int64(len(tt.body)), resp.BodyBytes)
		})
	}
}

// TestLatin1JSONBodyIsKeptRaw (class 6): a 2xx whose JSON holds invalid
// UTF-8 in a string (a server writing Latin-1) cannot travel through
// Temporal as JSON byte for byte: it is a success with the bytes in
// RawBody (credentials redacted), never an error encoding the result.
func TestLatin1JSONBodyIsKeptRaw(t *testing.T) {
	for name, body := range map[string]string{
		"Latin-1 name":      "{\"name\":\"Jos\xe9\"}",
		"with the token":    "{\"name\":\"Jos\xe9\",\"echo\":\"" + token + "\"}",
		"lone continuation": "[\"\xa8\"]",
	} {
		t.Run(name, func(t *testing.T) {
			srv := newRecorder(t, status(201, body, "Content-Type", "application/json"))
			cfg := activities.Config{AllowedOrigins: []string{srv.URL}, Credentials: map[string]activities.Credential{srv.URL: {Header: http.Header{"Authorization": {"Bearer " + token}}}}}
			resp, logs, err := run(t, cfg, req(srv.URL))
			require.NoError(t, err, "a 2xx is a success")
			assertNoPiece(t, nil, resp, logs, token)
			assert.Empty(t, resp.Body)
			assert.Equal(t, strings.ReplaceAll(body, token, "[REDACTED]"), string(resp.RawBody))
			assert.Equal(t, int64(len(body)), resp.BodyBytes)
		})
	}
}

// TestFollowStartResultWithinBound: the start's result, the accepted
// operation included, stays within MaxResultBytes.
func TestFollowStartResultWithinBound(t *testing.T) {
	body := `{"blob":"` + strings.Repeat("y", 6<<10) + `"}`
	srv := newRecorder(t, status(202, body, "Location", "/operations/"+strings.Repeat("m", 7<<10)))
	in := req(srv.URL + "/charges")
	in.Follow = true
	resp, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}, MaxResultBytes: 12 << 10}, in)
	require.NoError(t, err)
	enc, _ := json.Marshal(resp)
	assert.LessOrEqual(t, len(enc), 12<<10)
	assert.True(t, resp.BodyOmitted)
	require.NotNil(t, resp.Accepted, "the operation is kept, the body omitted")
}
