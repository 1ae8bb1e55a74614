package serverflag

import (
	"reflect"
	"strings"
	"testing"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

func TestParseScript(t *testing.T) {
	steps, err := ParseScript("503, 429:1,201,500")
	if err != nil {
		t.Fatal(err)
	}
	want := []testsuite.Step{{Status: 503}, {Status: 429, RetryAfter: "1"}, {Status: 201}, {Status: 500}}
	if !reflect.DeepEqual(steps, want) {
		t.Errorf("ParseScript = %v, want %v", steps, want)
	}
	for _, bad := range []string{"abc", "99", "600", "503:1,x"} {
		if _, err := ParseScript(bad); err == nil {
			t.Errorf("ParseScript(%q): want an error", bad)
		}
	}
}

func TestParseDialect(t *testing.T) {
	for name, want := range map[string]testsuite.Dialect{"ietf": testsuite.IETFDialect(), "": testsuite.IETFDialect(), "Stripe": testsuite.StripeDialect(), " express ": testsuite.ExpressDialect()} {
		got, err := ParseDialect(name)
		if err != nil || got != want {
			t.Errorf("ParseDialect(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := ParseDialect("paypal"); err == nil {
		t.Error("ParseDialect(paypal): want an error")
	}
}

func TestParseAsyncStyle(t *testing.T) {
	for in, want := range map[string]testsuite.AsyncStyle{"": testsuite.AsyncLocation, "azure": testsuite.AsyncAzure, "google": testsuite.AsyncGoogle} {
		if got, err := ParseAsyncStyle(in); err != nil || got != want {
			t.Errorf("ParseAsyncStyle(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseAsyncStyle("soap"); err == nil || !strings.Contains(err.Error(), "want location") {
		t.Errorf("ParseAsyncStyle(soap) = %v; want an error listing the styles", err)
	}
}
