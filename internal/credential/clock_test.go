package credential

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// TestClockedSources: the sources whose times are the API's (an OAuth 2.0
// token's expiry, a Signature V4 date) follow the clock the activity gives
// them; those whose times are the machine's (static headers, header files)
// take none.
func TestClockedSources(t *testing.T) {
	clock := &fakeClock{t: time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)} // far from the machine's

	e := newTokenEndpoint(t, 300)
	cfg := &clientcredentials.Config{ClientID: testClientID, ClientSecret: testClientSecret, TokenURL: e.URL, AuthStyle: oauth2.AuthStyleInHeader}
	src, err := NewOAuth2(cfg, &http.Client{Timeout: 10 * time.Second}, &recRedactor{})
	require.NoError(t, err)
	require.Implements(t, (*Clocked)(nil), src)
	src.(Clocked).UseClock(clock.now)
	first := apply(t, src).Get("Authorization")
	clock.advance(4 * time.Minute)
	assert.Equal(t, first, apply(t, src).Get("Authorization"), "a token 4 minutes old on the clock given is reused")
	clock.advance(time.Minute)
	assert.NotEqual(t, first, apply(t, src).Get("Authorization"), "a token expired on the clock given is replaced before it is sent")
	assert.EqualValues(t, 2, e.requests.Load())

	sig, err := NewSigV4("execute-api", "eu-west-1", credentials.NewStaticCredentialsProvider(suiteKeyID, suiteSecret, ""), &secrets{}, Names{})
	require.NoError(t, err)
	require.Implements(t, (*Clocked)(nil), sig)
	sig.(Clocked).UseClock(clock.now)
	assert.Equal(t, "20300601T120500Z", apply(t, sig).Get("X-Amz-Date"))

	static, err := NewStatic(http.Header{"X-Api-Key": {"ak_live_7c1f9e2d4b"}}, &secrets{}, Names{})
	require.NoError(t, err)
	assert.NotImplements(t, (*Clocked)(nil), static)
	path := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(path, []byte("Bearer tok_live_0123456789"), 0o600))
	files, err := NewHeaderFiles(map[string]string{"Authorization": path}, &secrets{}, nil, Names{})
	require.NoError(t, err)
	assert.NotImplements(t, (*Clocked)(nil), files)
}
