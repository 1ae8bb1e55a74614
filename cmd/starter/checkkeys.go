package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/idemhttp/temporal-idempotent-http/internal/httpheader"
	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/internal/rules"
)

// checkKeysUsage heads the help of `starter check-keys`.
const checkKeysUsage = `Usage: starter check-keys --url URL [--method POST] [--body JSON]
        [--key-in header:NAME|body:PATH|query:NAME] [--header 'Name: value' ...] [--json]

Does this API honour idempotency keys? check-keys makes a fresh key (a UUID),
puts it where --key-in says (default: the header Idempotency-Key), sends the
request, then sends the identical request again with the same key, directly
(no Temporal, no worker), and reports what the second answer was:

  replay         the first answer again: marked Idempotent-Replayed: true (or
                 --replayed-header), or the same body byte for byte
  conflict       a 4xx refusing the key as used (409, 422, or a 4xx that
                 speaks of idempotency or a used key): the API remembers the
                 key but a retry does not get the first answer
  second record  a 2xx with another body (another id): the API ignored the key
  inconclusive   the first answer was not a 2xx, a request failed, a 5xx, a
                 redirect, a 401/403/429...: the report says why

After a replay it sends a third request with the same key and the body
changed (a member "_check": 1 added to the JSON object body), reported on
its own line: an API that binds a key to its request refuses it (the IETF
draft answers 422); --changed-body=false skips it.

The requests are real and may create records, charge or send: run it
against a sandbox, before trusting an origin's keys (docs/unknown-outcomes.md:
an origin that does not honour keys needs Reconcile, Lookup or AtMostOnce).
Headers given with --header that are named like a credential
(Authorization, X-Api-Key...) are sent as given and shown [REDACTED]; the URL
is shown without user info and query values.

Exit codes: 0 replay (honours keys: safe to retry); 3 second record (does NOT
honour keys); 4 conflict (keys remembered, answers not replayed); 1
inconclusive; 2 bad flags.

Flags:
`

// Exit codes of check-keys (2, bad flags, is the starter's own).
const (
	exitHonours      = 0
	exitInconclusive = 1
	exitUsage        = 2
	exitSecondRecord = 3
	exitConflict     = 4
)

// The verdicts, as --json writes them.
const (
	verdictReplay       = "replay"
	verdictConflict     = "conflict"
	verdictSecondRecord = "second_record"
	verdictInconclusive = "inconclusive"
)

// The advice printed with each verdict.
const (
	adviceHonours    = "honours keys: safe to retry"
	adviceNotHonours = "does NOT honour keys: set Reconcile (Lookup or AtMostOnce) for this origin, see docs/unknown-outcomes.md"
	adviceConflict   = "remembers keys but does not replay: a retry after a lost answer gets this refusal, not the result; set Reconcile (Lookup or AtMostOnce) for this origin, see docs/unknown-outcomes.md"
	adviceRunAgain   = "nothing is known yet: fix what the reason says and run again; until then treat the origin as not honouring keys"
)

// maxAnswer bounds the bytes of an answer read and compared.
const maxAnswer = 1 << 20

// checkFlags is what the flags of check-keys ask for.
type checkFlags struct {
	url, method, body, keyIn string
	headers                  headerList
	replayedHeader           string
	changedBody              bool
	timeout                  time.Duration
	json                     bool
}

// headerList is the repeatable --header "Name: value". Set takes every
// value as given: a flag error would print it, and it may be a
// credential; plan checks them.
type headerList []string

func (h *headerList) String() string { return "" }

func (h *headerList) Set(s string) error {
	*h = append(*h, s)
	return nil
}

