package compose_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/distribution/reference"
)

// rootModule is the module path of the repository's root go.mod.
const rootModule = "github.com/idemhttp/temporal-idempotent-http"

// testEnv is the whole environment the file is loaded with: a value for each
// variable it reads, none of them its default, so that every value that
// comes from the environment is recognisable in the loaded project.
var testEnv = map[string]string{
	"POSTGRES_PASSWORD": "postgres-password-from-env",
	"API_TOKEN":         "api-token-from-env",
	"WEBHOOK_SECRET":    "webhook-secret-from-env",
}

// repoRoot returns the directory of the root module, above this one.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && regexp.MustCompile(`(?m)^module\s+`+regexp.QuoteMeta(rootModule)+`\s*$`).Match(raw) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod of module %s above the test's directory", rootModule)
		}
		dir = parent
	}
}

// load loads the compose files at paths as `docker compose` does: with
// compose-go's loader (schema validation, interpolation, normalization and
// the consistency checks), the repository root as the project directory, so
// that a copy elsewhere resolves its relative paths as the original does,
// and env as the only environment (nothing of the test process's own).
func load(t *testing.T, paths []string, env map[string]string) (*types.Project, error) {
	t.Helper()
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	opts, err := cli.NewProjectOptions(paths,
		cli.WithWorkingDirectory(repoRoot(t)),
		cli.WithEnv(list),
	)
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

// deployment is a compose project (docker-compose.yml, or it and an overlay
// such as docker-compose.webhooks.yml) loaded twice: with testEnv, and with
// only its required variables (the defaults of the other interpolations).
type deployment struct {
	root     string
	raw      string // the files' text
	required []string
	webhooks bool // the webhooks overlay is one of the files
	fromEnv  *types.Project
	defaults *types.Project
}

// loadDeployment loads the compose files at paths, in order, as
// `docker compose -f … -f …` does; the defaults are loaded with the
// variables the files require (${VAR:?…}) and no other.
func loadDeployment(t *testing.T, paths []string) (*deployment, error) {
	t.Helper()
	d := &deployment{root: repoRoot(t)}
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		d.raw += string(raw)
	}
	var err error
	d.webhooks = slices.ContainsFunc(paths, func(p string) bool { return filepath.Base(p) == webhooksFile })
	if d.webhooks {
		d.required = []string{"WEBHOOK_SECRET"} // the overlay's signing secret
	}
	if d.fromEnv, err = load(t, paths, testEnv); err != nil {
		return nil, err
	}
	minimal := map[string]string{}
	for _, k := range d.required {
		minimal[k] = testEnv[k]
	}
	if d.defaults, err = load(t, paths, minimal); err != nil {
		return nil, err
	}
	return d, nil
}

// service returns the named service of the project loaded with testEnv, or
// an empty one.
func (d *deployment) service(name string) types.ServiceConfig {
	return d.fromEnv.Services[name]
}

// env returns the value of an environment variable of a service ("" when
// unset or without value).
func env(s types.ServiceConfig, key string) string {
	if v := s.Environment[key]; v != nil {
		return *v
	}
	return ""
}

// check is one property of the tested topology; it returns what is wrong.
type check struct {
	name string
	fn   func(d *deployment) []string
}

var checks = []check{
	{"services", checkServices},
	{"images pinned", checkImagesPinned},
	{"versions match tools/go.mod", checkVersions},
	{"published ports", checkPorts},
	{"worker", checkWorker},
	{"depends_on", checkDependsOn},
	{"no inline secrets", checkSecrets},
	{"mounted scripts", checkMounts},
	{"webhooks", checkWebhooks},
}

// TestCompose loads docker-compose.yml, alone and with the webhooks overlay,
// with compose-go and checks the loaded project against the topology the
// cluster tests run without Docker.
func TestCompose(t *testing.T) {
	for _, files := range [][]string{{composeFile}, {composeFile, webhooksFile}} {
		t.Run(strings.Join(files, "+"), func(t *testing.T) {
			d, err := loadDeployment(t, repoFiles(t, files...))
			if err != nil {
				t.Fatalf("compose-go rejects %v: %v", files, err)
			}
			if d.fromEnv.Name != "idempotent-http" {
				t.Errorf("project name %q, want idempotent-http", d.fromEnv.Name)
			}
			for _, c := range checks {
				t.Run(c.name, func(t *testing.T) {
					for _, p := range c.fn(d) {
						t.Error(p)
					}
				})
			}
		})
	}
}

// The compose files, in the repository root.
const (
	composeFile  = "docker-compose.yml"
	webhooksFile = "docker-compose.webhooks.yml" // an overlay: -f docker-compose.yml -f this
)

// repoFiles returns the paths of the named files of the repository root.
func repoFiles(t *testing.T, names ...string) []string {
	t.Helper()
	var paths []string
	for _, n := range names {
		paths = append(paths, filepath.Join(repoRoot(t), n))
	}
	return paths
}

