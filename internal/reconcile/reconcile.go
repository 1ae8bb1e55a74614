// Package reconcile holds how a call settles an attempt of unknown
// outcome with an API that does not honour idempotency keys, by a lookup
// or by a person's decision (Reconcile), and the one reading of a
// lookup's answer (Read).
package reconcile

import (
	"bytes"
	"encoding/json"
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
	// (or run) made, with {key} where the idempotency key goes
	// (query-escaped), e.g.
	// "https://api.example.com/payments?client_reference={key}"; it is
	// asked before every request. It is on the call's origin. The key
	// must reach the API where it keeps it, so the call's key goes in its
	// body or query (KeyIn "body:client_reference"), not in a header the
	// API ignores; a record matches only when it carries the key.
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
	// list at Items, records that do not carry the key, a 404 from a list
	// route): nothing can be concluded.
	Unreadable
)

// KeyInPath reports whether the key goes in the lookup URL's path (a
// per-record route such as /payments/by-reference/{key}, whose 404 means
// "no such record"), not in its query (a list route, whose 404 means the
// route is wrong).
func (r Reconcile) KeyInPath() bool {
	before, _, _ := strings.Cut(r.Lookup, "?")
	return strings.Contains(before, KeyToken)
}

// Read reads a lookup's answer for key: a list of records (the whole
// body, or its member at items), or, when items is "", one record (an
// object). Only records that carry key as a string value (at any depth)
// match: a record that does not is another's, which a route that
// ignored its filter listed. No match in an empty list is NotFound; in
// a list of others' records, or in an object without the key (a list's
// envelope, say), it is Unreadable: nothing can be concluded. A 404 is
// NotFound only for a per-record route (keyInPath). It returns the one
// matching record for One and the number of matches.
func Read(status int, body []byte, items, key string, keyInPath bool) (Found, json.RawMessage, int) {
	if status == 404 && keyInPath {
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
	if !json.Valid(v) || len(v) == 0 {
		return Unreadable, nil, 0
	}
	var list []json.RawMessage
	switch {
	case v[0] == '[':
		if json.Unmarshal(v, &list) != nil {
			return Unreadable, nil, 0
		}
		if len(list) == 0 {
			return NotFound, nil, 0
		}
	case v[0] == '{' && items == "":
		list = []json.RawMessage{v}
	default:
		return Unreadable, nil, 0
	}
	var match json.RawMessage
	n := 0
	for _, rec := range list {
		rec = bytes.TrimSpace(rec)
		if len(rec) > 0 && rec[0] == '{' && carries(rec, key) {
			match = rec
			n++
		}
	}
	switch n {
	case 0:
		return Unreadable, nil, 0
	case 1:
		return One, match, 1
	}
	return Many, nil, n
}

// carries reports whether the JSON value v holds s as a string value, at
// any depth.
func carries(v json.RawMessage, s string) bool {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(x any) bool {
		switch x := x.(type) {
		case string:
			return x == s
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		case map[string]any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(x)
}
