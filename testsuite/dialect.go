package testsuite

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
)

// Shape is the body shape of the answers the server makes up itself: in
// flight, misuse and missing key. Stored responses are replayed as they were.
type Shape int

const (
	// ShapeProblemJSON is application/problem+json (RFC 9457) with type, title
	// and detail, as in the examples of the IETF draft "The Idempotency-Key
	// HTTP Header Field".
	ShapeProblemJSON Shape = iota
	// ShapeStripeJSON is application/json {"error":{"type":"idempotency_error",
	// "message":…}}, with "code":"idempotency_key_in_use" when in flight.
	ShapeStripeJSON
	// ShapePlainText is one short text/plain sentence: the message of the error
	// express-idempotency hands to Express.
	ShapePlainText
)

// Dialect is the convention the server plays: where the request carries the
// key, what it answers while a key is in flight, on misuse and without a
// key, and how it marks a replay. The zero Dialect is [IETFDialect]; any
// other Dialect is taken as written, except that an empty KeyHeader is
// Idempotency-Key and a zero status is the IETF one (409, 422, 400). Start
// from a preset and change fields:
//
//	d := testsuite.IETFDialect()
//	d.KeyHeader, d.ReplayHeader = "PayPal-Request-Id", ""
//
//	b := testsuite.IETFDialect()
//	b.KeyIn = "body:metadata.idempotency_key" // the key in the JSON body
type Dialect struct {
	// Name names the dialect in logs ("ietf", "stripe", "express", "plain").
	Name string
	// KeyHeader is the request header carrying the key (default
	// Idempotency-Key), unless KeyIn says otherwise.
	KeyHeader string
	// KeyIn is where the request carries the key, as the library's key
	// places write it (default "": KeyHeader): "header:NAME" is KeyHeader
	// NAME; "body:PATH" is the string member at PATH, a dotted path of
	// member names ("idempotency_key", "metadata.idempotency_key"), of the
	// JSON request body; "query:NAME" is the query parameter NAME. A body
	// or query parameter without the key (a member that is absent, not a
	// string, or "") is a missing key. The body's SHA-256 that binds a key
	// to its request is of the body as received, key member included. Its
	// name stands for KeyHeader in the made-up answers. NewServer panics if
	// it does not parse (Options.Validate).
	KeyIn string
	// KeyString reads the key header as the IETF draft "The Idempotency-Key
	// HTTP Header Field" defines it, an RFC 8941 Item whose value is a
	// String, while still taking the bare key that most clients send: a
	// value that starts with a double quote (after spaces) is parsed as an
	// sf-string (RFC 8941 sections 4.2 and 4.2.5: spaces around it, only
	// \" and \\ as escapes) and the key is its content, so "k1" (quoted)
	// and k1 are one key; any other value is the key as written (a bare key
	// that itself starts with a double quote must therefore be sent
	// quoted). A value that starts with a double quote but is not such a
	// string (unterminated, another escape, a byte outside printable ASCII,
	// anything after the closing quote, or an empty string) is an invalid
	// key; so are parameters (";a=1"), which RFC 8941 would parse but the
	// draft defines none of. An invalid key is answered MissingKeyStatus,
	// even when KeyOptional, and counted in Stats.MissingKey. Without
	// KeyString the value is the key as written, quotes included, as Stripe
	// and express-idempotency take it: "k1" (quoted) and k1 are two keys.
	// A key in the body or a query parameter (KeyIn) is always taken as
	// written.
	KeyString bool
	// KeyOptional: a request without the key is processed without
	// idempotency, every time, as Stripe and express-idempotency do.
	// Otherwise it is answered MissingKeyStatus.
	KeyOptional bool
	// IgnoreKeys makes a server that knows nothing of idempotency
	// ([PlainDialect]): every request is processed and makes a new
	// record, whatever key it carries; there is no replay, no in-flight,
	// misuse or missing-key answer, and the fields that shape them are
	// unused. The key is still read where KeyIn says (taken as written
	// unless KeyString), for Record.IdempotencyKey, Log and
	// Stats.DistinctKeys; Stats.MissingKey stays 0.
	IgnoreKeys bool
	// Shape is the body shape of the in-flight, misuse and missing-key answers.
	Shape Shape
	// InFlightStatus answers a request whose key is still being processed,
	// or whose lock was orphaned (default 409).
	InFlightStatus int
	// InFlightRetryAfter: the in-flight answer carries Retry-After with
	// Options.InFlightRetryAfter seconds.
	InFlightRetryAfter bool
	// MisuseStatus answers a key reused for another request: another body,
	// method or path (default 422).
	MisuseStatus int
	// MissingKeyStatus answers a request without the key unless KeyOptional,
	// and one with an invalid key (see KeyString) (default 400).
	MissingKeyStatus int
	// ReplayHeader, if set, is set to "true" on a replayed response.
	ReplayHeader string
	// ShouldRetryHeader, if set, is set to "true" on the in-flight answer and
	// on 429 and 5xx failures, and to "false" on misuse (Stripe-Should-Retry).
	ShouldRetryHeader string
}

