package perf

import (
	"strings"
	"testing"

	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

func TestReferenceRateFromCreation(t *testing.T) {
	g := &groupLog{year: 2026}
	if _, err := g.Write([]byte(referenceLog)); err != nil {
		t.Fatal(err)
	}
	// The log's three groups of 3 pods, scheduled within a SchedulingDuration of 4.5 s.
	dur := results.DataItem{Unit: "s", Data: map[string]float64{"Duration": 4.5}}
	it, ok := referenceRateFromCreation(dur, g.groups)
	if !ok {
		t.Fatal("no figure")
	}
	if !near(it.Data["Average"], 2) || it.Data["Pods"] != 9 || it.Data["DurationSeconds"] != 4.5 || it.Labels["Metric"] != RefRateFromCreation || it.Unit != "pods/s" {
		t.Errorf("item %+v", it)
	}
	if _, ok := referenceRateFromCreation(results.DataItem{}, g.groups); ok {
		t.Error("no SchedulingDuration is no rate")
	}
	if _, ok := referenceRateFromCreation(dur, nil); ok {
		t.Error("no group scheduled is no rate")
	}
}

// Both tools' rates from the first creation make a ratio of their own, with a verdict, beside the
// one against SchedulingThroughput (whose window starts at the first scheduled pod).
func TestReferenceRatiosFromCreation(t *testing.T) {
	r := &ReferenceResult{Benchmark: "b", Items: map[string]results.DataItem{
		RefThroughput:       {Unit: "pods/s", Data: map[string]float64{"Average": 240}},
		RefRateFromCreation: {Unit: "pods/s", Data: map[string]float64{"Average": 120, "Pods": 3000, "DurationSeconds": 25}},
	}}
	run := &results.Run{DataItems: []results.DataItem{
		{Name: measure.ItemBindingRate, Labels: map[string]string{"scenario": "s", "repetition": "1"}, Data: map[string]float64{"Average": 108}},
	}}
	item, lines := ReferenceRatios(run, "s", r, 0)
	if !near(item.Data["BindingRate"], 108.0/240) || !near(item.Data["BindingRateFromCreation"], 108.0/120) {
		t.Errorf("ratios %v", item.Data)
	}
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, "binding rate from the first creation in both (scheduler_perf: 3000 pods over its SchedulingDuration 25.0 s): gangbench 108.0 pods/s (median of 1), scheduler_perf 120.0 pods/s: 0.90× (target ≥ 0.80×, target met)") ||
		!strings.Contains(all, "0.45× (target ≥ 0.80×, target missed)") {
		t.Errorf("lines:\n%s", all)
	}
	if line := ReferenceLine("s", r); !strings.Contains(line, "120.0 pods/s from the first creation (3000 pods in 25.0 s)") {
		t.Errorf("reference line %q", line)
	}
	// On the median line of rounds, with the spread and its own verdict.
	var rounds []results.DataItem
	for i, v := range []float64{0.9, 0.7, 0.75} {
		rd := results.DataItem{Labels: map[string]string{"scenario": "s", "workload": "b", LabelRound: string(rune('1' + i))}, Data: map[string]float64{"BindingRateFromCreation": v}}
		rounds = append(rounds, rd)
	}
	sec := ReferenceSection(&results.Run{DataItems: []results.DataItem{MedianRatio(rounds)}})
	if len(sec) != 1 || !strings.Contains(sec[0], "0.75× [rounds 0.70–0.90×] from the first creation in both (scheduler_perf's pods over its SchedulingDuration; target ≥ 0.80×, missed)") {
		t.Errorf("median line %q", sec)
	}
}