// mutate writes a copy of the repository's compose file name to a temporary
// directory with the one occurrence of old replaced by new, and returns its
// path.
func mutate(t *testing.T, name, old, new string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), name))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), old); n != 1 {
		t.Fatalf("%s contains %q %d times, want once: update the test", name, old, n)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(strings.Replace(string(raw), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// mutated returns the paths of a project's files with file (default
// docker-compose.yml; the webhooks overlay comes after it) mutated as
// mutate does.
func mutated(t *testing.T, file, old, new string) []string {
	t.Helper()
	files := []string{cmp.Or(file, composeFile)}
	if file == webhooksFile {
		files = []string{composeFile, webhooksFile}
	}
	paths := repoFiles(t, files...)
	paths[len(paths)-1] = mutate(t, files[len(files)-1], old, new)
	return paths
}

// TestComposeLoaderRejectsBrokenCopies proves that the loader does check
// the file: each deliberately broken copy fails to load, for its reason.
func TestComposeLoaderRejectsBrokenCopies(t *testing.T) {
	tests := []struct {
		name, old, new string
		file           string            // default docker-compose.yml
		env            map[string]string // default: loaded as TestCompose loads
		wantErr        string
	}{
		{
			name:    "unknown service key",
			old:     "    image: temporalio/ui:2.42.1\n",
			new:     "    image: temporalio/ui:2.42.1\n    port: 8080\n",
			wantErr: "services.temporal-ui.port",
		},
		{
			name:    "depends_on a missing service",
			old:     "      demoapi:\n        condition: service_healthy\n",
			new:     "      demo-api:\n        condition: service_healthy\n",
			wantErr: `depends on undefined service "demo-api"`,
		},
		{
			name:    "unknown depends_on condition",
			old:     "      temporal-create-namespace:\n        condition: service_completed_successfully\n",
			new:     "      temporal-create-namespace:\n        condition: service_done\n",
			wantErr: "depends_on.temporal-create-namespace.condition value must be one of",
		},
		{
			name:    "port that is not a number",
			old:     `"127.0.0.1:8080:8080"`,
			new:     `"127.0.0.1:eighty:8080"`,
			wantErr: "Invalid hostPort: eighty",
		},
		{
			name:    "unterminated interpolation",
			old:     "      POSTGRES_PWD: ${POSTGRES_PASSWORD:-temporal}\n",
			new:     "      POSTGRES_PWD: ${POSTGRES_PASSWORD:-temporal\n",
			wantErr: "invalid interpolation format for services.temporal.environment.POSTGRES_PWD",
		},
		{
			name:    "required variable unset",
			old:     "      ALLOW_ORIGINS: http://demoapi:8081\n      API_TOKEN: ${API_TOKEN:-}\n",
			new:     "      ALLOW_ORIGINS: http://demoapi:8081\n      API_TOKEN: ${API_TOKEN:?API_TOKEN is required}\n",
			env:     map[string]string{"POSTGRES_PASSWORD": "x"},
			wantErr: "required variable API_TOKEN is missing a value",
		},
		{
			name: "provider without the receiver's health", file: webhooksFile,
			old:     "      provider:\n        condition: service_healthy\n",
			new:     "      provider:\n        condition: healthy\n",
			wantErr: "depends_on.provider.condition value must be one of",
		},
		{
			name:    "undefined named volume",
			old:     "      - postgresql-data:/var/lib/postgresql/data\n",
			new:     "      - pgdata:/var/lib/postgresql/data\n",
			wantErr: "undefined volume pgdata",
		},
		{
			name:    "healthcheck retries not a number",
			old:     "      retries: 20\n",
			new:     "      retries: twenty\n",
			wantErr: "services.demoapi.healthcheck.retries",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := mutated(t, tt.file, tt.old, tt.new)
			var err error
			if tt.env != nil {
				_, err = load(t, paths, tt.env)
			} else {
				_, err = loadDeployment(t, paths)
			}
			if err == nil {
				t.Fatalf("compose-go loaded the broken copy (%q -> %q) without error", tt.old, tt.new)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q, want it to mention %q", err, tt.wantErr)
			}
			t.Logf("rejected: %v", err)
		})
	}
}

// TestComposeWebhooksNeedSecret: without WEBHOOK_SECRET, docker compose
// refuses the webhooks overlay and says what to set.
func TestComposeWebhooksNeedSecret(t *testing.T) {
	without := maps.Clone(testEnv)
	delete(without, "WEBHOOK_SECRET")
	_, err := load(t, repoFiles(t, composeFile, webhooksFile), without)
	want := "required variable WEBHOOK_SECRET is missing a value: set WEBHOOK_SECRET to the signing secret"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("loaded without WEBHOOK_SECRET: error %v, want one containing %q", err, want)
	}
	// The base file alone needs no webhook secret.
	if _, err := load(t, repoFiles(t, composeFile), without); err != nil {
		t.Errorf("docker-compose.yml without WEBHOOK_SECRET: %v", err)
	}
}

// TestComposeChecksCatchBrokenCopies proves that the checks of TestCompose
// can fail: each copy is valid for compose-go but breaks the topology, and
// the check named reports it.
func TestComposeChecksCatchBrokenCopies(t *testing.T) {
	tests := []struct {
		name, old, new string
		file           string // default docker-compose.yml
		check          string
		wantProblem    string
	}{
		{
			name: "worker dials localhost", old: "    environment:\n      TEMPORAL_ADDRESS: temporal:7233\n      TEMPORAL_NAMESPACE: default\n",
			new:   "    environment:\n      TEMPORAL_ADDRESS: localhost:7233\n      TEMPORAL_NAMESPACE: default\n",
			check: "worker", wantProblem: "TEMPORAL_ADDRESS",
		},
		{
			name: "worker allowed another origin", old: "ALLOW_ORIGINS: http://demoapi:8081",
			new: "ALLOW_ORIGINS: http://demoapi:9090", check: "worker", wantProblem: "ALLOW_ORIGINS",
		},
		{
			name: "worker metrics on loopback only", old: "METRICS_ADDR: 0.0.0.0:9464",
			new: "METRICS_ADDR: 127.0.0.1:9464", check: "worker", wantProblem: "METRICS_ADDR",
		},
		{
			name: "worker metrics on an unpublished port", old: "METRICS_ADDR: 0.0.0.0:9464",
			new: "METRICS_ADDR: 0.0.0.0:9465", check: "worker", wantProblem: "METRICS_ADDR",
		},
		{
			name: "moving image tag", old: "image: temporalio/ui:2.42.1",
			new: "image: temporalio/ui:latest", check: "images pinned", wantProblem: "moving tag",
		},
		{
			name: "untagged image", old: "image: postgres:16.9",
			new: "image: postgres", check: "images pinned", wantProblem: "no explicit tag",
		},
		{
			name: "server image off the pinned version", old: "image: temporalio/server:1.29.1",
			new: "image: temporalio/server:1.29.0", check: "versions match tools/go.mod", wantProblem: `"1.29.0"`,
		},
		{
			name: "port published on every interface", old: `"127.0.0.1:7233:7233"`,
			new: `"7233:7233"`, check: "published ports", wantProblem: "not bound to 127.0.0.1",
		},
		{
			name: "worker no longer waits for the namespace", old: "      temporal-create-namespace:\n        condition: service_completed_successfully\n",
			new:   "      temporal-create-namespace:\n        condition: service_started\n",
			check: "depends_on", wantProblem: "service_started",
		},
		{
			name: "inline token", old: "      ALLOW_ORIGINS: http://demoapi:8081\n      API_TOKEN: ${API_TOKEN:-}\n",
			new:   "      ALLOW_ORIGINS: http://demoapi:8081\n      API_TOKEN: hunter2\n",
			check: "no inline secrets", wantProblem: "inline value",
		},
		{
			name: "secret default other than the development password", old: "      POSTGRES_PWD: ${POSTGRES_PASSWORD:-temporal}\n",
			new:   "      POSTGRES_PWD: ${POSTGRES_PASSWORD:-s3cr3t}\n",
			check: "no inline secrets", wantProblem: "defaults to",
		},
		{
			name: "webhooks: the provider posts to another port", file: webhooksFile,
			old: `"http://worker:8090/webhooks"`, new: `"http://worker:8091/webhooks"`,
			check: "webhooks", wantProblem: "--webhook-url",
		},
		{
			name: "webhooks: the provider posts to another path", file: webhooksFile,
			old: `"http://worker:8090/webhooks"`, new: `"http://worker:8090/hooks"`,
			check: "webhooks", wantProblem: "--webhook-url",
		},
		{
			name: "webhooks: the provider posts to another service", file: webhooksFile,
			old: `"http://worker:8090/webhooks"`, new: `"http://demoapi:8090/webhooks"`,
			check: "webhooks", wantProblem: "--webhook-url",
		},
		{
			name: "webhooks: the provider signs with another scheme", file: webhooksFile,
			old: `"--webhook-scheme", "${WEBHOOK_SCHEME:-standard-webhooks}"`, new: `"--webhook-scheme", "stripe"`,
			check: "webhooks", wantProblem: "scheme",
		},
		{
			name: "webhooks: the receiver on the container's loopback", file: webhooksFile,
			old: "WEBHOOK_ADDR: 0.0.0.0:8090", new: "WEBHOOK_ADDR: 127.0.0.1:8090",
			check: "webhooks", wantProblem: "WEBHOOK_ADDR",
		},
		{
			name: "webhooks: the receiver on an unpublished port", file: webhooksFile,
			old: `"127.0.0.1:8090-8099:8090"`, new: `"127.0.0.1:8090-8099:8091"`,
			check: "webhooks", wantProblem: "WEBHOOK_ADDR",
		},
		{
			name: "webhooks: the worker may not call the provider", file: webhooksFile,
			old: "ALLOW_ORIGINS: http://demoapi:8081,http://provider:8082", new: "ALLOW_ORIGINS: http://demoapi:8081",
			check: "webhooks", wantProblem: "ALLOW_ORIGINS",
		},
		{
			name: "webhooks: API_TOKEN for no named origin", file: webhooksFile,
			old: "      API_TOKEN_ORIGIN: http://demoapi:8081\n", new: "",
			check: "worker", wantProblem: "API_TOKEN_ORIGIN",
		},
		{
			name: "webhooks: API_TOKEN for the provider", file: webhooksFile,
			old: "API_TOKEN_ORIGIN: http://demoapi:8081", new: "API_TOKEN_ORIGIN: http://provider:8082",
			check: "worker", wantProblem: "API_TOKEN_ORIGIN",
		},
		{
			name: "webhooks: the worker verifies with another variable", file: webhooksFile,
			old: "      WEBHOOK_SECRETS: ${WEBHOOK_SECRET:?", new: "      WEBHOOK_SECRETS: ${API_TOKEN:-",
			check: "webhooks", wantProblem: "WEBHOOK_SECRETS",
		},
		{
			name: "webhooks: the provider reads its secret from another variable", file: webhooksFile,
			old: `"--webhook-forged", "1"]`, new: `"--webhook-forged", "1", "--webhook-secret-env", "OTHER_SECRET"]`,
			check: "webhooks", wantProblem: "OTHER_SECRET",
		},
		{
			name: "webhooks: a default signing secret", file: webhooksFile,
			old: "      WEBHOOK_SECRETS: ${WEBHOOK_SECRET:?", new: "      WEBHOOK_SECRETS: ${WEBHOOK_SECRET:-whsec_c2VjcmV0}${UNUSED:-",
			check: "no inline secrets", wantProblem: "${WEBHOOK_SECRET:-",
		},
		{
			name: "webhooks: the worker no longer waits for the provider", file: webhooksFile,
			old: "      provider:\n        condition: service_healthy\n", new: "      provider:\n        condition: service_started\n",
			check: "depends_on", wantProblem: "provider",
		},
		{
			name: "webhooks: the provider's port on every interface", file: webhooksFile,
			old: `"127.0.0.1:8082:8082"`, new: `"8082:8082"`,
			check: "published ports", wantProblem: "not bound to 127.0.0.1",
		},
		{
			name: "missing setup script", old: `entrypoint: ["/bin/sh", "/scripts/setup-postgres.sh"]`,
			new: `entrypoint: ["/bin/sh", "/scripts/setup-postgresql.sh"]`, check: "mounted scripts", wantProblem: "setup-postgresql.sh",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := slices.IndexFunc(checks, func(c check) bool { return c.name == tt.check })
			if i < 0 {
				t.Fatalf("no check %q", tt.check)
			}
			paths := mutated(t, tt.file, tt.old, tt.new)
			d, err := loadDeployment(t, paths)
			if err != nil {
				t.Fatalf("compose-go rejects the copy, want it valid: %v", err)
			}
			problems := checks[i].fn(d)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tt.wantProblem) }) {
				t.Errorf("check %q reported %q, want a problem mentioning %q", tt.check, problems, tt.wantProblem)
			}
			t.Logf("caught: %q", problems)
		})
	}
}