// IETFDialect is the default dialect, after the IETF draft "The Idempotency-Key HTTP
// Header Field": key in Idempotency-Key, required, quoted as an sf-string or
// bare (KeyString); 409 with Retry-After while in flight, 422 on misuse, 400
// without a valid key, all application/problem+json; replays marked
// Idempotent-Replayed: true.
func IETFDialect() Dialect {
	return Dialect{
		Name:               "ietf",
		KeyHeader:          "Idempotency-Key",
		KeyString:          true,
		Shape:              ShapeProblemJSON,
		InFlightStatus:     http.StatusConflict,
		InFlightRetryAfter: true,
		MisuseStatus:       http.StatusUnprocessableEntity,
		MissingKeyStatus:   http.StatusBadRequest,
		ReplayHeader:       "Idempotent-Replayed",
	}
}

// StripeDialect is Stripe's convention: key in Idempotency-Key, optional, taken as
// written (a quoted key is another key, quotes included); 409
// idempotency_key_in_use without Retry-After while in flight, 400
// idempotency_error on misuse; Stripe-Should-Retry: true on the 409 and on
// 429/5xx failures, false on misuse; replays marked Idempotent-Replayed: true.
func StripeDialect() Dialect {
	return Dialect{
		Name:              "stripe",
		KeyHeader:         "Idempotency-Key",
		KeyOptional:       true,
		Shape:             ShapeStripeJSON,
		InFlightStatus:    http.StatusConflict,
		MisuseStatus:      http.StatusBadRequest,
		MissingKeyStatus:  http.StatusBadRequest,
		ReplayHeader:      "Idempotent-Replayed",
		ShouldRetryHeader: "Stripe-Should-Retry",
	}
}

// ExpressDialect is the npm middleware express-idempotency's convention (read from
// its source, 1.0.6): key in Idempotency-Key, optional, taken as written
// (a quoted key is another key, quotes included); 409 without
// Retry-After while in flight, 417 Expectation Failed on misuse (its intent
// check compares method, URL, query and body); replays are not marked. The
// bodies are the package's error messages as text/plain, where the real
// middleware hands them to Express's default error handler (a small
// text/html page, "Conflict" or "Expectation Failed" in production); its
// echo of the key header on every answer is not played.
func ExpressDialect() Dialect {
	return Dialect{
		Name:             "express",
		KeyHeader:        "Idempotency-Key",
		KeyOptional:      true,
		Shape:            ShapePlainText,
		InFlightStatus:   http.StatusConflict,
		MisuseStatus:     http.StatusExpectationFailed,
		MissingKeyStatus: http.StatusBadRequest,
	}
}

// PlainDialect is a server that knows nothing of idempotency (IgnoreKeys):
// every request with a valid JSON body (or none) makes a new record, and a
// retry with the same key makes another, as an API that ignores keys does.
// Its records keep their request bodies (Record.Request); Options.Lookup
// lets a client find what an earlier request made.
func PlainDialect() Dialect {
	return Dialect{Name: "plain", KeyHeader: "Idempotency-Key", IgnoreKeys: true}
}

// normalized fills the defaults documented on Dialect. d.KeyIn has been
// checked (Options.Validate).
func (d Dialect) normalized() Dialect {
	if d == (Dialect{}) {
		return IETFDialect()
	}
	if p := d.place(); p.In == keyplace.Header && p.Name != "" {
		d.KeyHeader = p.Name
	}
	if d.KeyHeader == "" {
		d.KeyHeader = "Idempotency-Key"
	}
	if d.InFlightStatus == 0 {
		d.InFlightStatus = http.StatusConflict
	}
	if d.MisuseStatus == 0 {
		d.MisuseStatus = http.StatusUnprocessableEntity
	}
	if d.MissingKeyStatus == 0 {
		d.MissingKeyStatus = http.StatusBadRequest
	}
	return d
}

// validate checks KeyIn (Options.Validate).
func (d Dialect) validate() error {
	if _, err := keyplace.Parse(d.KeyIn); err != nil {
		return fmt.Errorf("testsuite: Options.Dialect.KeyIn: %w", err)
	}
	return nil
}

// place is where d reads the key: KeyIn parsed (the zero Place, the key
// header, if it does not parse: Options.Validate refuses it).
func (d Dialect) place() keyplace.Place {
	p, _ := keyplace.Parse(d.KeyIn)
	return p
}

// keyName names the key in the made-up answers: KeyHeader, or the body
// member's path or the query parameter of KeyIn; what says which it is
// ("header", "body member", "query parameter").
func (d Dialect) keyName() (name, what string) {
	switch p := d.place(); p.In {
	case keyplace.Body:
		return p.Name, "body member"
	case keyplace.Query:
		return p.Name, "query parameter"
	}
	return d.KeyHeader, "header"
}

// errInvalidKey is the answer of headerKey to a value that starts with a
// double quote but is not an sf-string.
var errInvalidKey = errors.New("the key header is neither a bare key nor an RFC 8941 sf-string")

