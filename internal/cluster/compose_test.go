package cluster_test

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/idemhttp/temporal-idempotent-http/internal/itest"
)

// composeFile is the part of docker-compose.yml these tests look at.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string           `yaml:"image"`
	Build       *composeBuild    `yaml:"build"`
	Command     []string         `yaml:"command"`
	Entrypoint  []string         `yaml:"entrypoint"`
	Environment composeEnv       `yaml:"environment"`
	Ports       []string         `yaml:"ports"`
	DependsOn   composeDependsOn `yaml:"depends_on"`
	Healthcheck *composeHealth   `yaml:"healthcheck"`
	Volumes     []string         `yaml:"volumes"`
	Restart     string           `yaml:"restart"`
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
	Target     string `yaml:"target"`
}

type composeHealth struct {
	Test []string `yaml:"test"`
}

// composeEnv accepts both forms of environment: a map, or a list of
// NAME=value strings.
type composeEnv map[string]string

func (e *composeEnv) UnmarshalYAML(n *yaml.Node) error {
	*e = composeEnv{}
	switch n.Kind {
	case yaml.MappingNode:
		var m map[string]string
		if err := n.Decode(&m); err != nil {
			return err
		}
		for k, v := range m {
			(*e)[k] = v
		}
	case yaml.SequenceNode:
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		for _, kv := range l {
			k, v, _ := strings.Cut(kv, "=")
			(*e)[k] = v
		}
	default:
		return fmt.Errorf("environment: want a map or a list, line %d", n.Line)
	}
	return nil
}

// composeDependsOn accepts both forms of depends_on: a list of names
// (condition service_started) or a map of name to {condition}.
type composeDependsOn map[string]string

func (d *composeDependsOn) UnmarshalYAML(n *yaml.Node) error {
	*d = composeDependsOn{}
	switch n.Kind {
	case yaml.SequenceNode:
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		for _, s := range l {
			(*d)[s] = "service_started"
		}
	case yaml.MappingNode:
		var m map[string]struct {
			Condition string `yaml:"condition"`
		}
		if err := n.Decode(&m); err != nil {
			return err
		}
		for k, v := range m {
			c := v.Condition
			if c == "" {
				c = "service_started"
			}
			(*d)[k] = c
		}
	default:
		return fmt.Errorf("depends_on: want a list or a map, line %d", n.Line)
	}
	return nil
}

func repoFile(t *testing.T, name string) string {
	t.Helper()
	root, err := itest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, name)
}

func loadCompose(t *testing.T) (composeFile, string) {
	t.Helper()
	path := repoFile(t, "docker-compose.yml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	var f composeFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	if len(f.Services) == 0 {
		t.Fatalf("%s defines no services", path)
	}
	return f, string(raw)
}

func TestComposeServices(t *testing.T) {
	f, _ := loadCompose(t)
	want := []string{
		"demoapi", "postgresql", "temporal", "temporal-admin-tools",
		"temporal-create-namespace", "temporal-ui", "worker",
	}
	var got []string
	for name := range f.Services {
		got = append(got, name)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("services = %v, want %v", got, want)
	}
	for _, name := range []string{"worker", "demoapi"} {
		s := f.Services[name]
		if s.Build == nil || s.Build.Target != name {
			t.Errorf("service %s: want build with target %q from the root Dockerfile, got %+v", name, name, s.Build)
		}
	}
}

// imageRef matches name:tag with an explicit tag (and optional digest).
var imageRef = regexp.MustCompile(`^([a-z0-9]+(?:[._/-][a-z0-9]+)*):([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})(@sha256:[0-9a-f]{64})?$`)

func TestComposeImagesPinned(t *testing.T) {
	f, _ := loadCompose(t)
	for name, s := range f.Services {
		if s.Image == "" {
			if s.Build == nil {
				t.Errorf("service %s has neither image nor build", name)
			}
			continue
		}
		m := imageRef.FindStringSubmatch(s.Image)
		switch {
		case m == nil:
			t.Errorf("service %s: image %q has no explicit tag", name, s.Image)
		case m[2] == "latest" || strings.HasPrefix(m[2], "latest-"):
			t.Errorf("service %s: image %q uses a moving latest tag", name, s.Image)
		}
	}
}

