package host

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
)

// TestOriginsFileErrors: each malformed origins file is refused with what
// a person needs to fix it: where (FILE:LINE:COLUMN of the key or value),
// the key as written, and what to write; no advice that does not apply,
// and no piece of a secret the file holds. In want, ":L:C:" stands for
// the file's path and the place, $DIR for a directory holding an empty
// file, "empty".
func TestOriginsFileErrors(t *testing.T) {
	const secret = "Zq8pLm2Xw9QeKZ0aBcDeFgHiJ" // no piece of the errors' own words
	env := envOf(map[string]string{"SET": "a-client-secret-0123456789", "EMPTY": " ", "VT": "sk_live_01234\x0b56789"})
	tests := []struct {
		name string
		text string
		mode os.FileMode
		want []string
		not  []string
	}{
		{"typo in a required key",
			"[origin.\"https://x.example\".oauth2]\nclient_id = \"treasury\"\nclient_secret_env = \"SET\"\ntokn_url = \"https://login.x.example/token\"\n", 0o644,
			[]string{`:4:1: origin "https://x.example": unknown key oauth2.tokn_url: did you mean oauth2.token_url?`, "client_secret_file"}, nil},
		{"typo in a required key, first in its table",
			"[origin.\"https://x.example\".oauth2]\ntokn_url = \"https://login.x.example/token\"\nclient_id = \"treasury\"\nclient_secret_env = \"SET\"\n", 0o644,
			[]string{`:2:1: origin "https://x.example": unknown key oauth2.tokn_url: did you mean oauth2.token_url?`}, []string{"is required"}},
		{"typo in the first key of an origin's table",
			"[origin.\"https://x.example\"]\nconvnetion = \"stripe\"\nkey_quoted = true\n", 0o644,
			[]string{`:2:1: origin "https://x.example": unknown key convnetion: did you mean convention?`, "the keys of [origin.\"https://x.example\"] are convention, key_header"}, nil},
		{"a key of another table",
			"[origin.\"https://x.example\"]\ncert_file = \"/run/secrets/bank.crt\"\n", 0o644,
			[]string{`:2:1: origin "https://x.example": unknown key cert_file: did you mean tls.cert_file, in [origin."https://x.example".tls]?`}, nil},
		{"wrong type",
			"[origin.\"https://x.example\"]\nkey_quoted = \"yes\"\n", 0o644,
			[]string{`:2:14: origin "https://x.example": key_quoted: want true or false, not a string, e.g. key_quoted = true`}, []string{"double quotes"}},
		{"a list of scopes as a string",
			"[origin.\"https://x.example\".oauth2]\nscopes = \"payments refunds\"\n", 0o644,
			[]string{`:2:10: origin "https://x.example": oauth2.scopes: want a list of strings, not a string, e.g. scopes = ["payments"]`}, nil},
		{"secret inline in a file others may read",
			"[origin.\"https://x.example\".headers]\nAuthorization = \"Bearer " + secret + "\"\n", 0o644,
			[]string{`:2:17: origin "https://x.example": headers.Authorization is a secret written inline`, `write { env = "VAR", prefix = "Bearer " } or { file = "/run/secrets/NAME" } instead, or chmod 600`}, nil},
		{"client secret inline, 0640",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://login.x.example/token\"\nclient_id = \"treasury\"\nclient_secret = \"" + secret + "\"\n", 0o640,
			[]string{`:4:17: origin "https://x.example": oauth2.client_secret is a secret written inline`, `write client_secret_env = "VAR" or client_secret_file = "/run/secrets/NAME" instead, or chmod 600`}, nil},
		{"one origin twice",
			"[origin.\"https://x.example\"]\nconvention = \"stripe\"\n[origin.\"https://X.example:443\"]\n", 0o644,
			[]string{`:3:9: [origin."https://X.example:443"] is the origin https://x.example a second time ([origin."https://x.example"] is at `, ":1:9): give each origin one table"}, nil},
		{"not an origin",
			"[origin.\"https://x.example/v1\"]\n", 0o644,
			[]string{`:1:9: [origin."https://x.example/v1"]: `, `write the origin as scheme://host[:port], e.g. [origin."https://api.stripe.com"]`}, nil},
		{"unknown scheme",
			"[origin.\"ftp://x.example\"]\n", 0o644,
			[]string{`:1:9: [origin."ftp://x.example"]: `, `unsupported scheme "ftp"`, "write the origin as scheme://host[:port]"}, nil},
		{"unknown preset",
			"[origin.\"https://x.example\"]\nconvention = \"paypal\"\n", 0o644,
			[]string{`:2:14: origin "https://x.example": convention = "paypal": want ietf, stripe, square, aws-json or google`}, nil},
		{"bad key_in",
			"[origin.\"https://x.example\"]\nkey_in = \"cookie:k\"\n", 0o644,
			[]string{`:2:10: origin "https://x.example": key_in = "cookie:k": key place "cookie:k": "cookie" is not header, body or query`}, nil},
		{"lookup with the key in a header",
			"[origin.\"https://x.example\".reconcile]\nlookup = \"https://x.example/p?ref={key}\"\n", 0o644,
			[]string{`origin "https://x.example": reconcile: reconcile.Lookup needs the key where the API keeps it`, `key_in = "body:client_reference"`}, nil},
		{"lookup on another origin",
			"[origin.\"https://x.example\"]\nkey_in = \"body:ref\"\n[origin.\"https://x.example\".reconcile]\nlookup = \"https://y.example/p?ref={key}\"\n", 0o644,
			[]string{`reconcile.Lookup is on https://y.example, the call on https://x.example`}, nil},
		{"unknown long_running",
			"[origin.\"https://x.example\"]\nlong_running = \"aws\"\n", 0o644,
			[]string{`:2:16: origin "https://x.example": long_running = "aws": want azure, operation-location or google`}, nil},
		{"a header by env and by file",
			"[origin.\"https://x.example\".headers]\nAuthorization = { env = \"API_KEY\", file = \"/run/secrets/key\" }\n", 0o644,
			[]string{`:2:36: origin "https://x.example": headers.Authorization: env and file both: write one`}, nil},
		{"unknown key of a header's value",
			"[origin.\"https://x.example\".headers]\nAuthorization = { environment = \"API_KEY\" }\n", 0o644,
			[]string{`:2:19: origin "https://x.example": headers.Authorization: unknown key environment: did you mean env?`, "env, prefix and file"}, nil},
		{"missing env var of a header",
			"[origin.\"https://x.example\".headers]\nX-Api-Key = { env = \"ADYEN_KEY\" }\n", 0o644,
			[]string{`:2:21: origin "https://x.example": headers.X-Api-Key.env: the environment variable ADYEN_KEY is not set (or empty): set it in the worker's environment, or write { file = "/run/secrets/NAME" }`}, nil},
		{"missing env var of a client ID",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://login.x.example/token\"\nclient_id_env = \"PAYPAL_ID\"\nclient_secret_env = \"SET\"\n", 0o644,
			[]string{`:3:17: origin "https://x.example": oauth2.client_id_env: the environment variable PAYPAL_ID is not set (or empty): set it in the worker's environment, or write client_id = "…" (a client ID is no secret) instead`}, []string{"file"}},
		{"client ID twice",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://login.x.example/token\"\nclient_id = \"treasury\"\nclient_id_env = \"PAYPAL_ID\"\nclient_secret_env = \"SET\"\n", 0o644,
			[]string{`:4:1: origin "https://x.example": oauth2: client_id and client_id_env both: write one`}, nil},
		{"empty client secret file",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://login.x.example/token\"\nclient_id = \"treasury\"\nclient_secret_file = \"$DIR/empty\"\n", 0o644,
			[]string{`:4:22: origin "https://x.example": oauth2.client_secret_file: $DIR/empty is empty: write the client secret in it`}, nil},
		{"half a certificate pair",
			"[origin.\"https://x.example\".tls]\ncert_file = \"/run/secrets/bank.crt\"\n", 0o644,
			[]string{`:1:29: origin "https://x.example": tls: cert_file and key_file are both required`, `key_file = "/run/secrets/bank.key"`}, nil},
		{"unknown top-level table",
			"[origins.\"https://x.example\"]\nconvention = \"stripe\"\n", 0o644,
			[]string{`:1:2: unknown key origins: did you mean origin? (the top-level keys are admission and origin)`}, nil},
		{"a missing ]",
			"[origin.\"https://x.example\"\nconvention = \"stripe\"\n", 0o644,
			[]string{`:1:28: not TOML: the table's name is not closed: close it with ], e.g. [origin."https://api.stripe.com"]`}, []string{"double quotes", ": :"}},
		{"an unterminated string",
			"[origin.\"https://x.example\"]\nconvention = \"stripe\n", 0o644,
			[]string{`:2:21: not TOML (after the key origin."https://x.example".convention): a string not closed on its line: close it with " on the same line`}, []string{"double quotes"}},
		{"a value without quotes",
			"[origin.\"https://x.example\".headers]\nAuthorization = Bearer " + secret + "\n", 0o600,
			[]string{`:2:17: not TOML (after the key origin."https://x.example".headers.Authorization): a value without quotes, or not a value: write string values in double quotes`}, nil},
		{"an inline table over two lines",
			"[origin.\"https://x.example\".headers]\nAuthorization = { env = \"API_KEY\",\n  prefix = \"Bearer \" }\n", 0o644,
			[]string{`:2:35: not TOML (after the key origin."https://x.example".headers.Authorization`, "an inline table over several lines: write it on one line"}, []string{"double quotes"}},
		{"a header name with a space",
			"[origin.\"https://x.example\".headers]\nX Api Key = { env = \"API_KEY\" }\n", 0o644,
			[]string{`:2:3: not TOML (after the key origin."https://x.example".headers): a key with a character keys do not have, or no =: write key = value, and quote a key`}, []string{"double quotes, e.g."}},
		{"a key given twice",
			"[origin.\"https://x.example\"]\nconvention = \"stripe\"\nconvention = \"ietf\"\n", 0o644,
			[]string{`:3:1`, `not TOML (after the key origin."https://x.example".convention): a key given twice`, "keep one of them"}, []string{"double quotes"}},
		{"a value of the wrong type in [admission]",
			"[admission]\ninitial_rate = \"5\"\n", 0o644,
			[]string{`:2:16: admission.initial_rate: want a number, not a string, e.g. initial_rate = 10`}, []string{"double quotes"}},
		{"a negative retry_refused",
			"[origin.\"https://x.example\"]\nretry_refused = \"-5m\"\n", 0o644,
			[]string{`:2:17: origin "https://x.example": retry_refused = "-5m0s": write how long a refused credential is asked again, e.g. retry_refused = "5m"`}, nil},
		{"a negative max_retry_after",
			"[origin.\"https://x.example\"]\nmax_retry_after = \"-1h\"\n", 0o644,
			[]string{`:2:19: origin "https://x.example": max_retry_after = "-1h0m0s": write the longest Retry-After of this origin to honour`}, nil},
		{"a negative rate",
			"[admission]\ninitial_rate = -1\n", 0o644,
			[]string{`:2:16: admission.initial_rate: out of range: write a value of 0 or more (0 takes the default), e.g. initial_rate = 10; off = true turns admission off`}, nil},
		{"a NaN rate",
			"[admission]\ninitial_rate = nan\n", 0o644,
			[]string{`:2:16: admission.initial_rate: out of range: write a value of 0 or more (0 takes the default), e.g. initial_rate = 10`}, nil},
		{"a failure ratio above 1",
			"[admission.breaker]\nfailure_ratio = 2\n", 0o644,
			[]string{`:2:17: admission.breaker.failure_ratio: out of range: write a share above 0 and at most 1`, "off = true in [admission.breaker] turns the breaker off"}, nil},
		{"an origin's failure ratio above 1",
			"[origin.\"https://x.example\".admission.breaker]\nfailure_ratio = 2\n", 0o644,
			[]string{`:2:17: origin "https://x.example": admission.breaker.failure_ratio: out of range: write a share above 0 and at most 1`, `off = true in [origin."https://x.example".admission.breaker] turns the breaker off`}, nil},
		{"an origin's min_rate above its initial_rate",
			"[origin.\"https://x.example\".admission]\ninitial_rate = 1\nmin_rate = 2\n", 0o644,
			[]string{`:3:12: origin "https://x.example": admission.min_rate 2 is above initial_rate 1: write a lowest rate at most the first`}, nil},
		{"a throttle that is not an error status",
			"[admission]\nthrottles = [429, 200]\n", 0o644,
			[]string{`:2:13: admission.throttles: out of range: list HTTP error statuses from 400 to 599, e.g. throttles = [429, 503]`}, nil},
		{"a bad duration string",
			"[admission]\nmax_wait = \"20 s\"\n", 0o644,
			[]string{`:2:12: admission.max_wait: "20 s" is not a duration: write a number and its unit (ms, s, m or h) in double quotes, e.g. max_wait = "1s"`}, nil},
		{"a duration without its unit",
			"[admission.breaker]\nwindow = 60\n", 0o644,
			[]string{`:2:10: admission.breaker.window: want a duration in double quotes, not a whole number, e.g. window = "10s"`}, nil},
		{"an unknown auth_style",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://login.x.example/token\"\nclient_id = \"treasury\"\nclient_secret_env = \"SET\"\nauth_style = \"basic\"\n", 0o644,
			[]string{`:5:14: origin "https://x.example": oauth2.auth_style = "basic": want "header" (HTTP Basic), "params" (in the body) or "auto"`}, nil},
		{"a token_url that is not an http(s) URL",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"ftp://login.x.example/token\"\nclient_id = \"treasury\"\nclient_secret_env = \"SET\"\n", 0o644,
			[]string{`:2:13: origin "https://x.example": oauth2.token_url = "ftp:/…" (27 bytes): not an http(s) URL`, `write the token endpoint's URL, e.g. token_url = "https://`}, nil},
		{"a key header that is no header name",
			"[origin.\"https://x.example\"]\nkey_header = \"Request Id\"\n", 0o644,
			[]string{`:2:14: origin "https://x.example": key_header = "Reque…" (10 bytes): not a header name`, `e.g. key_header = "PayPal-Request-Id"`}, nil},
		{"one header twice",
			"[origin.\"https://x.example\".headers]\nauthorization = { env = \"SET\", prefix = \"Bearer \" }\nAuthorization = { file = \"/run/secrets/key\" }\n", 0o644,
			[]string{`:3:1: origin "https://x.example": headers.Authorization: the header Authorization a second time (headers.authorization is at `, ":2:1): give each header one value"}, nil},
		{"a control byte in a header from the environment",
			"[origin.\"https://x.example\".headers]\nAuthorization = { env = \"VT\", prefix = \"Bearer \" }\n", 0o644,
			[]string{`:2:25: origin "https://x.example": headers.Authorization: $VT: `, "control character", "; fix the variable's value"}, nil},
		{"an empty env var",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://login.x.example/token\"\nclient_id = \"treasury\"\nclient_secret_env = \"EMPTY\"\n", 0o644,
			[]string{`:4:21: origin "https://x.example": oauth2.client_secret_env: the environment variable EMPTY is not set (or empty): set it in the worker's environment, or write client_secret_file = "/run/secrets/NAME" instead`}, nil},
		{"no client secret",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://login.x.example/token\"\nclient_id = \"treasury\"\n", 0o644,
			[]string{`:1:29: origin "https://x.example": oauth2: no client secret: write client_secret_env = "VAR" or client_secret_file = "/run/secrets/NAME"`}, nil},
		{"two client secrets",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://login.x.example/token\"\nclient_id = \"treasury\"\nclient_secret_file = \"/run/secrets/s\"\nclient_secret_env = \"SET\"\n", 0o644,
			[]string{`:5:1: origin "https://x.example": oauth2: client_secret_file and client_secret_env both: write one`}, nil},
		{"no token URL",
			"[origin.\"https://x.example\".oauth2]\nclient_id = \"treasury\"\nclient_secret_env = \"SET\"\n", 0o644,
			[]string{`:1:29: origin "https://x.example": oauth2: token_url is required: write the token endpoint's URL, e.g. token_url = "https://`}, nil},
		{"a client secret file that does not exist",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://login.x.example/token\"\nclient_id = \"treasury\"\nclient_secret_file = \"/nonexistent/secret\"\n", 0o644,
			[]string{`:4:22: origin "https://x.example": oauth2.client_secret_file: open /nonexistent/secret: no such file or directory: write the path of a file that holds the client secret`}, nil},
		{"a prefix with a file",
			"[origin.\"https://x.example\".headers]\nAuthorization = { file = \"/s\", prefix = \"Bearer \" }\n", 0o644,
			[]string{`:2:32: origin "https://x.example": headers.Authorization: prefix goes with env only`}, nil},
		{"half a token endpoint's certificate",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://login.x.example/token\"\nclient_id = \"treasury\"\nclient_secret_env = \"SET\"\n[origin.\"https://x.example\".oauth2.tls]\nkey_file = \"/k.pem\"\n", 0o644,
			[]string{`:5:36: origin "https://x.example": oauth2.tls: cert_file and key_file go together`}, nil},
		{"an unknown key of the token endpoint's TLS",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://login.x.example/token\"\nclient_id = \"treasury\"\nclient_secret_env = \"SET\"\n[origin.\"https://x.example\".oauth2.tls]\nca = \"/ca.pem\"\n", 0o644,
			[]string{`:6:1: origin "https://x.example": unknown key oauth2.tls.ca: did you mean oauth2.tls.ca_file? (the keys of [origin."https://x.example".oauth2.tls] are cert_file, key_file and ca_file)`}, nil},
		{"SigV4 without a region",
			"[origin.\"https://x.example\".aws_sigv4]\nservice = \"lambda\"\n", 0o644,
			[]string{`:1:29: origin "https://x.example": aws_sigv4: service and region are required`}, nil},
		{"no such AWS profile",
			"[origin.\"https://x.example\".aws_sigv4]\nservice = \"lambda\"\nregion = \"eu-west-1\"\nprofile = \"nope\"\n", 0o644,
			[]string{`:4:11: origin "https://x.example": aws_sigv4.profile = "nope": `, "AWS_CONFIG_FILE"}, nil},
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeOrigins(t, strings.ReplaceAll(tt.text, "$DIR", dir), tt.mode)
			_, err := loadOrigins(path, env)
			require.Error(t, err)
			msg := err.Error()
			t.Log(msg)
			for _, w := range tt.want {
				w = strings.ReplaceAll(w, "$DIR", dir)
				if strings.HasPrefix(w, ":") {
					w = path + w
				}
				assert.Contains(t, msg, w)
			}
			for _, n := range tt.not {
				assert.NotContains(t, msg, n)
			}
			for i := 0; i+8 <= len(secret); i++ {
				assert.NotContains(t, msg, secret[i:i+8], "a piece of the secret")
			}
		})
	}
}

