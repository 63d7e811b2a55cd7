package perf

import (
	"fmt"
	"slices"

	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

// Targets of the perf-fidelity work: gangbench keeps most of the scheduler's in-process speed.
const (
	// TargetBindingRatio: gangbench's binding rate at least this share of scheduler_perf's
	// SchedulingThroughput average.
	TargetBindingRatio = 0.8
	// TargetAttemptRatio: gangbench's podgroup attempt duration at most this multiple of scheduler_perf's.
	TargetAttemptRatio = 1.25
)

// ItemReferenceRatio is gangbench's figure over scheduler_perf's for one scenario (label scenario):
// BindingRate (higher is better, target ≥ 0.8), AttemptDuration (lower is better, ≤ 1.25) and
// CPUPerPod (all CPU spent per pod bound; no target: it says where the binding-rate gap comes from,
// with both sides' figures in CPUPerPodMs and ReferenceCPUPerPodMs).
const ItemReferenceRatio = "referenceRatio"

// seconds converts a scheduler_perf histogram figure to seconds: it reports them in ms.
func seconds(v float64, unit string) float64 {
	if unit == "ms" {
		return v / 1000
	}
	return v
}

// ReferenceLine is one reference run in a line.
func ReferenceLine(scenario string, r *ReferenceResult) string {
	if r == nil {
		return scenario + ": no reference run"
	}
	s := fmt.Sprintf("%s: scheduler_perf %s (%.0f s):", scenario, r.Benchmark, r.Wall.Seconds())
	if v, ok := r.Figure(RefThroughput, "Average"); ok {
		s += fmt.Sprintf(" SchedulingThroughput avg %.1f pods/s", v)
	}
	if v, ok := r.Figure(RefThroughput, "Perc50"); ok {
		s += fmt.Sprintf(" (p50 %.0f)", v)
	}
	if v, ok := r.Figure(RefRateFromCreation, "Average"); ok {
		s += fmt.Sprintf(", %.1f pods/s from the first creation (%.0f pods in %.1f s)", v, r.Items[RefRateFromCreation].Data["Pods"], r.Items[RefRateFromCreation].Data["DurationSeconds"])
	}
	for _, m := range []struct{ metric, name string }{{RefAttempt, "podgroup attempt"}, {RefAlgorithm, "algorithm"}} {
		if v, ok := r.Figure(m.metric, "Average"); ok {
			s += fmt.Sprintf(", %s avg %.1f ms", m.name, 1000*seconds(v, r.Items[m.metric].Unit))
		}
	}
	if v, ok := r.Figure(RefCPUPerPod, "Average"); ok {
		s += fmt.Sprintf(", CPU %.1f ms per pod bound (%.2f cores)", v, r.Items[RefCPUPerPod].Data["Cores"])
	}
	return s
}

// median of a scenario's bucket over the repetitions of a run.
func runMedian(run *results.Run, scenario, item, bucket string) (float64, int) {
	var vs []float64
	for _, d := range run.DataItems {
		if d.Name != item || d.Labels["scenario"] != scenario || d.Labels["phase"] != "" {
			continue
		}
		if v, ok := d.Data[bucket]; ok {
			vs = append(vs, v)
		}
	}
	return median(vs), len(vs)
}

// median of values, the mean of the middle two for an even count; values are not changed.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ReferenceRatios compares a run's figures of one scenario with its reference run: the data items
// for run.json and a line each for people. drift is BracketReference's (0 for a single reference
// run); it is recorded as ReferenceDrift.
func ReferenceRatios(run *results.Run, scenario string, r *ReferenceResult, drift float64) (results.DataItem, []string) {
	item := results.DataItem{Name: ItemReferenceRatio, Unit: "×", Labels: map[string]string{"scenario": scenario, "workload": r.Benchmark}, Data: map[string]float64{}}
	var lines []string
	if drift > 0 {
		item.Data["ReferenceDrift"] = drift
	}
	verdict := func(ok bool) string {
		if ok {
			return "target met"
		}
		return "target missed"
	}
	if ref, ok := r.Figure(RefThroughput, "Average"); ok && ref > 0 {
		if gb, n := runMedian(run, scenario, measure.ItemBindingRate, "Average"); n > 0 {
			ratio := gb / ref
			item.Data["BindingRate"] = ratio
			lines = append(lines, fmt.Sprintf("binding rate: gangbench %.1f pods/s (median of %d), scheduler_perf %.1f pods/s: %.2f× (target ≥ %.2f×, %s)", gb, n, ref, ratio, TargetBindingRatio, verdict(ratio >= TargetBindingRatio)))
		}
		if gb, n := runMedian(run, scenario, measure.ItemBindingRate, "SinceFirstBind"); n > 0 {
			ratio := gb / ref
			item.Data["BindingRateSinceFirstBind"] = ratio
			lines = append(lines, fmt.Sprintf("binding rate in scheduler_perf's window (first to last bind): gangbench %.1f pods/s (median of %d), scheduler_perf %.1f pods/s: %.2f× (target ≥ %.2f×, %s)", gb, n, ref, ratio, TargetBindingRatio, verdict(ratio >= TargetBindingRatio)))
		}
	}
	if ref, ok := r.Figure(RefRateFromCreation, "Average"); ok && ref > 0 {
		if gb, n := runMedian(run, scenario, measure.ItemBindingRate, "Average"); n > 0 {
			ratio := gb / ref
			item.Data["BindingRateFromCreation"] = ratio
			lines = append(lines, fmt.Sprintf("binding rate from the first creation in both (scheduler_perf: %.0f pods over its SchedulingDuration %.1f s): gangbench %.1f pods/s (median of %d), scheduler_perf %.1f pods/s: %.2f× (target ≥ %.2f×, %s)",
				r.Items[RefRateFromCreation].Data["Pods"], r.Items[RefRateFromCreation].Data["DurationSeconds"], gb, n, ref, ratio, TargetBindingRatio, verdict(ratio >= TargetBindingRatio)))
		}
	}
	if ref, ok := r.Figure(RefAttempt, "Average"); ok && ref > 0 {
		ref = seconds(ref, r.Items[RefAttempt].Unit)
		if gb, n := runMedian(run, scenario, "podGroupAttemptDuration", "Average"); n > 0 {
			ratio := gb / ref
			item.Data["AttemptDuration"] = ratio
			lines = append(lines, fmt.Sprintf("podgroup attempt: gangbench %.1f ms (median of %d), scheduler_perf %.1f ms: %.2f× (target ≤ %.2f×, %s)", 1000*gb, n, 1000*ref, ratio, TargetAttemptRatio, verdict(ratio <= TargetAttemptRatio)))
		}
	}
	if ref, ok := r.Items[RefCPUPerPod]; ok && ref.Data["Average"] > 0 {
		if all, per, cores, n := runCPUPerPod(run, scenario, false); n > 0 {
			item.Data["CPUPerPod"] = all / ref.Data["Average"]
			item.Data["CPUPerPodMs"], item.Data["ReferenceCPUPerPodMs"] = all, ref.Data["Average"]
			lines = append(lines, cpuPerPodLine("CPU per pod bound", all, per, cores, n, ref))
		}
		// Like with like: scheduler_perf's figure covers first to last group placed, which leaves
		// out creating the first gang; for 3 gangs of 1000 that is a third of the pods' creates.
		if all, per, cores, n := runCPUPerPod(run, scenario, true); n > 0 {
			item.Data["CPUPerPodInWindow"] = all / ref.Data["Average"]
			item.Data["CPUPerPodInWindowMs"] = all
			lines = append(lines, cpuPerPodLine("CPU per pod in scheduler_perf's window (first to last group placed)", all, per, cores, n, ref))
		}
	}
	if ref, ok := r.Figure(RefMachineSpeed, measure.Value); ok && ref > 0 {
		if gb, n := runMedian(run, scenario, ItemMachineSpeed, measure.Value); n > 0 {
			item.Data["MachineSpeed"] = gb / ref
			item.Data["ProbeMicros"], item.Data["ReferenceProbeMicros"] = gb, ref
			lines = append(lines, fmt.Sprintf("machine speed: the speed probe's unit took %.0f µs of CPU in gangbench's windows (median of %d) against %.0f µs during scheduler_perf's: %.2f× (above 1, the machine ran slower for gangbench)", gb, n, ref, gb/ref))
		}
	}
	if len(lines) == 0 {
		lines = append(lines, "no figures to compare: the run has no binding rate or podgroup attempt duration for "+scenario)
	}
	return item, lines
}

// RatioLines is ReferenceRatios' lines alone.
func RatioLines(run *results.Run, scenario string, r *ReferenceResult) []string {
	if r == nil {
		return nil
	}
	_, lines := ReferenceRatios(run, scenario, r, 0)
	return lines
}

// RefMachineSpeed is the speed probe's figure during a reference run (MachineSpeedItem's Data),
// kept among the reference's items so that BracketReference averages it like the others.
const RefMachineSpeed = "machineSpeed"

// RoundMedian is the round label of the reference ratio that summarises the rounds of a run.
const RoundMedian = "median"

// roundView is the part of a run measured in one round (label round), for ReferenceRatios.
func roundView(run *results.Run, round string) *results.Run {
	v := &results.Run{}
	for _, d := range run.DataItems {
		if d.Labels[LabelRound] == round {
			v.DataItems = append(v.DataItems, d)
		}
	}
	return v
}

// BracketRatios is ReferenceRatios for a run, or one round of it (round "" for the whole run),
// against scheduler_perf's runs right before and right after it (either may be nil). The item
// carries both runs' SchedulingThroughput averages, so a report can show the bracket. ok is false
// when there is no reference run at all.
func BracketRatios(run *results.Run, scenario, round string, before, after *ReferenceResult) (item results.DataItem, ok bool) {
	mean, drift := BracketReference(before, after)
	if mean == nil {
		return item, false
	}
	view := run
	if round != "" {
		view = roundView(run, round)
	}
	item, _ = ReferenceRatios(view, scenario, mean, drift)
	if round != "" {
		item.Labels[LabelRound] = round
	}
	for when, r := range map[string]*ReferenceResult{"Before": before, "After": after} {
		if r == nil {
			continue
		}
		if v, ok := r.Figure(RefThroughput, "Average"); ok {
			item.Data["ReferenceThroughput"+when] = v
		}
	}
	return item, true
}

// ratioKeys are the reference ratios whose spread over rounds MedianRatio reports.
var ratioKeys = []string{"BindingRate", "BindingRateSinceFirstBind", "BindingRateFromCreation", "AttemptDuration", "CPUPerPod", "CPUPerPodInWindow", "MachineSpeed"}

// MedianRatio summarises one scenario's per-round reference ratios (round label set): each ratio's
// median over the rounds that have it, with its lowest and highest (key+"Min", key+"Max"), and
// how many rounds there were. One round's ratio can land on minutes when gangbench's processes
// were charged a third more CPU for the same work and the references were not (seen here: 0.67×
// and 0.93× a quarter of an hour apart); the median of rounds, each bracketed by its own
// references, is what a target is judged by.
func MedianRatio(rounds []results.DataItem) results.DataItem {
	item := results.DataItem{Name: ItemReferenceRatio, Unit: "×", Labels: map[string]string{LabelRound: RoundMedian}, Data: map[string]float64{"Rounds": float64(len(rounds))}}
	if len(rounds) == 0 {
		return item
	}
	for k, v := range rounds[0].Labels {
		if k != LabelRound {
			item.Labels[k] = v
		}
	}
	for _, k := range append(slices.Clone(ratioKeys), "ReferenceDrift", "CPUPerPodMs", "ReferenceCPUPerPodMs", "CPUPerPodInWindowMs", "ProbeMicros", "ReferenceProbeMicros") {
		var vs []float64
		for _, r := range rounds {
			if v, ok := r.Data[k]; ok {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			continue
		}
		item.Data[k] = median(vs)
		if slices.Contains(ratioKeys, k) {
			item.Data[k+"Min"], item.Data[k+"Max"] = slices.Min(vs), slices.Max(vs)
		}
	}
	return item
}

// ReferenceSection is the reference comparison of a run for its reports, one line per scenario
// that had a reference run (per round and their median, for a run of rounds): the ratios with
// their targets, and scheduler_perf's figures.
func ReferenceSection(r *results.Run) []string {
	var out []string
	for _, d := range r.DataItems {
		if d.Name != ItemReferenceRatio {
			continue
		}
		sc := d.Labels["scenario"]
		round := d.Labels[LabelRound]
		s := fmt.Sprintf("%s vs scheduler_perf %s:", sc, d.Labels["workload"])
		switch round {
		case "":
		case RoundMedian:
			s = fmt.Sprintf("%s vs scheduler_perf %s, median of %.0f rounds:", sc, d.Labels["workload"], d.Data["Rounds"])
		default:
			s = fmt.Sprintf("%s vs scheduler_perf %s, round %s:", sc, d.Labels["workload"], round)
		}
		spread := func(key string) string {
			lo, okl := d.Data[key+"Min"]
			hi, okh := d.Data[key+"Max"]
			if !okl || !okh {
				return ""
			}
			return fmt.Sprintf(" [rounds %.2f–%.2f×]", lo, hi)
		}
		verdict := func(ok bool) string {
			if round != RoundMedian {
				return ""
			}
			if ok {
				return ", target met"
			}
			return ", target missed"
		}
		if v, ok := d.Data["BindingRate"]; ok {
			s += fmt.Sprintf(" binding rate %.2f×%s (target ≥ %.2f×%s)", v, spread("BindingRate"), TargetBindingRatio, verdict(v >= TargetBindingRatio))
		}
		if v, ok := d.Data["BindingRateSinceFirstBind"]; ok {
			// scheduler_perf's SchedulingThroughput takes no sample before its first scheduled pod,
			// so this and the rate from the first creation in both tools (below) compare like
			// with like; each gets a verdict of its own, as in `perf reference --against`.
			s += fmt.Sprintf(", %.2f×%s in scheduler_perf's window (first to last bind%s)", v, spread("BindingRateSinceFirstBind"), likeVerdict(round, v))
		}
		if v, ok := d.Data["BindingRateFromCreation"]; ok {
			s += fmt.Sprintf(", %.2f×%s from the first creation in both (scheduler_perf's pods over its SchedulingDuration%s)", v, spread("BindingRateFromCreation"), likeVerdict(round, v))
		}
		if v, ok := d.Data["AttemptDuration"]; ok {
			s += fmt.Sprintf(", podgroup attempt %.2f×%s (target ≤ %.2f×%s)", v, spread("AttemptDuration"), TargetAttemptRatio, verdict(v <= TargetAttemptRatio))
		}
		if v, ok := d.Data["CPUPerPod"]; ok {
			s += fmt.Sprintf(", CPU per pod bound %.2f×%s (%.1f ms against %.1f)", v, spread("CPUPerPod"), d.Data["CPUPerPodMs"], d.Data["ReferenceCPUPerPodMs"])
		}
		if v, ok := d.Data["CPUPerPodInWindow"]; ok {
			s += fmt.Sprintf(", %.2f×%s in scheduler_perf's window (%.1f ms)", v, spread("CPUPerPodInWindow"), d.Data["CPUPerPodInWindowMs"])
		}
		if v, ok := d.Data["MachineSpeed"]; ok {
			s += fmt.Sprintf(", machine speed probe %.2f×%s (%.0f µs against %.0f; above 1, slower for gangbench)", v, spread("MachineSpeed"), d.Data["ProbeMicros"], d.Data["ReferenceProbeMicros"])
		}
		if round != RoundMedian {
			s += referenceThroughputs(r, d)
		}
		out = append(out, s)
	}
	return out
}

// likeVerdict is the binding-rate verdict for a ratio whose two figures share a window (scheduler_perf's,
// or from the first creation in both), on the median line only, as for the other targets.
func likeVerdict(round string, v float64) string {
	if round != RoundMedian {
		return ""
	}
	if v >= TargetBindingRatio {
		return fmt.Sprintf("; target ≥ %.2f×, met", TargetBindingRatio)
	}
	return fmt.Sprintf("; target ≥ %.2f×, missed", TargetBindingRatio)
}

// referenceThroughputs is the part of a reference line that gives scheduler_perf's throughput: the
// bracket's two runs as the ratio item records them, or (for runs recorded before it did) the
// reference items of its scenario.
func referenceThroughputs(r *results.Run, d results.DataItem) string {
	var tput []float64
	b, okb := d.Data["ReferenceThroughputBefore"]
	a, oka := d.Data["ReferenceThroughputAfter"]
	switch {
	case okb && oka:
		tput = []float64{b, a}
	case okb:
		tput = []float64{b}
	case oka:
		tput = []float64{a}
	default:
		for _, ref := range r.DataItems {
			if ref.Name == ItemReference && ref.Labels["scenario"] == d.Labels["scenario"] && ref.Labels["metric"] == RefThroughput {
				tput = append(tput, ref.Data["Average"])
			}
		}
	}
	switch len(tput) {
	case 0:
		return ""
	case 2:
		return fmt.Sprintf("; scheduler_perf SchedulingThroughput avg %.1f pods/s (mean of %.1f right before and %.1f right after the run: the machine drifted %.0f %% between them)",
			(tput[0]+tput[1])/2, tput[0], tput[1], 100*d.Data["ReferenceDrift"])
	default:
		return fmt.Sprintf("; scheduler_perf SchedulingThroughput avg %.1f pods/s", tput[0])
	}
}
