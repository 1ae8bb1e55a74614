package host

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
)

var updateDocs = flag.Bool("update", false, "rewrite the settings table of docs/settings.md from the declarations")

// TestSettingsDeclaredOnce (issue 40, item 2): every setting is one
// declaration with all it needs (help; a flag or, for a secret, a
// variable; a variable unless it is a mode; a default or "(default …)" in
// its help), names no flag, variable or key twice, and declares as its
// default the library's own: a field added to activities.Admission or
// Breaker without its setting, or a default changed in one place only,
// fails here.
func TestSettingsDeclaredOnce(t *testing.T) {
	var s settings
	decls := settingsOf(reflect.ValueOf(&s))
	require.NotEmpty(t, decls)
	flags, envs, keys := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, d := range decls {
		name := d.field.Name
		assert.NotEmpty(t, d.field.Tag.Get("help"), "%s: no help", name)
		assert.False(t, d.flagName() == "" && d.envName() == "", "%s: neither flag nor variable", name)
		if d.flagName() != "" && d.field.Tag.Get("env") == "" {
			t.Errorf("%s: no env tag (env:\"-\" for a mode that has none)", name)
		}
		assert.False(t, flags[d.flagName()] && d.flagName() != "", "flag --%s declared twice", d.flagName())
		assert.False(t, envs[d.envName()] && d.envName() != "", "variable %s declared twice", d.envName())
		flags[d.flagName()], envs[d.envName()] = true, true
		if d.toml != nil {
			k := strings.Join(d.toml, ".")
			assert.False(t, keys[k], "key %s declared twice", k)
			keys[k] = true
			assert.NotEmpty(t, d.field.Tag.Get("example"), "%s: an [admission] key needs an example for the file's errors", name)
			assert.NotEmpty(t, d.field.Tag.Get("default"), "%s: an [admission] key shows the library's default", name)
		}
		if def := d.field.Tag.Get("default"); def != "" && !strings.HasPrefix(def, "half of") {
			_, err := parseSetting(d.v.Type(), def, d.field.Tag.Get("invert") == "true")
			if d.v.Kind() == reflect.Pointer {
				_, err = parseSetting(d.v.Type().Elem(), def, d.field.Tag.Get("invert") == "true")
			}
			assert.NoError(t, err, "%s: its default %q does not read", name, def)
		}
	}

	// Every field of the library's admission is a setting, of the same
	// name and type.
	for _, pair := range []struct{ lib, set reflect.Type }{
		{reflect.TypeFor[activities.Admission](), reflect.TypeFor[admissionTable]()},
		{reflect.TypeFor[activities.Breaker](), reflect.TypeFor[breakerTable]()},
	} {
		for _, f := range reflectFields(pair.lib) {
			if !f.IsExported() {
				continue
			}
			sf, ok := pair.set.FieldByName(f.Name)
			if !assert.True(t, ok, "%s.%s has no setting in %s: declare it there", pair.lib, f.Name, pair.set) {
				continue
			}
			st := sf.Type
			if st.Kind() == reflect.Pointer && st.Elem().Kind() != reflect.Struct {
				st = st.Elem()
			}
			if f.Type.Kind() != reflect.Struct {
				assert.Equal(t, f.Type, st, "%s.%s", pair.set, f.Name)
			}
		}
	}

	// The defaults declared are the library's.
	lib := activities.Admission{}.WithDefaults()
	want := map[string]any{
		"task-queue":                defaults.TaskQueue,
		"max-response-bytes":        int64(defaults.MaxResponseBytes),
		"max-retry-after":           defaults.MaxRetryAfter,
		"webhook-max-body-bytes":    int64(defaults.WebhookMaxBodyBytes),
		"webhook-delivery-timeout":  defaults.DeliveryTimeout,
		"webhook-workflow-id-field": defaults.WorkflowIDField,
		"webhook-operation-field":   defaults.OperationField,
		"webhook-key-digest-field":  defaults.KeyDigestField,
		"webhook-hmac-header":       hmacDefaults.Header,
		"webhook-hmac-encoding":     hmacDefaults.Encoding,
		"admission":                 !lib.Off,
		"admission-initial-rate":    lib.InitialRate,
		"admission-min-rate":        lib.MinRate,
		"retry-budget-ratio":        lib.RetryRatio,
		"admission-min-retries":     lib.MinRetries,
		"admission-retry-window":    lib.RetryWindow,
		"admission-max-wait":        lib.MaxWait,
		"admission-max-delay":       lib.MaxDelay,
		"admission-throttles":       lib.Throttles,
		"breaker":                   !lib.Breaker.Off,
		"breaker-failure-ratio":     lib.Breaker.FailureRatio,
		"breaker-min-failures":      lib.Breaker.MinFailures,
		"breaker-window":            lib.Breaker.FailureWindow,
		"breaker-open-time":         lib.Breaker.OpenTime,
		"breaker-max-open-time":     lib.Breaker.MaxOpenTime,
	}
	assert.Equal(t, lib.InitialRate/2, lib.Breaker.RestartRate, "breaker-restart-rate's default is half of admission-initial-rate")
	for _, d := range decls {
		w, ok := want[d.flagName()]
		if !ok {
			continue
		}
		typ := d.field.Type
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		got, err := parseSetting(typ, d.field.Tag.Get("default"), false)
		require.NoError(t, err, d.flagName())
		assert.Equal(t, w, got.Interface(), "--%s: declared default %q, the library's %v", d.flagName(), d.field.Tag.Get("default"), w)
		delete(want, d.flagName())
	}
	assert.Empty(t, want, "settings the test expects but nothing declares")
}

// TestSettingsDoc: docs/settings.md's table is the declarations' (go test
// ./host -run TestSettingsDoc -update rewrites it).
func TestSettingsDoc(t *testing.T) {
	path := filepath.Join("..", "docs", "settings.md")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	const begin, end = "<!-- settings: generated by go test ./host -run TestSettingsDoc -update -->\n", "<!-- end of settings -->\n"
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	require.True(t, i >= 0 && j > i, "%s: the generated table's markers are missing", path)
	table := settingsTable()
	if *updateDocs {
		require.NoError(t, os.WriteFile(path, []byte(doc[:i+len(begin)]+table+doc[j:]), 0o644))
		return
	}
	assert.Equal(t, table, doc[i+len(begin):j], "%s is not the declarations' table: run go test ./host -run TestSettingsDoc -update", path)
}

// settingsTable is the Markdown table of every setting.
func settingsTable() string {
	var b strings.Builder
	b.WriteString("| flag | environment | origins file | default | what it sets |\n|---|---|---|---|---|\n")
	var s settings
	for _, d := range settingsOf(reflect.ValueOf(&s)) {
		cell := func(v, wrap string) string {
			if v == "" {
				return ""
			}
			return wrap + v + wrap
		}
		flagCell := ""
		if d.flagName() != "" {
			flagCell = "`--" + d.flagName() + "`"
		}
		key := ""
		if d.toml != nil {
			key = fmt.Sprintf("`%s`", strings.Join(d.toml, "."))
		}
		def := cell(d.field.Tag.Get("default"), "`")
		if d.field.Tag.Get("invert") == "true" {
			def += " (on: the key's `false`)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", flagCell, cell(d.envName(), "`"), key, def,
			strings.ReplaceAll(d.help(), "|", "\\|"))
	}
	return b.String()
}
