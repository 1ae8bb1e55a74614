// Package httpurl holds the rules of the URLs a call may name: an
// absolute http or https URL without user info, its canonical origin (the
// key of the worker's allow list and of its per-origin settings), and the
// task queue of an origin's requests.
package httpurl

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
)

// Parse parses an absolute http or https URL and returns it, without its
// fragment, with its origin. It refuses user info (a password would be
// stored in Temporal's history) and hosts that are not ASCII (write them in
// their punycode form, so the origin compared with the worker's allow list is
// the host that is dialled).
func Parse(raw string) (*url.URL, string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, "", fmt.Errorf("invalid URL: %v", redact.Err(err))
	}
	if u.User != nil {
		return nil, "", fmt.Errorf("URL %s carries user info: a password in the URL would be stored in Temporal's history; put credentials on the worker instead", redact.URL(u.String()))
	}
	o, err := originOf(u)
	if err != nil {
		return nil, "", err
	}
	u.Fragment, u.RawFragment = "", ""
	return u, o, nil
}

// Origin returns the canonical origin of an absolute http or https URL:
// lower-case scheme and host, default port dropped, e.g. "https://api.example.com".
func Origin(raw string) (string, error) {
	_, o, err := Parse(raw)
	return o, err
}

// ParseOrigin parses an allowed origin, "scheme://host[:port]".
func ParseOrigin(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return "", fmt.Errorf("origin %q: %v", s, err)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("origin %q must be scheme://host[:port] with no path, query or user info", redact.URL(s))
	}
	o, err := originOf(u)
	if err != nil {
		return "", fmt.Errorf("origin %q: %w", s, err)
	}
	return o, nil
}

func originOf(u *url.URL) (string, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		if scheme == "" {
			return "", fmt.Errorf("%q is not an absolute URL: write it as https://host/path", redact.URL(u.String()))
		}
		return "", fmt.Errorf("unsupported scheme %q: only http and https are allowed", u.Scheme)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", fmt.Errorf("%q has no host", redact.URL(u.String()))
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= utf8.RuneSelf {
			return "", fmt.Errorf("host %q is not ASCII: write it in its punycode form (xn--…), the form that is dialled and compared with the allowed origins", host)
		}
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

// OriginQueue is the activity task queue of origin's requests when they
// run on a queue of their own (workflows.Request.OriginQueue): base, the
// task queue they would run on otherwise, then "@" and the canonical
// origin, e.g. "idempotent-http@https://api.example.com". The workflow
// side and the worker both name it here.
func OriginQueue(base, origin string) string {
	return base + "@" + origin
}
