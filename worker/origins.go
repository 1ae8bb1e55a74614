package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/named"
	"github.com/idemhttp/temporal-idempotent-http/internal/request"
)

// originsFile is the TOML file worker --origins reads (ORIGINS_FILE): one
// [origin."ORIGIN"] table per origin the worker may call, and the global
// [admission] table. See docs/credentials.md.
type originsFile struct {
	Admission *admissionTable        `toml:"admission"`
	Origin    map[string]originTable `toml:"origin"`
}

// originTable is one [origin."ORIGIN"] table.
type originTable struct {
	// Convention is a preset (--convention's PRESET); KeyHeader,
	// KeyQuoted and LongRunning are its modifiers.
	Convention  string `toml:"convention"`
	KeyHeader   string `toml:"key_header"`
	KeyQuoted   bool   `toml:"key_quoted"`
	LongRunning string `toml:"long_running"`
	// Headers maps a header name to its value: a string (inline, only in
	// a private file), { env = "VAR", prefix = "Bearer " } or
	// { file = "/path" }.
	Headers map[string]any `toml:"headers"`
	OAuth2  *oauth2Table   `toml:"oauth2"`
	TLS     *tlsTable      `toml:"tls"`
	SigV4   *sigV4Table    `toml:"aws_sigv4"`
	// RetryRefused is activities.Credential.RetryRefused, e.g. "5m".
	RetryRefused time.Duration `toml:"retry_refused"`
}

// oauth2Table is an origin's [origin."ORIGIN".oauth2] table.
type oauth2Table struct {
	TokenURL         string            `toml:"token_url"`
	ClientID         string            `toml:"client_id"`
	ClientIDEnv      string            `toml:"client_id_env"`
	ClientSecret     string            `toml:"client_secret"`
	ClientSecretEnv  string            `toml:"client_secret_env"`
	ClientSecretFile string            `toml:"client_secret_file"`
	Scopes           []string          `toml:"scopes"`
	Audience         string            `toml:"audience"`
	EndpointParams   map[string]string `toml:"endpoint_params"`
	AuthStyle        string            `toml:"auth_style"`
	// TLS is the token requests' own TLS (activities.Credential.TokenTLS):
	// cert_file and key_file both or neither, ca_file.
	TLS *tlsTable `toml:"tls"`
}

// tlsTable is an origin's [origin."ORIGIN".tls] table.
type tlsTable struct {
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	CAFile   string `toml:"ca_file"`
}

// sigV4Table is an origin's [origin."ORIGIN".aws_sigv4] table.
type sigV4Table struct {
	Service string `toml:"service"`
	Region  string `toml:"region"`
	Profile string `toml:"profile"`
}

// admissionTable is the [admission] table: activities.Admission, for every
// origin (per-origin admission is not yet possible).
type admissionTable struct {
	Off         *bool          `toml:"off"`
	InitialRate *float64       `toml:"initial_rate"`
	MinRate     *float64       `toml:"min_rate"`
	RetryRatio  *float64       `toml:"retry_ratio"`
	MinRetries  *int           `toml:"min_retries"`
	RetryWindow *time.Duration `toml:"retry_window"`
	MaxWait     *time.Duration `toml:"max_wait"`
	MaxDelay    *time.Duration `toml:"max_delay"`
	Throttles   []int          `toml:"throttles"`
	Breaker     *breakerTable  `toml:"breaker"`
}

// breakerTable is the [admission.breaker] table.
type breakerTable struct {
	Off          *bool          `toml:"off"`
	FailureRatio *float64       `toml:"failure_ratio"`
	MinFailures  *int           `toml:"min_failures"`
	Window       *time.Duration `toml:"window"`
	OpenTime     *time.Duration `toml:"open_time"`
	MaxOpenTime  *time.Duration `toml:"max_open_time"`
	RestartRate  *float64       `toml:"restart_rate"`
}

// admissionFlagOf names the flag that sets the same as each [admission]
// key, for the error when both are given.
var admissionFlagOf = map[string]string{
	"off": "admission", "initial_rate": "admission-initial-rate", "min_rate": "admission-min-rate",
	"retry_ratio": "retry-budget-ratio", "throttles": "admission-throttles",
	"breaker.off": "breaker", "breaker.failure_ratio": "breaker-failure-ratio", "breaker.min_failures": "breaker-min-failures",
	"breaker.window": "breaker-window", "breaker.open_time": "breaker-open-time", "breaker.max_open_time": "breaker-max-open-time",
	"breaker.restart_rate": "breaker-restart-rate",
}

