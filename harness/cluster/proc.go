package cluster

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// runLogged runs a short-lived command to completion, appending its output
// to spec.LogPath and returning the end of that log in the error when it
// fails.
func runLogged(spec itest.Spec, timeout time.Duration) error {
	p, err := itest.Start(spec)
	if err != nil {
		return err
	}
	select {
	case <-p.Done():
	case <-time.After(timeout):
		_ = p.Stop(2 * time.Second)
		return fmt.Errorf("cluster: %s timed out after %s; log %s:\n%s", spec.Name, timeout, spec.LogPath, itest.FileTail(spec.LogPath, 4096))
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("cluster: %s %s: %w; log %s:\n%s", spec.Path, strings.Join(spec.Args, " "), err, spec.LogPath, itest.FileTail(spec.LogPath, 4096))
	}
	return nil
}
