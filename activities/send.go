package activities

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
	"github.com/idemhttp/temporal-idempotent-http/internal/httpheader"
	"github.com/idemhttp/temporal-idempotent-http/internal/httpurl"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
	"github.com/idemhttp/temporal-idempotent-http/internal/reconcile"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/internal/rules"
)

// prepared is a validated request, ready to send.
type prepared struct {
	req    input.Input
	method string
	url    *url.URL
	// raw is url as a string, as sent.
	raw string
	// shown is url as messages, details, spans and logs may show it: with
	// its query values redacted (redact.URL, the one rule).
	shown  string
	origin string
	o      *origin
	// inject: the attempt's trace context goes into the request's
	// headers (set by requestActivity: false only when the default propagator, W3C
	// Trace Context, would write nothing, the span context being invalid).
	inject bool
	// noKey: the request carries no idempotency key (a poll's GET, a
	// lookup).
	noKey bool
	// place is where the key goes (prepared.placeKey); body is the body
	// sent: the request's, with the key when it goes there.
	place keyplace.Place
	body  []byte
	// rec is the call's Reconcile, else its origin's.
	rec reconcile.Reconcile
	// prev is requestActivity's progress of the attempts before this one, which admit
	// updates (asking.prev points here).
	prev progress
	// waited is how long admit waited inside this attempt, which the
	// attempt's other waits inside it count with (waitInStart).
	waited time.Duration
}

// parsedURL is a request URL as prepare needs it: parsed
// (httpurl.Parse), with its origin, as sent (raw) and as shown
// (redact.URL). It is never modified.
type parsedURL struct {
	url                *url.URL
	origin, raw, shown string
}

// urlCache keeps the request URLs parsed lately: the attempts of one
// operation, and the operations of one endpoint, send the same URL. It
// forgets them all when it holds maxCachedURLs.
type urlCache struct {
	mu   sync.RWMutex
	urls map[string]*parsedURL
}

const maxCachedURLs = 512