// originSettings is what an origins file gives activities.Config.
type originSettings struct {
	Origins     []string // canonical, sorted
	Conventions map[string]activities.Convention
	Credentials map[string]activities.Credential
	// AdmissionFlags are the flags whose settings the file's [admission]
	// table sets (to refuse both); apply sets them on an Admission.
	AdmissionFlags []string
	admission      *admissionTable
	// Secrets are the secret values the file gave (inline, from the
	// environment or a client secret file), for the logger to redact.
	Secrets []string
}

// environ reads an environment variable; os.LookupEnv in the worker.
type environ func(name string) (string, bool)

// loadOrigins reads and checks the origins file at path.
func loadOrigins(path string, env environ) (originSettings, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return originSettings{}, fmt.Errorf("--origins: %w", err)
	}
	var f originsFile
	md, err := toml.Decode(string(raw), &f)
	if err != nil {
		return originSettings{}, fmt.Errorf("--origins %s: %s", path, quietParseError(err))
	}
	if err := unknownKeys(path, md.Undecoded()); err != nil {
		return originSettings{}, err
	}
	l := loader{path: path, env: env}
	if l.private, err = privateFile(path); err != nil {
		return originSettings{}, err
	}
	s := originSettings{Conventions: map[string]activities.Convention{}, Credentials: map[string]activities.Credential{}, admission: f.Admission}
	for _, k := range md.Keys() {
		if len(k) > 1 && k[0] == "admission" {
			if fl, ok := admissionFlagOf[strings.Join(k[1:], ".")]; ok {
				s.AdmissionFlags = append(s.AdmissionFlags, fl)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Origin)) {
		o, err := request.ParseOrigin(name)
		if err != nil {
			return originSettings{}, fmt.Errorf("--origins %s: [origin.%q]: %v: write the origin as scheme://host[:port], e.g. [origin.\"https://api.stripe.com\"]", path, name, err)
		}
		if slices.Contains(s.Origins, o) {
			return originSettings{}, fmt.Errorf("--origins %s: [origin.%q] is the origin %s a second time: give each origin one table", path, name, o)
		}
		s.Origins = append(s.Origins, o)
		t := f.Origin[name]
		if err := l.origin(&s, o, t); err != nil {
			return originSettings{}, fmt.Errorf("--origins %s: origin %q: %w", path, name, err)
		}
	}
	s.Secrets = l.secrets
	return s, nil
}

// quoted matches what a TOML error quotes from the file: a value of 8
// bytes or more might be a piece of a secret.
var quoted = regexp.MustCompile(`"[^"]{8,}"|'[^']{8,}'`)

// quietParseError is err, a TOML decoding error, with no piece of the file
// it quotes that could be a secret: the line, the last key and the problem.
func quietParseError(err error) string {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("line %d (last key %q): %s: write string values in double quotes, e.g. key_header = \"PayPal-Request-Id\"", pe.Position.Line, pe.LastKey, quoted.ReplaceAllString(pe.Message, `"…"`))
	}
	return quoted.ReplaceAllString(err.Error(), `"…"`)
}

// loader reads one origins file's origins.
type loader struct {
	path    string
	env     environ
	private bool // the file is 0600 or stricter and the worker's user owns it
	secrets []string
}

