package perf

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gangbench/gangbench/observe/metrics"
	"github.com/gangbench/gangbench/perf/measure"
)

// ItemQuietWait records, per repetition, how long the measured window waited for a quiet control
// plane and the apiserver's request rate when it started. It describes the cluster, not the
// scheduler, so compare leaves it out like the harness's own figures.
const ItemQuietWait = "quietWait"

// Settling before the measured window. A freshly made cluster is still busy when its nodes report
// Ready: at 5000 nodes kwok lists each node's pods as it takes the node over, and the node lifecycle
// controller writes one RegisteredNode event per node through its rate-limited client, both for tens
// of seconds. Between repetitions, namespace deletion and garbage collection run on. scheduler_perf
// has none of this in its window, so a window opened on a busy apiserver measures the harness's
// start-up beside the scheduler (seen: 1120 pod LISTs and 782 events inside one 1000-gang window).
const (
	// QuietRate is the apiserver request rate (requests per second, heartbeats excluded) below
	// which the control plane counts as quiet. An idle cluster of either profile serves a few a
	// second (controller resyncs); a taking-over kwok or an event backlog serves hundreds.
	QuietRate = 10
	// quietInterval is the scrape period. The wait is before the window, so a 5000-node
	// apiserver rendering megabytes of /metrics text each second costs nothing measured.
	quietInterval = time.Second
	// quietHold is how many intervals in a row must be quiet: one quiet second can be a lull
	// between two bursts. Two keep the wait on an idle cluster at 2 s a repetition.
	quietHold = 2
	// QuietTimeout bounds the wait; a control plane that never goes quiet (a user's busy cluster)
	// is measured anyway, with a note saying what kept it busy.
	QuietTimeout = 3 * time.Minute
)

// heartbeat reports whether a request series is traffic the profile keeps on purpose for the whole
// run (node leases, node status heartbeats): it is in every window alike, so it is no reason to wait.
func heartbeat(labels map[string]string) bool {
	switch {
	case labels["resource"] == "leases":
		return true
	case labels["resource"] == "nodes" && labels["subresource"] == "status":
		return true
	}
	return false
}

// requestCounts sums apiserver_request_total by "verb resource[/subresource]", without heartbeats
// and without non-resource requests (among them this gate's own /metrics scrapes).
func requestCounts(s *metrics.Snapshot) map[string]float64 {
	return measure.CounterSums(s, measure.MetricRequests, func(l map[string]string) string {
		if heartbeat(l) {
			return ""
		}
		return measure.RequestKey(l)
	})
}

// quietState is the rate between two scrapes and what made it up.
type quietState struct {
	rate float64            // requests per second over the interval
	top  map[string]float64 // per "verb resource", requests per second
}

func (q quietState) String() string {
	keys := slices.Collect(maps.Keys(q.top))
	// Busiest first; equal rates by name, so the note reads the same for the same counts.
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(q.top[b], q.top[a]), strings.Compare(a, b)) })
	var parts []string
	for _, k := range keys[:min(len(keys), 3)] {
		parts = append(parts, fmt.Sprintf("%s %.1f/s", k, q.top[k]))
	}
	s := fmt.Sprintf("%.1f requests/s", q.rate)
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

func between(before, after map[string]float64, d time.Duration) quietState {
	q := quietState{top: map[string]float64{}}
	secs := max(d.Seconds(), 1e-3)
	for k, v := range after {
		// A restarted apiserver resets its counters; its new count is the interval's.
		delta := v - before[k]
		if delta < 0 {
			delta = v
		}
		if delta > 0 {
			q.top[k] = delta / secs
			q.rate += delta / secs
		}
	}
	return q
}

// quietClock is the gate's time source; tests drive it without waiting.
type quietClock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// waitQuiet polls the apiserver's request counter until the rate has stayed below QuietRate for
// quietHold intervals, or until timeout. It returns how long it waited and the last interval's
// state; quiet is false when the timeout came first. Only a failed scrape or ctx is an error.
func waitQuiet(ctx context.Context, f metrics.Fetcher, clock quietClock, timeout time.Duration) (waited time.Duration, last quietState, quiet bool, err error) {
	start := clock.Now()
	snap, err := measure.ScrapeFamilies(ctx, f, measure.MetricRequests)
	if err != nil {
		return 0, last, false, fmt.Errorf("wait for a quiet control plane: %w", err)
	}
	// The clock, not the scrape's own time: the rates must be over the intervals the clock made.
	prev, prevAt := requestCounts(snap), clock.Now()
	calm := 0
	for {
		select {
		case <-ctx.Done():
			return clock.Now().Sub(start), last, false, ctx.Err()
		case <-clock.After(quietInterval):
		}
		snap, err := measure.ScrapeFamilies(ctx, f, measure.MetricRequests)
		if err != nil {
			return clock.Now().Sub(start), last, false, fmt.Errorf("wait for a quiet control plane: %w", err)
		}
		cur, at := requestCounts(snap), clock.Now()
		last = between(prev, cur, at.Sub(prevAt))
		prev, prevAt = cur, at
		if last.rate < QuietRate {
			calm++
		} else {
			calm = 0
		}
		waited = clock.Now().Sub(start)
		if calm >= quietHold {
			return waited, last, true, nil
		}
		if waited >= timeout {
			return waited, last, false, nil
		}
	}
}
