// Package longrunning reads what a server answers about a long-running
// operation, one type per style of convention, as azcore's
// internal/pollers do: [StatusCode] (RFC 9110's 202 with Location and 303
// See Other), [Document] (a status document's state field: Azure's
// Azure-AsyncOperation, the Microsoft REST API Guidelines'
// Operation-Location), [Done] (Google's AIP-151 Operation, with its
// cancel request) and [Rule] (the fallback poll of an operation awaited by
// webhook, workflows.WebhookPoll).
//
// A style is a pure reader of one answer (its status, headers and body):
// it says what the answer means (the operation still running and where
// the monitor moved, succeeded, failed or cancelled with the state's name
// as the server wrote it, where the result is). It sends nothing and
// checks no URL: package activities chooses the style from the origin's
// activities.LongRunning settings and the start answer, checks every URL
// a style returns before it is followed or written to history, and sends
// every request (start, poll, cancel, result) through its one pipeline:
// admission, the exchange, the classification, the observation.
//
// To add a style: a file here with its type and Read, and a preset in
// activities/longrunning.go whose settings choose it.
package longrunning

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/idemhttp/temporal-idempotent-http/internal/jsonfield"
)

// Answer is one answer of the server as a style reads it. Body is the
// whole body, decoded: the activity reads none it cut or cannot decode
// for a style that reads status documents (see Style.Document).
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// State is what an answer says of the operation.
type State int

const (
	// Unreadable: the answer is no status document the style reads.
	Unreadable State = iota
	// Running: the operation goes on; Reading.Next, when set, is the
	// monitor's new URL (the next poll goes there).
	Running
	// Ended: the operation ended, and the answer (or, with Reading.Next,
	// the answer of a GET of Next) is its result, classified as any
	// answer is: a 2xx the result, a 4xx the server's refusal.
	Ended
	// Succeeded, Failed and Canceled: the status document says so.
	Succeeded
	Failed
	Canceled
	// Elsewhere: the answer of a GET of Reading.Next is read in this
	// one's place by the same style (a 303 to the resource a Rule reads).
	Elsewhere
)

// Reading is what one answer of the monitor means.
type Reading struct {
	State State
	// Name is the state as the server wrote it ("Running", "done: true"),
	// not yet redacted: the activity redacts and bounds it before it goes
	// to history, logs or messages.
	Name string
	// Next is a URL the answer names, as written (it may be relative to
	// the answer's URL): see State.
	Next string
	// Detail is the part of the status document that holds the server's
	// error (Failed, Canceled) or the result (Succeeded); nil when the
	// document names none (the whole document is then the error or the
	// result).
	Detail json.RawMessage
}

// Style reads the answers of a status monitor in one convention.
type Style interface {
	// Read reads an answer of the monitor whose status is a 2xx or 303
	// See Other; any other answer is the activity's to classify.
	Read(a Answer) Reading
	// Document returns the field of the status document Read reads the
	// state from, and whether Read reads a status document at all (the
	// activity then reads the body whole, or fails).
	Document() (field string, reads bool)
}

// MonitorHeader returns the first of names that h holds and its value:
// the header by which a start answer names its status monitor (Location
// for RFC 9110, Azure-AsyncOperation, Operation-Location). Both are ""
// when h holds none.
func MonitorHeader(h http.Header, names []string) (name, value string) {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return n, v
		}
	}
	return "", ""
}

// seeOther is what a 303 See Other means in every style but Rule: the
// operation ended, its result is at Location (RFC 9110, section 15.4.4).
func seeOther(a Answer) (Reading, bool) {
	if a.Status != http.StatusSeeOther {
		return Reading{}, false
	}
	return Reading{State: Ended, Next: a.Header.Get("Location")}, true
}

// stillRunning reads r of a 202 Accepted: one without a readable state
// is still running.
func stillRunning(r Reading, status int) Reading {
	if r.State == Unreadable && status == http.StatusAccepted {
		r.State = Running
	}
	return r
}

// field is the value at path in body, nil when it has none.
func field(body []byte, path string) json.RawMessage {
	if v, ok := jsonfield.Value(body, path); ok {
		return v
	}
	return nil
}

// in reports whether s is one of values, compared case-insensitively.
func in(values []string, s string) bool {
	return slices.ContainsFunc(values, func(v string) bool { return strings.EqualFold(v, s) })
}
