package testsuite

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/workflows"

	"github.com/idemhttp/temporal-idempotent-http/internal/named"
	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
)

// DeliveryKind is the kind of a webhook delivery (Delivery.Kind); in
// JSON, its string.
type DeliveryKind string

// The kinds.
const (
	// DeliveryValid: an event signed with the secret, at the time it is sent.
	DeliveryValid DeliveryKind = "valid"
	// DeliveryForged: the terminal event under its own ID, with a
	// well-formed signature by another secret (Webhooks.Forged).
	DeliveryForged DeliveryKind = "forged"
	// DeliveryStale: the terminal event under its own ID, signed with a
	// timestamp 10 minutes old and created 10 minutes before the
	// operation ended (Webhooks.Stale).
	DeliveryStale DeliveryKind = "stale"
)

const (
	// defaultScheme is Webhooks.Scheme's default.
	defaultScheme = "standard-webhooks"
	// staleAge is how old a stale copy's timestamp is: outside the 5 min
	// tolerance of every scheme that signs one.
	staleAge = 10 * time.Minute
	// defaultRetryFor is Webhooks.RetryFor's default.
	defaultRetryFor = 10 * time.Minute
	// retryFirst and retryMax bound a delivery's retry backoff.
	retryFirst, retryMax = time.Second, 30 * time.Second
	// deliveryTimeout bounds one delivery attempt.
	deliveryTimeout = 10 * time.Second
	// webhookUserAgent is the User-Agent of every delivery.
	webhookUserAgent = "temporal-idempotent-http-testsuite/1 (reference server webhooks)"
)

// Webhooks makes the reference server a provider that reports the outcome
// of its operations by signed webhooks (Options.Webhooks), as payment and
// other APIs do: each new key's request starts an operation, answered 201
// {"id": "op_N", "status": "processing"} with Location:
// /resources/op_N; GET /resources/op_N answers {"id", "status",
// "metadata"} with the status "processing" for Duration after the start,
// then the State; when the operation ends, its webhooks go out, at least
// once, to URL or to the start request's "callback_url".
//
// Every delivery is a POST of one JSON event, the same for every scheme:
//
//	{"id": "evt_…", "type": "operation.succeeded", "created": 1767225600,
//	 "timestamp": "2026-01-01T00:00:00Z",
//	 "data": {"object": {"id": "op_1", "status": "succeeded", "metadata": {…}}}}
//
// with the type operation.succeeded, operation.failed, operation.canceled
// or, for the Progress event, operation.processing; "metadata" is the
// start request body's top-level "metadata" object ({} without one).
// Deliveries have Content-Type: application/json, a User-Agent naming the
// reference server and a 10 s timeout. A delivery answered otherwise than
// 2xx, or not answered, is retried with a backoff of 1 s doubling to 30 s,
// with jitter, until it is answered 2xx or RetryFor has passed since its
// first attempt, as Stripe retries every non-2xx answer; a forged or stale
// copy is not retried after a 4xx.
//
// The operation's Duration is waited on the real clock (a timer); the
// resource's status and the signed timestamps read Options.Now, so with a
// test clock a poll may see the outcome before its webhook is sent, as it
// may with a provider whose webhooks lag. [Server.Close] stops every
// pending delivery and timer; later operations send no webhook.
type Webhooks struct {
	// URL is the endpoint deliveries go to, an absolute http or https URL.
	// A start request whose JSON body has a top-level string
	// "callback_url" gets its deliveries there instead, the URL taken as
	// given (query included). "": only operations that name a callback
	// URL send webhooks.
	URL string
	// Scheme names the signature scheme, as the worker's --webhook-scheme
	// and workflows.Notification.Scheme name it: "standard-webhooks"
	// (default: Standard Webhooks, https://www.standardwebhooks.com/,
	// headers webhook-id, webhook-timestamp and webhook-signature,
	// "v1,<base64>" of HMAC-SHA256 of "id.timestamp.body" under the
	// decoded "whsec_" secret), "stripe" (Stripe-Signature
	// "t=<unix>,v1=<hex>", the HMAC-SHA256 of "timestamp.body" under the
	// secret's bytes) or "hmac" (X-Signature, the lowercase hex
	// HMAC-SHA256 of the body under the secret's bytes; no timestamp).
	// webhooks.StandardWebhooksVerifier, StripeVerifier and HMACVerifier
	// verify them.
	Scheme string
	// Secret is the signing secret, required: "whsec_" and base64 for
	// Standard Webhooks (base64 alone is accepted), any string for Stripe
	// and HMAC.
	Secret string
	// Duration is how long an operation runs before its outcome (default
	// 0: it ends at once).
	Duration time.Duration
	// State is the state operations end in: workflows.StateSucceeded
	// (default), StateFailed or StateCanceled.
	State workflows.State
	// Deliveries is how many times the terminal event is delivered
	// (default 1). Every copy has the same event ID: duplicates, as
	// providers deliver at least once.
	Deliveries int
	// Progress, if set, also sends a non-terminal operation.processing
	// event (created when the operation started), delivered after the
	// terminal one: out of order.
	Progress bool
	// Shuffle, if set, sends an operation's deliveries in random order
	// (the default order: forged, stale, the terminal copies, progress).
	Shuffle bool
	// Jitter is the largest random delay before each delivery of an
	// operation, after the previous one (default 0: none).
	Jitter time.Duration
	// Forged and Stale are how many extra copies of the terminal event
	// each operation sends with a wrong signature (DeliveryForged) and
	// signed with a timestamp 10 minutes old (DeliveryStale), each under
	// its own event ID so that a receiver that wrongly accepted one shows
	// it (default 0). A stale copy's "created" is 10 minutes old too: the
	// HMAC scheme signs no timestamp, so only that field shows it.
	Forged, Stale int
	// DropRate is the share of operations, in [0, 1], whose webhooks are
	// never sent, decided per operation with Options.Rand (default 0).
	DropRate float64
	// RetryFor is how long a delivery is retried after its first attempt
	// (default 10 min).
	RetryFor time.Duration
}

