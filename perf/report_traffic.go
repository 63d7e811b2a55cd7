package perf

import (
	"fmt"
	"strings"

	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

// trafficShown is how many kinds of request and of watch event a traffic line names: the busiest
// few say where the apiserver's work went; run.json keeps them all.
const trafficShown = 6

// TrafficLines are one line per measured window: the apiserver's requests and watch events per
// measured pod, in all and for the busiest kinds, and the watches they went to, in run order.
func TrafficLines(r *results.Run) []string {
	var out []string
	for _, win := range itemsByWindow(r, measure.ItemAPIRequests, measure.ItemAPIErrors, measure.ItemWatchEvents, measure.ItemWatches) {
		out = append(out, trafficLine(win))
	}
	return out
}

// trafficLine is one window's traffic line.
func trafficLine(win *windowItems) string {
	var w struct {
		requests, events, watches      []string
		failed                         []string
		reqTotal, evTotal, watched     float64
		failedTotal                    float64
		hasReqs, hasEvents, hasWatches bool
	}
	for _, it := range win.items {
		// The measurement writes each item's kinds busiest first, after their sum.
		per := it.Data["PerPod"]
		switch {
		case it.Name == measure.ItemAPIRequests && it.Labels[measure.LabelRequest] == measure.All:
			w.reqTotal, w.hasReqs = per, true
		case it.Name == measure.ItemAPIRequests && len(w.requests) < trafficShown:
			w.requests = append(w.requests, fmt.Sprintf("%s %s", it.Labels[measure.LabelRequest], perPodFigure(per)))
		case it.Name == measure.ItemAPIErrors && it.Labels[measure.LabelRequest] == measure.All:
			w.failedTotal = it.Data["Count"]
		case it.Name == measure.ItemAPIErrors && len(w.failed) < trafficShown:
			w.failed = append(w.failed, fmt.Sprintf("%s %.0f", it.Labels[measure.LabelRequest], it.Data["Count"]))
		case it.Name == measure.ItemWatchEvents && it.Labels[measure.LabelResource] == measure.All:
			w.evTotal, w.hasEvents = per, true
		case it.Name == measure.ItemWatchEvents && len(w.events) < trafficShown:
			w.events = append(w.events, fmt.Sprintf("%s %s", it.Labels[measure.LabelResource], perPodFigure(per)))
		case it.Name == measure.ItemWatches && it.Labels[measure.LabelResource] == measure.All:
			w.watched, w.hasWatches = it.Data[measure.Value], true
		case it.Name == measure.ItemWatches && len(w.watches) < trafficShown:
			w.watches = append(w.watches, fmt.Sprintf("%s %g", it.Labels[measure.LabelResource], it.Data[measure.Value]))
		}
	}
	var parts []string
	if w.hasReqs {
		parts = append(parts, fmt.Sprintf("%s requests%s", perPodFigure(w.reqTotal), kinds(w.requests)))
	}
	if w.failedTotal > 0 {
		parts = append(parts, fmt.Sprintf("%.0f answered with an error%s", w.failedTotal, kinds(w.failed)))
	}
	if w.hasEvents {
		parts = append(parts, fmt.Sprintf("%s watch events sent%s", perPodFigure(w.evTotal), kinds(w.events)))
	}
	if w.hasWatches {
		parts = append(parts, fmt.Sprintf("%g watches open at the end%s", w.watched, kinds(w.watches)))
	}
	return fmt.Sprintf("%s rep %s: %s", win.scenario, win.rep, strings.Join(parts, "; "))
}

// kinds is the busiest kinds of a traffic part in parentheses, or nothing when there are none.
func kinds(k []string) string {
	if len(k) == 0 {
		return ""
	}
	return " (" + strings.Join(k, ", ") + ")"
}

// perPodFigure prints a per-pod count with the digits that matter: 1.00 binding per pod, 0.003
// node list per pod, 41 events per pod.
func perPodFigure(v float64) string {
	switch {
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v >= 0.1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// trafficCaption heads the section in both formats.
const trafficCaption = "apiserver traffic per measured pod in each window (between the window's two scrapes; heartbeats included), busiest first"