func checkServices(d *deployment) (problems []string) {
	want := []string{
		"demoapi", "postgresql", "temporal", "temporal-admin-tools",
		"temporal-create-namespace", "temporal-ui", "worker",
	}
	builds := map[string]string{"worker": "worker", "demoapi": "demoapi"} // service -> target
	if d.webhooks {
		want = append(want, "provider")
		builds["provider"] = "demoapi"
	}
	slices.Sort(want)
	if got := d.fromEnv.ServiceNames(); !slices.Equal(got, want) {
		problems = append(problems, fmt.Sprintf("services = %v, want %v", got, want))
	}
	for name, target := range builds {
		b := d.service(name).Build
		if b == nil || b.Target != target || b.Context != d.root {
			problems = append(problems, fmt.Sprintf("service %s: want a build of target %q with the repository root as context, got %+v", name, target, b))
		}
	}
	return problems
}

// pinnedTag returns image's tag, or a problem: no explicit tag, or a moving
// one (latest).
func pinnedTag(image string) (string, error) {
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("image %q: %v", image, err)
	}
	tagged, ok := ref.(reference.Tagged)
	if !ok {
		return "", fmt.Errorf("image %q has no explicit tag", image)
	}
	if tag := tagged.Tag(); tag == "latest" || strings.HasPrefix(tag, "latest-") {
		return "", fmt.Errorf("image %q uses a moving tag", image)
	}
	return tagged.Tag(), nil
}