// parse returns s parsed, from the cache when it was parsed lately.
func (c *urlCache) parse(s string) (*parsedURL, error) {
	c.mu.RLock()
	pu, ok := c.urls[s]
	c.mu.RUnlock()
	if ok {
		return pu, nil
	}
	u, o, err := httpurl.Parse(s)
	if err != nil {
		return nil, err
	}
	raw := u.String()
	pu = &parsedURL{url: u, origin: o, raw: raw, shown: redact.URL(raw)}
	if len(s) > maxCachedURLBytes {
		return pu, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.urls == nil || len(c.urls) >= maxCachedURLs {
		c.urls = make(map[string]*parsedURL)
	}
	c.urls[s] = pu
	return pu, nil
}

// maxCachedURLBytes bounds the URLs kept: a longer one is parsed anew.
const maxCachedURLBytes = 2 << 10

// answer is what one attempt got back: a response (after same-origin
// 307/308 redirects) with the start of its body, or the error that ended it.
type answer struct {
	status int
	header http.Header
	// body holds at most MaxResponseBytes+1 bytes of the body.
	body []byte
	// size covers the whole body (up to maxHashedBody) of a 2xx; so does
	// sha256 when it is too large to keep (else bodySHA256 computes it).
	size      int64
	sha256    string
	truncated bool
	// encoded names the content coding of a body that could not be
	// decoded (body then holds the encoded bytes, which redaction cannot
	// see into): such a body is never shown.
	encoded string
	// from is the URL that answered.
	from *url.URL
	err  error
}

// send sends p, following 307/308 redirects to the same origin (without user
// info) with the same method, body and key, and the trace context of ctx,
// each request authorized by the origin's credential sources. A source's
// error ends it, nothing more sent: its answer's err is the
// *credential.Error. A 401 that says the Bearer token is invalid is
// answered once per call: the origin's refreshers get a new secret and the
// same request is sent again; if none can be had, the source's error ends
// it.
func (a *Activities) send(ctx context.Context, p *prepared) answer {
	target := p.url
	client := a.client
	if p.o.client != nil {
		client = p.o.client
	}
	refreshed := false
	for hop := 0; ; hop++ {
		raw := p.raw
		if hop > 0 {
			raw = target.String()
		}
		hr, err := http.NewRequestWithContext(ctx, p.method, raw, nil)
		if err != nil {
			return answer{from: target, err: err}
		}
		a.setHeaders(ctx, hr, p)
		// Last, so that a signature covers every header set above.
		if err := p.o.apply(ctx, hr, p.body); err != nil {
			return answer{from: target, err: err}
		}
		resp, err := client.Do(hr)
		if err != nil {
			if ce := p.o.tlsRefusal(err); ce != nil {
				// The origin refused the client certificate in the
				// handshake: no handler read the request.
				return answer{from: target, err: ce}
			}
			if ne := p.o.unsendable(hr, err); ne != nil {
				// net/http refused to send it: nothing left the worker.
				return answer{from: target, err: ne}
			}
			return answer{from: target, err: err}
		}
		ans := a.read(resp)
		ans.from = target
		if ans.err != nil {
			return ans
		}
		if ans.status == http.StatusUnauthorized && !refreshed && len(p.o.refreshers) > 0 && invalidToken(ans.header) {
			refreshed = true
			if p.o.refresh(ctx, hr) {
				// The same request again, with the new secret.
				hop--
				continue
			}
			// No new secret: when the source cannot give one (its token
			// endpoint is down or refuses), that is the error, retryable
			// as it says, not the API's final 401 to the stale one.
			if err := p.o.apply(ctx, hr.Clone(ctx), p.body); err != nil {
				return answer{from: target, err: err}
			}
		}
		loc := resp.Header.Get("Location")
		if (ans.status == http.StatusTemporaryRedirect || ans.status == http.StatusPermanentRedirect) && hop < maxRedirects && loc != "" {
			if next, err := target.Parse(loc); err == nil && next.User == nil {
				if p.place.In == keyplace.Query && !p.noKey {
					// The key goes with the request, wherever it is sent.
					if next, err = keyplace.InsertQuery(next, p.place.Name, p.req.IdempotencyKey); err != nil {
						return ans
					}
				}
				if _, o, err := httpurl.Parse(next.String()); err == nil && o == p.origin {
					target = next
					continue
				}
			}
		}
		return ans
	}
}

// notSentError is a request net/http refused to send (send found why):
// nothing left the worker, so the API did nothing.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// unsendable says why net/http refused to send hr, when the cause is one
// of its headers (a name that is no token, a value with a control
// character): a *credential.Error when o's credential set that header (a
// token endpoint's token, say), else a *notSentError; nil when every
// header is valid, or when the client's error (failed) is not net/http's
// refusal of a header: a Config.HTTPClient's transport may send a request
// net/http would refuse (it dropped or rewrote that header), and a
// request that left is never one that "sent nothing". It runs only after
// the client failed, so a valid request pays nothing for it. The error
// names the header, never its value.
func (o *origin) unsendable(hr *http.Request, failed error) error {
	if !headerRefused(failed) {
		return nil
	}
	for name, vs := range hr.Header {
		err := error(nil)
		if !httpheader.ValidName(name) {
			err = fmt.Errorf("header name %q is not a valid HTTP token", name)
		}
		for _, v := range vs {
			if err == nil {
				err = httpheader.CheckValue(name, v)
			}
		}
		switch {
		case err == nil:
		case o.set[name]:
			return &credential.Error{Scheme: "header", Err: fmt.Errorf("the origin's credential set %w: no request can carry it; fix the worker's credential for the origin (%s)", err, o.credential())}
		default:
			return &notSentError{fmt.Errorf("net/http refused to send the request: %w", err)}
		}
	}
	return nil
}

// headerRefused reports whether err is net/http's refusal, before
// sending, of a request header: "net/http: invalid header field name …"
// or "… value for …" (HTTP/1.1, checked first for every request), or
// "invalid HTTP header …" (its HTTP/2 transport). Only a refusal in these
// words, whose wording Go keeps, says that nothing left.
func headerRefused(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "net/http: invalid header field ") || strings.Contains(msg, "invalid HTTP header name ") ||
		strings.Contains(msg, "invalid HTTP header value ")
}

