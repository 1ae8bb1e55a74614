package activities

import (
	"net/http"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
)

type (
	clientcredentialsConfig = clientcredentials.Config
	httpClient              = http.Client
)

// SetNewOAuth2 makes New build Credential.OAuth2's source with f, until
// the returned function restores it.
func SetNewOAuth2(f func(r credential.Redactor) credential.Source) func() {
	old := newOAuth2
	newOAuth2 = func(_ *clientcredentialsConfig, _ *httpClient, r credential.Redactor, _ credential.OAuth2Options) (credential.Source, error) {
		return f(r), nil
	}
	return func() { newOAuth2 = old }
}

// SetNewTLS makes New build the client certificate's source with f, until
// the returned function restores it.
func SetNewTLS(f func() credential.TLSSource) func() {
	old := newTLS
	newTLS = func(_ credential.Names, _, _, _, _ string, _ credential.Redactor) (credential.TLSSource, error) {
		return f(), nil
	}
	return func() { newTLS = old }
}

// Redactor returns a's redactor, and a function that redacts a string with it.
func Redactor(a *Activities) (credential.Redactor, func(string) string) {
	return a.redact, a.redact.string
}
