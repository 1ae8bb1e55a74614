package host

import (
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/cliutil"
	"github.com/idemhttp/temporal-idempotent-http/internal/named"
)

// TestActivityConfig: API_TOKEN goes to one origin, never to every
// allowed origin (issue 32: the worker sent it to all of them).
func TestActivityConfig(t *testing.T) {
	bearer := func(o string) map[string]activities.Credential {
		return map[string]activities.Credential{o: {Header: http.Header{"Authorization": {"Bearer tok_live_0123456789"}}}}
	}
	tests := []struct {
		name         string
		allow        string
		token, to    string
		wantOrigins  []string
		wantCreds    map[string]activities.Credential
		wantErrParts []string
	}{
		{"no token", "http://127.0.0.1:8081", "", "", []string{"http://127.0.0.1:8081"}, map[string]activities.Credential(nil), nil},
		{"one origin gets the token", "http://127.0.0.1:8081", "tok_live_0123456789", "", []string{"http://127.0.0.1:8081"}, bearer("http://127.0.0.1:8081"), nil},
		{"the named origin only", "http://127.0.0.1:8081,https://pay.example.com", "tok_live_0123456789", "https://PAY.example.com:443",
			[]string{"http://127.0.0.1:8081", "https://pay.example.com"}, bearer("https://pay.example.com"), nil},
		{"several origins, none named", "http://127.0.0.1:8081,https://pay.example.com", "tok_live_0123456789", "", nil, nil,
			[]string{"API_TOKEN", "2 origins", "--api-token-origin ORIGIN", "API_TOKEN_ORIGIN"}},
		{"named origin not allowed", "http://127.0.0.1:8081", "tok_live_0123456789", "https://other.example", nil, nil,
			[]string{"--api-token-origin https://other.example", "not an allowed origin", "http://127.0.0.1:8081"}},
		{"a target without a token is harmless", "http://127.0.0.1:8081,https://pay.example.com", "", "https://pay.example.com",
			[]string{"http://127.0.0.1:8081", "https://pay.example.com"}, map[string]activities.Credential(nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := activityConfig(config{settings: settings{Allow: cliutil.SplitList(tt.allow), Token: tt.token, TokenOrigin: tt.to}})
			if tt.wantErrParts != nil {
				require.Error(t, err)
				for _, p := range tt.wantErrParts {
					assert.Contains(t, err.Error(), p)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantOrigins, cfg.AllowedOrigins)
			creds, err := workerCredentials(cfg.AllowedOrigins, nil, tt.token, tt.to)
			require.NoError(t, err)
			assert.Equal(t, tt.wantCreds, creds)
			_, err = activities.New(cfg)
			require.NoError(t, err, "the worker's config must be valid")
		})
	}
}

func TestParseConventions(t *testing.T) {
	with := func(c activities.Convention, keyHeader string, quoted bool) activities.Convention {
		if keyHeader != "" {
			c.KeyHeader = keyHeader
		}
		c.KeyQuoted = quoted
		return c
	}
	lro := func(c activities.Convention, l activities.LongRunning) activities.Convention {
		c.LongRunning = l
		return c
	}
	tests := []struct {
		name    string
		list    string
		want    map[string]activities.Convention
		wantErr string
	}{
		{"empty", "", map[string]activities.Convention{}, ""},
		{"presets and a key header",
			"https://api.stripe.com=stripe, https://api-m.paypal.com=ietf:PayPal-Request-Id",
			map[string]activities.Convention{
				"https://api.stripe.com":   activities.StripeConvention(),
				"https://api-m.paypal.com": with(activities.IETFConvention(), "PayPal-Request-Id", false),
			}, ""},
		{"quoted", "https://api.example.com=ietf+quoted",
			map[string]activities.Convention{"https://api.example.com": with(activities.IETFConvention(), "", true)}, ""},
		{"quoted, any case, with spaces, and a key header", "https://api.example.com= IETF + Quoted :X-Request-Key",
			map[string]activities.Convention{"https://api.example.com": with(activities.IETFConvention(), "X-Request-Key", true)}, ""},
		{"quoted stripe", "https://api.stripe.com=stripe+quoted",
			map[string]activities.Convention{"https://api.stripe.com": with(activities.StripeConvention(), "", true)}, ""},
		{"no preset", "https://x", nil, "ORIGIN=PRESET"},
		{"unknown preset", "https://x=paypal", nil, "ORIGIN=PRESET"},
		{"long-running presets", "https://a.example=ietf+azure, https://b.example=stripe+quoted+operation-location, https://c.example=ietf+google",
			map[string]activities.Convention{
				"https://a.example": lro(activities.IETFConvention(), activities.AzureAsyncOperation()),
				"https://b.example": lro(with(activities.StripeConvention(), "", true), activities.OperationLocation()),
				"https://c.example": lro(activities.IETFConvention(), activities.GoogleOperation("https://c.example/v1/")),
			}, ""},
		{"unknown suffix", "https://x=ietf+strict", nil, "ORIGIN=PRESET[+MODIFIER...]"},
		{"empty suffix", "https://x=ietf+", nil, "ORIGIN=PRESET[+MODIFIER...]"},
		{"empty suffix between", "https://x=ietf++quoted", nil, "ORIGIN=PRESET[+MODIFIER...]"},
		{"suffix twice", "https://x=ietf+quoted+quoted", nil, "ORIGIN=PRESET[+MODIFIER...]"},
		{"two long-running presets", "https://x=ietf+azure+google", nil, "ORIGIN=PRESET[+MODIFIER...]"},
		// Issue 30, item 10: --convention accumulates, so one origin may come twice.
		{"an origin twice", "https://x.example=ietf, https://x.example=stripe", nil, "https://x.example is given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConventions(cliutil.SplitList(tt.list))
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestConventionPresets: every convention and long-running preset package
// activities registers is one --convention accepts (as PRESET, as
// +MODIFIER), as the value its function returns, and names in its help
// and its error.
func TestConventionPresets(t *testing.T) {
	names := named.Names[conventionPreset]()
	require.Subset(t, names, []string{"ietf", "stripe"})
	for _, name := range names {
		preset, ok := named.Lookup[conventionPreset](name)
		require.True(t, ok)
		got, err := parseConventions([]string{"https://api.example.com=" + strings.ToUpper(name)})
		require.NoError(t, err, name)
		assert.Equal(t, map[string]activities.Convention{"https://api.example.com": preset()}, got, name)
	}
	_, err := parseConventions([]string{"https://api.example.com=nosuch"})
	assert.ErrorContains(t, err, "PRESET "+named.OneOf[conventionPreset]()+" and")
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	_, err = parse(fs, nil)
	require.NoError(t, err)
	assert.Contains(t, fs.Lookup("convention").Usage, "PRESET "+named.OneOf[conventionPreset]()+";")

	// And every long-running preset is a modifier, given the origin.
	lros := named.Names[longRunningPreset]()
	require.Subset(t, lros, []string{"azure", "operation-location", "google"})
	for _, name := range lros {
		preset, _ := named.Lookup[longRunningPreset](name)
		got, err := parseConventions([]string{"https://api.example.com=ietf+" + name})
		require.NoError(t, err, name)
		want := activities.IETFConvention()
		want.LongRunning = preset("https://api.example.com")
		assert.Equal(t, map[string]activities.Convention{"https://api.example.com": want}, got, name)
		assert.Contains(t, fs.Lookup("convention").Usage, "+"+name)
	}
	_, err = parseConventions([]string{"https://api.example.com=ietf+" + lros[0] + "+" + lros[1]})
	assert.Error(t, err, "two long-running presets")
}

// parseArgs runs parse on args, as the command line, with a fresh
// flag set.
func parseArgs(t *testing.T, args ...string) config {
	t.Helper()
	cfg, err := parseArgsErr(t, args...)
	require.NoError(t, err)
	return cfg
}

// TestListFlagsAccumulate (issue 30, item 10): a list flag given twice
// keeps both (Go's flag package kept the last one), commas split as
// well; given on the command line, it replaces its environment default.
func TestListFlagsAccumulate(t *testing.T) {
	t.Setenv("ALLOW_ORIGINS", "http://env.example")
	t.Setenv("CONVENTIONS", "")
	tests := []struct {
		name               string
		args               []string
		allow, conventions []string
		throttles          []int
	}{
		{"repeated", []string{"--allow-origin", "http://a.example", "--allow-origin", "http://b.example,http://c.example",
			"--convention", "http://a.example=stripe", "--convention", "http://b.example=ietf+azure",
			"--admission-throttles", "429", "--admission-throttles", "503"},
			[]string{"http://a.example", "http://b.example", "http://c.example"},
			[]string{"http://a.example=stripe", "http://b.example=ietf+azure"}, []int{429, 503}},
		{"the environment's default", nil, []string{"http://env.example"}, nil, nil},
		{"one flag, commas", []string{"--allow-origin=http://a.example, http://b.example"},
			[]string{"http://a.example", "http://b.example"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := parseArgs(t, tt.args...)
			assert.Equal(t, tt.allow, cfg.Allow, "--allow-origin")
			assert.Equal(t, tt.conventions, cfg.Conventions, "--convention")
			assert.Equal(t, tt.throttles, cfg.Admission.Throttles, "--admission-throttles (nil: the library's default)")
		})
	}
	cfg := parseArgs(t, "--allow-origin", "http://a.example", "--allow-origin", "http://b.example",
		"--convention", "http://a.example=stripe", "--convention", "http://b.example=ietf")
	acts, _, err := newActivities(cfg)
	require.NoError(t, err)
	require.NotNil(t, acts)
	conv, err := parseConventions(cfg.Conventions)
	require.NoError(t, err)
	assert.Len(t, conv, 2, "both conventions kept")
}

// parseArgsErr is parseArgs returning parse' error.
func parseArgsErr(t *testing.T, args ...string) (config, error) {
	t.Helper()
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return parse(fs, args)
}
