package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
)

// authenticate gives o its own client, whose transport (a clone of the
// worker's) presents c's client certificate and trusts c's CA.
func (o *origin) authenticate(cfg Config, field string, c Credential, red *redactor) error {
	base := http.DefaultTransport.(*http.Transport)
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		t, ok := cfg.HTTPClient.Transport.(*http.Transport)
		if !ok {
			return fmt.Errorf("%s: CertFile, KeyFile and CAFile need Config.HTTPClient.Transport to be an *http.Transport (or nil), not %T: the worker clones it for the origin with the client certificate; set those options on an *http.Transport, or leave the files out and authenticate in your own Transport", field, cfg.HTTPClient.Transport)
		}
		if t.DialTLSContext != nil || t.DialTLS != nil {
			return fmt.Errorf("%s: CertFile, KeyFile and CAFile need Config.HTTPClient.Transport without DialTLSContext or DialTLS: the worker dials TLS for the origin with the client certificate, which your dialer would replace; leave them unset, or leave the files out and present the certificate in your own dialer", field)
		}
		base = t
	}
	ts, err := newTLS(c.CertFile, c.KeyFile, c.CAFile, red)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if src, ok := ts.(credential.Source); ok {
		o.sources = append(o.sources, src)
	}
	t := base.Clone()
	t.TLSClientConfig = ts.TLSConfig()
	// A refusal of the certificate is reported as such even when it
	// breaks a request being written (TLS 1.3); proxied requests keep
	// the transport's own handshake with TLSClientConfig.
	t.DialTLSContext = credential.DialTLS(base.DialContext, t.TLSClientConfig, base.TLSHandshakeTimeout)
	o.client = &http.Client{Transport: t}
	return nil
}

// apply authorizes req, about to be sent to o with body, with each of o's
// sources in order. Its error is a *credential.Error.
func (o *origin) apply(ctx context.Context, req *http.Request, body []byte) error {
	for _, src := range o.sources {
		if err := src.Apply(ctx, req, body); err != nil {
			var ce *credential.Error
			if !errors.As(err, &ce) {
				ce = &credential.Error{Scheme: "credential", Err: err}
			}
			return ce
		}
	}
	return nil
}

// refresh asks o's refreshers for a new secret after sent was answered
// 401 with a Bearer invalid_token challenge (send checks that, with
// invalidToken), and reports whether one may now be applied.
func (o *origin) refresh(ctx context.Context, sent *http.Request) bool {
	again := false
	for _, r := range o.refreshers {
		if r.Refresh(ctx, sent) {
			again = true
		}
	}
	return again
}

// invalidToken reports whether a WWW-Authenticate of h is a Bearer
// challenge with error="invalid_token".
func invalidToken(h http.Header) bool {
	for _, v := range h.Values("WWW-Authenticate") {
		l := strings.ToLower(v)
		i := strings.Index(l, "bearer")
		if i < 0 || (i > 0 && l[i-1] != ' ' && l[i-1] != ',') {
			continue
		}
		rest := strings.ReplaceAll(l[i+len("bearer"):], " ", "")
		if strings.Contains(rest, `error="invalid_token"`) || strings.Contains(rest, "error=invalid_token") {
			return true
		}
	}
	return false
}

// tlsRefusal is err as a final credential error when the origin has a
// client certificate (Credential.CertFile) and refused it in the TLS
// handshake; nil otherwise.
func (o *origin) tlsRefusal(err error) error {
	if o.client == nil {
		return nil
	}
	if ce := credential.TLSRefusal(err); ce != nil {
		return ce
	}
	return nil
}
