package perf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

// A data items file as scheduler_perf v1.37 writes it (trimmed): throughput in pods/s, histograms
// in ms, one histogram per label set.
const referenceItems = `{"version":"v1","dataItems":[
{"data":{"Average":226.4,"Perc50":249,"Perc90":301,"Perc99":320},"unit":"pods/s","labels":{"Metric":"SchedulingThroughput","Name":"BenchmarkPerfScheduling/GangScheduling/5000Nodes_1000Gangs_3000Pods/namespace-2"}},
{"data":{"Average":13.8,"Perc50":11,"Perc99":40},"unit":"ms","labels":{"Metric":"scheduler_podgroup_scheduling_attempt_duration_seconds","Name":"x"}},
{"data":{"Average":99,"Perc50":99},"unit":"ms","labels":{"Metric":"scheduler_podgroup_scheduling_attempt_duration_seconds","Name":"x","result":"error"}},
{"data":{"Average":6.1},"unit":"ms","labels":{"Metric":"scheduler_podgroup_scheduling_algorithm_duration_seconds","Name":"x"}}
]}`

func TestReadReferenceItems(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "BenchmarkPerfScheduling_GangScheduling_x.json"), []byte(referenceItems), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := readReferenceItems(dir)
	if err != nil {
		t.Fatal(err)
	}
	r.Benchmark = "BenchmarkPerfScheduling/GangScheduling/5000Nodes_1000Gangs_3000Pods"
	if v, _ := r.Figure(RefThroughput, "Average"); v != 226.4 {
		t.Errorf("throughput %v", v)
	}
	// The histogram without extra labels stands for the metric, not the result="error" one.
	if v, _ := r.Figure(RefAttempt, "Average"); v != 13.8 {
		t.Errorf("attempt %v, want the unlabelled 13.8 ms", v)
	}
	line := ReferenceLine("upstream-1000gangs-3pods", r)
	for _, want := range []string{"SchedulingThroughput avg 226.4 pods/s (p50 249)", "podgroup attempt avg 13.8 ms", "algorithm avg 6.1 ms"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	if _, err := readReferenceItems(t.TempDir()); err == nil {
		t.Error("a run that wrote no data items must be an error")
	}

	// gangbench measured 90 and 100 pods/s over two repetitions (median 95) and a 33 ms attempt.
	lab := func(rep string) map[string]string {
		return map[string]string{"scenario": "upstream-1000gangs-3pods", "repetition": rep}
	}
	run := &results.Run{DataItems: []results.DataItem{
		{Name: measure.ItemBindingRate, Labels: lab("1"), Data: map[string]float64{"Average": 90, "SinceFirstBind": 190}},
		{Name: measure.ItemBindingRate, Labels: lab("2"), Data: map[string]float64{"Average": 100, "SinceFirstBind": 200}},
		{Name: "podGroupAttemptDuration", Unit: "s", Labels: lab("1"), Data: map[string]float64{"Average": 0.033}},
	}}
	item, lines := ReferenceRatios(run, "upstream-1000gangs-3pods", r)
	if !near(item.Data["BindingRate"], 95/226.4) || !near(item.Data["AttemptDuration"], 0.033/0.0138) || !near(item.Data["BindingRateSinceFirstBind"], 195/226.4) {
		t.Errorf("ratios %v", item.Data)
	}
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, "0.42× (target ≥ 0.80×, target missed)") || !strings.Contains(all, "2.39× (target ≤ 1.25×, target missed)") ||
		!strings.Contains(all, "scheduler_perf's window (first to last bind): gangbench 195.0 pods/s (median of 2), scheduler_perf 226.4 pods/s: 0.86× (target ≥ 0.80×, target met)") {
		t.Errorf("lines:\n%s", all)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
