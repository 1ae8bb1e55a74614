package activities_test

import (
	"cmp"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/activities"
)

func ExampleNew() {
	// On the worker: the API token comes from the worker's environment and is
	// sent only to its own origin; workflows never see it.
	origin := "https://pay.example.com"
	acts, err := activities.New(activities.Config{
		AllowedOrigins: []string{origin},
		Credentials:    map[string]http.Header{origin: {"Authorization": {"Bearer " + os.Getenv("API_TOKEN")}}},
	})
	if err != nil {
		panic(err)
	}
	_ = acts // acts.Register(w) on a worker.Worker
	fmt.Println("ok")
	// Output: ok
}

func ExampleClassify() {
	for _, status := range []int{201, 409, 422, 429, 503, 501} {
		outcome, errType := activities.Classify(status, http.Header{})
		fmt.Println(status, outcome, cmp.Or(errType, "-"))
	}
	// Output:
	// 201 success -
	// 409 non_retryable HTTPClientError
	// 422 non_retryable HTTPClientError
	// 429 retryable HTTPRetryableStatus
	// 503 retryable HTTPRetryableStatus
	// 501 non_retryable HTTPNonRetryableStatus
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
	b := activities.Backoff{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second}
	for attempt := int32(1); attempt <= 7; attempt++ {
		fmt.Print(b.Ceiling(attempt), " ")
	}
	fmt.Println()
	// Output: 200ms 400ms 800ms 1.6s 3.2s 6.4s 10s
}