// runCheckKeys runs `starter check-keys args` and returns its exit code.
func runCheckKeys(args []string, stdout, stderr io.Writer) int {
	var f checkFlags
	fs := flag.NewFlagSet("starter check-keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), checkKeysUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.url, "url", "", "URL to call (required), e.g. https://sandbox.api.example.com/payments")
	fs.StringVar(&f.method, "method", "POST", "POST, PUT, PATCH or DELETE")
	fs.StringVar(&f.body, "body", "", "JSON request body (a JSON object when the key goes in it)")
	fs.StringVar(&f.keyIn, "key-in", "", "where the API reads the key: header:NAME, body:PATH (a member of the JSON object --body, e.g. body:idempotency_key) or query:NAME (default: the header Idempotency-Key)")
	fs.Var(&f.headers, "header", "a request header `'Name: value'` (repeat the flag for more), e.g. the sandbox's credential: shown [REDACTED] when named like one")
	fs.StringVar(&f.replayedHeader, "replayed-header", "Idempotent-Replayed", "the response header whose value \"true\" marks a replayed answer")
	fs.BoolVar(&f.changedBody, "changed-body", true, "after a replay, send a third request with the same key and the body changed, to see whether the API refuses it")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long each request may take")
	fs.BoolVar(&f.json, "json", false, "print the report as one JSON object")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage // the flag set printed it
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "starter check-keys: unexpected argument %q: every setting is a flag (starter check-keys -h)\n", fs.Arg(0))
		return exitUsage
	}
	if f.timeout <= 0 {
		fmt.Fprintf(stderr, "starter check-keys: --timeout %s: want a positive duration, e.g. 30s\n", f.timeout)
		return exitUsage
	}
	p, err := f.plan(uuid.NewString())
	if err != nil {
		fmt.Fprintf(stderr, "starter check-keys: %v\n", err)
		return exitUsage
	}
	rep := p.check(f.changedBody, f.timeout)
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			return fail(stderr, err)
		}
	} else {
		rep.print(stdout)
	}
	return rep.ExitCode
}

// checkPlan is the request check-keys sends, the key in place.
type checkPlan struct {
	method   string
	url      string // the key in its query, if it goes there
	body     []byte // the key in it, if it goes there
	header   http.Header
	key      string
	place    keyplace.Place
	replayed string // the replay marker's header

	shownURL     string   // the URL as given, redacted
	shownHeaders []string // "Name: value", credentials redacted
	secrets      []string // values never shown: credentials sent
}

// headersSetHere are headers --header may not set: the HTTP client's.
var headersSetHere = map[string]string{
	"Content-Length":    "it is computed from the body",
	"Host":              "it is taken from the URL",
	"Transfer-Encoding": "it is managed by the HTTP client",
	"Connection":        "it is managed by the HTTP client (check-keys opens a connection per request)",
}

// plan checks the flags and puts key where --key-in says.
func (f checkFlags) plan(key string) (checkPlan, error) {
	p := checkPlan{key: key}
	if f.url == "" {
		return p, errors.New("--url is required (starter check-keys -h)")
	}
	u, err := url.Parse(strings.TrimSpace(f.url))
	if err != nil {
		return p, fmt.Errorf("--url: %s", redact.Err(err))
	}
	p.shownURL = redact.URL(u.String())
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return p, fmt.Errorf("--url %s: want an absolute http or https URL", p.shownURL)
	}
	u.Fragment, u.RawFragment = "", ""
	if p.method, err = rules.Method(f.method); err != nil {
		return p, fmt.Errorf("--method: %w", err)
	}
	body := []byte(f.body)
	if err := rules.Body(body); err != nil {
		return p, fmt.Errorf("--body: %w", err)
	}
	if p.place, err = keyplace.Parse(f.keyIn); err != nil {
		return p, fmt.Errorf("--key-in: %w", err)
	}
	switch p.place.In {
	case keyplace.Header:
		if p.place.Name == "" {
			p.place.Name = "Idempotency-Key"
		}
		if !httpheader.ValidName(p.place.Name) {
			return p, fmt.Errorf("--key-in %s: %q is not a header name: use letters, digits and !#$%%&'*+-.^_`|~", f.keyIn, p.place.Name)
		}
		p.place.Name = http.CanonicalHeaderKey(p.place.Name)
	case keyplace.Body:
		if len(body) == 0 {
			return p, fmt.Errorf("--key-in %s needs a JSON object --body (e.g. --body '{}'): the key goes in its member %s", f.keyIn, p.place.Name)
		}
		if body, err = keyplace.InsertBody(body, p.place.Name, key); err != nil {
			return p, fmt.Errorf("--key-in %s: %w", f.keyIn, err)
		}
	case keyplace.Query:
		if u, err = keyplace.InsertQuery(u, p.place.Name, key); err != nil {
			return p, fmt.Errorf("--key-in %s: %w", f.keyIn, err)
		}
	}
	p.url, p.body = u.String(), body
	p.secrets = urlSecrets(u)
	p.header = http.Header{}
	for i, h := range f.headers {
		name, value, ok := strings.Cut(h, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || !httpheader.ValidName(name) {
			// Not shown: a malformed flag may hold a credential anywhere.
			return p, fmt.Errorf("--header number %d is not 'Name: value' with a header name (letters, digits and !#$%%&'*+-.^_`|~) before the colon", i+1)
		}
		name = http.CanonicalHeaderKey(name)
		if err := httpheader.CheckValue(name, value); err != nil {
			return p, fmt.Errorf("--header: %w", err)
		}
		if p.place.In == keyplace.Header && name == p.place.Name {
			return p, fmt.Errorf("--header %s: check-keys sends the key there itself, a fresh one", name)
		}
		if why, ok := headersSetHere[name]; ok {
			return p, fmt.Errorf("--header %s may not be set: %s", name, why)
		}
		p.header.Add(name, value)
		shown := value
		if redact.IsCredential(name) {
			shown = "[REDACTED]"
			p.secrets = append(p.secrets, credentialParts(value)...)
		}
		p.shownHeaders = append(p.shownHeaders, name+": "+shown)
	}
	if len(body) > 0 && p.header.Get("Content-Type") == "" {
		p.header.Set("Content-Type", "application/json")
	}
	if p.place.In == keyplace.Header {
		p.header.Set(p.place.Name, key)
	}
	p.replayed = http.CanonicalHeaderKey(strings.TrimSpace(f.replayedHeader))
	return p, nil
}

