// Package serverflag reads the reference server's settings (package
// testsuite) from text: the flags of cmd/demoapi and the scripts of the
// interop suite. Tests in Go set the testsuite values directly.
package serverflag

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// ParseScript parses a comma-separated script such as "503,429:1,201": each
// item a status, optionally ":" and a Retry-After value.
func ParseScript(s string) ([]testsuite.Step, error) {
	var steps []testsuite.Step
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		code, ra, _ := strings.Cut(item, ":")
		n, err := strconv.Atoi(code)
		if err != nil || n < 100 || n > 599 {
			return nil, fmt.Errorf("script item %q: want STATUS or STATUS:RETRY-AFTER with a status 100-599, e.g. 503 or 429:1", item)
		}
		steps = append(steps, testsuite.Step{Status: n, RetryAfter: ra})
	}
	return steps, nil
}

// ParseDialect returns the preset named "ietf" (or ""), "stripe" or
// "express", in any case.
func ParseDialect(name string) (testsuite.Dialect, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "ietf", "":
		return testsuite.IETFDialect(), nil
	case "stripe":
		return testsuite.StripeDialect(), nil
	case "express":
		return testsuite.ExpressDialect(), nil
	}
	return testsuite.Dialect{}, fmt.Errorf("dialect %q: want ietf, stripe or express", name)
}

// ParseAsyncStyle checks an Async.Style name ("" is AsyncLocation).
func ParseAsyncStyle(s string) (testsuite.AsyncStyle, error) {
	switch style := testsuite.AsyncStyle(s); style {
	case "":
		return testsuite.AsyncLocation, nil
	case testsuite.AsyncLocation, testsuite.AsyncSeeOther, testsuite.AsyncAzure, testsuite.AsyncOperationLocation, testsuite.AsyncGoogle:
		return style, nil
	}
	return "", fmt.Errorf("async style %q: want %s, %s, %s, %s or %s", s, testsuite.AsyncLocation, testsuite.AsyncSeeOther, testsuite.AsyncAzure, testsuite.AsyncOperationLocation, testsuite.AsyncGoogle)
}
