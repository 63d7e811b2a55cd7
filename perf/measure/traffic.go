package measure

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/metrics"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/results"
)

// The apiserver is the scheduler's busiest neighbour on a small machine, and what it serves besides
// the scheduler is what a harness adds to the measurement. This measurement counts, per measured
// pod, the requests the apiserver served and the watch events it sent during the window, by kind:
// the place to see what a profile, the load generator or a watch costs (scheduler_perf's own
// window has the scheduler's requests, the creations and nothing else).

// More items.
const (
	// ItemAPIRequests is the apiserver's requests per measured pod between the window's two
	// scrapes; label request is "VERB resource[/subresource]", or "all" for the sum. Data: PerPod
	// and Count.
	ItemAPIRequests = "apiserverRequests"
	// ItemWatchEvents is the watch events the apiserver sent per measured pod, by resource (label
	// resource, or "all"). Data: PerPod and Count.
	ItemWatchEvents = "apiserverWatchEvents"
	// ItemAPIErrors is the requests the apiserver answered with an error status (4xx, 5xx)
	// between the window's two scrapes, which ItemAPIRequests counts too; label request is
	// "VERB resource[/subresource] CODE", or "all". 429 is priority and fairness finding no seat
	// or queue place (client-go retries after the Retry-After it is given), 409 a conflict.
	// Data: PerPod and Count.
	ItemAPIErrors = "apiserverErrors"
	// ItemWatches is the watches open on the apiserver when the window closed, by resource (label
	// resource, or "all"): who the watch events went to. Data: Value.
	ItemWatches = "apiserverWatches"
	// MetricWatchEvents counts the events the apiserver sent to watchers.
	MetricWatchEvents = "apiserver_watch_events_total"
	// MetricLongRunning is the apiserver's gauge of open long-running requests (watches among them).
	MetricLongRunning = "apiserver_longrunning_requests"
	// LabelRequest and LabelResource are the two items' labels; All is their sum's value.
	LabelRequest  = "request"
	LabelResource = "resource"
	All           = "all"
)

type traffic struct {
	env    *Env
	before *metrics.Snapshot
}

func newTraffic(env *Env) Measurement { return &traffic{env: env} }

func (m *traffic) Start(ctx context.Context) error {
	s, err := scrape(ctx, m.env.Cluster.APIServerMetrics, MetricRequests, MetricWatchEvents)
	if err != nil {
		return fmt.Errorf("%s: apiserver metrics before the run: %w", Traffic, err)
	}
	m.before = s
	return nil
}

func (m *traffic) Gather(ctx context.Context) ([]results.DataItem, error) {
	after, err := scrape(ctx, m.env.Cluster.APIServerMetrics, MetricRequests, MetricWatchEvents, MetricLongRunning)
	if err != nil {
		return nil, fmt.Errorf("%s: apiserver metrics after the run: %w", Traffic, err)
	}
	if m.env.Restarted[clusters.APIServer] {
		m.env.note("the apiserver was restarted by a fault during the window: its request counters restarted from zero, so %s and %s are not reported", ItemAPIRequests, ItemWatchEvents)
		return nil, nil
	}
	pods := measuredPods(m.env.Timeline.Events(), m.env.Measured)
	if pods == 0 {
		return nil, nil
	}
	items := perPod(ItemAPIRequests, LabelRequest, "requests/pod",
		counterDelta(m.before, after, MetricRequests, RequestKey), pods)
	items = append(items, perPod(ItemWatchEvents, LabelResource, "events/pod",
		counterDelta(m.before, after, MetricWatchEvents, watchKey), pods)...)
	failed := counterDelta(m.before, after, MetricRequests, errorKey)
	items = append(items, perPod(ItemAPIErrors, LabelRequest, "requests/pod", failed, pods)...)
	if n := sumCounts(failed); n > 0 {
		m.env.note("the apiserver answered %.0f requests with an error status during the window (%s)%s",
			n, strings.Join(countsText(failed, 3), ", "), throttledWhy(failed))
	}
	return append(items, openWatches(after)...), nil
}

// errorKey is RequestKey and the status code for the series of requests answered 4xx or 5xx, ""
// for all others.
func errorKey(l map[string]string) string {
	k := RequestKey(l)
	if k == "" || len(l["code"]) != 3 || l["code"][0] < '4' {
		return ""
	}
	return k + " " + l["code"]
}