// unsent reports whether the attempt sent nothing: the origin's
// credential could not be applied, or net/http refused the request
// before sending it. Such an attempt is no request for the retry budget,
// the breaker or the shared rate, and leaves the outcome as it was.
func (ans *answer) unsent() bool {
	if ans.err == nil {
		return false
	}
	if credentialError(ans.err) != nil {
		return true
	}
	var ns *notSentError
	return errors.As(ans.err, &ns)
}

// setHeaders writes p's body and headers into hr, a request of send: the
// body, the worker's defaults, the request's own headers, the key and the
// trace context; the origin's credential comes after them (see send).
func (a *Activities) setHeaders(ctx context.Context, hr *http.Request, p *prepared) {
	// The worker's own values are shared by every request: the HTTP
	// client and transports only read a request's header (a
	// RoundTripper may not modify its request), as with credentials.
	h := hr.Header
	if len(p.body) > 0 {
		body := p.body
		// A NopCloser of a bytes.Reader, which net/http knows to be in
		// memory: it writes the headers and the body in one packet
		// (any other type costs a write of its own to the headers).
		hr.Body = io.NopCloser(bytes.NewReader(body))
		if p.rec.IsZero() {
			// GetBody lets net/http's transport send the request again
			// by itself when a reused connection breaks, which it does
			// for a request with an Idempotency-Key header. A call that
			// reconciles (Reconcile) must see every unknown outcome: its
			// requests are never sent again behind its back.
			hr.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
		hr.ContentLength = int64(len(body))
		h["Content-Type"] = jsonValue
	}
	// Defaults first: a workflow's Accept or User-Agent is sent as set.
	// What the worker sets after them, the request may not set
	// (rules.Headers and prepare refuse it).
	h["User-Agent"] = a.userAgent
	h["Accept"] = jsonValue
	// Asked for here, the codings are left to read's decoder by the
	// HTTP client, which would otherwise undo one gzip layer and drop
	// Content-Encoding, hiding a second one from redaction.
	h["Accept-Encoding"] = codingsValue
	for k, v := range p.req.Headers {
		k = http.CanonicalHeaderKey(k)
		if !p.rec.IsZero() && (k == "Idempotency-Key" || k == "X-Idempotency-Key") {
			// The mark net/http re-sends by (see below).
			k = strings.ToLower(k)
		}
		h[k] = []string{v}
	}
	if !p.noKey && p.place.In == keyplace.Header {
		name := p.place.Name
		if !p.rec.IsZero() {
			// net/http's transport sends a request with an
			// Idempotency-Key header again by itself when its reused
			// connection breaks, body or none (see GetBody above); it
			// looks for the canonical name only. Header names are
			// case-insensitive: the lower-case name carries the key
			// without that mark.
			name = strings.ToLower(name)
		}
		h[name] = []string{p.o.conv.keyValue(p.req.IdempotencyKey)}
	}
	if p.inject {
		a.inject(ctx, propagation.HeaderCarrier(hr.Header))
	}
}

// Header values the worker sends with every request (see send).
var (
	jsonValue    = []string{"application/json"}
	codingsValue = []string{"gzip, deflate"}
)

// read reads the response body, decoded when the server sent it with a
// content coding that the client did not decode (see decoder): up to
// MaxResponseBytes+1 bytes are kept; the body of a 2xx is read on (up to
// maxHashedBody bytes) to measure and hash it. A body that breaks off is
// an error, for a 2xx too: its status is kept (see decide).
func (a *Activities) read(resp *http.Response) answer {
	defer resp.Body.Close()
	ans := answer{status: resp.StatusCode, header: resp.Header}
	// Without a content coding the body is read as it comes: there is no
	// decoder whose errors must be told from the connection's.
	var wire *wireReader
	body := io.Reader(resp.Body)
	if len(resp.Header["Content-Encoding"]) > 0 {
		wire = &wireReader{r: resp.Body}
		body, ans.encoded = decoder(resp.Header, wire)
		if ans.encoded == "" {
			body = &toMessageEnd{r: body, wire: wire}
		}
	}
	data, err := readAtMost(body, a.cfg.MaxResponseBytes+1)
	ans.body, ans.size = data, int64(len(data))
	if err == nil && resp.StatusCode >= 200 && resp.StatusCode <= 299 && ans.size > a.cfg.MaxResponseBytes {
		// Too large to keep: the rest is only measured and hashed.
		h := sha256.New()
		h.Write(data)
		var n int64
		n, err = io.Copy(h, io.LimitReader(body, maxHashedBody-ans.size))
		ans.size += n
		if err == nil && ans.size >= maxHashedBody {
			var one [1]byte
			if m, _ := body.Read(one[:]); m > 0 {
				ans.truncated = true
			}
		}
		ans.sha256 = hex.EncodeToString(h.Sum(nil))
	}
	switch {
	case err != nil && wire != nil && wire.err == nil && ans.encoded == "" && body != io.Reader(wire) && !errors.Is(err, io.ErrUnexpectedEOF):
		// The connection delivered the whole body, but its coding is
		// broken (a bad header or checksum; a stream that stops early is
		// a body cut short, whatever the connection said): it is kept as
		// received, encoded, and never shown.
		ans.encoded = codingNames(contentCodings(resp.Header)) + " (broken)"
	case err != nil:
		ans.err = fmt.Errorf("reading the %d response body: %w", resp.StatusCode, err)
	}
	return ans
}

// readBufs are read's buffers: a body is read into one, then copied out
// at its size. Buffers that grew beyond maxPooledRead are let go.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

const maxPooledRead = 64 << 10

// readAtMost reads r to its end or to limit bytes, whichever comes first,
// as io.ReadAll(io.LimitReader(r, limit)) does: what was read comes with
// the error that ended reading (nil at the end or at limit).
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	bp := readBufs.Get().(*[]byte)
	b := (*bp)[:0]
	var err error
	for int64(len(b)) < limit {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		end := cap(b)
		if room := limit - int64(len(b)); room < int64(end-len(b)) {
			end = len(b) + int(room)
		}
		var n int
		n, err = r.Read(b[len(b):end])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			break
		}
	}
	out := append(make([]byte, 0, len(b)), b...)
	if cap(b) <= maxPooledRead {
		*bp = b[:0]
		readBufs.Put(bp)
	}
	return out, err
}

