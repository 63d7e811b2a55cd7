package local

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gangbench/gangbench/clusters"
)

// waitReady polls check until it succeeds, the process exits, or timeout passes. Failure names the
// component, what was last seen, and the tail of its log, because "timed out" alone sends users digging.
func waitReady(ctx context.Context, p *process, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it was ready (%s); last check: %v\n--- last lines of %s ---\n%s",
				p.name, p.exitSummary(), last, p.logPath, logTail(p.logPath, 25))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: last check: %v\n--- last lines of %s ---\n%s",
				p.name, timeout, last, p.logPath, logTail(p.logPath, 25))
		case <-tick.C:
		}
	}
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
