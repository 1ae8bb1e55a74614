package interop

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Introspect asks the OAuth 2.0 server at issuer (oidc-provider,
// node/oauth-server.js) whether tok is an active access token
// (RFC 7662), as the API's own client "payments-api" with apiSecret, and
// returns the client the token was issued to ("" when it is not active or
// the server could not say).
func Introspect(ctx context.Context, hc *http.Client, issuer, apiSecret, tok string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, issuer+"/token/introspection", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	if err != nil {
		return ""
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("payments-api", apiSecret)
	resp, err := hc.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var v struct {
		Active   bool   `json:"active"`
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&v); err != nil || resp.StatusCode != http.StatusOK || !v.Active {
		return ""
	}
	return v.ClientID
}
