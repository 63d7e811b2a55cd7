package perf

import (
	"fmt"
	"strings"

	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

// placementCaption heads the lines of topology-constrained and Job-driven scenarios.
const placementCaption = "topology and Jobs in each measured window: gangs whose members share one domain of their topology key (must be all), placements the scheduler generated and evaluated per gang cycle, its CPU per pod in each phase and the constrained/unconstrained ratio; for Jobs, Job created → PodGroup seen and Job created → last pod bound"

// PlacementLines are one line per measured window that has topology or Job figures.
func PlacementLines(r *results.Run) []string {
	var out []string
	for _, win := range itemsByWindow(r, measure.ItemOneDomainShare, measure.ItemPlacementsPerCycle, measure.ItemSchedulerCPUPerPod,
		measure.ItemTopologyCPURatio, measure.ItemJobLatency, measure.ItemJobToPodGroup) {
		if l := placementLine(win); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func placementLine(win *windowItems) string {
	// One slot per kind, read in this order whatever order the measurements recorded them in.
	var share, cycles, cpu, ratio, toGroup, job []string
	constrained := false
	for _, it := range win.items {
		d := it.Data
		switch it.Name {
		case measure.ItemOneDomainShare:
			constrained = true
			pct := "none placed"
			if v, ok := d[measure.Value]; ok {
				pct = fmt.Sprintf("%.0f%%", 100*v)
			}
			share = append(share, fmt.Sprintf("%s: %.0f of %.0f gangs in one domain (%s), %.0f domains used", it.Labels["phase"], d["OneDomain"], d["Placed"], pct, d["Domains"]))
		case measure.ItemPlacementsPerCycle:
			cycles = append(cycles, fmt.Sprintf("%.1f placements generated, %.1f evaluated (%.1f feasible) per gang cycle over %.0f cycles", d["Generated"], d["Evaluated"], d["Feasible"], d["Cycles"]))
		case measure.ItemSchedulerCPUPerPod:
			cpu = append(cpu, fmt.Sprintf("%s %.2f ms", it.Labels["phase"], d[measure.Value]))
		case measure.ItemTopologyCPURatio:
			ratio = append(ratio, fmt.Sprintf("constrained/unconstrained %.2f", d[measure.Value]))
		case measure.ItemJobToPodGroup:
			toGroup = append(toGroup, fmt.Sprintf("Job → PodGroup p50 %.2f s p99 %.2f s", d["Perc50"], d["Perc99"]))
		case measure.ItemJobLatency:
			job = append(job, fmt.Sprintf("Job → last pod bound p50 %.2f s p99 %.2f s", d["Perc50"], d["Perc99"]))
		}
	}
	parts := append(share, cycles...)
	// CPU per pod alone is in every window; it belongs here only beside topology figures.
	if cpu = append(cpu, ratio...); constrained && len(cpu) > 0 {
		parts = append(parts, "scheduler CPU per pod "+strings.Join(cpu, ", "))
	}
	parts = append(append(parts, toGroup...), job...)
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("%s rep %s: %s", win.scenario, win.rep, strings.Join(parts, "; "))
}
