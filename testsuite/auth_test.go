package testsuite_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// sendAuth posts body to url with key and the header set, and returns the answer.
func sendAuth(t *testing.T, c *http.Client, url, key string, set func(*http.Request)) (reply, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"amount":1}`))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", key)
	if set != nil {
		set(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

// tokenReply is the token endpoint's answer, decoded.
type tokenReply struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
	Error       string `json:"error"`
}

// fetchToken asks srv's token endpoint for a token, with the client's
// credentials in HTTP Basic (basic) or in the body.
func fetchToken(t *testing.T, srv *testsuite.Server, id, secret string, basic bool, form url.Values) (int, http.Header, tokenReply) {
	t.Helper()
	if form == nil {
		form = url.Values{"grant_type": {"client_credentials"}}
	}
	if !basic {
		form.Set("client_id", id)
		form.Set("client_secret", secret)
	}
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/oauth/token", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic {
		req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var tr tokenReply
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tr))
	return resp.StatusCode, resp.Header, tr
}

func bearer(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

// TestOAuthTokenEndpoint: POST /oauth/token answers RFC 6749 §5.1 with a
// token for a known client, however it authenticates, and §5.2 otherwise;
// every request is counted.
func TestOAuthTokenEndpoint(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{
		OAuthClients: map[string]string{"app": "client-secret-1", "a b:c": "x%y z"}, OAuthTokenLifetime: 90 * time.Second,
	})
	tests := []struct {
		name, id, secret string
		basic            bool
		form             url.Values
		status           int
		errCode          string
	}{
		{"basic", "app", "client-secret-1", true, nil, 200, ""},
		{"body", "app", "client-secret-1", false, nil, 200, ""},
		{"basic, escaped characters", "a b:c", "x%y z", true, nil, 200, ""},
		{"wrong secret", "app", "client-secret-2", true, nil, 401, "invalid_client"},
		{"wrong secret in the body", "app", "nope", false, nil, 401, "invalid_client"},
		{"unknown client", "other", "client-secret-1", false, nil, 401, "invalid_client"},
		{"no client", "", "", false, nil, 401, "invalid_client"},
		{"password grant", "app", "client-secret-1", true, url.Values{"grant_type": {"password"}}, 400, "unsupported_grant_type"},
		{"no grant", "app", "client-secret-1", true, url.Values{}, 400, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, tr := fetchToken(t, srv, tt.id, tt.secret, tt.basic, tt.form)
			require.Equal(t, tt.status, status, "%+v", tr)
			require.Equal(t, tt.errCode, tr.Error)
			require.Equal(t, "no-store", h.Get("Cache-Control"))
			if tt.status != 200 {
				require.Empty(t, tr.AccessToken)
				if tt.status == 401 && tt.basic {
					require.True(t, strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic "), h.Get("WWW-Authenticate"))
				}
				return
			}
			require.Equal(t, "Bearer", tr.TokenType)
			require.Equal(t, 90, tr.ExpiresIn)
			require.GreaterOrEqual(t, len(tr.AccessToken), 32)
			require.NotContains(t, tr.AccessToken, tt.secret)
		})
	}
	require.Equal(t, len(tests), srv.Stats().TokenRequests)
	require.Zero(t, srv.Stats().Requests, "token requests are not operations")
}

// TestOAuthRequired: with OAuthClients, an operation needs a live token
// of the server's own token endpoint; a missing, unknown or expired one
// is 401 with RFC 6750's WWW-Authenticate, and creates no record.
func TestOAuthRequired(t *testing.T) {
	clk := newClock()
	srv := testsuite.StartServer(t, testsuite.Options{
		Now: clk.Now, OAuthClients: map[string]string{"app": "client-secret-1"}, OAuthTokenLifetime: time.Minute,
	})
	_, _, tr := fetchToken(t, srv, "app", "client-secret-1", true, nil)
	tests := []struct {
		name    string
		set     func(*http.Request)
		advance time.Duration
		status  int
		auth    string // the WWW-Authenticate answered
	}{
		{"no token", nil, 0, 401, `Bearer realm="testsuite"`},
		{"basic credentials", func(r *http.Request) { r.SetBasicAuth("app", "client-secret-1") }, 0, 401, `Bearer realm="testsuite"`},
		{"unknown token", bearer("not-a-token-of-this-server"), 0, 401, `Bearer realm="testsuite", error="invalid_token"`},
		{"the token", bearer(tr.AccessToken), 0, 201, ""},
		{"the token, lowercase scheme", func(r *http.Request) { r.Header.Set("Authorization", "bearer "+tr.AccessToken) }, 0, 201, ""},
		{"the token a second before it expires", bearer(tr.AccessToken), 59 * time.Second, 201, ""},
		{"the expired token", bearer(tr.AccessToken), time.Second, 401, `Bearer realm="testsuite", error="invalid_token"`},
	}
	records, refused := 0, 0
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Advance(tt.advance)
			got, err := sendAuth(t, http.DefaultClient, srv.URL+"/payments", "k-"+string(rune('a'+i)), tt.set)
			require.NoError(t, err)
			require.Equal(t, tt.status, got.status, got.body)
			if tt.status == 201 {
				records++
				require.Empty(t, got.header.Get("WWW-Authenticate"))
			} else {
				refused++
				require.True(t, strings.HasPrefix(got.header.Get("WWW-Authenticate"), tt.auth), got.header.Get("WWW-Authenticate"))
				require.NotContains(t, got.body, tr.AccessToken)
			}
			require.Equal(t, records, srv.Stats().Records)
			require.Equal(t, refused, srv.Stats().Unauthorized)
		})
	}
	// The key of a refused request is not consumed: with a fresh token it is new.
	_, _, fresh := fetchToken(t, srv, "app", "client-secret-1", false, nil)
	got, err := sendAuth(t, http.DefaultClient, srv.URL+"/payments", "k-g", bearer(fresh.AccessToken))
	require.NoError(t, err)
	require.Equal(t, 201, got.status, got.body)
	require.Empty(t, got.header.Get("Idempotent-Replayed"))
	// GET /stats and /healthz need no token.
	resp, err := http.Get(srv.URL + "/stats")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}

// TestOAuthClientCredentialsLibrary: golang.org/x/oauth2/clientcredentials
// (the client the worker uses) gets a token and calls the API with it,
// in either authentication style.
func TestOAuthClientCredentialsLibrary(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{OAuthClients: map[string]string{"app": "client-secret-1"}})
	for i, style := range []oauth2.AuthStyle{oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams, oauth2.AuthStyleAutoDetect} {
		cfg := clientcredentials.Config{ClientID: "app", ClientSecret: "client-secret-1", TokenURL: srv.URL + "/oauth/token", AuthStyle: style, Scopes: []string{"payments"}}
		got, err := sendAuth(t, cfg.Client(context.Background()), srv.URL+"/payments", "lib-"+string(rune('a'+i)), nil)
		require.NoError(t, err)
		require.Equal(t, 201, got.status, "style %v: %s", style, got.body)
	}
	require.Equal(t, 3, srv.Stats().TokenRequests)
}

// TestOAuthRevokeClient: a revoked client is refused at the token
// endpoint (invalid_client) and its tokens on the API (invalid_token);
// another client is not affected.
func TestOAuthRevokeClient(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{OAuthClients: map[string]string{"app": "s1", "other": "s2"}})
	_, _, app := fetchToken(t, srv, "app", "s1", true, nil)
	_, _, other := fetchToken(t, srv, "other", "s2", true, nil)
	srv.RevokeClient("app")
	tests := []struct {
		name   string
		tok    string
		status int
	}{
		{"revoked client's token", app.AccessToken, 401},
		{"other client's token", other.AccessToken, 201},
	}
	for i, tt := range tests {
		got, err := sendAuth(t, http.DefaultClient, srv.URL+"/payments", "r-"+string(rune('a'+i)), bearer(tt.tok))
		require.NoError(t, err)
		require.Equal(t, tt.status, got.status, "%s: %s", tt.name, got.body)
		if tt.status == 401 {
			require.Contains(t, got.header.Get("WWW-Authenticate"), `error="invalid_token"`)
		}
	}
	for _, basic := range []bool{true, false} {
		status, _, tr := fetchToken(t, srv, "app", "s1", basic, nil)
		require.Equal(t, 401, status)
		require.Equal(t, "invalid_client", tr.Error)
	}
	status, _, _ := fetchToken(t, srv, "other", "s2", true, nil)
	require.Equal(t, 200, status)
	require.Equal(t, 1, srv.Stats().Records)
}

// pki makes certificates for the mutual TLS tests.
type pki struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T, name string) pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pki{cert: cert, key: key, pool: pool}
}

// issue makes a certificate signed by ca, for a server (127.0.0.1) or a
// client, valid until notAfter.
func (ca pki) issue(t *testing.T, server bool, notAfter time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestMutualTLS: with TLSCertificate and ClientCAs, StartServer serves
// TLS and only a client with a valid certificate of those CAs gets
// through; the others are refused in the handshake, with no record.
func TestMutualTLS(t *testing.T) {
	serverCA, clientCA, otherCA := newCA(t, "server CA"), newCA(t, "client CA"), newCA(t, "other CA")
	serverCert := serverCA.issue(t, true, time.Now().Add(time.Hour))
	srv := testsuite.StartServer(t, testsuite.Options{TLSCertificate: &serverCert, ClientCAs: clientCA.pool})
	require.True(t, strings.HasPrefix(srv.URL, "https://"), srv.URL)
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: serverCA.pool, Certificates: certs}}}
	}
	tests := []struct {
		name   string
		client *http.Client
		ok     bool
	}{
		{"client CA's certificate", client(clientCA.issue(t, false, time.Now().Add(time.Hour))), true},
		{"no certificate", client(), false},
		{"another CA's certificate", client(otherCA.issue(t, false, time.Now().Add(time.Hour))), false},
		{"expired certificate", client(clientCA.issue(t, false, time.Now().Add(-time.Hour))), false},
		{"the server CA's certificate", client(serverCA.issue(t, false, time.Now().Add(time.Hour))), false},
	}
	records := 0
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sendAuth(t, tt.client, srv.URL+"/payments", "m-"+string(rune('a'+i)), nil)
			if !tt.ok {
				require.Error(t, err)
				require.Equal(t, records, srv.Stats().Records)
				return
			}
			require.NoError(t, err)
			require.Equal(t, 201, got.status, got.body)
			records++
			require.Equal(t, records, srv.Stats().Records)
		})
	}
}

// TestMutualTLSHandler: the handler itself refuses a request that came
// without a verified client certificate (served over plain HTTP by
// mistake), with no record.
func TestMutualTLSHandler(t *testing.T) {
	ca := newCA(t, "CA")
	cert := ca.issue(t, true, time.Now().Add(time.Hour))
	srv := testsuite.NewServer(testsuite.Options{TLSCertificate: &cert, ClientCAs: ca.pool})
	defer srv.Close()
	cfg := srv.TLSConfig()
	require.Equal(t, tls.RequireAndVerifyClientCert, cfg.ClientAuth)
	require.Same(t, ca.pool, cfg.ClientCAs)
	require.Len(t, cfg.Certificates, 1)
	req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "k1")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	require.Equal(t, http.StatusForbidden, w.Code, w.Body.String())
	require.Zero(t, srv.Stats().Records)
	require.Equal(t, 1, srv.Stats().Unauthorized)
	// Nor does its token endpoint answer such a request.
	srv = testsuite.NewServer(testsuite.Options{TLSCertificate: &cert, ClientCAs: ca.pool, OAuthClients: map[string]string{"app": "s1"}})
	defer srv.Close()
	req = httptest.NewRequest(http.MethodPost, "/oauth/token", strings.NewReader("grant_type=client_credentials&client_id=app&client_secret=s1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w = httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	require.Equal(t, http.StatusForbidden, w.Code, w.Body.String())
	require.NotContains(t, w.Body.String(), "access_token")
}

const (
	akid    = "AKIDEXAMPLE"
	secret  = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	session = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"
)

// sigv4 signs a request with AWS's own Go signer at time at.
func sigv4(t *testing.T, creds aws.Credentials, region string, at time.Time) func(*http.Request) {
	return func(r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		sum := sha256.Sum256(body)
		require.NoError(t, v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), "execute-api", region, at))
	}
}

// then runs the setters in order.
func then(fs ...func(*http.Request)) func(*http.Request) {
	return func(r *http.Request) {
		for _, f := range fs {
			f(r)
		}
	}
}

// TestSigV4Required: with SigV4Credentials, a request signed by AWS's Go
// signer for the service and region gets through; a changed body, header
// or query, a wrong key, scope or session token, or a date more than 5
// minutes off is 403 with an AWS-style error, and creates no record.
func TestSigV4Required(t *testing.T) {
	clk := newClock()
	plain := testsuite.StartServer(t, testsuite.Options{
		Now: clk.Now, SigV4Credentials: &aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}, SigV4Service: "execute-api", SigV4Region: "eu-west-1",
	})
	withSession := testsuite.StartServer(t, testsuite.Options{
		Now: clk.Now, SigV4Credentials: &aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret, SessionToken: session}, SigV4Service: "execute-api", SigV4Region: "eu-west-1",
	})
	now := clk.Now()
	good := aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}
	goodSession := aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret, SessionToken: session}
	tests := []struct {
		name   string
		srv    *testsuite.Server
		path   string
		set    func(*http.Request)
		status int
		errTyp string
	}{
		{"signed", plain, "/payments?x=1&a=b", sigv4(t, good, "eu-west-1", now), 201, ""},
		{"signed 4 minutes ago", plain, "/payments", sigv4(t, good, "eu-west-1", now.Add(-4*time.Minute)), 201, ""},
		{"signed with the session token", withSession, "/payments", sigv4(t, goodSession, "eu-west-1", now), 201, ""},
		{"unsigned", plain, "/payments", nil, 403, "MissingAuthenticationTokenException"},
		{"bearer", plain, "/payments", bearer("x"), 403, "MissingAuthenticationTokenException"},
		{"body changed", plain, "/payments", then(sigv4(t, good, "eu-west-1", now), func(r *http.Request) {
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(`{"amount":9}`)), 12
		}), 403, "InvalidSignatureException"},
		{"signed header changed", plain, "/payments", then(sigv4(t, good, "eu-west-1", now), func(r *http.Request) {
			r.Header.Set("Idempotency-Key", "other")
		}), 403, "InvalidSignatureException"},
		{"query changed", plain, "/payments?x=1", then(sigv4(t, good, "eu-west-1", now), func(r *http.Request) { r.URL.RawQuery = "x=2" }), 403, "InvalidSignatureException"},
		{"path changed", plain, "/payments", then(sigv4(t, good, "eu-west-1", now), func(r *http.Request) { r.URL.Path = "/refunds" }), 403, "InvalidSignatureException"},
		{"date changed", plain, "/payments", then(sigv4(t, good, "eu-west-1", now), func(r *http.Request) {
			r.Header.Set("X-Amz-Date", now.Add(time.Second).Format("20060102T150405Z"))
		}), 403, "InvalidSignatureException"},
		{"signed 6 minutes ago", plain, "/payments", sigv4(t, good, "eu-west-1", now.Add(-6*time.Minute)), 403, "InvalidSignatureException"},
		{"signed 6 minutes ahead", plain, "/payments", sigv4(t, good, "eu-west-1", now.Add(6*time.Minute)), 403, "InvalidSignatureException"},
		{"wrong secret", plain, "/payments", sigv4(t, aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret + "x"}, "eu-west-1", now), 403, "InvalidSignatureException"},
		{"unknown access key", plain, "/payments", sigv4(t, aws.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: secret}, "eu-west-1", now), 403, "UnrecognizedClientException"},
		{"other region", plain, "/payments", sigv4(t, good, "us-east-1", now), 403, "InvalidSignatureException"},
		{"session token missing", withSession, "/payments", sigv4(t, good, "eu-west-1", now), 403, "UnrecognizedClientException"},
		{"wrong session token", withSession, "/payments", sigv4(t, aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret, SessionToken: "other"}, "eu-west-1", now), 403, "UnrecognizedClientException"},
		{"unexpected session token", plain, "/payments", sigv4(t, goodSession, "eu-west-1", now), 403, "UnrecognizedClientException"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.srv.Stats()
			got, err := sendAuth(t, http.DefaultClient, tt.srv.URL+tt.path, "s-"+string(rune('a'+i)), tt.set)
			require.NoError(t, err)
			require.Equal(t, tt.status, got.status, got.body)
			after := tt.srv.Stats()
			if tt.status == 201 {
				require.Equal(t, before.Records+1, after.Records)
				return
			}
			require.Equal(t, before.Records, after.Records)
			require.Equal(t, before.Unauthorized+1, after.Unauthorized)
			require.Equal(t, tt.errTyp, got.header.Get("X-Amzn-Errortype"))
			var raw map[string]string
			require.NoError(t, json.Unmarshal([]byte(got.body), &raw), got.body)
			require.Equal(t, tt.errTyp, raw["__type"])
			require.NotEmpty(t, raw["message"])
			require.NotContains(t, got.body, secret)
			require.NotContains(t, got.body, session)
		})
	}
	// A refused request's key is not consumed.
	got, err := sendAuth(t, http.DefaultClient, plain.URL+"/payments", "s-e", sigv4(t, good, "eu-west-1", now))
	require.NoError(t, err)
	require.Equal(t, 201, got.status, got.body)
}

// TestOptionsValidate: inconsistent credential settings are refused with
// an error naming the field.
func TestOptionsValidate(t *testing.T) {
	ca := newCA(t, "CA")
	cert := ca.issue(t, true, time.Now().Add(time.Hour))
	creds := &aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}
	tests := []struct {
		name string
		opts testsuite.Options
		want string // "" for valid
	}{
		{"zero", testsuite.Options{}, ""},
		{"oauth", testsuite.Options{OAuthClients: map[string]string{"a": "b"}, OAuthTokenLifetime: time.Minute}, ""},
		{"mtls", testsuite.Options{TLSCertificate: &cert, ClientCAs: ca.pool}, ""},
		{"tls only", testsuite.Options{TLSCertificate: &cert}, ""},
		{"sigv4", testsuite.Options{SigV4Credentials: creds, SigV4Service: "execute-api", SigV4Region: "eu-west-1"}, ""},
		{"sigv4 and mtls", testsuite.Options{SigV4Credentials: creds, SigV4Service: "s3", SigV4Region: "eu-west-1", TLSCertificate: &cert, ClientCAs: ca.pool}, ""},
		{"lifetime without clients", testsuite.Options{OAuthTokenLifetime: time.Minute}, "OAuthClients"},
		{"negative lifetime", testsuite.Options{OAuthClients: map[string]string{"a": "b"}, OAuthTokenLifetime: -1}, "OAuthTokenLifetime"},
		{"empty client secret", testsuite.Options{OAuthClients: map[string]string{"a": ""}}, "OAuthClients"},
		{"empty client id", testsuite.Options{OAuthClients: map[string]string{"": "b"}}, "OAuthClients"},
		{"client CAs without certificate", testsuite.Options{ClientCAs: ca.pool}, "TLSCertificate"},
		{"empty certificate", testsuite.Options{TLSCertificate: &tls.Certificate{}}, "TLSCertificate"},
		{"sigv4 without scope", testsuite.Options{SigV4Credentials: creds}, "SigV4Service"},
		{"sigv4 without region", testsuite.Options{SigV4Credentials: creds, SigV4Service: "s3"}, "SigV4Region"},
		{"sigv4 scope without credentials", testsuite.Options{SigV4Service: "s3", SigV4Region: "eu-west-1"}, "SigV4Credentials"},
		{"sigv4 without secret", testsuite.Options{SigV4Credentials: &aws.Credentials{AccessKeyID: akid}, SigV4Service: "s3", SigV4Region: "eu-west-1"}, "SecretAccessKey"},
		{"oauth and sigv4", testsuite.Options{OAuthClients: map[string]string{"a": "b"}, SigV4Credentials: creds, SigV4Service: "s3", SigV4Region: "eu-west-1"}, "one"},
		{"key in the body", testsuite.Options{Dialect: testsuite.Dialect{KeyIn: "body:metadata.idempotency_key"}}, ""},
		{"key place without its kind", testsuite.Options{Dialect: testsuite.Dialect{KeyIn: "idempotency_key"}}, "Dialect.KeyIn"},
		{"key place of another kind", testsuite.Options{Dialect: testsuite.Dialect{KeyIn: "cookie:k"}}, "Dialect.KeyIn"},
		{"key path with an empty member", testsuite.Options{Dialect: testsuite.Dialect{KeyIn: "body:a..b"}}, "Dialect.KeyIn"},
		{"lookup", testsuite.Options{Lookup: "metadata.ref"}, ""},
		{"cut rate", testsuite.Options{CutRate: 1}, ""},
		{"negative cut rate", testsuite.Options{CutRate: -0.1}, "Options.CutRate"},
		{"cut rate over 1", testsuite.Options{CutRate: 1.5}, "Options.CutRate"},
		{"cut rate NaN", testsuite.Options{CutRate: math.NaN()}, "Options.CutRate"},
		{"lookup path with an empty member", testsuite.Options{Lookup: "metadata..ref"}, "Options.Lookup"},
		{"lookup path with a space", testsuite.Options{Lookup: "client reference"}, "Options.Lookup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), secret)
			require.Panics(t, func() { testsuite.NewServer(tt.opts) })
		})
	}
}

// TestSigV4OverMutualTLS: the two schemes together, as a bank behind AWS
// might require: a signed request with a client certificate gets
// through, the same request unsigned is refused.
func TestSigV4OverMutualTLS(t *testing.T) {
	serverCA, clientCA := newCA(t, "server CA"), newCA(t, "client CA")
	serverCert := serverCA.issue(t, true, time.Now().Add(time.Hour))
	srv := testsuite.StartServer(t, testsuite.Options{
		TLSCertificate: &serverCert, ClientCAs: clientCA.pool,
		SigV4Credentials: &aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}, SigV4Service: "execute-api", SigV4Region: "eu-west-1",
	})
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: serverCA.pool, Certificates: []tls.Certificate{clientCA.issue(t, false, time.Now().Add(time.Hour))},
	}}}
	for _, tt := range []struct {
		name   string
		set    func(*http.Request)
		status int
	}{
		{"signed", sigv4(t, aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}, "eu-west-1", time.Now()), 201},
		{"unsigned", nil, 403},
	} {
		got, err := sendAuth(t, c, srv.URL+"/payments?q=1", "tls-"+tt.name, tt.set)
		require.NoError(t, err)
		require.Equal(t, tt.status, got.status, "%s: %s", tt.name, got.body)
	}
	require.Equal(t, 1, srv.Stats().Records)
}