func checkImagesPinned(d *deployment) (problems []string) {
	for _, name := range d.fromEnv.ServiceNames() {
		s := d.service(name)
		if s.Image == "" || s.Build != nil {
			continue // built from the Dockerfile: see TestDockerfile
		}
		if _, err := pinnedTag(s.Image); err != nil {
			problems = append(problems, fmt.Sprintf("service %s: %v", name, err))
		}
	}
	return problems
}

// toolsVersions returns the module versions that tools/go.mod requires.
func toolsVersions(root string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(root, "tools", "go.mod"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && strings.HasPrefix(fields[1], "v") {
			v[fields[0]] = strings.TrimPrefix(fields[1], "v")
		}
	}
	return v, sc.Err()
}

// checkVersions keeps the images on the versions that tools/go.mod pins and
// the cluster tests run.
func checkVersions(d *deployment) (problems []string) {
	versions, err := toolsVersions(d.root)
	if err != nil {
		return []string{err.Error()}
	}
	server, ui := versions["go.temporal.io/server"], versions["github.com/temporalio/ui-server/v2"]
	if server == "" || ui == "" {
		return []string{fmt.Sprintf("tools/go.mod pins no Temporal server (%q) or UI (%q)", server, ui)}
	}
	tests := []struct {
		service, want string
		prefix        bool
	}{
		{"temporal", server, false},
		{"temporal-admin-tools", server + "-", true},
		{"temporal-create-namespace", server + "-", true},
		{"temporal-ui", ui, false},
	}
	for _, tt := range tests {
		tag, err := pinnedTag(d.service(tt.service).Image)
		ok := err == nil && (tag == tt.want || tt.prefix && strings.HasPrefix(tag, tt.want))
		if !ok {
			problems = append(problems, fmt.Sprintf("service %s: image tag %q, want %q (from tools/go.mod)%s",
				tt.service, tag, tt.want, map[bool]string{true: " as prefix"}[tt.prefix]))
		}
	}
	return problems
}

