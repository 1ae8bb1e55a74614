package activities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/propagation"

	"github.com/idemhttp/temporal-idempotent-http/internal/request"
)

// prepared is a validated request, ready to send.
type prepared struct {
	req    request.Input
	method string
	url    *url.URL
	origin string
	o      *origin
}

// answer is what one attempt got back: a response (after same-origin
// 307/308 redirects) with the start of its body, or the error that ended it.
type answer struct {
	status int
	header http.Header
	// body holds at most MaxResponseBytes+1 bytes of the body.
	body []byte
	// size and sha256 cover the whole body (up to maxHashedBody) of a 2xx.
	size      int64
	sha256    string
	truncated bool
	// cut is set when the body of a 2xx ended early (the connection broke):
	// the operation succeeded, its body is incomplete.
	cut error
	// from is the URL that answered.
	from *url.URL
	err  error
}

// send sends p, following 307/308 redirects to the same origin (without user
// info) with the same method, body and key, and the trace context of ctx.
func (a *Activities) send(ctx context.Context, p *prepared) answer {
	target := p.url
	for hop := 0; ; hop++ {
		hr, err := http.NewRequestWithContext(ctx, p.method, target.String(), nil)
		if err != nil {
			return answer{from: target, err: err}
		}
		if len(p.req.Body) > 0 {
			body := p.req.Body
			hr.Body = io.NopCloser(bytes.NewReader(body))
			hr.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
			hr.ContentLength = int64(len(body))
			hr.Header.Set("Content-Type", "application/json")
		}
		for k, v := range p.req.Headers {
			hr.Header[http.CanonicalHeaderKey(k)] = []string{v}
		}
		for k, vs := range p.o.creds {
			hr.Header[k] = vs
		}
		hr.Header.Set(p.o.conv.KeyHeader, p.o.conv.keyValue(p.req.IdempotencyKey))
		hr.Header.Set("User-Agent", a.cfg.UserAgent)
		hr.Header.Set("Accept", "application/json")
		a.inject(ctx, propagation.HeaderCarrier(hr.Header))
		resp, err := a.client.Do(hr)
		if err != nil {
			return answer{from: target, err: err}
		}
		ans := a.read(resp)
		ans.from = target
		if ans.err != nil {
			return ans
		}
		loc := resp.Header.Get("Location")
		if (ans.status == http.StatusTemporaryRedirect || ans.status == http.StatusPermanentRedirect) && hop < maxRedirects && loc != "" {
			if next, err := target.Parse(loc); err == nil && next.User == nil {
				if _, o, err := request.ParseURL(next.String()); err == nil && o == p.origin {
					target = next
					continue
				}
			}
		}
		return ans
	}
}

// read reads the response body: up to MaxResponseBytes+1 bytes are kept; the
// body of a 2xx is read on (up to maxHashedBody bytes) to measure and hash it.
func (a *Activities) read(resp *http.Response) answer {
	defer resp.Body.Close()
	ans := answer{status: resp.StatusCode, header: resp.Header}
	h := sha256.New()
	data, err := io.ReadAll(io.TeeReader(io.LimitReader(resp.Body, a.cfg.MaxResponseBytes+1), h))
	ans.body, ans.size = data, int64(len(data))
	if err == nil && resp.StatusCode >= 200 && resp.StatusCode <= 299 && ans.size > a.cfg.MaxResponseBytes {
		var n int64
		n, err = io.Copy(h, io.LimitReader(resp.Body, maxHashedBody-ans.size))
		ans.size += n
		if err == nil && ans.size >= maxHashedBody {
			var one [1]byte
			if m, _ := resp.Body.Read(one[:]); m > 0 {
				ans.truncated = true
			}
		}
	}
	if err != nil {
		if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
			// A 2xx is a success whatever happens to its body afterwards.
			ans.cut = err
		} else {
			ans.err = fmt.Errorf("reading the %d response body: %w", resp.StatusCode, err)
		}
	}
	ans.sha256 = hex.EncodeToString(h.Sum(nil))
	return ans
}

// lowerBody returns the start of the body, lower-cased, for signal matching.
func (ans *answer) lowerBody() string {
	b := ans.body
	if len(b) > signalBodyPrefix {
		b = b[:signalBodyPrefix]
	}
	return strings.ToLower(string(b))
}