// Validate reports what is wrong with w, if anything; NewServer panics
// with its error.
func (w Webhooks) Validate() error {
	var errs []error
	if sc, ok := signature.Lookup(cmp.Or(w.Scheme, defaultScheme)); !ok {
		errs = append(errs, fmt.Errorf("Scheme %q: want %s", w.Scheme, named.List(signature.Names()...)))
	} else if _, err := sc.Key(w.Secret); err != nil {
		errs = append(errs, fmt.Errorf("Secret: %w", err))
	}
	if w.URL != "" {
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("URL %q: want an absolute http or https URL", w.URL))
		}
	}
	switch w.State {
	case "", workflows.StateSucceeded, workflows.StateFailed, workflows.StateCanceled:
	default:
		errs = append(errs, fmt.Errorf("State %q: want %s, %s or %s", w.State, workflows.StateSucceeded, workflows.StateFailed, workflows.StateCanceled))
	}
	if w.Duration < 0 || w.Jitter < 0 || w.RetryFor < 0 {
		errs = append(errs, errors.New("Duration, Jitter and RetryFor: want 0 or more"))
	}
	if w.Deliveries < 0 || w.Forged < 0 || w.Stale < 0 {
		errs = append(errs, errors.New("Deliveries, Forged and Stale: want 0 or more"))
	}
	if w.DropRate < 0 || w.DropRate > 1 {
		errs = append(errs, fmt.Errorf("DropRate %v: want a fraction in [0, 1]", w.DropRate))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("testsuite.Webhooks: %w", err)
	}
	return nil
}

// Delivery is one webhook delivery attempt (Server.Deliveries).
type Delivery struct {
	// Operation is the operation's ID; EventID, Type and Kind
	// (DeliveryValid, DeliveryForged or DeliveryStale) the event's.
	Operation string       `json:"operation"`
	EventID   string       `json:"event_id"`
	Type      string       `json:"type"`
	Kind      DeliveryKind `json:"kind"`
	// URL is where it was sent.
	URL string `json:"url"`
	// Attempt counts the attempts of this copy, from 1.
	Attempt int `json:"attempt"`
	// Status is the status answered, 0 for a network error (Error).
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
	// Time is when it was sent (Options.Now).
	Time time.Time `json:"time"`
}

// sender is the state of a server's webhooks.
type sender struct {
	w       Webhooks         // normalized
	scheme  signature.Scheme // w.Scheme's
	key     []byte           // its signing key
	client  *http.Client
	ctx     context.Context // done at Server.Close
	stop    context.CancelFunc
	wg      sync.WaitGroup // the operations' goroutines
	stopped bool           // Server.Close was called; s.mu guards it

	// s.mu guards the rest.
	ops        map[string]*hookOp
	deliveries []Delivery
}

// hookOp is an operation that reports its outcome by webhooks.
type hookOp struct {
	id       string
	metadata json.RawMessage
	url      string
	started  time.Time // Options.Now
}

// hookCopy is one copy of an event to deliver.
type hookCopy struct {
	kind     DeliveryKind
	id, typ  string
	body     []byte
	due      time.Time // real clock
	first    time.Time // real clock, zero before the first attempt
	attempts int
}