// bodySHA256 is the hex SHA-256 of the body: of the whole body (up to
// maxHashedBody) for one too large to keep, else of the bytes read.
func (ans *answer) bodySHA256() string {
	if ans.sha256 == "" {
		ans.sha256 = rules.BodyHash(ans.body)
	}
	return ans.sha256
}

// wireReader remembers the error that ended reading from the connection,
// so that a body cut in transit can be told from one whose coding is broken.
type wireReader struct {
	r   io.Reader
	err error
}

// toMessageEnd reads a decoded body and, at the decoder's end, the rest of
// the message (at most maxTrailingBytes), so that a message that breaks off
// after a complete coded stream is a body cut short: a zlib or raw DEFLATE
// stream needs no byte past its own end, unlike gzip, whose reader reads on
// for a next member.
type toMessageEnd struct {
	r    io.Reader
	wire *wireReader
}

// maxTrailingBytes bounds what is read past a coded stream's end.
const maxTrailingBytes = 4 << 10

func (t *toMessageEnd) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err == io.EOF {
		if _, werr := io.Copy(io.Discard, io.LimitReader(t.wire, maxTrailingBytes)); werr != nil {
			return n, werr
		}
	}
	return n, err
}

func (w *wireReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if err != nil && err != io.EOF {
		w.err = err
	}
	return n, err
}

