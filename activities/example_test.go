package activities_test

import (
	"cmp"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/request"
)

func ExampleNew() {
	// On the worker: the API token comes from the worker's environment (here
	// a stand-in) and is sent only to its own origin; workflows never see it.
	token := cmp.Or(os.Getenv("PAY_API_TOKEN"), "sk_test_4eC39HqLyjWDarjtT1zdp7dc")
	origin := "https://pay.example.com"
	acts, err := activities.New(activities.Config{
		AllowedOrigins: []string{origin},
		Credentials:    map[string]http.Header{origin: {"Authorization": {"Bearer " + token}}},
	})
	if err != nil {
		panic(err)
	}
	_ = acts // acts.Register(w) on a worker.Worker
	fmt.Println("ok")
	// Output: ok
}

func ExampleConvention() {
	// A server that takes its key in PayPal-Request-Id and answers 423 while
	// a request with the key is still being processed.
	paypal := activities.IETF()
	paypal.KeyHeader = "PayPal-Request-Id"
	paypal.InFlight = append(paypal.InFlight, activities.Signal{Status: 423, Body: "in progress"})
	_, err := activities.New(activities.Config{
		AllowedOrigins: []string{"https://api-m.paypal.com", "https://api.stripe.com"},
		Conventions: map[string]activities.Convention{
			"https://api-m.paypal.com": paypal,
			"https://api.stripe.com":   activities.Stripe(),
		},
	})
	fmt.Println(err)
	// Output: <nil>
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Wed, 02 Dec 2026 12:00:30 GMT", "-1", "soon"} {
		d, ok := activities.ParseRetryAfter(v, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 30s true
	// 0s false
	// 0s false
}

func ExampleBackoff_Ceiling() {
	b := request.Backoff{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second}
	for attempt := int32(1); attempt <= 7; attempt++ {
		fmt.Print(b.Ceiling(attempt), " ")
	}
	fmt.Println()
	// Output: 200ms 400ms 800ms 1.6s 3.2s 6.4s 10s
}