// origin adds the settings of the origin o's table t to s.
func (l *loader) origin(s *originSettings, o string, t originTable) error {
	if t.Convention != "" || t.KeyHeader != "" || t.KeyQuoted || t.LongRunning != "" {
		c, err := tableConvention(o, t)
		if err != nil {
			return err
		}
		s.Conventions[o] = c
	}
	var cred activities.Credential
	var err error
	if cred.Header, cred.HeaderFiles, err = l.headers(t.Headers); err != nil {
		return err
	}
	if t.OAuth2 != nil {
		if cred.OAuth2, err = l.oauth2(*t.OAuth2); err != nil {
			return err
		}
		if t.OAuth2.ClientSecretFile != "" {
			// Read again by the activity when it changes (checked here
			// so that a missing file is reported with its key).
			cred.ClientSecretFile, cred.OAuth2.ClientSecret = t.OAuth2.ClientSecretFile, ""
		}
		if tt := t.OAuth2.TLS; tt != nil {
			if (tt.CertFile == "") != (tt.KeyFile == "") {
				return errors.New(`oauth2.tls: cert_file and key_file go together (the token endpoint's client certificate and its key), or leave both out for none: e.g. tls = { cert_file = "/run/secrets/login.crt", key_file = "/run/secrets/login.key" }`)
			}
			cred.TokenTLS = &activities.TLSFiles{CertFile: tt.CertFile, KeyFile: tt.KeyFile, CAFile: tt.CAFile}
		}
	}
	if t.TLS != nil {
		if t.TLS.CertFile == "" || t.TLS.KeyFile == "" {
			return errors.New(`tls: cert_file and key_file are both required: write the PEM files' paths, e.g. tls = { cert_file = "/run/secrets/bank.crt", key_file = "/run/secrets/bank.key" }`)
		}
		cred.CertFile, cred.KeyFile, cred.CAFile = t.TLS.CertFile, t.TLS.KeyFile, t.TLS.CAFile
	}
	if t.SigV4 != nil {
		if cred.SigV4, err = sigV4(*t.SigV4); err != nil {
			return err
		}
	}
	if t.RetryRefused < 0 {
		return fmt.Errorf("retry_refused = %q: write how long a refused credential is asked again, e.g. retry_refused = \"5m\", or leave it out to fail at the first refusal", t.RetryRefused.String())
	}
	cred.RetryRefused = t.RetryRefused
	if !reflect.ValueOf(cred).IsZero() {
		s.Credentials[o] = cred
	}
	return nil
}

// tableConvention is the convention t names, as --convention would read
// ORIGIN=PRESET[+quoted][+LONG-RUNNING][:KEY-HEADER].
func tableConvention(o string, t originTable) (activities.Convention, error) {
	preset := t.Convention
	if preset == "" {
		preset = "ietf"
	}
	p, ok := named.Lookup[conventionPreset](preset)
	if !ok {
		return activities.Convention{}, fmt.Errorf("convention = %q: want %s (and key_header = \"PayPal-Request-Id\", say, for another key header)", t.Convention, named.OneOf[conventionPreset]())
	}
	c := p()
	if t.LongRunning != "" {
		lro, ok := named.Lookup[longRunningPreset](t.LongRunning)
		if !ok {
			return c, fmt.Errorf("long_running = %q: want %s", t.LongRunning, named.OneOf[longRunningPreset]())
		}
		c.LongRunning = lro(o)
	}
	if t.KeyHeader != "" {
		c.KeyHeader = t.KeyHeader
	}
	c.KeyQuoted = t.KeyQuoted
	return c, nil
}

// headers reads an origin's headers table: static values into Header,
// { file = … } into HeaderFiles.
func (l *loader) headers(t map[string]any) (http.Header, map[string]string, error) {
	var h http.Header
	var files map[string]string
	for _, name := range slices.Sorted(maps.Keys(t)) {
		field := "headers." + name
		switch v := t[name].(type) {
		case string:
			if err := l.inline(field, `{ env = "VAR", prefix = "Bearer " } or { file = "/run/secrets/NAME" }`); err != nil {
				return nil, nil, err
			}
			h = addHeader(h, name, v)
			l.secrets = append(l.secrets, v)
		case map[string]any:
			ref, err := headerRef(field, v)
			if err != nil {
				return nil, nil, err
			}
			if ref.file != "" {
				if files == nil {
					files = map[string]string{}
				}
				files[name] = ref.file
				continue
			}
			val, err := l.getenv(field, ref.env)
			if err != nil {
				return nil, nil, err
			}
			if err := request.HeaderValue(name, ref.prefix+val); err != nil {
				return nil, nil, fmt.Errorf("%s: $%s: %w; fix the variable's value", field, ref.env, err)
			}
			h = addHeader(h, name, ref.prefix+val)
			l.secrets = append(l.secrets, val)
		default:
			return nil, nil, fmt.Errorf(`%s: want { env = "VAR", prefix = "Bearer " } or { file = "/run/secrets/NAME" }, not a %T`, field, v)
		}
	}
	return h, files, nil
}

// headerRef is a header value by reference: { env, prefix } or { file }.
type headerValue struct{ env, prefix, file string }

