package activities

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
)

// baseTransport is the worker's transport, which an origin's own
// transports clone; at begins its errors (see authorize), what names the
// fields that need it.
func baseTransport(cfg Config, at, what string) (*http.Transport, error) {
	base := http.DefaultTransport.(*http.Transport)
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		t, ok := cfg.HTTPClient.Transport.(*http.Transport)
		if !ok {
			return nil, fmt.Errorf("%s%s need Config.HTTPClient.Transport to be an *http.Transport (or nil), not %T: the worker clones it for the origin with the client certificate; set those options on an *http.Transport, or leave the files out and authenticate in your own Transport", at, what, cfg.HTTPClient.Transport)
		}
		if t.DialTLSContext != nil || t.DialTLS != nil {
			return nil, fmt.Errorf("%s%s need Config.HTTPClient.Transport without DialTLSContext or DialTLS: the worker dials TLS for the origin with the client certificate, which your dialer would replace; leave them unset, or leave the files out and present the certificate in your own dialer", at, what)
		}
		base = t
	}
	return base, nil
}

// certTransport is a clone of base that presents ts's client certificate
// (the setting cert names) and trusts its CA. A refusal of the certificate
// is reported as such even when it breaks a request being written (TLS
// 1.3) or comes without an alert; proxied requests keep the transport's
// own handshake with TLSClientConfig.
func certTransport(base *http.Transport, ts credential.TLSSource, cert string) *http.Transport {
	t := base.Clone()
	t.TLSClientConfig = ts.TLSConfig()
	t.DialTLSContext = credential.DialTLS(base.DialContext, t.TLSClientConfig, base.TLSHandshakeTimeout, cert)
	return t
}

// authenticate gives o its own client, whose transport (a clone of the
// worker's) presents c's client certificate and trusts c's CA; at begins
// its errors (see authorize).
func (o *origin) authenticate(cfg Config, at string, c Credential, red *redactor) error {
	base, err := baseTransport(cfg, at, "CertFile, KeyFile and CAFile")
	if err != nil {
		return err
	}
	ts, err := newTLS(c.names, "", c.CertFile, c.KeyFile, c.CAFile, red)
	if err != nil {
		return fmt.Errorf("%s%w", at, err)
	}
	if src, ok := ts.(credential.Source); ok {
		o.sources = append(o.sources, src)
	}
	o.client = &http.Client{Transport: certTransport(base, ts, c.names.Of("CertFile"))}
	return nil
}

// tokenClient is the client of c.OAuth2's token requests and what its
// errors say of its TLS settings: Credential.TokenTLS's when set, else
// the origin's (its client certificate and CA), else the worker's client
// (nothing said); at begins its errors (see authorize).
func (o *origin) tokenClient(cfg Config, at string, c Credential, red *redactor) (*http.Client, string, error) {
	n := c.names
	hc := http.Client{}
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	f := c.TokenTLS
	if f == nil {
		if o.client == nil {
			return cfg.HTTPClient, "", nil
		}
		hc.Transport = o.client.Transport
		return &hc, fmt.Sprintf("the token request used the origin's TLS settings (the client certificate of %s %s, %s): set %s for a token endpoint that needs others (its CA, its client certificate or none)", n.Of("CertFile"), c.CertFile, cas(n.Of("CAFile"), c.CAFile), n.Of("TokenTLS")), nil
	}
	base, err := baseTransport(cfg, at, "TokenTLS")
	if err != nil {
		return nil, "", err
	}
	var t *http.Transport
	cert := "no client certificate"
	if f.CertFile != "" || f.KeyFile != "" {
		ts, err := credential.NewTLSFor(n, "TokenTLS.", f.CertFile, f.KeyFile, f.CAFile, red)
		if err != nil {
			return nil, "", fmt.Errorf("%s%w", at, err)
		}
		if src, ok := ts.(credential.Source); ok {
			// Keeps the key redacted while it is used (see NewTLS).
			o.sources = append(o.sources, src)
		}
		t = certTransport(base, ts, n.Of("TokenTLS.CertFile"))
		cert = "the client certificate of " + n.Of("TokenTLS.CertFile") + " " + f.CertFile
	} else {
		roots, err := credential.CAPool(n.Of("TokenTLS.CAFile"), f.CAFile)
		if err != nil {
			return nil, "", fmt.Errorf("%s%w", at, err)
		}
		t = base.Clone()
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	}
	hc.Transport = t
	return &hc, fmt.Sprintf("the token request used %s (%s, %s)", n.Of("TokenTLS"), cert, cas(n.Of("TokenTLS.CAFile"), f.CAFile)), nil
}

// cas names the CAs trusted: those of field's file, or the system's.
func cas(field, file string) string {
	if file == "" {
		return "the system's CAs"
	}
	return "the CAs of " + field + " " + file
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

// credential names o's credential: where its loader read it, or
// Config.Credentials.
func (o *origin) credential() string {
	if o.names.Credential != "" {
		return o.names.Credential
	}
	return "Config.Credentials"
}

// tlsRefusal is err as a final credential error when the origin has a
// client certificate (Credential.CertFile) and refused it in the TLS
// handshake; nil otherwise.
func (o *origin) tlsRefusal(err error) error {
	if o.client == nil {
		return nil
	}
	if ce := credential.TLSRefusal(err, o.names.Of("CertFile")); ce != nil {
		return ce
	}
	return nil
}
