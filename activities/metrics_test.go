package activities_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
)

// counting is a client.MetricsHandler that sums counters by name and tags.
type counting struct {
	mu     *sync.Mutex
	tags   map[string]string
	counts map[string]int64
}

func newCounting() *counting {
	return &counting{mu: &sync.Mutex{}, tags: map[string]string{}, counts: map[string]int64{}}
}

func (c *counting) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(c.tags)
	maps.Copy(merged, tags)
	return &counting{mu: c.mu, tags: merged, counts: c.counts}
}

func (c *counting) key(name string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.tags)) {
		if k == "operation" || k == "outcome" || k == "error_type" {
			parts = append(parts, k+"="+c.tags[k])
		}
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func (c *counting) Counter(name string) client.MetricsCounter {
	return counter{c, c.key(name)}
}
func (c *counting) Gauge(string) client.MetricsGauge { return nop{} }
func (c *counting) Timer(string) client.MetricsTimer { return nop{} }

type counter struct {
	c   *counting
	key string
}

func (k counter) Inc(n int64) {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	k.c.counts[k.key] += n
}

type nop struct{}

func (nop) Update(float64)       {}
func (nop) Record(time.Duration) {}

func TestAttemptCounters(t *testing.T) {
	tests := []struct {
		status int
		url    string
		want   string
	}{
		{201, "", "idempotent_http_attempts{error_type=none,operation=charge,outcome=success}"},
		{503, "", "idempotent_http_attempts{error_type=HTTPRetryableStatus,operation=charge,outcome=retryable}"},
		{400, "", "idempotent_http_attempts{error_type=HTTPClientError,operation=charge,outcome=non_retryable}"},
		{0, "http://127.0.0.3:1/x", "idempotent_http_attempts{error_type=OriginNotAllowed,operation=charge,outcome=non_retryable}"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status, tt.url), func(t *testing.T) {
			srv := newRecorder(t, status(tt.status, "{}"))
			m := newCounting()
			var s testsuite.WorkflowTestSuite
			s.SetMetricsHandler(m)
			env := s.NewTestActivityEnvironment()
			a, err := activities.New(activities.Config{AllowedOrigins: []string{srv.URL}})
			require.NoError(t, err)
			a.Register(env)
			r := req(srv.URL)
			if tt.url != "" {
				r.URL = tt.url
			}
			_, _ = env.ExecuteActivity(activities.ActivityName, r)
			m.mu.Lock()
			defer m.mu.Unlock()
			assert.Equal(t, int64(1), m.counts[tt.want], "counters: %v", m.counts)
		})
	}
}
