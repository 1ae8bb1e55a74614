package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
	"github.com/idemhttp/temporal-idempotent-http/internal/request"
)

// originQueues is the worker's --shared-rate: the allowed origins' own
// task queues and the reporter to their governors. It is the activity's
// Config.SharedRate, for those queues only (a request on another queue
// keeps the worker's own rate).
type originQueues struct {
	base   string            // the worker's task queue: the governors run there
	queues map[string]string // task queue → origin

	mu sync.RWMutex
	r  *governor.Reporter // set by start
}

func newOriginQueues(base string, origins []string) *originQueues {
	q := &originQueues{base: base, queues: map[string]string{}}
	for _, o := range origins {
		// The origins were validated by activities.New's rules: canonical
		// form as the workflow side names the queue.
		if canon, err := request.ParseOrigin(o); err == nil {
			o = canon
		}
		q.queues[request.OriginQueue(base, o)] = o
	}
	return q
}

func (q *originQueues) reporter(taskQueue string) *governor.Reporter {
	if _, ok := q.queues[taskQueue]; !ok {
		return nil
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.r
}

// Limit is activities.SharedRate's: the limit in force and this
// worker's share of it, as the reporter last read them.
func (q *originQueues) Limit(taskQueue string) (limit, share float64, ok bool) {
	if r := q.reporter(taskQueue); r != nil {
		limit, ok = r.Limit(taskQueue)
		return limit, r.Share(taskQueue), ok
	}
	return 0, 0, false
}

// Record is activities.SharedRate's.
func (q *originQueues) Record(taskQueue string, throttled, failed bool) {
	if r := q.reporter(taskQueue); r != nil {
		r.Record(taskQueue, throttled, failed)
	}
}

// start registers the governor on w (the worker of the base task queue),
// starts a worker of acts on each origin's queue and the reporter; stop
// stops them.
func (q *originQueues) start(c client.Client, w worker.Worker, acts *activities.Activities, opts client.Options, logger *slog.Logger) (stop func(), err error) {
	(&governor.Activities{Client: c}).Register(w)
	stopWorkers, err := q.startWorkers(c, acts, logger)
	if err != nil {
		return nil, err
	}
	stopReporter := q.startReporter(c, opts, logger)
	return func() {
		stopWorkers()
		stopReporter()
	}, nil
}

// startWorkers starts a worker of acts on each origin's queue. stop stops
// them side by side: each waits for its running activities up to
// WorkerStopTimeout.
func (q *originQueues) startWorkers(c client.Client, acts *activities.Activities, logger *slog.Logger) (stop func(), err error) {
	var workers []worker.Worker
	stop = func() {
		var wg sync.WaitGroup
		for _, ow := range workers {
			wg.Go(ow.Stop)
		}
		wg.Wait()
	}
	for tq, origin := range q.queues {
		ow := worker.New(c, tq, worker.Options{WorkerStopTimeout: 15 * time.Second})
		acts.Register(ow)
		if err := ow.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("--shared-rate: starting the worker of %s's task queue %q: %w", origin, tq, err)
		}
		workers = append(workers, ow)
		logger.Info("polling origin task queue", slog.String("task_queue", tq), slog.String("origin", origin))
	}
	return stop, nil
}

// startReporter starts the reporter of the origins' queues to their
// governors, as the worker's identity (default pid@host); stop stops it.
func (q *originQueues) startReporter(c client.Client, opts client.Options, logger *slog.Logger) (stop func()) {
	host, _ := os.Hostname()
	identity := cmp.Or(opts.Identity, fmt.Sprintf("%d@%s", os.Getpid(), host))
	// The limit in force is read every second, so that a worker stops
	// pacing attempts itself soon after the server does.
	r := governor.NewReporter(c, q.base, cmp.Or(opts.Namespace, client.DefaultNamespace), identity,
		governor.ReporterConfig{Logger: sdklog.NewStructuredLogger(logger), LimitInterval: time.Second})
	q.mu.Lock()
	q.r = r
	q.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	r.Start(ctx)
	return func() {
		cancel()
		r.Close()
	}
}