// TestComposeVersionsMatchTools keeps the images on the versions that
// tools/go.mod pins and the cluster tests run.
func TestComposeVersionsMatchTools(t *testing.T) {
	f, _ := loadCompose(t)
	versions := toolsModuleVersions(t)
	tag := func(service string) string {
		_, tg, _ := strings.Cut(f.Services[service].Image, ":")
		return tg
	}
	server := strings.TrimPrefix(versions["go.temporal.io/server"], "v")
	ui := strings.TrimPrefix(versions["github.com/temporalio/ui-server/v2"], "v")
	tests := []struct {
		service, got, want string
		prefix             bool
	}{
		{"temporal", tag("temporal"), server, false},
		{"temporal-admin-tools", tag("temporal-admin-tools"), server + "-", true},
		{"temporal-create-namespace", tag("temporal-create-namespace"), server + "-", true},
		{"temporal-ui", tag("temporal-ui"), ui, false},
	}
	for _, tt := range tests {
		ok := tt.got == tt.want
		if tt.prefix {
			ok = strings.HasPrefix(tt.got, tt.want)
		}
		if tt.want == "" || tt.want == "-" || !ok {
			t.Errorf("service %s: image tag %q, want %q (from tools/go.mod)%s", tt.service, tt.got, tt.want, map[bool]string{true: " as prefix"}[tt.prefix])
		}
	}
}

func toolsModuleVersions(t *testing.T) map[string]string {
	t.Helper()
	fh, err := os.Open(repoFile(t, "tools/go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	v := map[string]string{}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && strings.HasPrefix(fields[1], "v") {
			v[fields[0]] = fields[1]
		}
	}
	return v
}

// publishedPorts returns the container ports a service publishes, from
// short-syntax entries such as "8080:8080", "127.0.0.1:7233:7233" or
// "7233:7233/tcp".
func publishedPorts(s composeService) []string {
	var out []string
	for _, p := range s.Ports {
		p, _, _ = strings.Cut(p, "/")
		parts := strings.Split(p, ":")
		out = append(out, parts[len(parts)-1])
	}
	return out
}

func TestComposePublishedPorts(t *testing.T) {
	f, _ := loadCompose(t)
	tests := []struct{ service, port string }{
		{"temporal", "7233"},
		{"temporal-ui", "8080"},
	}
	for _, tt := range tests {
		if got := publishedPorts(f.Services[tt.service]); !slices.Contains(got, tt.port) {
			t.Errorf("service %s publishes %v, want container port %s", tt.service, got, tt.port)
		}
	}
	for name, s := range f.Services {
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s: port %q is not bound to 127.0.0.1 (the server runs without an authorizer)", name, p)
			}
		}
	}
}

func TestComposeWorker(t *testing.T) {
	f, _ := loadCompose(t)
	w := f.Services["worker"]

	host, port, err := net.SplitHostPort(w.Environment["TEMPORAL_ADDRESS"])
	if err != nil || host != "temporal" || port != "7233" {
		t.Errorf("worker TEMPORAL_ADDRESS = %q, want the temporal service's frontend temporal:7233", w.Environment["TEMPORAL_ADDRESS"])
	}
	if _, ok := f.Services[host]; !ok {
		t.Errorf("worker TEMPORAL_ADDRESS host %q is not a service", host)
	}
	if got := w.Environment["TEMPORAL_NAMESPACE"]; got != "default" {
		t.Errorf("worker TEMPORAL_NAMESPACE = %q, want default", got)
	}

	// ALLOW_ORIGINS names the demoapi service on the port it listens on.
	u, err := url.Parse(w.Environment["ALLOW_ORIGINS"])
	if err != nil || u.Scheme != "http" || u.Hostname() != "demoapi" {
		t.Errorf("worker ALLOW_ORIGINS = %q, want http://demoapi:PORT", w.Environment["ALLOW_ORIGINS"])
	}
	api := f.Services["demoapi"]
	addr := flagValue(api.Command, "--addr")
	if _, apiPort, _ := net.SplitHostPort(addr); apiPort == "" || apiPort != u.Port() {
		t.Errorf("demoapi listens on %q but the worker is allowed %q", addr, w.Environment["ALLOW_ORIGINS"])
	}
	if got := flagValue(w.Command, "--task-queue"); got != "idempotent-http" {
		t.Errorf("worker --task-queue = %q, want idempotent-http (command %v)", got, w.Command)
	}
	if len(w.Command) == 0 || w.Command[0] != "worker" || len(api.Command) == 0 || api.Command[0] != "demoapi" {
		t.Errorf("commands: worker %v, demoapi %v; want the binaries worker and demoapi", w.Command, api.Command)
	}
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

func TestComposeDependsOn(t *testing.T) {
	f, _ := loadCompose(t)
	tests := []struct{ service, dep, condition string }{
		{"temporal-admin-tools", "postgresql", "service_healthy"},
		{"temporal", "temporal-admin-tools", "service_completed_successfully"},
		{"temporal-create-namespace", "temporal", "service_healthy"},
		{"temporal-ui", "temporal", "service_healthy"},
		{"worker", "temporal", "service_healthy"},
		{"worker", "temporal-create-namespace", "service_completed_successfully"},
		{"worker", "demoapi", "service_healthy"},
	}
	for _, tt := range tests {
		if got := f.Services[tt.service].DependsOn[tt.dep]; got != tt.condition {
			t.Errorf("%s depends_on %s: condition %q, want %q", tt.service, tt.dep, got, tt.condition)
		}
	}
	// Whatever the list above says, every condition must be satisfiable.
	for name, s := range f.Services {
		for dep, cond := range s.DependsOn {
			d, ok := f.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s depends on unknown service %s", name, dep)
			case cond == "service_healthy" && (d.Healthcheck == nil || len(d.Healthcheck.Test) == 0):
				t.Errorf("%s waits for %s to be healthy, but %s has no healthcheck", name, dep, dep)
			case cond == "service_completed_successfully" && d.Restart != "" && d.Restart != "no":
				t.Errorf("%s waits for %s to complete, but %s has restart: %s", name, dep, dep, d.Restart)
			case cond != "service_healthy" && cond != "service_completed_successfully" && cond != "service_started":
				t.Errorf("%s depends_on %s: unknown condition %q", name, dep, cond)
			}
		}
	}
	for _, name := range []string{"postgresql", "temporal", "demoapi"} {
		if h := f.Services[name].Healthcheck; h == nil || len(h.Test) == 0 {
			t.Errorf("service %s has no healthcheck", name)
		}
	}
}