// newSender makes the sender of the valid w.
func newSender(w Webhooks) *sender {
	if w.Scheme == "" {
		w.Scheme = defaultScheme
	}
	if w.State == "" {
		w.State = workflows.StateSucceeded
	}
	if w.Deliveries == 0 {
		w.Deliveries = 1
	}
	if w.RetryFor == 0 {
		w.RetryFor = defaultRetryFor
	}
	sn := &sender{w: w, ops: map[string]*hookOp{}}
	sn.scheme, _ = signature.Lookup(w.Scheme)
	sn.key, _ = sn.scheme.Key(w.Secret)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	sn.client = &http.Client{
		Transport: tr,
		Timeout:   deliveryTimeout,
		// A redirect is an answer other than 2xx, as providers take it:
		// retried at the same URL, never followed (a 302 would turn the
		// POST into a GET).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	sn.ctx, sn.stop = context.WithCancel(context.Background())
	return sn
}

// closeWebhooks stops the timers and deliveries and waits for their
// goroutines, which end at once.
func (s *Server) closeWebhooks() {
	sn := s.wh
	s.mu.Lock()
	sn.stopped = true
	s.mu.Unlock()
	sn.stop()
	sn.wg.Wait()
	sn.client.CloseIdleConnections()
}

// Deliveries returns every webhook delivery attempt, in order (the first
// 131072), retries included; nil without Options.Webhooks.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wh == nil {
		return nil
	}
	return append([]Delivery(nil), s.wh.deliveries...)
}

// startOperation starts the operation of a new key whose request body is
// body (its record is made) and answers it; its webhooks go out when it
// ends, unless dropped.
func (s *Server) startOperation(r *http.Request, body []byte, now time.Time) (int, []byte, http.Header) {
	sn := s.wh
	op := &hookOp{metadata: json.RawMessage("{}"), url: sn.w.URL, started: now}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) == nil {
		var cb string
		if json.Unmarshal(fields["callback_url"], &cb) == nil && cb != "" {
			op.url = cb
		}
		if m := bytes.TrimSpace(fields["metadata"]); len(m) > 0 && m[0] == '{' {
			op.metadata = m
		}
	}
	s.mu.Lock()
	s.stats.Operations++
	op.id = "op_" + strconv.Itoa(s.stats.Operations)
	sn.ops[op.id] = op
	drop := sn.w.DropRate > 0 && s.opts.Rand() < sn.w.DropRate
	if !drop && op.url != "" && !sn.stopped {
		sn.wg.Add(1)
		go s.runOperation(op)
	}
	s.mu.Unlock()
	h := http.Header{}
	h.Set("Location", "http://"+r.Host+"/resources/"+op.id)
	b, _ := json.Marshal(map[string]string{"id": op.id, "status": "processing"})
	return http.StatusCreated, append(b, '\n'), h
}

// hookState is the status of op at now: processing, then the outcome.
func (s *Server) hookState(op *hookOp, now time.Time) string {
	if now.Sub(op.started) < s.wh.w.Duration {
		return "processing"
	}
	return string(s.wh.w.State)
}

// serveResource answers GET /resources/{id}; it reports whether r was one.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request) bool {
	id, ok := strings.CutPrefix(r.URL.Path, "/resources/")
	if r.Method != http.MethodGet || !ok {
		return false
	}
	now := s.now()
	s.mu.Lock()
	s.stats.Requests++
	s.stats.Polls++
	op := s.wh.ops[id]
	s.mu.Unlock()
	if op == nil {
		jsonError(http.StatusNotFound, "no such resource").write(w, Dialect{})
		return true
	}
	b, _ := json.Marshal(map[string]any{"id": op.id, "status": s.hookState(op, now), "metadata": op.metadata})
	write(w, http.StatusOK, "application/json", append(b, '\n'))
	return true
}

// runOperation waits for op to end, then delivers its webhooks, until
// they are all answered 2xx or given up, or the server is closed.
func (s *Server) runOperation(op *hookOp) {
	sn := s.wh
	defer sn.wg.Done()
	if !sn.sleep(sn.w.Duration) {
		return
	}
	copies := sn.plan(op, s.now())
	s.mu.Lock()
	s.stats.WebhooksPending += len(copies)
	s.mu.Unlock()
	for len(copies) > 0 {
		i := 0
		for j, c := range copies {
			if c.due.Before(copies[i].due) {
				i = j
			}
		}
		c := copies[i]
		if !sn.sleep(time.Until(c.due)) {
			return
		}
		if c.first.IsZero() {
			c.first = time.Now()
		}
		c.attempts++
		at := s.now()
		status, err := sn.send(op.url, c, at)
		if sn.ctx.Err() != nil {
			return // cut by Close: not an attempt
		}
		next := time.Now().Add(backoff(c.attempts))
		ok := status >= 200 && status <= 299
		rejected := status >= 400 && status <= 499
		giveUp := !ok && (rejected && c.kind != DeliveryValid || next.Sub(c.first) > sn.w.RetryFor || errors.Is(err, errBadURL))
		d := Delivery{Operation: op.id, EventID: c.id, Type: c.typ, Kind: c.kind, URL: op.url, Attempt: c.attempts, Status: status, Time: at}
		if err != nil {
			d.Error = err.Error()
		}
		s.mu.Lock()
		s.stats.Webhooks++
		switch {
		case ok:
			s.stats.WebhooksDelivered++
		case rejected:
			s.stats.WebhooksRejected++
		}
		if ok || giveUp {
			s.stats.WebhooksPending--
		}
		if len(sn.deliveries) < maxLog {
			sn.deliveries = append(sn.deliveries, d)
		}
		s.mu.Unlock()
		if ok || giveUp {
			copies = append(copies[:i], copies[i+1:]...)
		} else {
			c.due = next
		}
	}
}