func checkPorts(d *deployment) (problems []string) {
	tests := []struct {
		service   string
		port      uint32
		published string
	}{
		{"temporal", 7233, "7233"},
		{"temporal-ui", 8080, "8080"},
		{"demoapi", 8081, "8081"},
		// The worker's /metrics: a range of host ports, one for each of
		// up to 10 workers (--scale).
		{"worker", 9464, "9464-9473"},
	}
	if d.webhooks {
		tests = append(tests, []struct {
			service   string
			port      uint32
			published string
		}{
			{"provider", 8082, "8082"},
			// The worker's webhook receiver, like its /metrics.
			{"worker", 8090, "8090-8099"},
		}...)
	}
	for _, tt := range tests {
		if !slices.ContainsFunc(d.service(tt.service).Ports, func(p types.ServicePortConfig) bool {
			return p.Target == tt.port && p.Published == tt.published
		}) {
			problems = append(problems, fmt.Sprintf("service %s publishes %+v, want container port %d on host port %s",
				tt.service, d.service(tt.service).Ports, tt.port, tt.published))
		}
	}
	// The server runs without an authorizer: nothing on other networks.
	for _, name := range d.fromEnv.ServiceNames() {
		for _, p := range d.service(name).Ports {
			if p.HostIP != "127.0.0.1" {
				problems = append(problems, fmt.Sprintf("service %s: port %d is not bound to 127.0.0.1 (host IP %q)", name, p.Target, p.HostIP))
			}
		}
	}
	return problems
}