// substitution is a whole-value ${VAR} or ${VAR:-default}.
var substitution = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-(.*))?\}$`)

// secretName matches environment variable names that carry secrets.
var secretName = regexp.MustCompile(`(?i)(pass|pwd|token|secret|api_?key|credential|auth)`)

func TestComposeNoInlineSecrets(t *testing.T) {
	f, raw := loadCompose(t)
	// The development database password is the one default allowed.
	allowedDefault := map[string]string{"POSTGRES_PASSWORD": "temporal"}
	for name, s := range f.Services {
		for k, v := range s.Environment {
			if !secretName.MatchString(k) {
				continue
			}
			m := substitution.FindStringSubmatch(v)
			if m == nil {
				t.Errorf("service %s: %s has an inline value; use ${VAR} substitution", name, k)
				continue
			}
			if def := m[2]; def != "" && allowedDefault[m[1]] != def {
				t.Errorf("service %s: %s defaults to an inline secret via %s", name, k, v)
			}
		}
	}
	tests := []struct{ service, key, want string }{
		{"worker", "API_TOKEN", "${API_TOKEN:-}"},
		{"demoapi", "API_TOKEN", "${API_TOKEN:-}"},
		{"postgresql", "POSTGRES_PASSWORD", "${POSTGRES_PASSWORD:-temporal}"},
	}
	for _, tt := range tests {
		if got := f.Services[tt.service].Environment[tt.key]; got != tt.want {
			t.Errorf("service %s: %s = %q, want %q", tt.service, tt.key, got, tt.want)
		}
	}
	for _, bad := range []string{"Bearer ", "BEGIN PRIVATE KEY", "api_key="} {
		if strings.Contains(raw, bad) {
			t.Errorf("docker-compose.yml contains %q", bad)
		}
	}
}

func TestComposeMountedScriptsExist(t *testing.T) {
	f, _ := loadCompose(t)
	for name, s := range f.Services {
		mounts := map[string]string{} // container dir -> host dir
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
				continue
			}
			host := repoFile(t, parts[0])
			if _, err := os.Stat(host); err != nil {
				t.Errorf("service %s mounts %s: %v", name, parts[0], err)
			}
			mounts[parts[1]] = host
		}
		for _, arg := range s.Entrypoint {
			for dir, host := range mounts {
				if rest, ok := strings.CutPrefix(arg, dir+"/"); ok {
					if _, err := os.Stat(filepath.Join(host, rest)); err != nil {
						t.Errorf("service %s runs %s: %v", name, arg, err)
					}
				}
			}
		}
	}
}

// dockerStage is one FROM line of the Dockerfile.
type dockerStage struct{ image, name string }

func parseDockerfile(t *testing.T) (stages []dockerStage, text string) {
	t.Helper()
	raw, err := os.ReadFile(repoFile(t, "Dockerfile"))
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

func TestDockerfile(t *testing.T) {
	stages, text := parseDockerfile(t)
	names := map[string]bool{}
	for _, st := range stages {
		if !names[st.image] { // an earlier stage is not an image to pin
			m := imageRef.FindStringSubmatch(st.image)
			if m == nil || m[2] == "latest" {
				t.Errorf("FROM %s: want an image with an explicit, non-latest tag", st.image)
			}
		}
		names[st.name] = true
	}
	for _, target := range []string{"worker", "demoapi"} {
		if !names[target] {
			t.Errorf("Dockerfile has no stage %q (docker-compose.yml builds it as a target)", target)
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