// credentialParts are what of a credential's value must not be shown: the
// value, and each of its words of 4 bytes or more ("Bearer sk_…" echoed
// as "sk_…").
func credentialParts(v string) []string {
	parts := []string{v}
	for w := range strings.FieldsSeq(v) {
		if len(w) >= 4 && w != v {
			parts = append(parts, w)
		}
	}
	return parts
}

// urlSecrets are what of u must not be shown when an answer echoes it:
// its password, and the values of query parameters named like a
// credential.
func urlSecrets(u *url.URL) []string {
	var s []string
	if pw, ok := u.User.Password(); ok && pw != "" {
		s = append(s, pw)
	}
	for name, vs := range u.Query() {
		if redact.IsCredential(name) {
			for _, v := range vs {
				if len(v) >= 4 {
					s = append(s, v)
				}
			}
		}
	}
	return s
}

// answer is what one request got.
type answer struct {
	status    int
	header    http.Header
	body      []byte
	truncated bool // the body was longer than maxAnswer: body is its start
	err       error
}

// ok reports whether a is a 2xx.
func (a answer) ok() bool { return a.err == nil && a.status >= 200 && a.status <= 299 }

// send sends p's request with body once, on a connection of its own: a
// fresh *http.Request without GetBody, and a client without keep-alives,
// so that net/http never sends it again by itself (its transport re-sends
// a request with an Idempotency-Key header cut on a reused connection),
// and without following redirects.
func (p checkPlan) send(client *http.Client, body []byte, timeout time.Duration) answer {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, p.method, p.url, rd)
	if err != nil {
		return answer{err: err}
	}
	req.GetBody = nil
	req.Header = p.header.Clone()
	resp, err := client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	a := answer{status: resp.StatusCode, header: resp.Header, body: b}
	if len(b) > maxAnswer {
		a.body, a.truncated = b[:maxAnswer], true
	}
	if err != nil {
		a.err = fmt.Errorf("reading the answer (%d): %w", resp.StatusCode, err)
	}
	return a
}

// checkClient is the client of check-keys: the default transport's
// settings (proxies from the environment, TLS, HTTP/2) without
// keep-alives, and no redirects followed.
func checkClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// checkReport is what check-keys prints: --json writes it as it is.
type checkReport struct {
	Method string `json:"method"`
	// URL is the URL as given, without user info and query values.
	URL string `json:"url"`
	// Key is the key sent; KeyIn where ("header:Idempotency-Key").
	Key   string `json:"key"`
	KeyIn string `json:"key_in"`
	// Headers are the --header flags, credentials [REDACTED].
	Headers   []string `json:"headers,omitempty"`
	BodyBytes int      `json:"body_bytes"`
	First     *shown   `json:"first,omitempty"`
	Second    *shown   `json:"second,omitempty"`
	// Verdict is replay, conflict, second_record or inconclusive; Reason
	// why; Advice what to do.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	Advice  string `json:"advice"`
	// ChangedBody is the third request: the same key, the body changed.
	ChangedBody *probe `json:"changed_body,omitempty"`
	ExitCode    int    `json:"exit_code"`
}