// flagValue returns the value of --name value or --name=value in args.
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// allowedOrigins returns the origins of the worker's ALLOW_ORIGINS.
func allowedOrigins(w types.ServiceConfig) []string {
	var origins []string
	for o := range strings.SplitSeq(env(w, "ALLOW_ORIGINS"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	return origins
}

// origin returns http://SERVICE:PORT for a service that listens on --addr
// [HOST]:PORT, or "" for one that does not.
func (d *deployment) origin(service string) string {
	s, ok := d.fromEnv.Services[service]
	if !ok {
		return ""
	}
	_, port, err := net.SplitHostPort(flagValue(s.Command, "--addr"))
	if err != nil || port == "" {
		return ""
	}
	return "http://" + net.JoinHostPort(service, port)
}

// publishedListen checks the listen address in the worker's variable key:
// every interface of the container (the published port reaches it from
// outside), on a published container port, which it returns.
func publishedListen(w types.ServiceConfig, key string) (string, error) {
	addr := env(w, key)
	host, port, err := net.SplitHostPort(addr)
	published := slices.ContainsFunc(w.Ports, func(p types.ServicePortConfig) bool { return fmt.Sprint(p.Target) == port })
	if err != nil || (host != "" && host != "0.0.0.0") || !published {
		return port, fmt.Errorf("worker %s = %q, want :PORT or 0.0.0.0:PORT with PORT a published container port (%+v)", key, addr, w.Ports)
	}
	return port, nil
}

func checkWorker(d *deployment) (problems []string) {
	w, api := d.service("worker"), d.service("demoapi")
	addr := env(w, "TEMPORAL_ADDRESS")
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "temporal" || port != "7233" {
		problems = append(problems, fmt.Sprintf("worker TEMPORAL_ADDRESS = %q, want the temporal service's frontend temporal:7233", addr))
	}
	if _, ok := d.fromEnv.Services[host]; !ok {
		problems = append(problems, fmt.Sprintf("worker TEMPORAL_ADDRESS host %q is not a service", host))
	}
	ns := env(w, "TEMPORAL_NAMESPACE")
	if ns != "default" || env(d.service("temporal-create-namespace"), "NAMESPACE") != ns {
		problems = append(problems, fmt.Sprintf("worker TEMPORAL_NAMESPACE = %q, want default, the namespace temporal-create-namespace registers", ns))
	}
	// ALLOW_ORIGINS names services on the ports they listen on, demoapi
	// among them.
	origins := allowedOrigins(w)
	for _, o := range origins {
		u, err := url.Parse(o)
		if err != nil || u.Scheme != "http" || o != d.origin(u.Hostname()) {
			problems = append(problems, fmt.Sprintf("worker ALLOW_ORIGINS: %q is not http://SERVICE:PORT with the port a service listens on (--addr)", o))
		}
	}
	if !slices.Contains(origins, d.origin("demoapi")) {
		problems = append(problems, fmt.Sprintf("worker ALLOW_ORIGINS = %q, want http://demoapi:PORT with the port demoapi listens on (%q) among them", origins, flagValue(api.Command, "--addr")))
	}
	// API_TOKEN goes to demoapi only: with several origins the worker
	// needs API_TOKEN_ORIGIN, and it names demoapi's.
	if to := env(w, "API_TOKEN_ORIGIN"); len(origins) > 1 || to != "" {
		if to != d.origin("demoapi") {
			problems = append(problems, fmt.Sprintf("worker API_TOKEN_ORIGIN = %q with ALLOW_ORIGINS %q, want demoapi's origin %q: the worker sends API_TOKEN to that one origin, and refuses to start with several and none named", to, origins, d.origin("demoapi")))
		}
	}
	// METRICS_ADDR listens on every interface of the container (the
	// published port reaches it from outside) on a published port.
	if _, err := publishedListen(w, "METRICS_ADDR"); err != nil {
		problems = append(problems, err.Error())
	}
	if got := flagValue(w.Command, "--task-queue"); got != "idempotent-http" {
		problems = append(problems, fmt.Sprintf("worker --task-queue = %q, want idempotent-http (command %v)", got, w.Command))
	}
	if len(w.Command) == 0 || w.Command[0] != "worker" || len(api.Command) == 0 || api.Command[0] != "demoapi" {
		problems = append(problems, fmt.Sprintf("commands: worker %v, demoapi %v; want the binaries worker and demoapi", w.Command, api.Command))
	}
	return problems
}

func checkDependsOn(d *deployment) (problems []string) {
	tests := []struct{ service, dep, condition string }{
		{"temporal-admin-tools", "postgresql", types.ServiceConditionHealthy},
		{"temporal", "temporal-admin-tools", types.ServiceConditionCompletedSuccessfully},
		{"temporal-create-namespace", "temporal", types.ServiceConditionHealthy},
		{"temporal-ui", "temporal", types.ServiceConditionHealthy},
		{"worker", "temporal", types.ServiceConditionHealthy},
		{"worker", "temporal-create-namespace", types.ServiceConditionCompletedSuccessfully},
		{"worker", "demoapi", types.ServiceConditionHealthy},
	}
	if d.webhooks {
		tests = append(tests, struct{ service, dep, condition string }{"worker", "provider", types.ServiceConditionHealthy})
	}
	for _, tt := range tests {
		dep, ok := d.service(tt.service).DependsOn[tt.dep]
		if !ok || dep.Condition != tt.condition {
			problems = append(problems, fmt.Sprintf("%s depends_on %s: condition %q, want %q", tt.service, tt.dep, dep.Condition, tt.condition))
		}
	}
	// Whatever the list above says, every condition must be satisfiable.
	for _, name := range d.fromEnv.ServiceNames() {
		for dep, cfg := range d.service(name).DependsOn {
			target := d.service(dep)
			switch {
			case cfg.Condition == types.ServiceConditionHealthy &&
				(target.HealthCheck == nil || target.HealthCheck.Disable || len(target.HealthCheck.Test) == 0):
				problems = append(problems, fmt.Sprintf("%s waits for %s to be healthy, but %s has no healthcheck", name, dep, dep))
			case cfg.Condition == types.ServiceConditionCompletedSuccessfully && target.Restart != "" && target.Restart != types.RestartPolicyNo:
				problems = append(problems, fmt.Sprintf("%s waits for %s to complete, but %s has restart: %s", name, dep, dep, target.Restart))
			}
		}
	}
	return problems
}

// secretName matches environment variable names that carry secrets.
var secretName = regexp.MustCompile(`(?i)(pass|pwd|token|secret|api_?key|credential|auth)`)

// checkSecrets proves that every secret comes from the environment: loaded
// with testEnv, each secret-named variable has one of testEnv's values; with
// an empty environment it is empty, or for the database password the
// development default "temporal" that the README names.
func checkSecrets(d *deployment) (problems []string) {
	from := map[string]string{} // testEnv value -> its variable
	for k, v := range testEnv {
		from[v] = k
	}
	for _, name := range d.fromEnv.ServiceNames() {
		for key := range d.service(name).Environment {
			if !secretName.MatchString(key) || strings.HasSuffix(key, "_ORIGIN") {
				continue // API_TOKEN_ORIGIN names where the token goes
			}
			src, ok := from[env(d.service(name), key)]
			if !ok {
				problems = append(problems, fmt.Sprintf("service %s: %s has an inline value; use ${VAR} interpolation", name, key))
				continue
			}
			if slices.Contains(d.required, src) {
				continue // no default: see below and TestComposeWebhooksNeedSecret
			}
			def := env(d.defaults.Services[name], key)
			if def != "" && (src != "POSTGRES_PASSWORD" || def != "temporal") {
				problems = append(problems, fmt.Sprintf("service %s: %s defaults to %q, an inline secret, when %s is unset", name, key, def, src))
			}
		}
	}
	// The secrets are wired: one database password for the database, the
	// schema set-up and the server; the worker sends the API's token.
	tests := []struct{ service, key, variable string }{
		{"postgresql", "POSTGRES_PASSWORD", "POSTGRES_PASSWORD"},
		{"temporal-admin-tools", "SQL_PASSWORD", "POSTGRES_PASSWORD"},
		{"temporal", "POSTGRES_PWD", "POSTGRES_PASSWORD"},
		{"demoapi", "API_TOKEN", "API_TOKEN"},
		{"worker", "API_TOKEN", "API_TOKEN"},
	}
	if d.webhooks {
		// The provider signs and the worker verifies with one secret; the
		// worker sends its token to the reference API only, not to the
		// provider (checkWorker).
		tests = append(tests, []struct{ service, key, variable string }{
			{"provider", "WEBHOOK_SECRET", "WEBHOOK_SECRET"},
			{"worker", "WEBHOOK_SECRETS", "WEBHOOK_SECRET"},
		}...)
	}
	for _, tt := range tests {
		if got := env(d.service(tt.service), tt.key); got != testEnv[tt.variable] {
			problems = append(problems, fmt.Sprintf("service %s: %s = %q with %s=%q set, want that value", tt.service, tt.key, got, tt.variable, testEnv[tt.variable]))
		}
	}
	for _, bad := range []string{"Bearer ", "BEGIN PRIVATE KEY", "api_key="} {
		if strings.Contains(d.raw, bad) {
			problems = append(problems, fmt.Sprintf("the compose files contain %q", bad))
		}
	}
	// A required variable is required wherever it is read: a default in
	// one place would be a secret written in the file.
	for _, k := range d.required {
		for _, m := range regexp.MustCompile(`\$\{`+k+`(\W\W?)`).FindAllStringSubmatch(d.raw, -1) {
			if m[1] != ":?" {
				problems = append(problems, fmt.Sprintf("${%s%s…}: want ${%s:?hint}, %s is required", k, m[1], k, k))
			}
		}
	}
	return problems
}

// checkMounts checks that the host directories mounted into services exist
// and hold the scripts their entrypoints run.
func checkMounts(d *deployment) (problems []string) {
	for _, name := range d.fromEnv.ServiceNames() {
		s := d.service(name)
		mounts := map[string]string{} // container dir -> host dir
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				problems = append(problems, fmt.Sprintf("service %s mounts %s: %v", name, v.Source, err))
			}
			mounts[v.Target] = v.Source
		}
		for _, arg := range s.Entrypoint {
			for dir, host := range mounts {
				if rest, ok := strings.CutPrefix(arg, dir+"/"); ok {
					if _, err := os.Stat(filepath.Join(host, rest)); err != nil {
						problems = append(problems, fmt.Sprintf("service %s runs %s: %v", name, arg, err))
					}
				}
			}
		}
	}
	return problems
}

