package host

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"google.golang.org/grpc/codes"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
	"github.com/idemhttp/temporal-idempotent-http/internal/httpurl"
)

// originQueues are the allowed origins' own task queues, which the worker
// always polls (requests with workflows.Request.OriginQueue run there, and
// with the shared rate on, every HTTP activity scheduled on the base queue:
// routing), and the reporter to their governors. It is the activity's
// Config.SharedRate, for those queues only (a request on another queue
// keeps the worker's own rate); without a reporter (the shared rate off)
// no limit is in force for the activity.
type originQueues struct {
	base   string            // the worker's task queue
	queues map[string]string // task queue → origin
	// governors holds the Config each queue's governor starts with
	// (governorConfig of its origin's admission; none: the defaults).
	governors map[string]governor.Config

	mu sync.RWMutex
	r  *governor.Reporter // set by start with the shared rate on
}

func newOriginQueues(base string, origins []string) *originQueues {
	q := &originQueues{base: base, queues: map[string]string{}}
	for _, o := range origins {
		// The origins were validated by activities.New's rules: canonical
		// form as the workflow side names the queue.
		if canon, err := httpurl.ParseOrigin(o); err == nil {
			o = canon
		}
		q.queues[httpurl.OriginQueue(base, o)] = o
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

// Workers is activities.SharedRate's: the workers polling taskQueue, as
// the reporter last read them (1: not an origin's queue, or the shared
// rate off).
func (q *originQueues) Workers(taskQueue string) int {
	if r := q.reporter(taskQueue); r != nil {
		return r.Pollers(taskQueue)
	}
	return 1
}

// Record is activities.SharedRate's.
func (q *originQueues) Record(taskQueue string, throttled, failed bool) {
	if r := q.reporter(taskQueue); r != nil {
		r.Record(taskQueue, throttled, failed)
	}
}

// start starts a worker of acts on each origin's queue and, with shared,
// a worker of the governors on governor.TaskQueue(base) and the reporter;
// stop stops them.
func (q *originQueues) start(c client.Client, acts *activities.Activities, opts client.Options, logger *slog.Logger, shared bool) (stop func(), err error) {
	stopWorkers, err := q.startWorkers(c, acts, logger)
	if err != nil {
		return nil, err
	}
	if !shared {
		return stopWorkers, nil
	}
	// The governors and the reports are the worker's own traffic: not
	// traced (a trace a second per origin and worker), metrics kept.
	plain := opts
	plain.Interceptors = nil
	gc, err := client.NewClientFromExisting(c, plain)
	if err != nil {
		stopWorkers()
		return nil, fmt.Errorf("shared rate: a client for the governors: %w", err)
	}
	gtq := governor.TaskQueue(q.base)
	gw := worker.New(gc, gtq, worker.Options{WorkerStopTimeout: 15 * time.Second})
	(&governor.Activities{Client: gc}).Register(gw)
	if err := gw.Start(); err != nil {
		gc.Close()
		stopWorkers()
		return nil, fmt.Errorf("shared rate: starting the worker of the governors' task queue %q: %w", gtq, err)
	}
	logger.Info("polling governor task queue", slog.String("task_queue", gtq))
	stopReporter := q.startReporter(gc, opts, logger)
	return func() {
		stopReporter()
		gw.Stop()
		gc.Close()
		stopWorkers()
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
			return nil, fmt.Errorf("starting the worker of %s's task queue %q: %w", origin, tq, err)
		}
		workers = append(workers, ow)
		logger.Info("polling origin task queue", slog.String("task_queue", tq), slog.String("origin", origin))
	}
	return stop, nil
}

// setAdmission records each origin's admission, for the governor of its
// queue: byOrigin's (keys as activities.Config.OriginAdmission takes
// them), else worker.
func (q *originQueues) setAdmission(worker activities.Admission, byOrigin map[string]activities.Admission) {
	own := map[string]activities.Admission{}
	for o, a := range byOrigin {
		if canon, err := httpurl.ParseOrigin(o); err == nil {
			o = canon
		}
		own[o] = a
	}
	q.governors = map[string]governor.Config{}
	for tq, o := range q.queues {
		a, ok := own[o]
		if !ok {
			a = worker
		}
		q.governors[tq] = governorConfig(a)
	}
}

// governorConfig is the Config of the governor of an origin whose
// admission is a: the cluster's breaker trips, opens and restarts as the
// origin's own breaker does (its settings, with their defaults), and is
// off where that breaker, or admission, is.
func governorConfig(a activities.Admission) governor.Config {
	b := a.WithDefaults().Breaker
	b.Off = b.Off || a.Off
	return governor.Config{Breaker: b}
}

// startReporter starts the reporter of the origins' queues to their
// governors, which it starts on governor.TaskQueue(base) (a governor
// started on base by an earlier version is signalled where it runs), as
// the worker's identity (default pid@host); stop stops it.
func (q *originQueues) startReporter(c client.Client, opts client.Options, logger *slog.Logger) (stop func()) {
	host, _ := os.Hostname()
	identity := cmp.Or(opts.Identity, fmt.Sprintf("%d@%s", os.Getpid(), host))
	// The limit in force is read every second, so that a worker stops
	// pacing attempts itself soon after the server does.
	r := governor.NewReporter(c, governor.TaskQueue(q.base), cmp.Or(opts.Namespace, client.DefaultNamespace), identity,
		governor.ReporterConfig{Logger: sdklog.NewStructuredLogger(logger), LimitInterval: time.Second,
			GovernorFor: func(tq string) governor.Config { return q.governors[tq] }})
	// Watch every origin's queue from the start: the limit in force, and
	// the worker's share, are known before the first attempt.
	for tq := range q.queues {
		r.Limit(tq)
	}
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

// sharedRateAllowed reports whether the worker may write the task-queue
// config of namespace (checkConfigWrite), and says in one log line at
// start why not: each worker then keeps its own rate per origin. An
// error that says nothing about the permission (the server unreachable
// for a moment) leaves the shared rate on: a governor refused later
// stops writing (governor.StatusUnsupported) and the workers keep their
// own rates.
func sharedRateAllowed(ctx context.Context, c client.Client, namespace, base string, logger *slog.Logger) bool {
	err := checkConfigWrite(ctx, c, namespace, base)
	if err == nil {
		return true
	}
	const off = "shared rate off: each worker keeps its own rate per origin (N workers may send up to N times what an API takes)"
	switch serviceerror.ToStatus(err).Code() {
	case codes.PermissionDenied:
		logger.Warn(off+": the Temporal server refused UpdateTaskQueueConfig: give the worker's identity write access to namespace "+namespace+" (or run with --shared-rate=false to say so)",
			slog.String("error", err.Error()))
		return false
	case codes.Unimplemented:
		logger.Warn(off+": the Temporal server has no UpdateTaskQueueConfig: upgrade it to a version with task-queue rate limits (this project tests Server 1.29.1), or run with --shared-rate=false",
			slog.String("error", err.Error()))
		return false
	}
	logger.Warn("shared rate: could not check that the worker may write the task-queue config; keeping the shared rate on (a governor the server refuses stops writing and the workers keep their own rates)",
		slog.String("error", err.Error()))
	return true
}

// checkConfigWrite asks the server to update the config of the governors'
// task queue's activity queue (governor.TaskQueue(base), on which no
// activity runs) with nothing to change, as governor.Identity: the same
// call, and so the same permission, as a governor's write, without
// writing anything (an empty update on Server 1.29.1 leaves the config as
// it is).
func checkConfigWrite(ctx context.Context, c client.Client, namespace, base string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.WorkflowService().UpdateTaskQueueConfig(ctx, &workflowservice.UpdateTaskQueueConfigRequest{
		Namespace:     namespace,
		Identity:      governor.Identity,
		TaskQueue:     governor.TaskQueue(base),
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
	})
	return err
}
