package chaos

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
	"github.com/idemhttp/temporal-idempotent-http/internal/reconcile"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Way is how a campaign's operations meet their API (Config.Way): an API
// that honours idempotency keys, or one that ignores them
// (testsuite.PlainDialect), met three ways.
type Way string

// The ways of a campaign.
const (
	// WayKeyed: the API honours the key (the reference server's IETF
	// dialect, the key where Config.KeyIn says); a retry gets the stored
	// response.
	WayKeyed Way = ""
	// WayPlain: the API ignores keys and the operations retry as
	// against one that honours them: every attempt of unknown outcome
	// that the API processed is a duplicate. The baseline.
	WayPlain Way = "plain"
	// WayLookup: the API ignores keys; after an attempt of unknown
	// outcome the activity asks the API's lookup (Reconcile.Lookup, GET
	// /payments?client_reference={key}) before it sends again.
	WayLookup Way = "lookup"
	// WayAtMostOnce: the API ignores keys; after an attempt of unknown
	// outcome the activity pauses itself (Reconcile.AtMostOnce) and the
	// campaign's operator decides with the Temporal CLI, after asking the
	// API: `temporal activity complete` with the record it found, or
	// `temporal activity unpause` to send again.
	WayAtMostOnce Way = "at-most-once"
)

// Ways are the ways a campaign can take, the keyed one first.
var Ways = []Way{WayKeyed, WayPlain, WayLookup, WayAtMostOnce}

// String names w in logs and reports ("keyed" for WayKeyed).
func (w Way) String() string {
	if w == WayKeyed {
		return "keyed"
	}
	return string(w)
}

// Unkeyed reports whether w's API ignores keys.
func (w Way) Unkeyed() bool { return w != WayKeyed }

// ClientReference is the body member the operations of the ways without
// keys carry their key in (KeyIn "body:client_reference"), the member the
// API's lookup filters on (testsuite.Options.Lookup).
const ClientReference = "client_reference"

// Key places of Config.KeyIn.
const (
	// KeyInBody is the key in the JSON body, member client_reference.
	KeyInBody = "body:" + ClientReference
	// KeyInQuery is the key in the query parameter client_reference.
	KeyInQuery = "query:" + ClientReference
)

// paymentsPath is the API path the operations POST to (and look up).
const paymentsPath = "/payments"

// checkWay checks cfg's Way and KeyIn, and gives an unkeyed way its key
// place (KeyInBody).
func (c *Config) checkWay() error {
	switch c.Way {
	case WayKeyed, WayPlain, WayLookup, WayAtMostOnce:
	default:
		return fmt.Errorf("chaos: Config.Way %q: want one of %q, %q, %q or %q", c.Way, WayKeyed, WayPlain, WayLookup, WayAtMostOnce)
	}
	if c.KeyIn != "" {
		if _, err := keyplace.Parse(c.KeyIn); err != nil {
			return fmt.Errorf("chaos: Config.KeyIn: %w", err)
		}
	}
	if !c.Way.Unkeyed() {
		return nil
	}
	switch c.KeyIn {
	case "":
		c.KeyIn = KeyInBody
	case KeyInBody:
	default:
		return fmt.Errorf("chaos: Config.KeyIn %q with Way %q: an API without keys is looked up by a body member, so its key goes in %q (or leave KeyIn empty)", c.KeyIn, c.Way, KeyInBody)
	}
	return nil
}

// apiOptions are the options of the campaign's API: the reference server
// honouring keys where cfg.KeyIn puts them, or, for a way without keys,
// ignoring them (reading the key from the body for its records) with a
// lookup on client_reference.
func (c *Config) apiOptions() testsuite.Options {
	o := testsuite.Options{ProcessingTime: c.APIProcessingTime, CutRate: c.APICutRate}
	if c.Way.Unkeyed() {
		o.Dialect = testsuite.PlainDialect()
		o.Lookup = ClientReference
	} else {
		o.Dialect = testsuite.IETFDialect()
	}
	o.Dialect.KeyIn = c.KeyIn
	return o
}

// request is operation i's call to the API at base (the proxy's URL): the
// key where cfg.KeyIn puts it, and the way's Reconcile.
func (c *Config) request(base string, i int) workflows.Request {
	req := workflows.Request{
		Operation: operationName, URL: base + paymentsPath,
		Body:  fmt.Appendf(nil, `{"order":%d,"amount":%d}`, i, 100+i),
		KeyIn: c.KeyIn,
		// Every failed attempt waits at most 5 s: the operations
		// outlive the outage and the server's restart on retries,
		// not on luck.
		Retry:                  workflows.RetryOptions{MaximumInterval: 5 * time.Second, MaximumAttempts: 1000},
		ScheduleToCloseTimeout: c.ScheduleToClose,
		OriginQueue:            c.OriginQueue,
	}
	switch c.Way {
	case WayLookup:
		req.Reconcile = workflows.Reconcile{Lookup: base + paymentsPath + "?" + ClientReference + "=" + reconcile.KeyToken}
	case WayAtMostOnce:
		req.Reconcile = workflows.Reconcile{AtMostOnce: true}
		// A person's decision may take hours: the call refuses a bound
		// shorter than reconcile.MinDecisionWait.
		req.ScheduleToCloseTimeout = max(req.ScheduleToCloseTimeout, reconcile.MinDecisionWait)
	}
	return req
}

// prefix names the campaign's workflows and task queue: "chaos-SEED" for
// the keyed way with its key in the header (as before there were ways),
// else with the way and the key place, so that campaigns of several ways
// can share a cluster ("chaos-lookup-body-33").
func (c *Config) prefix() string {
	p := fmt.Sprintf("chaos-%d", c.Plan.Seed)
	if c.Way == WayKeyed && c.KeyIn == "" {
		return p
	}
	place, _, _ := strings.Cut(c.KeyIn, ":")
	return fmt.Sprintf("chaos-%s-%s-%d", c.Way, place, c.Plan.Seed)
}