// decoder returns a reader of the decoded body. The activity asks for
// gzip and deflate itself (send), so the HTTP client leaves every coding to
// it, and a server that encodes unasked, or twice, is decoded all the same:
// gzip and deflate (zlib, or raw as some servers send it), at most
// maxCodings layers, so that redaction sees the text. Any other coding (br,
// zstd, …), or more layers, is returned as its name, with the raw reader:
// the body is then never shown, since credentials in it cannot be found.
func decoder(h http.Header, r io.Reader) (io.Reader, string) {
	codings := contentCodings(h)
	if len(codings) > maxCodings {
		return r, codingNames(codings)
	}
	for _, c := range codings {
		if c != "gzip" && c != "x-gzip" && c != "deflate" {
			return r, codingNames(codings)
		}
	}
	// Codings are listed in the order they were applied: undo the last first.
	for i := len(codings) - 1; i >= 0; i-- {
		if codings[i] == "deflate" {
			r = &lazy{open: openDeflate, src: r}
		} else {
			r = &lazy{open: func(src io.Reader) (io.Reader, error) { return gzip.NewReader(src) }, src: r}
		}
	}
	return r, ""
}

// maxCodings bounds the content codings decoded for one body: each layer
// costs a decompressor (curl stops at 5 for the same reason, CVE-2022-32206).
const maxCodings = 3

// knownCodings are the content codings a message may name as written
// (RFC 9110 §8.4.1 and the IANA registry); other names are the server's
// words and are not shown.
var knownCodings = map[string]bool{
	"gzip": true, "x-gzip": true, "deflate": true, "br": true, "zstd": true,
	"compress": true, "x-compress": true, "aes128gcm": true, "exi": true, "pack200-gzip": true,
}

// contentCodings returns the codings of Content-Encoding, lower-cased,
// without identity.
func contentCodings(h http.Header) []string {
	var codings []string
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	return codings
}

// codingNames names content codings for a message: registered names as
// written, anything else as "of an unknown coding" (the server's words).
func codingNames(codings []string) string {
	if len(codings) > maxCodings {
		return fmt.Sprintf("of %d layers", len(codings))
	}
	for _, c := range codings {
		if !knownCodings[c] {
			return "of an unknown coding"
		}
	}
	return strings.Join(codings, ", ")
}

// openDeflate reads "deflate" as RFC 9110 defines it (zlib) or as raw
// DEFLATE, which some servers send instead.
func openDeflate(src io.Reader) (io.Reader, error) {
	br := bufio.NewReader(src)
	head, err := br.Peek(2)
	if err != nil {
		return nil, err
	}
	if head[0]&0x0f == 8 && (uint16(head[0])<<8|uint16(head[1]))%31 == 0 {
		return zlib.NewReader(br)
	}
	return flate.NewReader(br), nil
}

// lazy opens a decoding reader on its first Read, so that an error in the
// coding's header comes from Read like any other.
type lazy struct {
	open func(io.Reader) (io.Reader, error)
	src  io.Reader
	r    io.Reader
}

func (l *lazy) Read(p []byte) (int, error) {
	if l.r == nil {
		r, err := l.open(l.src)
		if err != nil {
			// An empty body (io.EOF before any byte) stays empty.
			return 0, err
		}
		l.r = r
	}
	return l.r.Read(p)
}

// lowerBody returns the start of the body, lower-cased, for signal matching.
func (ans *answer) lowerBody() string {
	b := ans.body
	if len(b) > signalBodyPrefix {
		b = b[:signalBodyPrefix]
	}
	return strings.ToLower(string(b))
}