// headerRef reads { env = …, prefix = … } or { file = … }.
func headerRef(field string, v map[string]any) (headerValue, error) {
	var r headerValue
	for k, x := range v {
		s, ok := x.(string)
		switch {
		case !ok:
			return r, fmt.Errorf("%s.%s: want a string", field, k)
		case k == "env":
			r.env = s
		case k == "prefix":
			r.prefix = s
		case k == "file":
			r.file = s
		default:
			return r, fmt.Errorf("%s: unknown key %q: valid keys are env, prefix and file", field, k)
		}
	}
	switch {
	case (r.env == "") == (r.file == ""):
		return r, fmt.Errorf(`%s: want one of env and file: { env = "VAR", prefix = "Bearer " } or { file = "/run/secrets/NAME" }`, field)
	case r.file != "" && r.prefix != "":
		return r, fmt.Errorf("%s: prefix goes with env only: the file holds the header's whole value (e.g. \"Bearer sk_live_…\")", field)
	}
	return r, nil
}

// oauth2 reads an origin's oauth2 table.
func (l *loader) oauth2(t oauth2Table) (*clientcredentials.Config, error) {
	if _, err := url.ParseRequestURI(t.TokenURL); err != nil || t.TokenURL == "" {
		return nil, fmt.Errorf(`oauth2.token_url = %q: write the token endpoint's URL, e.g. token_url = "https://api-m.paypal.com/v1/oauth2/token"`, t.TokenURL)
	}
	c := &clientcredentials.Config{TokenURL: t.TokenURL, Scopes: t.Scopes}
	var err error
	switch {
	case t.ClientID != "" && t.ClientIDEnv != "":
		return nil, errors.New("oauth2: client_id and client_id_env: write one")
	case t.ClientIDEnv != "":
		if c.ClientID, err = l.getenv("oauth2.client_id_env", t.ClientIDEnv); err != nil {
			return nil, err
		}
	case t.ClientID == "":
		return nil, errors.New(`oauth2: client_id is required: write client_id = "…" or client_id_env = "VAR"`)
	default:
		c.ClientID = t.ClientID
	}
	if c.ClientSecret, err = l.clientSecret(t); err != nil {
		return nil, err
	}
	l.secrets = append(l.secrets, c.ClientSecret)
	styles := map[string]oauth2.AuthStyle{"": oauth2.AuthStyleAutoDetect, "auto": oauth2.AuthStyleAutoDetect, "header": oauth2.AuthStyleInHeader, "params": oauth2.AuthStyleInParams}
	style, ok := styles[t.AuthStyle]
	if !ok {
		return nil, fmt.Errorf(`oauth2.auth_style = %q: want "header" (HTTP Basic), "params" (in the body) or "auto" (the default)`, t.AuthStyle)
	}
	c.AuthStyle = style
	if t.Audience != "" || len(t.EndpointParams) > 0 {
		c.EndpointParams = url.Values{}
		for k, v := range t.EndpointParams {
			c.EndpointParams.Set(k, v)
		}
		if t.Audience != "" {
			c.EndpointParams.Set("audience", t.Audience)
		}
	}
	return c, nil
}

// clientSecret reads the client secret from exactly one of client_secret
// (inline), client_secret_env and client_secret_file.
func (l *loader) clientSecret(t oauth2Table) (string, error) {
	n := 0
	for _, s := range []string{t.ClientSecret, t.ClientSecretEnv, t.ClientSecretFile} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return "", errors.New(`oauth2: write one of client_secret_env = "VAR" and client_secret_file = "/run/secrets/NAME" (client_secret inline only in a file of mode 0600)`)
	}
	switch {
	case t.ClientSecretEnv != "":
		return l.getenv("oauth2.client_secret_env", t.ClientSecretEnv)
	case t.ClientSecretFile != "":
		b, err := os.ReadFile(t.ClientSecretFile)
		if err != nil {
			return "", fmt.Errorf("oauth2.client_secret_file: %w: write the path of a file that holds the client secret", err)
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
		return "", fmt.Errorf("oauth2.client_secret_file: %s is empty: write the client secret in it", t.ClientSecretFile)
	}
	return t.ClientSecret, l.inline("oauth2.client_secret", `client_secret_env = "VAR" or client_secret_file = "/run/secrets/NAME"`)
}

// sigV4 reads an origin's aws_sigv4 table.
func sigV4(t sigV4Table) (*activities.SigV4, error) {
	if t.Service == "" || t.Region == "" {
		return nil, errors.New(`aws_sigv4: service and region are required, e.g. aws_sigv4 = { service = "execute-api", region = "eu-west-1" }`)
	}
	s := &activities.SigV4{Service: t.Service, Region: t.Region}
	if t.Profile != "" {
		cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithSharedConfigProfile(t.Profile))
		if err != nil {
			return nil, fmt.Errorf("aws_sigv4.profile = %q: %w: name a profile of the shared AWS config or credentials file (AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE), or leave profile out for the default chain", t.Profile, err)
		}
		s.Credentials = cfg.Credentials
	}
	return s, nil
}