// headerKey returns the key that the value v of the key header carries: v
// itself, or, with KeyString and v starting with a double quote, the
// content of the sf-string v (parseKeyString). An empty result is a missing
// key. An invalid key is v with errInvalidKey.
func (d Dialect) headerKey(v string) (string, error) {
	if !d.KeyString || !strings.HasPrefix(strings.TrimLeft(v, " "), `"`) {
		return v, nil
	}
	key, err := parseKeyString(v)
	if err != nil || key == "" {
		return v, errInvalidKey
	}
	return key, nil
}

// parseKeyString parses v as a whole field value holding one RFC 8941 Item
// that is a String without parameters: leading and trailing spaces are
// discarded (section 4.2), the String is parsed as section 4.2.5 says
// (escapes \" and \\ only, other bytes in %x20-7E), and anything left after
// it, parameters (";…") included, fails. It returns the String's content.
func parseKeyString(v string) (string, error) {
	v = strings.TrimLeft(v, " ")
	if v == "" || v[0] != '"' {
		return "", errors.New("sf-string: no opening double quote")
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) {
				return "", errors.New("sf-string: backslash at the end")
			}
			if v[i] != '"' && v[i] != '\\' {
				return "", fmt.Errorf("sf-string: escape %q: only \\\" and \\\\ are allowed", v[i-1:i+1])
			}
			b.WriteByte(v[i])
		case c == '"':
			if rest := strings.TrimRight(v[i+1:], " "); rest != "" {
				return "", fmt.Errorf("sf-string: %q after the closing double quote (parameters are not supported)", rest)
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("sf-string: byte %#x outside printable ASCII", c)
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("sf-string: no closing double quote")
}

// problemType is the problem type URI of ShapeProblemJSON answers, the one of
// the draft's examples.
const problemType = "https://developer.example.com/idempotency"

type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

type stripeError struct {
	Error stripeErrorBody `json:"error"`
}

type stripeErrorBody struct {
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// message is one answer of the server, in each Shape's words.
type message struct {
	stripe        stripeErrorBody // ShapeStripeJSON
	plain         string          // ShapePlainText
	title, detail string          // ShapeProblemJSON
}

// body is m as d's Shape writes it.
func (d Dialect) body(m message) (ctype string, body []byte) {
	switch d.Shape {
	case ShapeStripeJSON:
		return marshal(stripeError{m.stripe})
	case ShapePlainText:
		return plain(m.plain)
	}
	return marshalProblem(problem{problemType, m.title, m.detail})
}

// inFlightBody is the body of the in-flight answer.
func (d Dialect) inFlightBody() (ctype string, body []byte) {
	key, _ := d.keyName()
	return d.body(message{
		stripe: stripeErrorBody{
			Type:    "idempotency_error",
			Code:    "idempotency_key_in_use",
			Message: "There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice at the same time). Try again later.",
		},
		plain:  "A previous request is still in progress for this key.",
		title:  "A request is outstanding for this " + key,
		detail: "A request with the same " + key + " for the same operation is being processed or is outstanding.",
	})
}

// misuseBody is the body of the answer to a key reused for another request.
func (d Dialect) misuseBody(key string) (ctype string, body []byte) {
	name, _ := d.keyName()
	return d.body(message{
		stripe: stripeErrorBody{
			Type:    "idempotency_error",
			Message: "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '" + key + "' if you meant to execute a different request.",
		},
		plain:  "Misuse of the idempotency key. Please check your request.",
		title:  name + " is already used",
		detail: "This operation is idempotent and it requires correct usage of Idempotency Key. Idempotency Key MUST not be reused across different payloads of this operation.",
	})
}

// missingKeyBody is the body of the answer to a request without the key.
func (d Dialect) missingKeyBody() (ctype string, body []byte) {
	key, what := d.keyName()
	return d.body(message{
		stripe: stripeErrorBody{Type: "invalid_request_error", Message: "Missing required " + what + ": " + key + "."},
		plain:  "Missing " + key + " " + what + ".",
		title:  key + " is missing",
		detail: "This operation is idempotent and it requires correct usage of Idempotency Key.",
	})
}

// invalidKeyBody is the body of the answer to a request whose key header
// starts with a double quote but is not an sf-string (KeyString).
func (d Dialect) invalidKeyBody() (ctype string, body []byte) {
	return d.body(message{
		stripe: stripeErrorBody{Type: "invalid_request_error", Message: "Invalid " + d.KeyHeader + " header: send the key bare or as a quoted string."},
		plain:  "Invalid " + d.KeyHeader + " header.",
		title:  d.KeyHeader + " is invalid",
		detail: d.KeyHeader + " must be a String Structured Field (RFC 8941), such as \"8e03978e-40d5-43e8-bc93-6894a57f9324\", or the bare key.",
	})
}

func marshal(v any) (string, []byte) {
	b, _ := json.Marshal(v)
	return "application/json", append(b, '\n')
}

func marshalProblem(p problem) (string, []byte) {
	_, b := marshal(p)
	return "application/problem+json", b
}

func plain(s string) (string, []byte) {
	return "text/plain; charset=utf-8", []byte(s + "\n")
}
