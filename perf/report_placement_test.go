package perf

import (
	"slices"
	"testing"

	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

// TestPlacementLines: topology figures in a fixed order whatever order they were recorded in, CPU
// per pod only beside topology figures, Job latencies, and no line for a window with neither.
func TestPlacementLines(t *testing.T) {
	item := func(sc, name, phase string, data map[string]float64) results.DataItem {
		l := map[string]string{"scenario": sc, "repetition": "1"}
		if phase != "" {
			l["phase"] = phase
		}
		return results.DataItem{Name: name, Labels: l, Data: data}
	}
	r := &results.Run{DataItems: []results.DataItem{
		item("tas", measure.ItemTopologyCPURatio, "", map[string]float64{measure.Value: 1.25}),
		item("tas", measure.ItemSchedulerCPUPerPod, "rack", map[string]float64{measure.Value: 2.5}),
		item("tas", measure.ItemSchedulerCPUPerPod, "free", map[string]float64{measure.Value: 2}),
		item("tas", measure.ItemPlacementsPerCycle, "", map[string]float64{"Generated": 10, "Evaluated": 9.5, "Feasible": 3, "Cycles": 56}),
		item("tas", measure.ItemOneDomainShare, "rack", map[string]float64{measure.Value: 1, "Placed": 56, "OneDomain": 56, "Domains": 10}),
		item("plain", measure.ItemSchedulerCPUPerPod, "gangs", map[string]float64{measure.Value: 2}),
		item("jobs", measure.ItemJobLatency, "", map[string]float64{"Perc50": 0.5, "Perc99": 1.5}),
		item("jobs", measure.ItemJobToPodGroup, "", map[string]float64{"Perc50": 0.1, "Perc99": 0.4}),
		item("none", measure.ItemOneDomainShare, "rack", map[string]float64{"Placed": 0, "OneDomain": 0, "Domains": 0}),
	}}
	want := []string{
		"tas rep 1: rack: 56 of 56 gangs in one domain (100%), 10 domains used; 10.0 placements generated, 9.5 evaluated (3.0 feasible) per gang cycle over 56 cycles; scheduler CPU per pod rack 2.50 ms, free 2.00 ms, constrained/unconstrained 1.25",
		"jobs rep 1: Job → PodGroup p50 0.10 s p99 0.40 s; Job → last pod bound p50 0.50 s p99 1.50 s",
		"none rep 1: rack: 0 of 0 gangs in one domain (none placed), 0 domains used",
	}
	if got := PlacementLines(r); !slices.Equal(got, want) {
		t.Errorf("lines:\n%q\nwant\n%q", got, want)
	}
}
