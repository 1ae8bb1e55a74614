package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// ToxiproxyTool is Toxiproxy's server, pinned as a Go tool in tools/go.mod
// (github.com/Shopify/toxiproxy/v2), built as toxiproxy-server.
var ToxiproxyTool = itest.Tool{Binary: "toxiproxy-server", Package: "github.com/Shopify/toxiproxy/v2/cmd/server"}

// BuildToxiproxy builds toxiproxy-server from the tools module into binDir
// (seconds with a warm Go build cache) and returns its path.
func BuildToxiproxy(ctx context.Context, binDir string, logf func(string, ...any)) (string, error) {
	if err := itest.BuildTools(ctx, binDir, []itest.Tool{ToxiproxyTool}, logf); err != nil {
		return "", err
	}
	return filepath.Join(binDir, ToxiproxyTool.Binary), nil
}

// proxy is a toxiproxy-server process with one proxy, "api", in front of
// the API.
type proxy struct {
	proc *itest.Process
	api  *toxiproxy.Proxy
	// URL is the API's base URL through the proxy.
	URL string
}

// startProxy starts bin (toxiproxy-server, its toxics seeded with seed) on
// a free loopback port, logging to workDir/toxiproxy.log, and creates the
// proxy "api" from a free loopback port to upstream (host:port).
func startProxy(ctx context.Context, bin, workDir, upstream string, seed uint64) (_ *proxy, err error) {
	ports, err := itest.FreePorts(2)
	if err != nil {
		return nil, err
	}
	api := itest.HostPort(ports[0])
	p, err := itest.Start(itest.Spec{
		Name: "toxiproxy-server",
		Path: bin,
		Args: []string{"-host", "127.0.0.1", "-port", strconv.Itoa(ports[0]), "-seed", strconv.FormatUint(seed, 10)},
		// Toxiproxy logs every connection at info.
		Env:     []string{"LOG_LEVEL=warn"},
		LogPath: filepath.Join(workDir, "toxiproxy.log"),
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = p.Stop(5 * time.Second)
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := itest.WaitHTTP(wctx, "http://"+api+"/version"); err != nil {
		return nil, fmt.Errorf("chaos: toxiproxy-server not up on %s: %w; its output:\n%s", api, err, p.Tail(4<<10))
	}
	listen := itest.HostPort(ports[1])
	px, err := toxiproxy.NewClient(api).CreateProxy("api", listen, upstream)
	if err != nil {
		return nil, fmt.Errorf("chaos: creating the proxy %s -> %s: %w", listen, upstream, err)
	}
	return &proxy{proc: p, api: px, URL: "http://" + listen}, nil
}

// add adds t to the proxy.
func (p *proxy) add(t *Toxic) error {
	attrs := toxiproxy.Attributes{}
	for k, v := range t.Attributes {
		attrs[k] = v
	}
	_, err := p.api.AddToxic(t.Name, t.Type, t.Stream, t.Toxicity, attrs)
	return err
}

// remove removes the toxic named name.
func (p *proxy) remove(name string) error { return p.api.RemoveToxic(name) }

// setEnabled enables or disables the proxy: disabled, it closes its
// listener and every connection through it.
func (p *proxy) setEnabled(on bool) error {
	if on {
		return p.api.Enable()
	}
	return p.api.Disable()
}

// stop stops toxiproxy-server.
func (p *proxy) stop() error { return p.proc.Stop(5 * time.Second) }