// dockerStage is one FROM line of the Dockerfile.
type dockerStage struct{ image, name string }

func parseDockerfile(t *testing.T, path string) (stages []dockerStage, text string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	args := map[string]string{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "ARG":
			if k, v, ok := strings.Cut(fields[1], "="); ok {
				args[k] = v
			}
		case "FROM":
			img := os.Expand(fields[1], func(k string) string { return args[k] })
			st := dockerStage{image: img}
			if len(fields) >= 4 && strings.EqualFold(fields[2], "AS") {
				st.name = fields[3]
			}
			stages = append(stages, st)
		}
	}
	return stages, string(raw)
}

// TestDockerfile checks the Dockerfile that the compose file's builds use:
// pinned base images and the stages they build as targets.
func TestDockerfile(t *testing.T) {
	d, err := loadDeployment(t, repoFiles(t, composeFile, webhooksFile))
	if err != nil {
		t.Fatal(err)
	}
	b := d.service("worker").Build
	if b == nil {
		t.Fatal("the worker service has no build")
	}
	path := b.Dockerfile
	if !filepath.IsAbs(path) {
		path = filepath.Join(b.Context, path)
	}
	stages, text := parseDockerfile(t, path)
	names := map[string]bool{}
	for _, st := range stages {
		if !names[st.image] { // an earlier stage is not an image to pin
			if _, err := pinnedTag(st.image); err != nil {
				t.Errorf("FROM %s: %v", st.image, err)
			}
		}
		names[st.name] = true
	}
	for _, name := range d.fromEnv.ServicesWithBuild() {
		if target := d.service(name).Build.Target; !names[target] {
			t.Errorf("Dockerfile has no stage %q (service %s builds it as its target)", target, name)
		}
	}
	for _, want := range []string{"go build", "./worker", "./cmd/demoapi", "CGO_ENABLED=0", "USER "} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile does not contain %q", want)
		}
	}
	if !slices.ContainsFunc(stages, func(s dockerStage) bool { return strings.HasPrefix(s.image, "golang:1.26") }) {
		t.Errorf("Dockerfile stages %v: want a golang:1.26.x build stage", stages)
	}
}

// receiverPath is the path of the worker's fixed-endpoint receiver on
// WEBHOOK_ADDR (webhookPath in host/webhooks.go).
const receiverPath = "/webhooks"

// checkWebhooks: alone, docker-compose.yml serves no receiver (and needs no
// signing secret); with the overlay, the provider posts its events to the
// worker's receiver, signed with the scheme and the secret the receiver
// verifies with, and the worker may call the provider back (the fallback
// poll).
func checkWebhooks(d *deployment) (problems []string) {
	w, p := d.service("worker"), d.service("provider")
	if !d.webhooks {
		if a := env(w, "WEBHOOK_ADDR"); a != "" {
			problems = append(problems, fmt.Sprintf("worker WEBHOOK_ADDR = %q without the webhooks overlay, want none", a))
		}
		return problems
	}
	addr := env(w, "WEBHOOK_ADDR")
	port, err := publishedListen(w, "WEBHOOK_ADDR")
	if err != nil {
		problems = append(problems, err.Error())
	}
	if want, got := "http://"+net.JoinHostPort("worker", port)+receiverPath, flagValue(p.Command, "--webhook-url"); got != want {
		problems = append(problems, fmt.Sprintf("provider --webhook-url = %q, want the worker's receiver %q (WEBHOOK_ADDR %q)", got, want, addr))
	}
	scheme, verifies := flagValue(p.Command, "--webhook-scheme"), env(w, "WEBHOOK_SCHEME")
	if scheme == "" || scheme != verifies {
		problems = append(problems, fmt.Sprintf("provider --webhook-scheme = %q, worker WEBHOOK_SCHEME = %q: want one scheme", scheme, verifies))
	}
	secretEnv := cmp.Or(flagValue(p.Command, "--webhook-secret-env"), "WEBHOOK_SECRET")
	if signs, verifies := env(p, secretEnv), env(w, "WEBHOOK_SECRETS"); signs != testEnv["WEBHOOK_SECRET"] || verifies != signs {
		problems = append(problems, fmt.Sprintf("provider signs with %s = %q, worker verifies with WEBHOOK_SECRETS = %q: want both WEBHOOK_SECRET's value %q",
			secretEnv, signs, verifies, testEnv["WEBHOOK_SECRET"]))
	}
	if o := d.origin("provider"); o == "" || !slices.Contains(allowedOrigins(w), o) {
		problems = append(problems, fmt.Sprintf("worker ALLOW_ORIGINS = %q, want the provider's origin %q among them (the fallback poll calls it)", env(w, "ALLOW_ORIGINS"), o))
	}
	return problems
}

