package activities

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxResponseBytes = 1 << 20 // 1 MiB
	DefaultMaxRetryAfter    = 5 * time.Minute
	// MaxResponseBytesLimit keeps a result (with JSON or base64 overhead)
	// below Temporal's default 2 MiB payload limit.
	MaxResponseBytesLimit = 3 << 19 // 1.5 MiB
	maxRedirects          = 5
	errorBodyBytes        = 1 << 10
)

// DefaultResultHeaders are the response headers copied into Response.Headers
// when Config.ResultHeaders is nil.
var DefaultResultHeaders = []string{"Content-Type", "Location", ReplayedHeader, "Request-Id", "X-Request-Id"}

// Config configures the activity on the worker. Its zero value is usable and
// safe: it allows no origin at all, so every request fails with
// ErrTypeOriginNotAllowed until AllowedOrigins names one.
type Config struct {
	// HTTPClient sends the requests. nil uses a client with a Transport cloned
	// from http.DefaultTransport. The activity never lets the client follow
	// redirects itself (it handles them as documented on Activities.Do); the
	// client's Timeout, if any, bounds each attempt together with the activity
	// context.
	HTTPClient *http.Client
	// AllowedOrigins lists the origins ("https://api.example.com",
	// "http://127.0.0.1:8081") the worker may call. Nothing else is called.
	AllowedOrigins []string
	// Credentials maps an allowed origin to headers (for example
	// Authorization: Bearer …) added to every request to that origin and to
	// no other. Their values are redacted from results, errors and logs.
	Credentials map[string]http.Header
	// MaxResponseBytes caps the response body kept (default 1 MiB, at most
	// MaxResponseBytesLimit). A larger 2xx body is a success with BodyOmitted set.
	MaxResponseBytes int64
	// MaxRetryAfter caps the wait a server can ask for with Retry-After
	// (default 5 minutes).
	MaxRetryAfter time.Duration
	// ResultHeaders names the response headers copied into Response.Headers
	// (default DefaultResultHeaders).
	ResultHeaders []string
	// UserAgent is sent as User-Agent (default "temporal-idempotent-http").
	UserAgent string
	// Now returns the current time, for Retry-After dates and deadlines
	// (default time.Now).
	Now func() time.Time
	// Uniform returns a uniform random number in [0, 1) for jitter
	// (default math/rand/v2's Float64).
	Uniform func() float64
}

// Origin returns the canonical origin of an absolute http or https URL:
// lower-case scheme and host, default port dropped, e.g. "https://api.example.com".
func Origin(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", err
	}
	return originOf(u)
}

func originOf(u *url.URL) (string, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		if scheme == "" {
			return "", fmt.Errorf("%q is not an absolute URL: write it as https://host/path", u.String())
		}
		return "", fmt.Errorf("unsupported scheme %q: only http and https are allowed", u.Scheme)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", fmt.Errorf("%q has no host", u.String())
	}
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host, nil
}

func parseOrigin(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return "", fmt.Errorf("allowed origin %q: %w", s, err)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("allowed origin %q must be scheme://host[:port] with no path, query or user info", s)
	}
	o, err := originOf(u)
	if err != nil {
		return "", fmt.Errorf("allowed origin %q: %w", s, err)
	}
	return o, nil
}
