package activities_test

import (
	"cmp"
	"fmt"
	"net/http"
	"os"

	"github.com/idemhttp/temporal-idempotent-http/activities"
)

func ExampleNew() {
	// On the worker: the API token comes from the worker's environment (here
	// a stand-in) and is sent only to its own origin; workflows never see it.
	token := cmp.Or(os.Getenv("PAY_API_TOKEN"), "sk_test_4eC39HqLyjWDarjtT1zdp7dc")
	origin := "https://pay.example.com"
	acts, err := activities.New(activities.Config{
		AllowedOrigins: []string{origin},
		Credentials:    map[string]activities.Credential{origin: {Header: http.Header{"Authorization": {"Bearer " + token}}}},
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
	paypal := activities.IETFConvention()
	paypal.KeyHeader = "PayPal-Request-Id"
	paypal.InFlight = append(paypal.InFlight, activities.Signal{Status: 423, Body: "in progress"})
	_, err := activities.New(activities.Config{
		AllowedOrigins: []string{"https://api-m.paypal.com", "https://api.stripe.com"},
		Conventions: map[string]activities.Convention{
			"https://api-m.paypal.com": paypal,
			"https://api.stripe.com":   activities.StripeConvention(),
		},
	})
	fmt.Println(err)
	// Output: <nil>
}
