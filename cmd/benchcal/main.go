package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/bench"
)

func main() {
	k := flag.Int("k", 5, "")
	w := flag.Duration("w", 500*time.Millisecond, "")
	base := flag.Duration("base", time.Second, "")
	cp := flag.Duration("cap", 5*time.Second, "")
	strat := flag.String("s", "none,full", "")
	shift := flag.String("shift", "", "")
	flag.Parse()
	ctx := context.Background()
	cli, err := bench.EnsureCLI(ctx, "", log.Printf)
	if err != nil { log.Fatal(err) }
	dir, _ := os.MkdirTemp("", "benchcal")
	var extra []string
	if *shift != "" { extra = []string{"--dynamic-config-value", "history.timerProcessorMaxTimeShift=\"" + *shift + "\""} }
	t0 := time.Now()
	h, err := bench.StartHarness(ctx, cli, dir, "cal", extra...)
	if err != nil { log.Fatal(err) }
	defer h.Stop()
	log.Printf("harness up in %s (logs %s)", time.Since(t0), dir)
	p := bench.DefaultContention
	p.Capacity, p.Window, p.Base, p.Cap = *k, *w, *base, *cp
	for _, s := range splitComma(*strat) {
		r, err := bench.RunContention(ctx, h, p, activities.Jitter(s), fmt.Sprint(time.Now().Unix()))
		if err != nil { log.Fatal(err) }
		sim := bench.SimulateMean(p.SimConfig(100, activities.Jitter(s), 1), 20)
		log.Printf("%-13s req=%d succ=%d failed=%d last=%s wall=%s startspread=%s maxatt=%d | sim req=%.0f time=%s", s, r.Requests, r.Successes, r.Failed, r.ToLastSuccess.Round(time.Millisecond), r.Wall.Round(time.Millisecond), r.StartSpread.Round(time.Millisecond), r.MaxAttempts, sim.Requests, sim.Duration.Round(time.Millisecond))
		// print first 3 bursts
		if s == "none" {
			prev := time.Duration(-1)
			n := 0
			for _, l := range r.Log {
				if prev >= 0 && l.At-prev > 300*time.Millisecond {
					fmt.Printf("  burst n=%d ends %s; next at %s\n", n, prev.Round(time.Millisecond), l.At.Round(time.Millisecond))
					n = 0
				}
				n++
				prev = l.At
			}
		}
	}
}

func splitComma(s string) []string {
	var out []string
	cur := ""
	for _, c := range s { if c == ',' { out = append(out, cur); cur = "" } else { cur += string(c) } }
	return append(out, cur)
}