// shown is an answer as the report shows it.
type shown struct {
	Status   int  `json:"status,omitempty"`
	Bytes    int  `json:"bytes"`
	Replayed bool `json:"replayed,omitempty"` // the replay marker was "true"
	// BodyStart is the start of the body, credentials redacted.
	BodyStart string `json:"body_start,omitempty"`
	Error     string `json:"error,omitempty"`
}

// probe is the third request's outcome.
type probe struct {
	// Skipped says why it was not sent.
	Skipped string `json:"skipped,omitempty"`
	// Member is the member added to the body.
	Member string `json:"member,omitempty"`
	Answer *shown `json:"answer,omitempty"`
	// Outcome is refused, replayed, processed or inconclusive; Note says
	// what it means.
	Outcome string `json:"outcome,omitempty"`
	Note    string `json:"note,omitempty"`
}

// check sends p's request twice (three times with changedBody, after a
// replay) and judges the answers.
func (p checkPlan) check(changedBody bool, timeout time.Duration) checkReport {
	client := checkClient()
	first := p.send(client, p.body, timeout)
	var second answer
	if first.ok() {
		second = p.send(client, p.body, timeout)
	}
	rep := p.report(first, second)
	if rep.Verdict != verdictReplay || !changedBody {
		return rep
	}
	body, member, err := changed(p.body)
	if err != nil {
		rep.ChangedBody = &probe{Skipped: err.Error()}
		return rep
	}
	third := p.send(client, body, timeout)
	rep.ChangedBody = p.judgeChanged(first, third, member)
	return rep
}

// report judges first and second (second unsent unless first is a 2xx).
func (p checkPlan) report(first, second answer) checkReport {
	rep := checkReport{
		Method: p.method, URL: p.shownURL, Key: p.key, KeyIn: p.place.String(),
		Headers: p.shownHeaders, BodyBytes: len(p.body), First: p.show(first),
	}
	if first.ok() {
		rep.Second = p.show(second)
	}
	rep.Verdict, rep.Reason = p.judge(first, second)
	switch rep.Verdict {
	case verdictReplay:
		rep.Advice, rep.ExitCode = adviceHonours, exitHonours
	case verdictSecondRecord:
		rep.Advice, rep.ExitCode = adviceNotHonours, exitSecondRecord
	case verdictConflict:
		rep.Advice, rep.ExitCode = adviceConflict, exitConflict
	default:
		rep.Advice, rep.ExitCode = adviceRunAgain, exitInconclusive
	}
	return rep
}

