package measure

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/metrics"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/stats"
	"github.com/gangbench/gangbench/results"
)

// Binding counter: one POST to pods/binding per bound pod (gang-semantics §6.2).
const (
	// MetricRequests is the apiserver's request counter, by verb, resource, subresource and code.
	MetricRequests = "apiserver_request_total"
	// SampleInterval is the width of the throughput samples (scheduler_perf samples once a second).
	SampleInterval = time.Second
)

// BindingSelector selects successful binding calls in apiserver_request_total.
func BindingSelector() map[string]string {
	return map[string]string{"resource": "pods", "subresource": "binding", "verb": "POST", "code": "201"}
}

// More items of the binding measurement.
const (
	// ItemAPIServerBindingRate is the apiserver's count of successful binding calls over the
	// interval between its two scrapes.
	ItemAPIServerBindingRate = "apiserverBindingRate"
)

type bindingRate struct {
	env    *Env
	start  time.Time
	before *metrics.Snapshot
}

func newBindingRate(env *Env) Measurement { return &bindingRate{env: env} }

func (m *bindingRate) Start(ctx context.Context) error {
	s, err := scrape(ctx, m.env.Cluster.APIServerMetrics, MetricRequests)
	if err != nil {
		return fmt.Errorf("bindingRate: apiserver metrics before the run: %w", err)
	}
	m.before = s
	// After the scrape: the window starts when the load may start, not before the scrape's latency.
	m.start = time.Now()
	return nil
}

func (m *bindingRate) Gather(ctx context.Context) ([]results.DataItem, error) {
	after, err := scrape(ctx, m.env.Cluster.APIServerMetrics, MetricRequests)
	if err != nil {
		return nil, fmt.Errorf("bindingRate: apiserver metrics after the run: %w", err)
	}
	server, err := metrics.Delta(m.before, after, MetricRequests, BindingSelector())
	if err != nil {
		// No binding ever happened in this apiserver's life: the series does not exist yet.
		if _, ok := after.Sum(MetricRequests, nil); !ok {
			return nil, fmt.Errorf("bindingRate: %w", err)
		}
		server = 0
	}
	events := m.env.Timeline.Events()
	// The window opens at the measured phase's first creation, not at Start: Start runs before the
	// apiserver scrape returns and the load generator's informers sync, and that idle time would
	// otherwise dilute the average (scheduler_perf starts its throughput collector right before
	// the measured op creates its first object).
	start := FirstCreation(events, m.env.Measured, m.start)
	binds := BindTimes(events, m.env.Measured, start)
	watch, withheld := WatchRate(start, binds)
	if withheld != "" {
		m.env.note("%s: %s", ItemBindingRate, withheld)
	}
	if m.env.Restarted[clusters.APIServer] {
		// The new apiserver process counted only the binds after its start; a delta against the
		// old process's count would be garbage, and a mismatch with the watch a false alarm.
		m.env.note("the apiserver was restarted by a fault during the window: its binding counter restarted from zero, so %s and %s are not reported (the watch-side %s is)", ItemAPIServerBindingRate, ItemBindCountMismatch, ItemBindingRate)
		return []results.DataItem{{Name: ItemBindingRate, Unit: "pods/s", Data: watch}}, nil
	}
	// The apiserver's count comes from two scrapes around the whole repetition, but every measured
	// bind falls inside the watch's window [first creation, last bind], so the count is divided by
	// that same window: the two averages then differ only if the counts do (bindCountMismatch).
	window := time.Duration(watch["DurationSeconds"] * float64(time.Second))
	serverWindow := after.Time.Sub(m.before.Time)
	items := []results.DataItem{
		{Name: ItemBindingRate, Unit: "pods/s", Data: watch},
		{Name: ItemAPIServerBindingRate, Unit: "pods/s", Data: map[string]float64{
			"Average": stats.Rate(int(server), window), "Count": server, "DurationSeconds": window.Seconds(), "ScrapeSeconds": serverWindow.Seconds(),
		}},
		{Name: ItemBindCountMismatch, Unit: "pods", Data: map[string]float64{Value: math.Abs(float64(len(binds)) - server)}},
	}
	if d := float64(len(binds)) - server; d != 0 {
		m.env.note("binding counts differ: the pod watch saw %d measured pods bound, the apiserver counted %g successful binding calls (another client binding pods, or a bind the watch missed)", len(binds), server)
	}
	return items, nil
}

