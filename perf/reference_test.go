package perf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
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
	item, lines := ReferenceRatios(run, "upstream-1000gangs-3pods", r, 0)
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

func TestBracketReference(t *testing.T) {
	ref := func(tput, attempt float64) *ReferenceResult {
		return &ReferenceResult{Benchmark: "b", Items: map[string]results.DataItem{
			RefThroughput: {Unit: "pods/s", Data: map[string]float64{"Average": tput, "Perc50": tput + 10}},
			RefAttempt:    {Unit: "ms", Data: map[string]float64{"Average": attempt}},
		}}
	}
	before, after := ref(100, 10), ref(120, 14)
	// Only the run after has the CPU figure: it stands alone.
	after.Items[RefCPUPerPod] = results.DataItem{Unit: "ms", Data: map[string]float64{"Average": 9}}
	mean, drift := BracketReference(before, after)
	if v, _ := mean.Figure(RefThroughput, "Average"); v != 110 {
		t.Errorf("throughput %v, want the mean 110", v)
	}
	if v, _ := mean.Figure(RefThroughput, "Perc50"); v != 120 {
		t.Errorf("p50 %v", v)
	}
	if v, _ := mean.Figure(RefAttempt, "Average"); v != 12 {
		t.Errorf("attempt %v", v)
	}
	if v, _ := mean.Figure(RefCPUPerPod, "Average"); v != 9 {
		t.Errorf("cpu %v", v)
	}
	if !near(drift, 20.0/110) {
		t.Errorf("drift %v", drift)
	}
	if v, _ := before.Figure(RefThroughput, "Average"); v != 100 {
		t.Error("the runs themselves must not change")
	}
	if r, d := BracketReference(nil, after); r != after || d != 0 {
		t.Error("one run is the reference")
	}

	// The run records both reference runs; its report names the mean, both runs and the drift.
	run := &results.Run{DataItems: []results.DataItem{
		{Name: measure.ItemBindingRate, Labels: map[string]string{"scenario": "s", "repetition": "1"}, Data: map[string]float64{"Average": 88}},
	}}
	run.DataItems = append(run.DataItems, ReferenceItems("s", "before", before)...)
	run.DataItems = append(run.DataItems, ReferenceItems("s", "after", after)...)
	item, _ := ReferenceRatios(run, "s", mean, drift)
	if !near(item.Data["BindingRate"], 0.8) || !near(item.Data["ReferenceDrift"], 20.0/110) {
		t.Errorf("ratio %v", item.Data)
	}
	run.DataItems = append(run.DataItems, item)
	sec := ReferenceSection(run)
	if want := "binding rate 0.80× (target ≥ 0.80×)"; len(sec) != 1 || !strings.Contains(sec[0], want) ||
		!strings.Contains(sec[0], "SchedulingThroughput avg 110.0 pods/s (mean of 100.0 right before and 120.0 right after the run: the machine drifted 18 % between them)") {
		t.Errorf("section %q", sec)
	}
	for _, it := range run.DataItems {
		if it.Name == ItemReference && it.Labels["run"] != "before" && it.Labels["run"] != "after" {
			t.Errorf("reference item without its run: %+v", it)
		}
	}
}

// RunReference against a stand-in benchmark binary: it is asked for a CPU profile at the absolute
// path given (and writes it there), its data items are read back, and a relative profile path is
// refused before anything runs, since the benchmark runs in its package directory.
func TestRunReferenceCPUProfile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "performance-config.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	items := filepath.Join(dir, "items.json")
	if err := os.WriteFile(items, []byte(referenceItems), 0o644); err != nil {
		t.Fatal(err)
	}
	// The stand-in copies the data items into -data-items-dir and writes "profile" to
	// -test.cpuprofile; it fails when either flag is missing.
	script := `#!/bin/sh
items= prof=
for a in "$@"; do
  case "$a" in
    -data-items-dir=*) items="${a#-data-items-dir=}" ;;
    -test.cpuprofile=*) prof="${a#-test.cpuprofile=}" ;;
  esac
done
[ -n "$items" ] && [ -n "$prof" ] || { echo "missing flags: $*"; exit 1; }
cp ` + items + ` "$items/BenchmarkPerfScheduling_x.json" && echo profile > "$prof"
`
	if err := os.WriteFile(filepath.Join(dir, "scheduler-perf.test"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ref := scenario.Reference{Package: "podgroup/gangscheduling", Config: "performance-config.yaml", TestCase: "GangScheduling", Workload: "w"}
	prof := filepath.Join(t.TempDir(), "reference.pprof")
	res, err := RunReference(t.Context(), ReferenceOptions{Dir: dir, Reference: ref, CPUProfile: prof, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := res.Figure(RefThroughput, "Average"); v != 226.4 {
		t.Errorf("throughput %v", v)
	}
	if b, err := os.ReadFile(prof); err != nil || string(b) != "profile\n" {
		t.Errorf("profile file: %q, %v", b, err)
	}
	if _, err := RunReference(t.Context(), ReferenceOptions{Dir: dir, Reference: ref, CPUProfile: "reference.pprof"}); err == nil || !strings.Contains(err.Error(), "absolute path") {
		t.Errorf("relative profile path: %v", err)
	}
}