// judge classifies the second answer against the first: the verdict and
// why.
func (p checkPlan) judge(first, second answer) (verdict, reason string) {
	switch {
	case first.err != nil:
		return verdictInconclusive, "the first request failed: " + p.errText(first.err)
	case !first.ok():
		r := fmt.Sprintf("the first answer was %s, not a 2xx: the check needs a request the API accepts; fix it (--body, --header, --method) and run again", statusText(first.status))
		if speaksOfKey(first.body) {
			r += "; it speaks of the key: the API may read it elsewhere (--key-in) or want another format"
		}
		return verdictInconclusive, r
	case second.err != nil:
		return verdictInconclusive, "the second request failed: " + p.errText(second.err)
	case p.marked(second):
		return verdictReplay, fmt.Sprintf("the second answer (%s) is marked %s: true", statusText(second.status), p.replayed)
	case second.ok():
		switch {
		case bytes.Equal(first.body, second.body) && !first.truncated:
			r := "the second answer has the first's status and body, byte for byte, without a replay marker: a replay, unless the API answers every such request with the same body (check that it holds one record)"
			if first.status != second.status {
				r = fmt.Sprintf("the second answer has the first's body, byte for byte, with %s after %s and no replay marker: a replay, unless the API answers every such request with the same body (check that it holds one record)", statusText(second.status), statusText(first.status))
			}
			return verdictReplay, r
		case jsonEqual(first.body, second.body):
			return verdictReplay, "the second answer is the first's JSON document, re-encoded, without a replay marker: a replay, unless the API answers every such request with the same body (check that it holds one record)"
		}
		r := fmt.Sprintf("the second answer is a %s with another body: the API processed the request again", statusText(second.status))
		if a, b, ok := ids(first.body, second.body); ok {
			r += fmt.Sprintf(` (id %s, then %s)`, p.clean(a, 40), p.clean(b, 40))
		}
		return verdictSecondRecord, r
	case second.status == http.StatusTooManyRequests:
		return verdictInconclusive, "the second answer was 429 Too Many Requests: the API rate-limits; run again later"
	case second.status == http.StatusUnauthorized || second.status == http.StatusForbidden || second.status == http.StatusProxyAuthRequired:
		return verdictInconclusive, fmt.Sprintf("the second answer was %s: a credential was refused; run again", statusText(second.status))
	case second.status == http.StatusConflict || second.status == http.StatusUnprocessableEntity ||
		second.status >= 400 && second.status <= 499 && speaksOfKey(second.body):
		return verdictConflict, fmt.Sprintf("the second answer refused the same request with the same key: %s", statusText(second.status))
	case second.status >= 400 && second.status <= 499:
		return verdictInconclusive, fmt.Sprintf("the second answer was %s, which does not say the key was used", statusText(second.status))
	case second.status >= 500:
		return verdictInconclusive, fmt.Sprintf("the second answer was %s, a server error: run again", statusText(second.status))
	}
	return verdictInconclusive, fmt.Sprintf("the second answer was %s (check-keys follows no redirect: give the final URL)", statusText(second.status))
}

// judgeChanged classifies the third answer, to the same key with the
// body changed (member added), against the first.
func (p checkPlan) judgeChanged(first, third answer, member string) *probe {
	pr := &probe{Member: member, Answer: p.show(third)}
	switch {
	case third.err != nil:
		pr.Outcome, pr.Note = "inconclusive", "the request failed: "+p.errText(third.err)
	case p.marked(third) || third.ok() && (bytes.Equal(first.body, third.body) || jsonEqual(first.body, third.body)):
		pr.Outcome, pr.Note = "replayed", "the API answered another body with the first answer: it does not bind a key to its request, so a changed request under a reused key gets the old answer (the IETF draft says 422)"
	case third.ok():
		pr.Outcome, pr.Note = "processed", "the API processed another body under the used key as a new request (the IETF draft says 422)"
	case third.status == http.StatusUnprocessableEntity:
		pr.Outcome, pr.Note = "refused", "422 Unprocessable Entity, as the IETF draft says: a key reused with another body is refused"
	case third.status >= 400 && third.status <= 499 && third.status != http.StatusTooManyRequests &&
		third.status != http.StatusUnauthorized && third.status != http.StatusForbidden:
		pr.Outcome, pr.Note = "refused", fmt.Sprintf("%s (the IETF draft says 422): a key reused with another body is refused", statusText(third.status))
	default:
		pr.Outcome, pr.Note = "inconclusive", fmt.Sprintf("the answer was %s", statusText(third.status))
	}
	return pr
}

// marked reports whether a carries the replay marker.
func (p checkPlan) marked(a answer) bool {
	return a.err == nil && p.replayed != "" && strings.EqualFold(strings.TrimSpace(a.header.Get(p.replayed)), "true")
}

// changed returns body with a member added (`"_check":1`, or `"_check2"`…
// when the body has that one): the body of the third request.
func changed(body []byte) ([]byte, string, error) {
	var obj map[string]json.RawMessage
	if len(body) == 0 || json.Unmarshal(body, &obj) != nil || obj == nil {
		return nil, "", errors.New("no JSON object body to change (give --body '{…}')")
	}
	name := "_check"
	for i := 2; obj[name] != nil; i++ {
		name = fmt.Sprintf("_check%d", i)
	}
	end := bytes.LastIndexByte(body, '}')
	member := fmt.Sprintf(`"%s":1`, name)
	if len(obj) > 0 {
		member = "," + member
	}
	out := slices.Concat(body[:end], []byte(member), body[end:])
	return out, name, nil
}

