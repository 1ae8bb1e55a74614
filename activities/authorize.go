package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
)

// The constructors of the sources that reach beyond the worker (a token
// endpoint, certificate files), replaced by tests (export_test.go).
var (
	newOAuth2 = credential.NewOAuth2
	newTLS    = credential.NewTLS
)

// sigV4Headers are the headers AWS Signature V4 sets.
var sigV4Headers = []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"}

// authorize builds the sources of c, the credential of origin o (named s in
// Config.Credentials), in the order Credential documents, and o's own
// transport when c authenticates the connection.
func (o *origin) authorize(cfg Config, s string, c Credential, red *redactor) error {
	field := fmt.Sprintf("Config.Credentials[%s]", s)
	o.set = map[string]bool{}
	add := func(src credential.Source, err error, part string, headers ...string) error {
		if err != nil {
			return fmt.Errorf("%s.%s%w", field, part, err)
		}
		o.sources = append(o.sources, src)
		if r, ok := src.(credential.Refresher); ok {
			o.refreshers = append(o.refreshers, r)
		}
		for _, h := range headers {
			o.set[http.CanonicalHeaderKey(h)] = true
		}
		return nil
	}
	if len(c.Header) > 0 {
		src, err := credential.NewStatic(c.Header, red)
		if err := add(src, err, "Header: ", slices.Collect(maps.Keys(c.Header))...); err != nil {
			return err
		}
	}
	if len(c.HeaderFiles) > 0 {
		logf := func(msg string, kv ...any) { slog.Warn(msg, append([]any{"origin", s}, kv...)...) }
		src, err := credential.NewHeaderFiles(c.HeaderFiles, red, logf)
		if err := add(src, err, "", slices.Collect(maps.Keys(c.HeaderFiles))...); err != nil {
			return err
		}
	}
	if c.OAuth2 != nil {
		// The token endpoint is reached with the worker's client.
		src, err := newOAuth2(c.OAuth2, cfg.HTTPClient, red)
		if err := add(src, err, "OAuth2: ", "Authorization"); err != nil {
			return err
		}
	}
	if c.SigV4 != nil {
		src, err := credential.NewSigV4(c.SigV4.Service, c.SigV4.Region, c.SigV4.Credentials, red)
		if err := add(src, err, "SigV4: ", sigV4Headers...); err != nil {
			return err
		}
	}
	if c.CertFile == "" && c.KeyFile == "" && c.CAFile == "" {
		return nil
	}
	return o.authenticate(cfg, field, c, red)
}

// authenticate gives o its own client, whose transport (a clone of the
// worker's) presents c's client certificate and trusts c's CA.
func (o *origin) authenticate(cfg Config, field string, c Credential, red *redactor) error {
	base := http.DefaultTransport.(*http.Transport)
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		t, ok := cfg.HTTPClient.Transport.(*http.Transport)
		if !ok {
			return fmt.Errorf("%s: CertFile, KeyFile and CAFile need Config.HTTPClient.Transport to be an *http.Transport (or nil), not %T: the worker clones it for the origin with the client certificate; set those options on an *http.Transport, or leave the files out and authenticate in your own Transport", field, cfg.HTTPClient.Transport)
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

// refresh asks o's refreshers for a new secret after the answer h (a 401)
// to sent, whose body was body, and reports whether one may now be
// applied: only when h's WWW-Authenticate says the Bearer token is
// invalid (RFC 6750 §3.1). When none was refreshed, the sources are
// applied again to a copy of sent: a source whose refresh failed (its
// token endpoint down, or the client refused) answers its error there,
// which is the attempt's (a *credential.Error), rather than the API's 401.
func (o *origin) refresh(ctx context.Context, sent *http.Request, body []byte, h http.Header) (bool, error) {
	if len(o.refreshers) == 0 || !invalidToken(h) {
		return false, nil
	}
	again := false
	for _, r := range o.refreshers {
		if r.Refresh(ctx, sent) {
			again = true
		}
	}
	if again {
		return true, nil
	}
	return false, o.apply(ctx, sent.Clone(ctx), body)
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
