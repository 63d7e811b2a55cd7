package perf

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// TestReferenceRounds: with rounds, each round is compared with the reference runs right before and
// right after it, only with its own figures, and the rounds are summarised by their median, which
// carries the verdict, with the spread beside it.
func TestReferenceRounds(t *testing.T) {
	ref := func(tput float64) *ReferenceResult {
		return &ReferenceResult{Benchmark: "b", Items: map[string]results.DataItem{
			RefThroughput: {Unit: "pods/s", Data: map[string]float64{"Average": tput}},
			RefAttempt:    {Unit: "ms", Data: map[string]float64{"Average": 10}},
			// The speed probe's unit took 500 µs while each reference ran.
			RefMachineSpeed: MachineSpeedItem(500*time.Microsecond, 40),
		}}
	}
	refs := []*ReferenceResult{ref(100), ref(100), ref(120), ref(80)}
	run := &results.Run{}
	for round, fig := range map[string]struct {
		rate, attempt float64
		probe         time.Duration
	}{"1": {80, 0.011, 600 * time.Microsecond}, "2": {99, 0.014, 500 * time.Microsecond}, "3": {50, 0.012, 750 * time.Microsecond}} {
		l := map[string]string{"scenario": "s", "repetition": round, LabelRound: round}
		speed := MachineSpeedItem(fig.probe, 100)
		speed.Labels = l
		run.DataItems = append(run.DataItems,
			results.DataItem{Name: measure.ItemBindingRate, Labels: l, Data: map[string]float64{"Average": fig.rate}},
			results.DataItem{Name: "podGroupAttemptDuration", Unit: "s", Labels: l, Data: map[string]float64{"Average": fig.attempt}},
			speed)
	}
	var rounds []results.DataItem
	for n := 1; n <= 3; n++ {
		item, ok := BracketRatios(run, "s", strconv.Itoa(n), refs[n-1], refs[n])
		if !ok {
			t.Fatalf("round %d: no ratio", n)
		}
		rounds = append(rounds, item)
	}
	// Round 2: 99 pods/s against the mean of 100 and 120; 14 ms against 10.
	if r := rounds[1]; r.Labels[LabelRound] != "2" || !near(r.Data["BindingRate"], 0.9) || !near(r.Data["AttemptDuration"], 1.4) || !near(r.Data["MachineSpeed"], 1) ||
		r.Data["ReferenceThroughputBefore"] != 100 || r.Data["ReferenceThroughputAfter"] != 120 {
		t.Errorf("round 2: %+v", r)
	}
	med := MedianRatio(rounds)
	if med.Labels[LabelRound] != RoundMedian || med.Labels["scenario"] != "s" || med.Data["Rounds"] != 3 ||
		!near(med.Data["BindingRate"], 0.8) || !near(med.Data["BindingRateMin"], 0.5) || !near(med.Data["BindingRateMax"], 0.9) ||
		!near(med.Data["AttemptDuration"], 1.2) || !near(med.Data["MachineSpeed"], 1.2) || !near(med.Data["MachineSpeedMax"], 1.5) {
		t.Errorf("median: %+v", med)
	}
	run.DataItems = append(run.DataItems, rounds...)
	run.DataItems = append(run.DataItems, med)
	sec := ReferenceSection(run)
	if len(sec) != 4 {
		t.Fatalf("section: %q, want a line per round and the median", sec)
	}
	if !strings.Contains(sec[1], "s vs scheduler_perf b, round 2: binding rate 0.90× (target ≥ 0.80×)") ||
		!strings.Contains(sec[1], "mean of 100.0 right before and 120.0 right after the run") {
		t.Errorf("round 2 line: %q", sec[1])
	}
	if want := "s vs scheduler_perf b, median of 3 rounds: binding rate 0.80× [rounds 0.50–0.90×] (target ≥ 0.80×, target met), podgroup attempt 1.20× [rounds 1.10–1.40×] (target ≤ 1.25×, target met), machine speed probe 1.20× [rounds 1.00–1.50×] (600 µs against 500; above 1, slower for gangbench)"; sec[3] != want {
		t.Errorf("median line:\n%q, want\n%q", sec[3], want)
	}
	// One slower round moves the median below the target.
	rounds[0].Data["BindingRate"] = 0.7
	if sec := ReferenceSection(&results.Run{DataItems: []results.DataItem{MedianRatio(rounds)}}); len(sec) != 1 || !strings.Contains(sec[0], "binding rate 0.70× [rounds 0.50–0.90×] (target ≥ 0.80×, target missed)") {
		t.Errorf("median line with a slower round: %q", sec)
	}
	// The rate in scheduler_perf's window has its own verdict on the median line, and none per round.
	for i, v := range []float64{0.95, 0.85, 0.6} {
		rounds[i].Data["BindingRateSinceFirstBind"] = v
	}
	sec = ReferenceSection(&results.Run{DataItems: append(slices.Clone(rounds), MedianRatio(rounds))})
	if len(sec) != 4 || !strings.Contains(sec[3], "0.85× [rounds 0.60–0.95×] in scheduler_perf's window (first to last bind; target ≥ 0.80×, met)") ||
		!strings.Contains(sec[0], "0.95× in scheduler_perf's window (first to last bind)") {
		t.Errorf("in-window verdicts: %q", sec)
	}
	rounds[1].Data["BindingRateSinceFirstBind"] = 0.7
	if sec := ReferenceSection(&results.Run{DataItems: []results.DataItem{MedianRatio(rounds)}}); len(sec) != 1 || !strings.Contains(sec[0], "0.70× [rounds 0.60–0.95×] in scheduler_perf's window (first to last bind; target ≥ 0.80×, missed)") {
		t.Errorf("in-window median below the target: %q", sec)
	}
	if _, ok := BracketRatios(run, "s", "1", nil, nil); ok {
		t.Error("no reference run is no ratio")
	}
	// The median line gives the in-window CPU per pod with its milliseconds, not a zero.
	cpu := []results.DataItem{
		{Data: map[string]float64{"CPUPerPodInWindow": 0.8, "CPUPerPodInWindowMs": 10}},
		{Data: map[string]float64{"CPUPerPodInWindow": 1.0, "CPUPerPodInWindowMs": 12}},
		{Data: map[string]float64{"CPUPerPodInWindow": 0.9, "CPUPerPodInWindowMs": 11}},
	}
	if sec := ReferenceSection(&results.Run{DataItems: []results.DataItem{MedianRatio(cpu)}}); len(sec) != 1 || !strings.Contains(sec[0], "0.90× [rounds 0.80–1.00×] in scheduler_perf's window (11.0 ms)") {
		t.Errorf("median line with CPU per pod in the window: %q", sec)
	}
}