// speaksOfKey reports whether an answer's body says something of
// idempotency or of a key already used.
func speaksOfKey(body []byte) bool {
	s := strings.ToLower(string(body[:min(len(body), 64<<10)]))
	if strings.Contains(s, "idempoten") || strings.Contains(s, "duplicate request") {
		return true
	}
	if !strings.Contains(s, "key") {
		return false
	}
	for _, w := range []string{"already", "used", "reuse", "duplicate", "in use", "in progress", "in-progress", "outstanding", "conflict"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// jsonEqual reports whether a and b are both JSON and the same value.
func jsonEqual(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// ids returns the top-level "id" members of the JSON objects a and b when
// both have one and they differ.
func ids(a, b []byte) (string, string, bool) {
	var oa, ob struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(a, &oa) != nil || json.Unmarshal(b, &ob) != nil || oa.ID == nil || ob.ID == nil || bytes.Equal(oa.ID, ob.ID) {
		return "", "", false
	}
	return string(oa.ID), string(ob.ID), true
}

// show is a as the report shows it.
func (p checkPlan) show(a answer) *shown {
	s := &shown{Status: a.status, Bytes: len(a.body), Replayed: p.marked(a)}
	if a.err != nil {
		s.Error = p.errText(a.err)
	}
	if len(a.body) > 0 {
		b := a.body
		if r, ok := redact.Fields(b, "[REDACTED]"); ok {
			b = r
		}
		s.BodyStart = p.clean(string(b), 160)
	}
	return s
}

// errText is err's text, its URL redacted and the credentials sent
// replaced.
func (p checkPlan) errText(err error) string {
	return p.clean(redact.Err(err), 300)
}

// clean returns s for the report: every credential sent replaced by
// [REDACTED], control characters as spaces, at most n bytes (cut on a
// rune, "…" after).
func (p checkPlan) clean(s string, n int) string {
	for _, sec := range p.secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[REDACTED]")
		}
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// statusText is "201 Created".
func statusText(status int) string {
	if t := http.StatusText(status); t != "" {
		return fmt.Sprintf("%d %s", status, t)
	}
	return fmt.Sprint(status)
}

// print writes rep for a person.
func (rep checkReport) print(w io.Writer) {
	fmt.Fprintf(w, "check-keys  %s %s\n", rep.Method, rep.URL)
	fmt.Fprintf(w, "key         %s in %s\n", rep.Key, describe(rep.KeyIn))
	if len(rep.Headers) > 0 {
		fmt.Fprintf(w, "headers     %s\n", strings.Join(rep.Headers, "; "))
	}
	fmt.Fprintf(w, "body        %d bytes\n", rep.BodyBytes)
	printAnswer(w, "first       ", rep.First)
	if rep.Second != nil {
		printAnswer(w, "second      ", rep.Second)
	}
	label := rep.Verdict
	if label == verdictSecondRecord {
		label = "second record"
	}
	fmt.Fprintf(w, "verdict     %s: %s\n", label, rep.Reason)
	fmt.Fprintf(w, "            => %s\n", rep.Advice)
	if pr := rep.ChangedBody; pr != nil {
		if pr.Skipped != "" {
			fmt.Fprintf(w, "reused key, changed body (a third request): not sent: %s\n", pr.Skipped)
		} else {
			fmt.Fprintf(w, "reused key, changed body (a third request, same key, %q added to the body): %s: %s\n", pr.Member, pr.Outcome, pr.Note)
			printAnswer(w, "third       ", pr.Answer)
		}
	}
}

// printAnswer writes one answer's line.
func printAnswer(w io.Writer, label string, s *shown) {
	if s.Error != "" && s.Status == 0 {
		fmt.Fprintf(w, "%sno answer: %s\n", label, s.Error)
		return
	}
	line := fmt.Sprintf("%s%s, %d bytes", label, statusText(s.Status), s.Bytes)
	if s.Replayed {
		line += ", marked replayed"
	}
	if s.BodyStart != "" {
		line += ": " + s.BodyStart
	}
	if s.Error != "" {
		line += " (" + s.Error + ")"
	}
	fmt.Fprintln(w, line)
}

// describe names a key place as the report shows it.
func describe(keyIn string) string {
	p, err := keyplace.Parse(keyIn)
	if err != nil {
		return keyIn
	}
	return p.Describe()
}
