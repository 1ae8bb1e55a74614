// Package reconcile holds how a call settles an attempt of unknown
// outcome with an API that does not honour idempotency keys, by a lookup
// or by a person's decision (Reconcile), and the one reading of a
// lookup's answer (Read).
package reconcile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/httpurl"
	"github.com/idemhttp/temporal-idempotent-http/internal/jsonfield"
	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
)

// Reconcile is what a call does before it sends again after an attempt
// whose outcome is unknown (a timeout after the request left, an answer
// cut short, a gateway's 5xx), for an API that would make a second record
// of a second request: ask Lookup whether the first went through, or,
// with AtMostOnce, wait for a person's decision. The zero value sends
// again, which only an API that honours the key makes safe.
type Reconcile struct {
	// Lookup is the URL of a GET that finds the record an earlier attempt
	// made, with {key} where the idempotency key goes (query-escaped),
	// e.g. "https://api.example.com/payments?client_reference={key}". It
	// is on the call's origin. The key must reach the API where it keeps
	// it, so the call's key goes in its body or query (KeyIn
	// "body:client_reference"), not in a header the API ignores.
	Lookup string `json:"lookup,omitempty"`
	// Items is the dotted path of the list of matches in the lookup's
	// answer, e.g. "data" (default "": the answer is the list itself; an
	// object answer is the record). One match is the result; none sends
	// again; more than one is never taken as the result.
	Items string `json:"items,omitempty"`
	// LookupActivity, for an API with no lookup route, names an activity
	// of your own, registered on the workers, that finds the record an
	// earlier attempt made: it takes the call's key (a string) and returns
	// a *workflows.Response, nil when there is no record (an error is
	// retried by the call's retry policy). Found, it is the result
	// (Reconciled "lookup"); not found, the request is sent again. Per
	// call only (workflows.Request.Reconcile).
	LookupActivity string `json:"lookup_activity,omitempty"`
	// AtMostOnce: never send again on its own. The call waits, paused,
	// for a person's decision (docs/unknown-outcomes.md): "it went
	// through" (temporal activity complete, with the result), "send
	// again" (temporal activity unpause) or "give up" (complete with
	// {"gave_up": "why"}). Attempts that sent nothing still retry.
	AtMostOnce bool `json:"at_most_once,omitempty"`
}

// NeedsLookup is the error type of the HTTP activity's attempt that
// leaves an unknown outcome to the call's LookupActivity: the workflow
// side runs it, then the request again if it found nothing. It never
// reaches the caller.
const NeedsLookup = "IdempotentHTTPNeedsLookup"

// KeyToken is the placeholder of the key in Lookup.
const KeyToken = "{key}"

// MinDecisionWait is the shortest ScheduleToCloseTimeout an AtMostOnce
// call accepts: a person's decision takes hours.
const MinDecisionWait = time.Hour

// IsZero reports whether r asks for nothing.
func (r Reconcile) IsZero() bool { return r == Reconcile{} }

// Validate checks r for a call to callURL; field prefixes its messages
// ("Request.Reconcile"). CheckPlace checks it with where the key goes.
func (r Reconcile) Validate(field, callURL string) error {
	if r.IsZero() {
		return nil
	}
	set := 0
	for _, on := range []bool{r.Lookup != "", r.LookupActivity != "", r.AtMostOnce} {
		if on {
			set++
		}
	}
	if set > 1 {
		return fmt.Errorf("%s: Lookup, LookupActivity and AtMostOnce exclude each other: set the one way this API's unknown outcomes are settled", field)
	}
	if r.Lookup == "" {
		if r.Items != "" {
			return fmt.Errorf("%s.Items needs Lookup: it is the list in the lookup's answer", field)
		}
		return nil
	}
	if strings.Count(r.Lookup, KeyToken) != 1 {
		return fmt.Errorf("%s.Lookup %q: put %s exactly once where the key goes, e.g. https://api.example.com/payments?client_reference={key}", field, r.Lookup, KeyToken)
	}
	_, lo, err := httpurl.Parse(r.URL("k"))
	if err != nil {
		return fmt.Errorf("%s.Lookup: %w", field, err)
	}
	if _, co, err := httpurl.Parse(callURL); err == nil && co != lo {
		return fmt.Errorf("%s.Lookup is on %s, the call on %s: a lookup asks the API the call went to, with its credential", field, lo, co)
	}
	if r.Items != "" {
		if _, err := keyplace.Parse("body:" + r.Items); err != nil {
			return fmt.Errorf("%s.Items %q: a dotted path of member names, e.g. data", field, r.Items)
		}
	}
	return nil
}

// CheckPlace checks that a Lookup can find a key that goes at place: an
// API without keys ignores a key header.
func (r Reconcile) CheckPlace(field string, place keyplace.Place) error {
	if r.Lookup != "" && place.In == keyplace.Header {
		return fmt.Errorf("%s.Lookup needs the key where the API keeps it: an API without keys ignores the key header, so no lookup can find it; set KeyIn to body:FIELD (the member the API stores and filters on) or query:NAME", field)
	}
	return nil
}

// URL is the lookup's URL for key.
func (r Reconcile) URL(key string) string {
	return strings.Replace(r.Lookup, KeyToken, url.QueryEscape(key), 1)
}

// Found is what a lookup's answer says.
type Found int

const (
	// NotFound: no record; the call sends again.
	NotFound Found = iota
	// One: one record, the result.
	One
	// Many: more than one record matches; none is the result.
	Many
	// Unreadable: the answer is not what a lookup answers (not JSON, no
	// list at Items): nothing can be concluded.
	Unreadable
)

// ErrStatus is Read's error for an answer that is not a lookup's: a status
// other than 2xx and 404.
var ErrStatus = errors.New("not a lookup's answer")

// Read reads a lookup's answer: a 404 is NotFound; a 2xx's body is the
// list of matches (at items, or the whole body), or, when it is an object
// and items is "", the record. It returns the record for One and the
// number of matches.
func Read(status int, body []byte, items string) (Found, json.RawMessage, int) {
	if status == 404 {
		return NotFound, nil, 0
	}
	if status < 200 || status > 299 {
		return Unreadable, nil, 0
	}
	v := json.RawMessage(bytes.TrimSpace(body))
	if items != "" {
		var ok bool
		if v, ok = jsonfield.Value(body, items); !ok {
			return Unreadable, nil, 0
		}
	}
	if !json.Valid(v) {
		return Unreadable, nil, 0
	}
	switch {
	case len(v) > 0 && v[0] == '[':
		var list []json.RawMessage
		if json.Unmarshal(v, &list) != nil {
			return Unreadable, nil, 0
		}
		switch len(list) {
		case 0:
			return NotFound, nil, 0
		case 1:
			if r := bytes.TrimSpace(list[0]); len(r) > 0 && r[0] == '{' {
				return One, r, 1
			}
			return Unreadable, nil, 1
		}
		return Many, nil, len(list)
	case len(v) > 0 && v[0] == '{' && items == "":
		return One, v, 1
	}
	return Unreadable, nil, 0
}
