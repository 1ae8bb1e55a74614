package activities

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"time"
)

// Check asks each origin's credential for what a request needs, as a
// worker starts, sending no request to any API: it fetches each OAuth 2.0
// token, resolves each AWS credential (and signs), reads each header file,
// and completes a TLS handshake with each origin that requires a client
// certificate. It returns the credentials that were refused or are
// misconfigured, each error naming its origin, joined: a worker should not
// take work with them (fix them first). unreachable, when not nil, gets
// each credential that could not be had for now, naming its origin (a
// token endpoint or an origin that is down): calls will wait for it
// (workflows.ErrTypeCredentialUnavailable, retried). A refused client
// answered from the token endpoint's memory is asked again at the next
// Check only after its hold (30 s), or once its client secret file
// changed.
func (a *Activities) Check(ctx context.Context, unreachable func(error)) error {
	var refused []error
	for _, name := range slices.Sorted(maps.Keys(a.origins)) {
		o := a.origins[name]
		if len(o.sources) == 0 && o.client == nil {
			continue
		}
		err := o.check(ctx, name)
		if err == nil {
			continue
		}
		ce := credentialError(err)
		shown := fmt.Errorf("origin %s: %s", name, a.redact.string(err.Error()))
		if ce == nil || ce.Retryable {
			if unreachable != nil {
				unreachable(shown)
			}
			continue
		}
		refused = append(refused, shown)
	}
	return errors.Join(refused...)
}

// checkHandshakeWait bounds how long Check waits, after a handshake, for
// an origin that refuses the client certificate to say so (TLS 1.3 ends
// the client's side of the handshake before the server has checked it).
const checkHandshakeWait = time.Second

// check applies o's sources to a request to origin that is not sent, then,
// when o requires a client certificate, completes a TLS handshake with
// origin and waits checkHandshakeWait for a refusal. Its error is a
// *credential.Error when the credential was refused or could not be had,
// another error when the origin could not be reached.
func (o *origin) check(ctx context.Context, origin string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, origin+"/", nil)
	if err != nil {
		return err
	}
	if err := o.apply(ctx, req, nil); err != nil {
		return err
	}
	if o.client == nil {
		return nil
	}
	t, ok := o.client.Transport.(*http.Transport)
	if !ok || t.DialTLSContext == nil {
		return nil
	}
	host, port := req.URL.Hostname(), req.URL.Port()
	if port == "" {
		port = "443"
	}
	conn, err := t.DialTLSContext(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		if ce := o.tlsRefusal(err); ce != nil {
			return ce
		}
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(checkHandshakeWait))
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil {
		if ce := o.tlsRefusal(err); ce != nil {
			return ce
		}
	}
	return nil
}