// packages maps the Dockerfile's targets to the packages their binaries
// are built from.
var packages = map[string]string{"worker": "./worker", "demoapi": "./cmd/demoapi"}

// readBySDK are the variables the worker reads through the SDK's envconfig
// (go.temporal.io/sdk/contrib/envconfig) rather than by name in its source.
var readBySDK = []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE"}

// buildBinaries builds the worker and the reference API from the
// repository into a temporary directory and returns it.
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), packages["worker"], packages["demoapi"])
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// TestComposeCommands checks what the compose files run against the
// binaries they run: every flag of a command is one that binary's -h lists,
// every environment variable set for it is one its source reads, and the
// provider's command (the reference API with webhooks on) starts and
// serves, with each signature scheme WEBHOOK_SCHEME may name.
func TestComposeCommands(t *testing.T) {
	d, err := loadDeployment(t, repoFiles(t, composeFile, webhooksFile))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildBinaries(t)
	flagLine := regexp.MustCompile(`(?m)^\s+--?([a-z0-9][a-z0-9-]*)`)
	for _, name := range d.fromEnv.ServicesWithBuild() {
		s := d.service(name)
		target := s.Build.Target
		t.Run(name, func(t *testing.T) {
			if len(s.Command) == 0 || s.Command[0] != target {
				t.Fatalf("command %v: want the binary %s first", s.Command, target)
			}
			help, _ := exec.Command(filepath.Join(bin, target), "-h").CombinedOutput()
			known := map[string]bool{}
			for _, m := range flagLine.FindAllStringSubmatch(string(help), -1) {
				known[m[1]] = true
			}
			if len(known) < 5 {
				t.Fatalf("%s -h lists %d flags, want its flags:\n%s", target, len(known), help)
			}
			for _, a := range s.Command[1:] {
				f, ok := strings.CutPrefix(a, "--")
				if f, _, _ = strings.Cut(f, "="); ok && !known[f] {
					t.Errorf("command %v: %s has no flag --%s", s.Command, target, f)
				}
			}
			// The worker's -h names every variable it reads (its settings
			// are declared with them: host/settings.go); the reference
			// API's are read by name in its source.
			reads := func(key string) bool {
				return strings.Contains(string(help), "(env "+key+")") || regexp.MustCompile(`(?m)^\s+`+key+`$`).Match(help)
			}
			if target != "worker" {
				src := sourceText(t, filepath.Join(d.root, packages[target]), filepath.Join(d.root, "internal", "cliutil"))
				reads = func(key string) bool { return strings.Contains(src, `"`+key+`"`) }
			}
			for key := range s.Environment {
				if !slices.Contains(readBySDK, key) && !reads(key) {
					t.Errorf("environment %s: %s reads no such variable (%s)", key, target, packages[target])
				}
			}
		})
	}
	for _, scheme := range []string{"", "standard-webhooks", "stripe", "hmac"} {
		t.Run("provider starts/"+cmp.Or(scheme, "default"), func(t *testing.T) {
			vars := maps.Clone(testEnv)
			if scheme != "" {
				vars["WEBHOOK_SCHEME"] = scheme
			}
			// The form the overlay's hint names (Standard Webhooks' form).
			vars["WEBHOOK_SECRET"] = "whsec_" + base64.StdEncoding.EncodeToString([]byte("a 24-byte signing secret"))
			p, err := load(t, repoFiles(t, composeFile, webhooksFile), vars)
			if err != nil {
				t.Fatal(err)
			}
			provider, worker := p.Services["provider"], p.Services["worker"]
			if got, want := flagValue(provider.Command, "--webhook-scheme"), cmp.Or(scheme, "standard-webhooks"); got != want || env(worker, "WEBHOOK_SCHEME") != want {
				t.Errorf("provider --webhook-scheme %q, worker WEBHOOK_SCHEME %q, want both %q", got, env(worker, "WEBHOOK_SCHEME"), want)
			}
			serve(t, filepath.Join(bin, "demoapi"), provider)
		})
	}
}

// sourceText returns the text of the non-test Go files of dirs.
func sourceText(t *testing.T, dirs ...string) string {
	t.Helper()
	var b strings.Builder
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(raw)
		}
	}
	return b.String()
}

// serve runs binary with the service's command (its --addr moved to a free
// loopback port) and environment, and waits for GET /healthz to answer 200;
// a process that exits first fails the test with its output.
func serve(t *testing.T, binary string, s types.ServiceConfig) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := slices.Clone(s.Command[1:])
	i := slices.Index(args, "--addr")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("command %v: want --addr ADDR", s.Command)
	}
	args[i+1] = addr
	cmd := exec.Command(binary, args...)
	for k, v := range s.Environment {
		if v != nil {
			cmd.Env = append(cmd.Env, k+"="+*v)
		}
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(30 * time.Second) // a hang guard, not a measurement
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("%s %v exited (%v) before serving:\n%s", filepath.Base(binary), args, err, out.String())
		default:
		}
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %v: no 200 from /healthz within 30 s:\n%s", filepath.Base(binary), args, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
