package local

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/internal/poll"
	"github.com/gangbench/gangbench/internal/proc"
)

// waitReady polls check until it succeeds, the process exits, or timeout passes. Failure names the
// component, what was last seen, and the tail of its log, because "timed out" alone sends users digging.
func waitReady(ctx context.Context, p *process, timeout time.Duration, check func(context.Context) error) error {
	var last error
	err := poll.Until(ctx, p.name+" to be ready", 100*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		if !p.running() {
			// Waiting out the timeout for a component that is gone would only delay the log tail.
			return false, "", poll.Stop(fmt.Errorf("%s exited before it was ready (%s); last check: %v", p.name, p.exitSummary(), last))
		}
		// One check must not eat the whole wait: an apiserver that accepts and never answers is
		// asked again.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		last = check(cctx)
		return last == nil, "", last
	})
	if err != nil {
		return fmt.Errorf("%w\n--- last lines of %s ---\n%s", err, p.logPath, proc.LogTail(p.logPath, 25))
	}
	return nil
}

// healthCheck GETs a health endpoint and wants a 200 whose body says ok (or, for etcd, health true).
func healthCheck(e clusters.Endpoint) func(context.Context) error {
	return func(ctx context.Context) error {
		body, err := e.Get(ctx)
		if err != nil {
			return err
		}
		s := strings.TrimSpace(string(body))
		if s == "ok" || strings.Contains(s, `"health":"true"`) {
			return nil
		}
		return fmt.Errorf("GET %s: unexpected body %q", e.URL, s)
	}
}