// getenv reads the environment variable name that field refers to.
func (l *loader) getenv(field, name string) (string, error) {
	v, ok := l.env(name)
	if v = strings.TrimSpace(v); !ok || v == "" {
		return "", fmt.Errorf("%s: the environment variable %s is not set (or empty): set it to the value, or refer to a file instead", field, name)
	}
	return v, nil
}

// inline refuses a secret written in the file unless only the worker's
// user can read the file.
func (l *loader) inline(field, instead string) error {
	if l.private {
		return nil
	}
	return fmt.Errorf(`%s is a secret written inline in %s, which users other than the worker's may read (or the worker's user does not own): write %s instead, or chmod 600 %s`, field, l.path, instead, l.path)
}

// privateFile reports whether path is readable and writable by its owner
// only (0600 or stricter) and the worker's user owns it.
func privateFile(path string) (bool, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return false, fmt.Errorf("--origins: %w", err)
	}
	return fi.Mode().Perm()&0o077 == 0 && ownedByMe(fi), nil
}

// apply sets the [admission] table's settings on a.
func (s originSettings) apply(a *activities.Admission) {
	t := s.admission
	if t == nil {
		return
	}
	set(&a.Off, t.Off)
	set(&a.InitialRate, t.InitialRate)
	set(&a.MinRate, t.MinRate)
	set(&a.RetryRatio, t.RetryRatio)
	set(&a.MinRetries, t.MinRetries)
	set(&a.RetryWindow, t.RetryWindow)
	set(&a.MaxWait, t.MaxWait)
	set(&a.MaxDelay, t.MaxDelay)
	if t.Throttles != nil {
		a.Throttles = t.Throttles
	}
	if b := t.Breaker; b != nil {
		set(&a.Breaker.Off, b.Off)
		set(&a.Breaker.FailureRatio, b.FailureRatio)
		set(&a.Breaker.MinFailures, b.MinFailures)
		set(&a.Breaker.FailureWindow, b.Window)
		set(&a.Breaker.OpenTime, b.OpenTime)
		set(&a.Breaker.MaxOpenTime, b.MaxOpenTime)
		set(&a.Breaker.RestartRate, b.RestartRate)
	}
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// unknownKeys refuses the keys of the file that nothing reads, naming the
// origin, the key and the valid keys of its table.
func unknownKeys(path string, keys []toml.Key) error {
	// The keys of a header's { env, prefix, file } are checked by headerRef.
	keys = slices.DeleteFunc(keys, func(k toml.Key) bool { return len(k) > 3 && k[0] == "origin" && k[2] == "headers" })
	if len(keys) == 0 {
		return nil
	}
	k := keys[0]
	typ, table, where := reflect.TypeFor[originsFile](), []string{}, ""
	for i, part := range k {
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.Kind() == reflect.Map {
			if i == 1 && k[0] == "origin" {
				where = fmt.Sprintf("origin %q: ", part)
			}
			typ, table = typ.Elem(), append(table, fmt.Sprintf("%q", part))
			continue
		}
		f, ok := fieldByTag(typ, part)
		if !ok || i == len(k)-1 {
			in := "the top-level keys are"
			if len(table) > 0 {
				in = fmt.Sprintf("the keys of [%s] are", strings.Join(table, "."))
			}
			return fmt.Errorf("--origins %s: %sunknown key %s: %s %s", path, where, part, in, named.List(tags(typ)...))
		}
		typ, table = f.Type, append(table, part)
	}
	return fmt.Errorf("--origins %s: %sunknown key %s", path, where, k)
}

// fieldByTag returns the field of struct type typ whose toml tag is name.
func fieldByTag(typ reflect.Type, name string) (reflect.StructField, bool) {
	if typ.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for f := range typ.Fields() {
		if f.Tag.Get("toml") == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// tags lists the toml tags of struct type typ.
func tags(typ reflect.Type) []string {
	var out []string
	if typ.Kind() == reflect.Struct {
		for f := range typ.Fields() {
			out = append(out, f.Tag.Get("toml"))
		}
	}
	return out
}

func addHeader(h http.Header, name, v string) http.Header {
	if h == nil {
		h = http.Header{}
	}
	h.Add(name, v)
	return h
}