// BindTimes returns the first bind time of each pod of the given phases bound at or after start.
func BindTimes(events []timeline.Event, phases []string, start time.Time) []time.Time {
	var out []time.Time
	for _, e := range events {
		if e.Kind == timeline.PodBound && slices.Contains(phases, e.Phase) && !e.Time.Before(start) {
			out = append(out, e.Time)
		}
	}
	return out
}

// FirstCreation is the time of the first PodGroup or pod created for the given phases at or after
// notBefore, or notBefore when there is none.
func FirstCreation(events []timeline.Event, phases []string, notBefore time.Time) time.Time {
	first := time.Time{}
	for _, e := range events {
		if (e.Kind == timeline.PodCreated || e.Kind == timeline.PodGroupCreated) && slices.Contains(phases, e.Phase) && !e.Time.Before(notBefore) {
			if first.IsZero() || e.Time.Before(first) {
				first = e.Time
			}
		}
	}
	if first.IsZero() {
		return notBefore
	}
	return first
}

// minSamples is how many one-second samples a percentile needs before it says more than the
// maximum does: below it, p50 of 2 samples is one of them and p99 of 30 is the largest.
var minSamples = []struct {
	key string
	n   int
}{{"Perc50", 10}, {"Perc90", 10}, {"Perc99", 100}}

// WatchRate computes the watch-side binding figures: the average over [start, last bind], the
// percentiles and maximum of the one-second samples (scheduler_perf's SchedulingThroughput,
// clusterloader2's Max), the count and the window. Percentiles with too few samples behind them
// are left out, and withheld says which and why ("" when none is).
func WatchRate(start time.Time, binds []time.Time) (data map[string]float64, withheld string) {
	return watchRate(start, binds, "binds")
}

// watchRate is WatchRate of any events (what names them in withheld: binds, allocations).
func watchRate(start time.Time, binds []time.Time, what string) (data map[string]float64, withheld string) {
	out := map[string]float64{"Count": float64(len(binds))}
	if len(binds) == 0 {
		out["Average"] = 0
		return out, ""
	}
	last := slices.MaxFunc(binds, func(a, b time.Time) int { return a.Compare(b) })
	window := last.Sub(start)
	out["Average"] = stats.Rate(len(binds), window)
	out["DurationSeconds"] = window.Seconds()
	// scheduler_perf's window instead: its throughput collector takes no sample before a pod is
	// scheduled and drops its first one, so what happens before the first bind (creating a 1000-pod
	// gang that cannot bind until it is whole) is outside it. The binds after the first, over first
	// to last bind, is that window; the reference ratio compares like with like through it.
	if first := slices.MinFunc(binds, func(a, b time.Time) int { return a.Compare(b) }); last.After(first) {
		out["SinceFirstBind"] = stats.Rate(len(binds)-1, last.Sub(first))
	}
	s := stats.Summarize(stats.Samples(start, binds, SampleInterval))
	for k, v := range s.Data() {
		switch k {
		case "Perc50", "Perc90", "Perc99", "Max":
			out[k] = v
		case "Count":
			out["Samples"] = v
		}
	}
	var left []string
	for _, m := range minSamples {
		if _, ok := out[m.key]; ok && s.Count < m.n {
			delete(out, m.key)
			left = append(left, fmt.Sprintf("%s (needs %d)", m.key, m.n))
		}
	}
	if len(left) > 0 {
		withheld = fmt.Sprintf("%d one-second samples (%s over %.1f s) are too few for %s; not reported (a longer scenario, or more groups, gives them)", s.Count, what, window.Seconds(), strings.Join(left, ", "))
	}
	return out, withheld
}
