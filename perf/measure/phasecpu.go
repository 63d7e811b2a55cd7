package measure

import (
	"time"

	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/results"
)

// The scheduler's CPU per pod, phase by phase, answers what a feature costs when a scenario runs
// the same groups with and without it, one phase after the other (start: afterBound): both phases
// then share the run's machine, cluster and noise, and their ratio is the figure to read.
const (
	// ItemSchedulerCPUPerPod is the scheduler's CPU over a phase's window divided by the pods it
	// bound (Value, ms per pod; label phase).
	ItemSchedulerCPUPerPod = "schedulerCPUPerPod"
	// ItemTopologyCPURatio is the scheduler's CPU per pod in the topology-constrained phases over that
	// in the unconstrained ones (Value), when a scenario has both and their windows do not overlap.
	ItemTopologyCPURatio = "topologyCPURatio"
)

// PhaseWindow is a phase's stretch of a timeline: its first create (a PodGroup, a pod or a Job) to
// its last bind, and the pods it bound.
type PhaseWindow struct {
	Phase    string
	From, To time.Time
	Pods     int
}

// PhaseWindows finds each phase's window; a phase that bound nothing has none.
func PhaseWindows(events []timeline.Event, phases []string) []PhaseWindow {
	at := map[string]*PhaseWindow{}
	var out []*PhaseWindow
	for _, ph := range phases {
		w := &PhaseWindow{Phase: ph}
		at[ph] = w
		out = append(out, w)
	}
	bound := map[string]bool{}
	for _, e := range timeline.Sorted(events) {
		w := at[e.Phase]
		if w == nil {
			continue
		}
		switch e.Kind {
		case timeline.PodGroupCreated, timeline.PodCreated, timeline.JobCreated:
			if e.Ahead {
				continue // made before the window (arrival: schedulerPerf)
			}
			if w.From.IsZero() {
				w.From = e.Time
			}
		case timeline.PodBound:
			if !bound[e.Pod] {
				bound[e.Pod] = true
				w.To = e.Time
				w.Pods++
			}
		}
	}
	var res []PhaseWindow
	for _, w := range out {
		if w.Pods > 0 && !w.From.IsZero() && w.To.After(w.From) {
			res = append(res, *w)
		}
	}
	return res
}

// phaseCPUItems are the scheduler's CPU per pod in each measured phase, and the topology ratio.
func phaseCPUItems(series []CPUSample, events []timeline.Event, sc *scenario.Scenario, measured []string, note func(string, ...any)) []results.DataItem {
	windows := PhaseWindows(events, measured)
	var items []results.DataItem
	type sum struct {
		cpu  time.Duration
		pods int
	}
	var with, without sum
	overlap := false
	for i, w := range windows {
		from, ok0 := CPUAt(series, w.From)
		to, ok1 := CPUAt(series, w.To)
		if !ok0 || !ok1 {
			continue
		}
		cpu := to - from
		items = append(items, results.DataItem{Name: ItemSchedulerCPUPerPod, Unit: "ms/pod", Labels: map[string]string{"phase": w.Phase}, Data: map[string]float64{
			Value: float64(cpu.Microseconds()) / 1000 / float64(w.Pods), "CPUSeconds": cpu.Seconds(), "Pods": float64(w.Pods), "WindowSeconds": w.To.Sub(w.From).Seconds(),
		}})
		for _, v := range windows[:i] {
			overlap = overlap || (w.From.Before(v.To) && v.From.Before(w.To))
		}
		if constrained(sc, w.Phase) {
			with.cpu, with.pods = with.cpu+cpu, with.pods+w.Pods
		} else {
			without.cpu, without.pods = without.cpu+cpu, without.pods+w.Pods
		}
	}
	switch {
	case with.pods == 0 || without.pods == 0 || without.cpu <= 0:
	case overlap:
		note("%s not reported: the constrained and unconstrained phases ran at the same time, so the scheduler's CPU cannot be split between them (start the second with afterBound)", ItemTopologyCPURatio)
	default:
		per := func(s sum) float64 { return s.cpu.Seconds() / float64(s.pods) }
		items = append(items, results.DataItem{Name: ItemTopologyCPURatio, Unit: "ratio", Data: map[string]float64{
			Value: per(with) / per(without), "ConstrainedMsPerPod": 1000 * per(with), "UnconstrainedMsPerPod": 1000 * per(without),
		}})
	}
	return items
}

func constrained(sc *scenario.Scenario, phase string) bool {
	for _, p := range sc.Phases {
		if p.Name == phase {
			return p.TopologyKey != ""
		}
	}
	return false
}
