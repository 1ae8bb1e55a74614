package credential

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemhttp/temporal-idempotent-http/internal/httpheader"
)

// MinSecretBytes is the shortest secret a Source accepts: a shorter one
// cannot be redacted without rewriting unrelated text.
const MinSecretBytes = 8

// static sends fixed headers (Credential.Header).
type static struct {
	h     http.Header
	parts []string
	r     Redactor
}

// NewStatic returns the Source that sets the headers h (names
// canonicalized, values trimmed) on every request, and tells r their
// secrets (SecretParts). It fails on an invalid header name or a value too
// short to redact, naming Header[NAME] as n says.
func NewStatic(h http.Header, r Redactor, n Names) (Source, error) {
	s := &static{h: http.Header{}, r: r}
	for name, vs := range h {
		canon := http.CanonicalHeaderKey(name)
		field := n.head("Header[" + canon + "]")
		if !httpheader.ValidName(canon) {
			return nil, fmt.Errorf("%s: invalid header name %q", field, name)
		}
		for _, v := range vs {
			v = strings.TrimSpace(v)
			parts, err := SecretParts(canon, v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", field, err)
			}
			s.h[canon] = append(s.h[canon], v)
			s.parts = append(s.parts, parts...)
		}
	}
	for _, p := range s.parts {
		r.Add(p)
	}
	return s, nil
}

// Apply sets the headers. Their values are shared by every request: the
// HTTP client only reads them. Each secret is told to the redactor again
// (a lookup for one it knows), so that it stays redacted as long as it is
// sent.
func (s *static) Apply(_ context.Context, req *http.Request, _ []byte) error {
	for _, p := range s.parts {
		s.r.Add(p)
	}
	for k, vs := range s.h {
		req.Header[k] = vs
	}
	return nil
}

// SecretParts returns the pieces of the value v of header name that must
// never be shown: the value itself or, for an Authorization value with a
// scheme ("Bearer tok", "Basic dXNlcjpwYXNz"), the part after the scheme
// and, for Basic credentials, the decoded password (or, when the password
// is empty, as in Stripe's form, the user name, which then is the
// secret). The scheme is no secret: redacting every "Bearer " would
// rewrite unrelated text, and a user name beside a password is an account
// name. Each piece must be at least MinSecretBytes long: a shorter one
// could not be redacted without rewriting unrelated text, so the error
// names it. A value with a control character (other than horizontal tab)
// is refused too: no request could carry it.
func SecretParts(name, v string) ([]string, error) {
	short := func(what string, n int) error {
		return fmt.Errorf("%s is %d bytes long, shorter than %d bytes: a shorter one cannot be redacted from results and logs without rewriting unrelated text; use a longer secret; is the token missing?", what, n, MinSecretBytes)
	}
	if err := httpheader.CheckValue(name, v); err != nil {
		// net/http would refuse every request that carries it.
		return nil, err
	}
	isAuth := name == "Authorization" || name == "Proxy-Authorization"
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !isAuth || !isToken(scheme) {
		if len(v) < MinSecretBytes {
			return nil, short("the "+name+" value", len(v))
		}
		return []string{v}, nil
	}
	tok = strings.TrimSpace(tok)
	if len(tok) < MinSecretBytes {
		return nil, short("the "+name+" value's token, after the scheme "+scheme+",", len(tok))
	}
	parts := []string{tok}
	if strings.EqualFold(scheme, "Basic") {
		// Unpadded base64 too: lenient servers accept it.
		dec, err := base64.StdEncoding.DecodeString(tok)
		if err != nil {
			dec, err = base64.RawStdEncoding.DecodeString(tok)
		}
		if err == nil {
			if user, pass, ok := strings.Cut(string(dec), ":"); ok {
				secret, what := pass, "the password of its Basic credentials"
				if pass == "" {
					secret, what = user, "the user name of its Basic credentials (the secret, since the password is empty)"
				}
				if len(secret) < MinSecretBytes {
					return nil, short(what, len(secret))
				}
				parts = append(parts, secret)
			}
		}
	}
	return parts, nil
}

// isToken reports whether s looks like an auth scheme name.
func isToken(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	return httpheader.ValidName(s)
}
