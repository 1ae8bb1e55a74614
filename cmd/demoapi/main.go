// Command demoapi serves the reference idempotent server of package
// testsuite on an address, for the demo, the integration tests and for
// trying clients against it.
//
//	go run ./cmd/demoapi --addr 127.0.0.1:8081 --script 503,429:1,201
//
// Any POST, PUT, PATCH or DELETE path creates a record per distinct
// Idempotency-Key; GET /stats reports requests, distinct keys and records as
// JSON, and the same figures are logged on exit.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/cliutil"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demoapi:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:8081", "address to listen on")
	script := flag.String("script", "", `scripted answers before normal processing, e.g. "503,429:1,201"`)
	failureRate := flag.Float64("failure-rate", 0, "fraction of requests answered 503 at random, in [0, 1]")
	failureRetryAfter := flag.String("failure-retry-after", "", "Retry-After sent with random failures")
	processing := flag.Duration("processing-time", 0, "how long the work of a new key takes")
	window := flag.Duration("window", testsuite.DefaultWindow, "how long keys are remembered")
	capacity := flag.Int("capacity", 0, "requests accepted per --capacity-window, 503 beyond (0: unlimited)")
	capacityWindow := flag.Duration("capacity-window", time.Second, "window of --capacity")
	token := flag.String("require-token", os.Getenv("API_TOKEN"), "if set, requests must carry Authorization: Bearer TOKEN (env API_TOKEN)")
	flag.Parse()

	logger, err := cliutil.NewLogger("info", *token)
	if err != nil {
		return err
	}
	steps, err := testsuite.ParseScript(*script)
	if err != nil {
		return err
	}
	if *failureRate < 0 || *failureRate > 1 {
		return fmt.Errorf("--failure-rate %v: want a fraction in [0, 1]", *failureRate)
	}
	srv := testsuite.NewServer(testsuite.Options{
		Window: *window, ProcessingTime: *processing, FailureRate: *failureRate,
		FailureRetryAfter: *failureRetryAfter, Capacity: *capacity, CapacityWindow: *capacityWindow,
	})
	srv.Script(steps...)

	var h http.Handler = srv
	if *token != "" {
		h = requireToken(srv, *token)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
	}()
	logger.Info("reference API listening", "url", "http://"+ln.Addr().String(), "script", *script, "failure_rate", *failureRate)
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	st, _ := json.Marshal(srv.Stats())
	logger.Info("reference API stopped", slog.String("stats", string(st)))
	return nil
}

// requireToken answers 401 to requests without the expected bearer token,
// except GET /stats and /healthz.
func requireToken(next http.Handler, token string) http.Handler {
	want := "Bearer " + token
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Header.Get("Authorization") != want {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"missing or wrong bearer token"}` + "\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
