package host

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// writeOrigins writes text as an origins file of the given mode.
func writeOrigins(t *testing.T, text string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "origins.toml")
	require.NoError(t, os.WriteFile(path, []byte(text), mode))
	require.NoError(t, os.Chmod(path, mode))
	return path
}

// envOf is an environment of vars only.
func envOf(vars map[string]string) environ {
	return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
}

func TestLoadOrigins(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "paypal-secret")
	require.NoError(t, os.WriteFile(secretFile, []byte("  EFcS-client-secret-from-file\n"), 0o600))
	env := envOf(map[string]string{"STRIPE_KEY": "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "PAYPAL_ID": "AYSq3RDGsmBLJE", "PAYPAL_SECRET": "EFcS-client-secret-env"})
	azure := activities.IETFConvention()
	azure.LongRunning = activities.AzureAsyncOperation()
	azure.KeyHeader, azure.KeyQuoted = "X-Request-Key", true
	tests := []struct {
		name    string
		text    string
		mode    os.FileMode
		origins []string
		conv    map[string]activities.Convention
		creds   map[string]activities.Credential
		secrets []string
	}{
		{"empty", "", 0o644, nil, map[string]activities.Convention{}, map[string]activities.Credential{}, nil},
		{"a convention, no credentials", `
[origin."https://api.stripe.com"]
convention = "stripe"
[origin."https://api.example.com:443"]
convention = "IETF"
key_header = "X-Request-Key"
key_quoted = true
long_running = "azure"
`, 0o644, []string{"https://api.example.com", "https://api.stripe.com"},
			map[string]activities.Convention{"https://api.stripe.com": activities.StripeConvention(), "https://api.example.com": azure},
			map[string]activities.Credential{}, nil},
		{"headers by reference", `
[origin."https://api.stripe.com".headers]
Authorization = { env = "STRIPE_KEY", prefix = "Bearer " }
X-Api-Key = { file = "/run/secrets/adyen" }
`, 0o644, []string{"https://api.stripe.com"}, map[string]activities.Convention{},
			map[string]activities.Credential{"https://api.stripe.com": {
				Header:      http.Header{"Authorization": {"Bearer sk_test_4eC39HqLyjWDarjtT1zdp7dc"}},
				HeaderFiles: map[string]string{"X-Api-Key": "/run/secrets/adyen"},
			}}, []string{"sk_test_4eC39HqLyjWDarjtT1zdp7dc"}},
		{"an inline secret in a private file", `
[origin."https://api.stripe.com".headers]
Authorization = "Bearer sk_test_inline_0123456789"
`, 0o600, []string{"https://api.stripe.com"}, map[string]activities.Convention{},
			map[string]activities.Credential{"https://api.stripe.com": {Header: http.Header{"Authorization": {"Bearer sk_test_inline_0123456789"}}}},
			[]string{"Bearer sk_test_inline_0123456789"}},
		{"oauth2, mTLS and SigV4", `
[origin."https://api-m.paypal.com".oauth2]
token_url = "https://api-m.paypal.com/v1/oauth2/token"
client_id_env = "PAYPAL_ID"
client_secret_env = "PAYPAL_SECRET"
scopes = ["payments"]
audience = "https://api-m.paypal.com"
endpoint_params = { resource = "payments" }
auth_style = "header"
[origin."https://bank.example".oauth2]
token_url = "https://bank.example/token"
client_id = "treasury"
client_secret_file = "` + secretFile + `"
auth_style = "params"
[origin."https://bank.example".tls]
cert_file = "/run/secrets/bank.crt"
key_file = "/run/secrets/bank.key"
ca_file = "/etc/bank-ca.pem"
[origin."https://abc.execute-api.eu-west-1.amazonaws.com".aws_sigv4]
service = "execute-api"
region = "eu-west-1"
`, 0o644, []string{"https://abc.execute-api.eu-west-1.amazonaws.com", "https://api-m.paypal.com", "https://bank.example"}, map[string]activities.Convention{},
			map[string]activities.Credential{
				"https://api-m.paypal.com": {OAuth2: &clientcredentials.Config{
					TokenURL: "https://api-m.paypal.com/v1/oauth2/token", ClientID: "AYSq3RDGsmBLJE", ClientSecret: "EFcS-client-secret-env",
					Scopes: []string{"payments"}, AuthStyle: oauth2.AuthStyleInHeader,
					EndpointParams: url.Values{"audience": {"https://api-m.paypal.com"}, "resource": {"payments"}},
				}},
				"https://bank.example": {
					OAuth2:           &clientcredentials.Config{TokenURL: "https://bank.example/token", ClientID: "treasury", AuthStyle: oauth2.AuthStyleInParams},
					ClientSecretFile: secretFile,
					CertFile:         "/run/secrets/bank.crt", KeyFile: "/run/secrets/bank.key", CAFile: "/etc/bank-ca.pem",
				},
				"https://abc.execute-api.eu-west-1.amazonaws.com": {SigV4: &activities.SigV4{Service: "execute-api", Region: "eu-west-1"}},
			}, []string{"EFcS-client-secret-env", "EFcS-client-secret-from-file"}},
		{"a token endpoint's own TLS", `
[origin."https://api.bank.example".tls]
cert_file = "/run/secrets/bank.crt"
key_file = "/run/secrets/bank.key"
ca_file = "/etc/bank-ca.pem"
[origin."https://api.bank.example".oauth2]
token_url = "https://login.bank.example/token"
client_id = "treasury"
client_secret_env = "PAYPAL_SECRET"
[origin."https://api.bank.example".oauth2.tls]
[origin."https://api.other.example".oauth2]
token_url = "https://login.other.example/token"
client_id = "treasury"
client_secret_env = "PAYPAL_SECRET"
tls = { cert_file = "/run/secrets/login.crt", key_file = "/run/secrets/login.key", ca_file = "/etc/login-ca.pem" }
`, 0o644, []string{"https://api.bank.example", "https://api.other.example"}, map[string]activities.Convention{},
			map[string]activities.Credential{
				"https://api.bank.example": {
					OAuth2:   &clientcredentials.Config{TokenURL: "https://login.bank.example/token", ClientID: "treasury", ClientSecret: "EFcS-client-secret-env"},
					CertFile: "/run/secrets/bank.crt", KeyFile: "/run/secrets/bank.key", CAFile: "/etc/bank-ca.pem",
					TokenTLS: &activities.TLSFiles{},
				},
				"https://api.other.example": {
					OAuth2:   &clientcredentials.Config{TokenURL: "https://login.other.example/token", ClientID: "treasury", ClientSecret: "EFcS-client-secret-env"},
					TokenTLS: &activities.TLSFiles{CertFile: "/run/secrets/login.crt", KeyFile: "/run/secrets/login.key", CAFile: "/etc/login-ca.pem"},
				},
			}, []string{"EFcS-client-secret-env", "EFcS-client-secret-env"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := loadOrigins(writeOrigins(t, tt.text, tt.mode), env)
			require.NoError(t, err)
			assert.Equal(t, tt.origins, s.Origins)
			assert.Equal(t, tt.conv, s.Conventions)
			for o, c := range tt.creds { // no table here says retry_refused: the default
				c.RetryRefused = defaultRetryRefused
				tt.creds[o] = c
			}
			assert.EqualExportedValues(t, tt.creds, s.Credentials, "the names its errors give are TestOriginsNameCredentials'")
			assert.ElementsMatch(t, tt.secrets, s.Secrets, "the secrets the logger redacts")
		})
	}
}

// TestOriginsErrorsQuoteNoSecret: a file that is not valid TOML, or has
// a secret where another value goes (a type, a preset, a URL, a
// variable's or a file's name), is refused with its place and key, and no
// 8-byte piece of what it holds. (TestOriginsFileErrors checks every row
// of its table too.)
func TestOriginsErrorsQuoteNoSecret(t *testing.T) {
	const secret = "sk_live_51Hx9QeKZ0aBcDeFgHiJ"
	for _, text := range []string{
		"[origin.\"https://x.example\".headers]\nAuthorization = " + secret + "\n",
		"[origin.\"https://x.example\".headers]\nAuthorization = Bearer " + secret + "\n",
		"[origin.\"https://x.example\".headers]\nAuthorization = \"Bearer " + secret + "\n",
		"[origin.\"https://x.example\".headers]\nAuthorization = \"" + secret + "\\q\"\n",
		"[origin.\"https://x.example\".oauth2]\nscopes = \"" + secret + "\"\n",
		"[admission]\nmin_failures = \"" + secret + "\"\n",
		"[admission]\nmax_wait = \"" + secret + "\"\n",
		"[admission]\ninitial_rate = \"" + secret + "\"\n",
		"[origin.\"https://x.example\"]\nconvention = \"" + secret + "\"\n",
		"[origin.\"https://x.example\"]\nlong_running = \"" + secret + "\"\n",
		"[origin.\"https://x.example\"]\nkey_header = \"Bearer " + secret + "\"\n",
		"[origin.\"https://x.example\".oauth2]\ntoken_url = \"" + secret + "\"\nclient_id = \"a\"\nclient_secret = \"cs_inline_0123456789\"\n",
		"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://x.example/t\"\nclient_id = \"a\"\nclient_secret = \"cs_inline_0123456789\"\nauth_style = \"" + secret + "\"\n",
		"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://x.example/t\"\nclient_id = \"a\"\nclient_secret_env = \"" + secret + "\"\n",
		"[origin.\"https://x.example\".oauth2]\ntoken_url = \"https://x.example/t\"\nclient_id = \"a\"\nclient_secret_file = \"" + secret + "\"\n",
		"[origin.\"https://x.example\".headers]\nAuthorization = { env = \"" + secret + "\" }\n",
		"[origin.\"https://x.example\".headers]\nAuthorization = { env = \"" + secret + "\", file = \"/k\" }\n",
		"[origin.\"https://x.example\".headers]\nAuthorization = { env = \"API_KEY\", prefix = \"" + secret + "\", file = \"/k\" }\n",
		"[origin.\"https://x.example\".headers]\nAuthorization = { env = 1, prefix = \"" + secret + "\" }\n",
	} {
		path := writeOrigins(t, text, 0o600)
		_, err := loadOrigins(path, envOf(nil))
		require.Error(t, err)
		t.Log(err)
		assert.Contains(t, err.Error(), path+":")
		for i := 0; i+8 <= len(secret); i++ {
			require.NotContains(t, err.Error(), secret[i:i+8], "a piece of the secret in %q", err)
		}
	}
}

// TestOriginsAWSProfile: a profile's keys sign, not the environment's.
func TestOriginsAWSProfile(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	require.NoError(t, os.WriteFile(creds, []byte("[payments]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = profile-secret-0123456789\n"), 0o600))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret-0123456789")
	s, err := loadOrigins(writeOrigins(t, "[origin.\"https://x.example\".aws_sigv4]\nservice = \"lambda\"\nregion = \"eu-west-1\"\nprofile = \"payments\"\n", 0o644), os.LookupEnv)
	require.NoError(t, err)
	p := s.Credentials["https://x.example"].SigV4.Credentials
	require.NotNil(t, p)
	c, err := p.Retrieve(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "AKIDPROFILE", c.AccessKeyID)
}

// TestOriginsAdmission: the [admission] table sets activities.Admission for
// every origin; a flag that sets the same is refused.
func TestOriginsAdmission(t *testing.T) {
	path := writeOrigins(t, `
[admission]
initial_rate = 5
throttles = [429, 503]
max_wait = "20s"
[admission.breaker]
window = "1m"
min_failures = 7
[origin."https://x.example"]
`, 0o644)
	s, err := loadOrigins(path, envOf(nil))
	require.NoError(t, err)
	a := activities.Admission{MinRate: 0.5}
	s.admission.apply(&a)
	assert.Equal(t, activities.Admission{InitialRate: 5, MinRate: 0.5, Throttles: []int{429, 503}, MaxWait: 20 * time.Second,
		Breaker: activities.Breaker{FailureWindow: time.Minute, MinFailures: 7}}, a)

	t.Setenv("ORIGINS_FILE", path)
	t.Setenv("API_TOKEN", "")
	cfg := parseArgs(t)
	acts, _, err := newActivities(cfg)
	require.NoError(t, err, "the file alone is a valid configuration")
	require.NotNil(t, acts)
	for _, tt := range []struct{ args, env, want string }{
		{"--admission-initial-rate", "", "--admission-initial-rate and admission.initial_rate in --origins " + path + " set the same"},
		{"--breaker-window", "", "--breaker-window and admission.breaker.window in --origins " + path},
		{"", "ADMISSION_THROTTLES", "ADMISSION_THROTTLES (--admission-throttles) and admission.throttles in --origins " + path},
	} {
		var args []string
		if tt.args != "" {
			args = []string{tt.args, "3s"}
			if tt.args == "--admission-initial-rate" {
				args[1] = "3"
			}
		}
		if tt.env != "" {
			t.Setenv(tt.env, "429")
		}
		_, err = parseArgsErr(t, args...)
		require.ErrorContains(t, err, tt.want)
		if tt.env != "" {
			t.Setenv(tt.env, "")
		}
	}
}

// TestOriginsAdmissionPerOrigin (issue 40, item 3): an origin's
// [origin."…".admission] table is laid over the worker's admission (the
// flags, then [admission]) for that origin alone
// (activities.Config.OriginAdmission); the other origins keep the
// worker's.
func TestOriginsAdmissionPerOrigin(t *testing.T) {
	path := writeOrigins(t, `
[admission]
initial_rate = 20
[origin."https://psp.example".admission]
throttles = [429, 503]
[origin."https://psp.example".admission.breaker]
off = true
[origin."https://ledger.example"]
`, 0o644)
	t.Setenv("ORIGINS_FILE", path)
	t.Setenv("API_TOKEN", "")
	cfg := parseArgs(t, "--admission-min-rate", "2")
	ac, err := activityConfig(cfg)
	require.NoError(t, err)
	ac.Admission = cfg.admission
	want := activities.Admission{InitialRate: 20, MinRate: 2, Throttles: []int{429, 503}, Breaker: activities.Breaker{Off: true}}
	got, err := cfg.file.admissions(ac.Admission)
	require.NoError(t, err)
	require.Contains(t, got, "https://psp.example")
	psp := got["https://psp.example"]
	assert.Equal(t, want.InitialRate, psp.InitialRate, "the file's [admission]")
	assert.Equal(t, want.MinRate, psp.MinRate, "the flag")
	assert.Equal(t, want.Throttles, psp.Throttles, "the origin's own")
	assert.True(t, psp.Breaker.Off, "the origin's own breaker setting")
	assert.NotContains(t, got, "https://ledger.example", "an origin without a table keeps the worker's admission")
	assert.False(t, ac.Admission.Breaker.Off, "the worker's breaker stays on")
	acts, _, err := newActivities(cfg)
	require.NoError(t, err)
	require.NotNil(t, acts)
}

// TestOriginsWithFlags: the file's origins are added to the flags'; an
// origin in both is refused; API_TOKEN goes to its named origin only.
func TestOriginsWithFlags(t *testing.T) {
	path := writeOrigins(t, `
[origin."https://api.stripe.com"]
convention = "stripe"
[origin."https://api.stripe.com".headers]
Authorization = { env = "STRIPE_KEY", prefix = "Bearer " }
`, 0o644)
	t.Setenv("STRIPE_KEY", "sk_test_4eC39HqLyjWDarjtT1zdp7dc")
	file, err := loadOrigins(path, os.LookupEnv)
	require.NoError(t, err)

	ac, err := activityConfig(config{settings: settings{Allow: []string{"http://127.0.0.1:8081"}, Token: "tok_live_0123456789", TokenOrigin: "http://127.0.0.1:8081", OriginsPath: path}, file: file})
	require.NoError(t, err)
	assert.Equal(t, []string{"http://127.0.0.1:8081", "https://api.stripe.com"}, ac.AllowedOrigins)
	assert.Equal(t, map[string]activities.Convention{"https://api.stripe.com": activities.StripeConvention()}, ac.Conventions)
	creds, err := workerCredentials(ac.AllowedOrigins, file.Credentials, "tok_live_0123456789", "http://127.0.0.1:8081")
	require.NoError(t, err)
	assert.EqualExportedValues(t, map[string]activities.Credential{
		"http://127.0.0.1:8081":  {Header: http.Header{"Authorization": {"Bearer tok_live_0123456789"}}},
		"https://api.stripe.com": {Header: http.Header{"Authorization": {"Bearer sk_test_4eC39HqLyjWDarjtT1zdp7dc"}}, RetryRefused: defaultRetryRefused},
	}, creds, "each origin its own credential; the file's asks again for a refused one")
	_, err = activities.New(ac)
	require.NoError(t, err)

	for _, tt := range []struct {
		name string
		cfg  config
		want []string
	}{
		{"allowed twice", config{settings: settings{Allow: []string{"https://API.stripe.com:443"}, OriginsPath: path}, file: file},
			[]string{"origin https://api.stripe.com", path, "--allow-origin", "one place"}},
		{"convention twice", config{settings: settings{Allow: []string{"http://a.example"}, Conventions: []string{"https://api.stripe.com=stripe"}, OriginsPath: path}, file: file},
			[]string{"origin https://api.stripe.com", "--convention", "one place"}},
		{"several origins, no token origin", config{settings: settings{Allow: []string{"http://127.0.0.1:8081"}, Token: "tok_live_0123456789", OriginsPath: path}, file: file},
			[]string{"API_TOKEN", "--api-token-origin"}},
		{"token for an origin with file credentials", config{settings: settings{Token: "tok_live_0123456789", OriginsPath: path}, file: file},
			[]string{"API_TOKEN is for https://api.stripe.com", "credentials in the origins file"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := activityConfig(tt.cfg)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestOriginsExample: testdata/origins.toml, the file docs/credentials.md
// shows (harness/repocheck checks it word for word there), gives
// each origin the credential its page says.
func TestOriginsExample(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	env := envOf(map[string]string{"PAYPAL_CLIENT_ID": "AYSq3RDGsmBLJE-otTkBtM", "PAYPAL_CLIENT_SECRET": "EFcS-paypal-secret-0123456789", "BANK_CLIENT_SECRET": "bank-secret-0123456789"})
	s, err := loadOrigins(filepath.Join("testdata", "origins.toml"), env)
	require.NoError(t, err)
	paypal, bank, aws, stripe := "https://api-m.paypal.com", "https://api.bank.example", "https://abc123.execute-api.eu-west-1.amazonaws.com", "https://api.stripe.com"
	assert.Equal(t, []string{aws, paypal, bank, stripe}, s.Origins)
	c := s.Credentials
	require.NotNil(t, c[paypal].OAuth2)
	assert.Equal(t, "AYSq3RDGsmBLJE-otTkBtM", c[paypal].OAuth2.ClientID)
	assert.Equal(t, oauth2.AuthStyleInHeader, c[paypal].OAuth2.AuthStyle)
	assert.NotEmpty(t, c[bank].CertFile+c[bank].KeyFile+c[bank].CAFile)
	require.NotNil(t, c[bank].OAuth2)
	assert.Equal(t, &activities.TLSFiles{}, c[bank].TokenTLS, "the bank's token requests: the system's CAs, no client certificate")
	assert.Equal(t, &activities.SigV4{Service: "execute-api", Region: "eu-west-1"}, c[aws].SigV4)
	assert.Equal(t, map[string]string{"Authorization": "/run/secrets/stripe-key"}, c[stripe].HeaderFiles)
	assert.Equal(t, activities.StripeConvention(), s.Conventions[stripe])
	assert.Equal(t, "PayPal-Request-Id", s.Conventions[paypal].KeyHeader)

	a := activities.Admission{}
	s.apply(&a)
	_, err = activities.New(activities.Config{AllowedOrigins: s.Origins, Conventions: s.Conventions, Admission: a})
	require.NoError(t, err, "the example's origins, conventions and admission are a valid activities.Config")
}

// TestOriginsPerOriginCaps: max_retry_after and retry_refused are settings
// of an origin: the file's values reach its Convention and Credential; a
// credential of the file asks again for defaultRetryRefused when its
// table does not say, and "0s" fails at the first refusal.
func TestOriginsPerOriginCaps(t *testing.T) {
	tests := []struct {
		name, line   string
		retryRefused time.Duration
	}{
		{"set", "retry_refused = \"10m\"\n", 10 * time.Minute},
		{"the default", "", defaultRetryRefused},
		{"at the first refusal", "retry_refused = \"0s\"\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeOrigins(t, "[origin.\"https://api.example.com\"]\nmax_retry_after = \"1h\"\n"+tt.line+"[origin.\"https://api.example.com\".headers]\nX-Api-Key = { env = \"KEY\" }\n", 0o644)
			s, err := loadOrigins(path, envOf(map[string]string{"KEY": "ak_live_0123456789"}))
			require.NoError(t, err)
			assert.Equal(t, time.Hour, s.Conventions["https://api.example.com"].MaxRetryAfter)
			assert.Equal(t, tt.retryRefused, s.Credentials["https://api.example.com"].RetryRefused)
		})
	}
}

// TestOriginsKeyInAndReconcile (#41): an origin's key_in and its
// [reconcile] table become its Convention's KeyIn and Reconcile, over
// the preset's; the result is a valid activities.Config.
func TestOriginsKeyInAndReconcile(t *testing.T) {
	const ledger, square, legacy = "https://ledger.internal.example", "https://connect.squareup.com", "https://legacy.internal.example"
	path := writeOrigins(t, `[origin."https://ledger.internal.example"]
key_in = "body:reference"

[origin."https://ledger.internal.example".reconcile]
lookup = "https://ledger.internal.example/entries?reference={key}"
items = "data"

[origin."https://connect.squareup.com"]
convention = "square"

[origin."https://legacy.internal.example".reconcile]
at_most_once = true
`, 0o644)
	s, err := loadOrigins(path, envOf(nil))
	require.NoError(t, err)
	assert.Equal(t, "body:reference", s.Conventions[ledger].KeyIn)
	assert.Equal(t, workflows.Reconcile{Lookup: ledger + "/entries?reference={key}", Items: "data"}, s.Conventions[ledger].Reconcile)
	assert.Equal(t, "body:idempotency_key", s.Conventions[square].KeyIn)
	assert.Equal(t, workflows.Reconcile{AtMostOnce: true}, s.Conventions[legacy].Reconcile)
	_, err = activities.New(activities.Config{AllowedOrigins: s.Origins, Conventions: s.Conventions})
	require.NoError(t, err)
}
