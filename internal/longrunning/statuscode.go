package longrunning

import "net/http"

// StatusCode is RFC 9110's style, the default (activities.AcceptedLocation):
// the monitor's status code says everything. A 202 Accepted (section
// 15.3.3) is still running, a Location on it moves the monitor (Azure
// SDKs follow the newest); a 303 See Other (section 15.4.4) names the
// result at its Location; any other 2xx is the result. A status document
// style falls back to it for a monitor named only by Location
// (Azure-AsyncOperation's fallback).
type StatusCode struct{}

// Read reads a 2xx or 303 answer of the monitor.
func (StatusCode) Read(a Answer) Reading {
	if r, ok := seeOther(a); ok {
		return r
	}
	if a.Status == http.StatusAccepted {
		return Reading{State: Running, Next: a.Header.Get("Location")}
	}
	return Reading{State: Ended}
}

// Document reports that StatusCode reads no status document.
func (StatusCode) Document() (string, bool) { return "", false }