// TestOriginsNameCredentials: a credential read from the origins file
// names its settings by the file's keys, where they are written, in the
// errors of activities.New and in those of its requests at run time (a
// token endpoint that refuses the client, an origin that refuses the
// client certificate): not by the Go fields a person who wrote the file
// never saw.
func TestOriginsNameCredentials(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600))
	env := envOf(map[string]string{"SHORT": "abc", "SET": "a-client-secret-0123456789"})
	for _, tt := range []struct {
		name, text string
		want       []string // ":L:C" stands for the file's path and the place
	}{
		{"a certificate file that does not exist",
			"[origin.\"https://bank.example\"]\n[origin.\"https://bank.example\".tls]\ncert_file = \"/nonexistent/bank.crt\"\nkey_file = \"/nonexistent/bank.key\"\n",
			[]string{`: origin "https://bank.example": mtls credential: tls.cert_file at :3:1: `, "no such file or directory", "write the path of the client certificate's PEM file"}},
		{"a header too short to redact",
			"[origin.\"https://x.example\".headers]\nX-Api-Key = { env = \"SHORT\" }\n",
			[]string{`: origin "https://x.example": headers.X-Api-Key at :2:1: the X-Api-Key value is 3 bytes long`}},
		{"a header file that does not exist",
			"[origin.\"https://x.example\".headers]\nAuthorization = { file = \"/nonexistent/key\" }\n",
			[]string{`: origin "https://x.example": headers.Authorization at :2:1: open /nonexistent/key: no such file or directory; write the header's value in that file, or fix the path`}},
		{"a client secret too short",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://login.x.example/token\"\nclient_id = \"treasury\"\nclient_secret_env = \"SHORT\"\n",
			[]string{`: origin "https://x.example": credential: oauth2.client_secret_env at :4:1 is shorter than 8 bytes`}},
		{"a token endpoint's CA file that is no PEM",
			"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://login.x.example/token\"\nclient_id = \"treasury\"\nclient_secret_env = \"SET\"\ntls = { ca_file = \"" + notPEM + "\" }\n",
			[]string{`: origin "https://x.example": mtls credential: oauth2.tls.ca_file at :5:9 ` + notPEM + ` holds no PEM certificate`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeOrigins(t, tt.text, 0o644)
			s, err := loadOrigins(path, env)
			require.NoError(t, err)
			_, err = activities.New(activities.Config{AllowedOrigins: s.Origins, Credentials: s.Credentials})
			require.Error(t, err)
			t.Log(err)
			assert.True(t, strings.HasPrefix(err.Error(), "--origins "+path+": origin "), "begins with the file and the origin: %v", err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), strings.ReplaceAll(w, " :", " "+path+":"))
			}
			assert.NotContains(t, err.Error(), "Credential.")
			assert.NotContains(t, err.Error(), "Config.Credentials")
		})
	}

	t.Run("run time", func(t *testing.T) {
		secretFile := filepath.Join(dir, "client-secret")
		require.NoError(t, os.WriteFile(secretFile, []byte("cs_live_0123456789abcdef\n"), 0o600))
		tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
		}))
		t.Cleanup(tokens.Close)
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
		t.Cleanup(api.Close)

		// A bank that trusts client certificates of its own CA only.
		bankCA, otherCA := rotationCA(t), rotationCA(t)
		bank := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
		clients := x509.NewCertPool()
		clients.AddCert(bankCA.cert)
		bank.TLS = &tls.Config{Certificates: []tls.Certificate{bankCA.server(t)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients}
		bank.StartTLS()
		t.Cleanup(bank.Close)
		certPEM, keyPEM := otherCA.issue(t, 7)
		certFile, keyFile, caFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), filepath.Join(dir, "ca.pem")
		require.NoError(t, os.WriteFile(certFile, certPEM, 0o600))
		require.NoError(t, os.WriteFile(keyFile, keyPEM, 0o600))
		require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: bankCA.cert.Raw}), 0o600))

		path := writeOrigins(t, fmt.Sprintf(`[origin.%q.oauth2]
token_url = "%s/token"
client_id = "treasury"
client_secret_file = %q

[origin.%q.tls]
cert_file = %q
key_file = %q
ca_file = %q
`, api.URL, tokens.URL, secretFile, bank.URL, certFile, keyFile, caFile), 0o644)
		s, err := loadOrigins(path, envOf(nil))
		require.NoError(t, err)
		a, err := activities.New(activities.Config{AllowedOrigins: s.Origins, Credentials: s.Credentials, Admission: activities.Admission{Off: true}})
		require.NoError(t, err)

		var suite sdktestsuite.WorkflowTestSuite
		suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(io.Discard, nil))))
		for _, c := range []struct{ url, want string }{
			{api.URL, "the client was refused; check oauth2.client_id at " + path + ":3:1 and oauth2.client_secret_file at " + path + ":4:1"},
			{bank.URL, "the origin refused the client certificate of tls.cert_file at " + path + ":7:1"},
		} {
			env := suite.NewTestActivityEnvironment()
			a.Register(env)
			_, err := env.ExecuteActivity(input.ActivityName, input.Input{Operation: "charge", URL: c.url + "/charges", Body: []byte(`{"amount":42}`), IdempotencyKey: "key-1"})
			require.Error(t, err)
			t.Log(err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "Credential.")
		}
	})
}