// throttledWhy explains 429s among failed requests, which a reader comparing with scheduler_perf
// needs: its scheduler talks to its apiserver as the loopback client (system:masters), which
// priority and fairness exempts, so its window never has them.
func throttledWhy(failed map[string]float64) string {
	for k := range failed {
		if strings.HasSuffix(k, " 429") {
			return "; 429 is priority and fairness refusing a request it has no seat or queue place for, which the client retries after a delay; scheduler_perf's scheduler is exempt from priority and fairness"
		}
	}
	return ""
}

func sumCounts(counts map[string]float64) float64 {
	n := 0.0
	for _, v := range counts {
		n += v
	}
	return n
}

// countsText is the first n keys of counts, busiest first, with their counts.
func countsText(counts map[string]float64, n int) []string {
	var out []string
	for _, k := range sortedByCount(counts) {
		if len(out) == n {
			break
		}
		out = append(out, fmt.Sprintf("%s %.0f", k, counts[k]))
	}
	return out
}

// openWatches is the watches open by resource in a scrape, all of them first, then by count.
func openWatches(s *metrics.Snapshot) []results.DataItem {
	mf := s.Families[MetricLongRunning]
	if mf == nil {
		return nil
	}
	byResource := map[string]float64{}
	total := 0.0
	for _, m := range mf.GetMetric() {
		l := labels(m)
		if l["verb"] != "WATCH" || l["resource"] == "" {
			continue
		}
		byResource[l["resource"]] += m.GetGauge().GetValue()
		total += m.GetGauge().GetValue()
	}
	item := func(r string, n float64) results.DataItem {
		return results.DataItem{Name: ItemWatches, Unit: "watches", Labels: map[string]string{LabelResource: r}, Data: map[string]float64{Value: n}}
	}
	out := []results.DataItem{item(All, total)}
	for _, r := range sortedByCount(byResource) {
		if byResource[r] > 0 {
			out = append(out, item(r, byResource[r]))
		}
	}
	return out
}

// sortedByCount is the keys of counts, largest count first, equal counts by name.
func sortedByCount(counts map[string]float64) []string {
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), strings.Compare(a, b)) })
	return keys
}

// measuredPods is how many pods the measured phases created.
func measuredPods(events []timeline.Event, phases []string) int {
	n := 0
	for _, e := range events {
		if e.Kind == timeline.PodCreated && slices.Contains(phases, e.Phase) {
			n++
		}
	}
	return n
}

// RequestKey is "VERB resource[/subresource]" of an apiserver_request_total series; "" leaves out
// requests that are not for a resource (the scrapes themselves among them).
func RequestKey(l map[string]string) string {
	if l["resource"] == "" {
		return ""
	}
	k := l["verb"] + " " + l["resource"]
	if l["subresource"] != "" {
		k += "/" + l["subresource"]
	}
	return k
}

// watchKey is the resource of a watch-event series: newer apiservers label it resource, older
// ones kind.
func watchKey(l map[string]string) string {
	if r := l["resource"]; r != "" {
		return r
	}
	return l["kind"]
}

// CounterSums sums a counter family of a scrape by key; series whose key is "" are left out.
func CounterSums(s *metrics.Snapshot, name string, key func(map[string]string) string) map[string]float64 {
	out := map[string]float64{}
	mf := s.Families[name]
	if mf == nil {
		return out
	}
	for _, m := range mf.GetMetric() {
		if k := key(labels(m)); k != "" {
			out[k] += m.GetCounter().GetValue()
		}
	}
	return out
}

// counterDelta sums a counter's increase between two scrapes by key. A series that shrank belongs
// to a restarted process, whose whole count is the interval's.
func counterDelta(before, after *metrics.Snapshot, name string, key func(map[string]string) string) map[string]float64 {
	b, a := CounterSums(before, name, key), CounterSums(after, name, key)
	out := map[string]float64{}
	for k, v := range a {
		d := v - b[k]
		if d < 0 {
			d = v
		}
		if d > 0 {
			out[k] = d
		}
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, lp := range m.GetLabel() {
		l[lp.GetName()] = lp.GetValue()
	}
	return l
}

// perPod turns counts by key into items, busiest first, with their sum under All.
func perPod(name, label, unit string, counts map[string]float64, pods int) []results.DataItem {
	total := sumCounts(counts)
	keys := sortedByCount(counts)
	item := func(k string, n float64) results.DataItem {
		return results.DataItem{Name: name, Unit: unit, Labels: map[string]string{label: k},
			Data: map[string]float64{"PerPod": n / float64(pods), "Count": n}}
	}
	out := []results.DataItem{item(All, total)}
	for _, k := range keys {
		out = append(out, item(k, counts[k]))
	}
	return out
}