// sleep waits d, or until the server is closed; it reports whether d passed.
func (sn *sender) sleep(d time.Duration) bool {
	if d <= 0 {
		return sn.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-sn.ctx.Done():
		return false
	}
}

// backoff is the delay after the n-th failed attempt of a copy: 1 s
// doubling to 30 s, drawn in [d/2, d].
func backoff(n int) time.Duration {
	d := retryMax
	if n < 6 {
		d = min(retryFirst<<(n-1), retryMax)
	}
	return d/2 + mrand.N(d/2+1)
}

// event is the body of a webhook.
type event struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Created   int64  `json:"created"`
	Timestamp string `json:"timestamp"`
	Data      struct {
		Object struct {
			ID       string          `json:"id"`
			Status   string          `json:"status"`
			Metadata json.RawMessage `json:"metadata"`
		} `json:"object"`
	} `json:"data"`
}

// plan makes the copies of the events of op, which ended at end, each
// due after the previous one and a random gap up to Jitter.
func (sn *sender) plan(op *hookOp, end time.Time) []*hookCopy {
	w := sn.w
	mk := func(kind DeliveryKind, status string, created time.Time) *hookCopy {
		var e event
		e.ID, e.Type = newEventID(), "operation."+status
		e.Created, e.Timestamp = created.Unix(), created.UTC().Format(time.RFC3339)
		e.Data.Object.ID, e.Data.Object.Status, e.Data.Object.Metadata = op.id, status, op.metadata
		b, _ := json.Marshal(e)
		return &hookCopy{kind: kind, id: e.ID, typ: e.Type, body: b}
	}
	var copies []*hookCopy
	for range w.Forged {
		copies = append(copies, mk(DeliveryForged, string(w.State), end))
	}
	for range w.Stale {
		copies = append(copies, mk(DeliveryStale, string(w.State), end.Add(-staleAge)))
	}
	terminal := mk(DeliveryValid, string(w.State), end)
	for range w.Deliveries {
		c := *terminal
		copies = append(copies, &c)
	}
	if w.Progress {
		copies = append(copies, mk(DeliveryValid, "processing", op.started))
	}
	if w.Shuffle {
		mrand.Shuffle(len(copies), func(i, j int) { copies[i], copies[j] = copies[j], copies[i] })
	}
	due := time.Now()
	for i, c := range copies {
		if w.Jitter > 0 {
			due = due.Add(mrand.N(w.Jitter + 1))
		}
		// Copies due at one time go out in order.
		c.due = due.Add(time.Duration(i))
	}
	return copies
}

// newEventID is a unique event ID: "evt_" and 24 random hex digits.
func newEventID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "evt_" + hex.EncodeToString(b)
}

// errBadURL: the delivery URL cannot make a request; it is not retried.
var errBadURL = errors.New("webhook URL unusable")

// send delivers c to u, signed at now (10 minutes before for a stale
// copy), and returns the status answered, 0 with an error when none was.
func (sn *sender) send(u string, c *hookCopy, now time.Time) (int, error) {
	req, err := http.NewRequestWithContext(sn.ctx, http.MethodPost, u, bytes.NewReader(c.body))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errBadURL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", webhookUserAgent)
	if c.kind == DeliveryStale {
		now = now.Add(-staleAge)
	}
	sn.sign(req.Header, c, now.Unix())
	resp, err := sn.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// sign sets the scheme's signature headers of c, signed at ts; a forged
// copy is signed, well-formed, under another secret.
func (sn *sender) sign(h http.Header, c *hookCopy, ts int64) {
	key := sn.key
	if c.kind == DeliveryForged {
		key = append([]byte("forged:"), key...)
	}
	sn.scheme.Sign(h, key, c.id, ts, c.body)
}
