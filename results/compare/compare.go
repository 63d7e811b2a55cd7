// Package compare is gangbench's offline comparison of two scheduler versions from their result
// directories alone (no cluster): per-metric statistics over repeated perf runs — medians, confidence
// intervals and a Mann–Whitney U test, computed by golang.org/x/perf/benchmath, the code behind
// benchstat — and a diff of the conformance verdicts per assertion ID.
//
// A side is the set of repetitions of one scheduler version (the runner interleaves them, A B B A, so
// that drift of the machine hits both sides alike). Each run contributes one sample per metric; a
// metric is a data key of a results.DataItem, identified by item name, labels and key. Per-case
// measurements (results.Case.Measurements) are not compared: they describe one assertion's scenario,
// and the perf benchmarks publish what is meant to be compared as DataItems.
package compare

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/gangbench/gangbench/results"
)

// Side is the repetitions of one scheduler version.
type Side struct {
	Label string         // e.g. "old v1.37.1"
	Runs  []*results.Run // in the order they ran
}

// Defaults of Options.
const (
	DefaultAlpha     = 0.05 // significance level of the U test; the median CIs are at 1-Alpha
	DefaultMinEffect = 0.05 // 5%: smaller significant changes are reported as no significant change
)

// Options tune Compare. The zero value means the defaults.
type Options struct {
	// Alpha is the significance level of the Mann–Whitney U test (0 means DefaultAlpha). Median and
	// ratio confidence intervals are computed at level 1-Alpha, so both tell the same story.
	Alpha float64 `json:"alpha"`
	// MinEffect is the smallest relative change of the median, |new/old - 1|, that counts even when
	// significant (0 means DefaultMinEffect), because tiny but consistent shifts on a shared 2-core
	// machine are more often noise of the environment than of the scheduler.
	MinEffect float64 `json:"minEffect"`
	// HigherIsBetter tells the direction of a metric ("bindingRate.Average", unit "pods/s"); nil means
	// DefaultHigherIsBetter.
	HigherIsBetter func(metric, unit string) bool `json:"-"`
	// NotComparable maps assertion IDs whose semantics changed between the compared versions to the
	// reason; they are reported "not comparable" instead of regressed or fixed. compare has no built-in
	// list (results imports no other gangbench package): the runner fills it when comparing across
	// minor versions, e.g. v1.36 against v1.37, from the suites' knowledge of changed assertions.
	NotComparable map[string]string `json:"notComparable,omitempty"`
	// GateMetrics are the metrics (DataItem name "." data key, e.g. "bindingRate.Average") whose
	// significant regression sets Report.Regressed; nil means DefaultGateMetrics, and "*" every metric.
	// Every metric is still tested and reported. Each test at Alpha is one more chance of a false
	// alarm (63 metrics at 0.05 flag about three by chance alone), so a CI gate judges the few figures
	// a user decides on, and the rest are there to explain them.
	GateMetrics []string `json:"gateMetrics"`
	// NotComparableMetrics maps DataItem names (e.g. "podGroupAttemptDuration") whose meaning differs
	// between the compared versions to the reason: their figures are shown, their verdict is "not
	// comparable". Filled by the runner, like NotComparable.
	NotComparableMetrics map[string]string `json:"notComparableMetrics,omitempty"`
}

// DefaultGateMetrics are the headline figures, one per question a user decides on: throughput
// (the binding rate), the tail of gang latency, the scheduler's time per group, and the gang
// invariants. The time per group is gated twice, as averages (the percentiles come from histogram
// buckets of 32, 64, 128 ms, too coarse to move by a 20 ms regression): the attempt's, which is what a
// gang waits for, and the algorithm's, which is the scheduler's own computation (observed from the
// cycle's start to the end of the placement, schedule_one_podgroup.go:441 in v1.37.2). Since v1.37 the
// attempt ends after the PodGroup status PATCH, so its average carries an apiserver round trip, and a
// slower scheduler unloads the apiserver and shortens that trip: in CI on 2026-12-03 a scheduler 20 ms
// slower per cycle moved the attempt's median 1.30× but not its average significantly, while the
// algorithm's average moved 2.98× with no overlap between the sides. Redundant figures are left out on purpose: the
// apiserver's binding count equals the watch's (bindCountMismatch checks that), and the median
// latency follows the binding rate. Each gate metric widens Holm's correction, so a redundant one
// makes real regressions harder to flag without adding information.
func DefaultGateMetrics() []string {
	return []string{
		"bindingRate.Average", "gangLatency.Perc99", "podGroupAttemptDuration.Average",
		"podGroupAlgorithmDuration.Average", "partialGangs.Value", "unboundFittingPods.Value",
		"statusRegressions.Value",
	}
}

func (o Options) gated(metric string) bool {
	return slices.Contains(o.GateMetrics, "*") || slices.Contains(o.GateMetrics, metric)
}

// withDefaults fills zero fields and rejects values that make no statistical sense.
func (o Options) withDefaults() (Options, error) {
	if o.Alpha == 0 {
		o.Alpha = DefaultAlpha
	}
	if o.MinEffect == 0 {
		o.MinEffect = DefaultMinEffect
	}
	if !(o.Alpha > 0 && o.Alpha < 1) {
		return o, fmt.Errorf("alpha %v is not in (0, 1)", o.Alpha)
	}
	if !(o.MinEffect >= 0) || math.IsInf(o.MinEffect, 0) {
		return o, fmt.Errorf("minimum effect %v is not a finite non-negative fraction", o.MinEffect)
	}
	if o.HigherIsBetter == nil {
		o.HigherIsBetter = DefaultHigherIsBetter
	}
	if o.GateMetrics == nil {
		o.GateMetrics = DefaultGateMetrics()
	}
	return o, nil
}

// DefaultHigherIsBetter is the default metric direction. A data key that is a duration ("…Seconds",
// "…Duration") is lower-better whatever the item's unit, since bindingRate carries its window length
// too. Otherwise rates and throughputs ("/s" units, names containing "rate" or "throughput") are
// higher-better; everything else — latencies, spreads, durations and counts of bad events such as
// partial gangs or unbound pods — is lower-better.
func DefaultHigherIsBetter(metric, unit string) bool {
	m := strings.ToLower(metric)
	key := m[strings.LastIndex(m, ".")+1:]
	for _, s := range []string{"seconds", "duration", "latency"} {
		if strings.Contains(key, s) {
			return false
		}
	}
	if strings.Contains(unit, "/s") || strings.Contains(m, "rate") || strings.Contains(m, "throughput") {
		return true
	}
	return false
}

// SideInfo describes one side of a comparison.
type SideInfo struct {
	Label             string   `json:"label"`
	SchedulerVersion  string   `json:"schedulerVersion,omitempty"` // distinct values joined by ", "
	SchedulerBinary   string   `json:"schedulerBinary,omitempty"`
	KubernetesVersion string   `json:"kubernetesVersion,omitempty"`
	Runs              int      `json:"runs"`
	RunIDs            []string `json:"runIDs,omitempty"`
}

// Report is the outcome of Compare.
type Report struct {
	Old        SideInfo          `json:"old"`
	New        SideInfo          `json:"new"`
	Metrics    []MetricResult    `json:"metrics"`    // sorted by metric, then labels
	Assertions []AssertionChange `json:"assertions"` // in order of first appearance, old runs first
	Options    Options           `json:"options"`    // as used, defaults filled in
	// Regressed is set when any gated metric is a Regression or any assertion "regressed". Flaky, new,
	// removed and not comparable assertions do not set it: they need a human look, not a red build.
	Regressed bool     `json:"regressed"`
	Notes     []string `json:"notes,omitempty"`
}

// Compare compares the new side against the old one. It fails only on unusable input (a side without
// runs, a nil run, invalid options); everything the data cannot support is a verdict or a note.
func Compare(old, new Side, opts Options) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	for _, s := range []Side{old, new} {
		if len(s.Runs) == 0 {
			return nil, fmt.Errorf("compare: side %q has no runs", s.Label)
		}
		if slices.Contains(s.Runs, nil) {
			return nil, fmt.Errorf("compare: side %q has a nil run", s.Label)
		}
	}
	rep := &Report{Old: sideInfo(old), New: sideInfo(new), Options: opts}
	rep.Notes = append(rep.Notes, sideNotes(old)...)
	rep.Notes = append(rep.Notes, sideNotes(new)...)
	rep.Notes = append(rep.Notes, environmentNotes(old, new)...)

	var notes []string
	rep.Metrics, notes = compareMetrics(old, new, opts)
	rep.Notes = append(rep.Notes, notes...)
	rep.Assertions = compareAssertions(old.Runs, new.Runs, opts.NotComparable)

	var regressedMetrics, regressedAssertions, flaky, tested, gated int
	for _, m := range rep.Metrics {
		if m.Verdict != NotComparable {
			tested++
			if m.Gated {
				gated++
			}
		}
		if m.Regression && m.Gated {
			regressedMetrics++
		}
	}
	if tested > gated {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d metrics tested at alpha %g: about %.1f would come out significant by chance alone; the %d of them that are gate metrics (--gate-metrics %s) decide the regression flag, judged after Holm's correction so that the flag's false-alarm rate is alpha for all of them together; the others are reported to explain them",
			tested, opts.Alpha, float64(tested)*opts.Alpha, gated, strings.Join(opts.GateMetrics, ",")))
	}
	for _, a := range rep.Assertions {
		switch a.Change {
		case ChangeRegressed:
			regressedAssertions++
		case ChangeFlaky:
			flaky++
		}
	}
	rep.Regressed = regressedMetrics+regressedAssertions > 0
	if flaky > 0 {
		what := "1 assertion is"
		if flaky > 1 {
			what = fmt.Sprintf("%d assertions are", flaky)
		}
		rep.Notes = append(rep.Notes, what+" flaky (passed and failed among the repetitions of one side); flaky assertions do not set the regression flag")
	}
	return rep, nil
}

// LoadSide reads run.json from each run directory.
func LoadSide(label string, dirs []string) (Side, error) {
	if len(dirs) == 0 {
		return Side{}, fmt.Errorf("side %q: no run directories given", label)
	}
	s := Side{Label: label}
	for _, d := range dirs {
		r, err := results.Read(d)
		if err != nil {
			// Read names the file; the directory and side make it clear which argument was wrong.
			return Side{}, fmt.Errorf("side %q, run directory %s: %w", label, d, err)
		}
		s.Runs = append(s.Runs, r)
	}
	return s, nil
}

func sideInfo(s Side) SideInfo {
	info := SideInfo{Label: s.Label, Runs: len(s.Runs)}
	var versions, binaries, kubes []string
	for _, r := range s.Runs {
		info.RunIDs = append(info.RunIDs, r.ID)
		versions = appendNew(versions, r.Environment.SchedulerVersion)
		binaries = appendNew(binaries, r.Environment.SchedulerBinary)
		kubes = appendNew(kubes, r.Environment.KubernetesVersion)
	}
	info.SchedulerVersion = strings.Join(versions, ", ")
	info.SchedulerBinary = strings.Join(binaries, ", ")
	info.KubernetesVersion = strings.Join(kubes, ", ")
	return info
}

// sideNotes flags what makes a side's repetitions less than repetitions of one thing.
func sideNotes(s Side) []string {
	var notes []string
	var versions []string
	for _, r := range s.Runs {
		versions = appendNew(versions, r.Environment.SchedulerVersion)
		if r.Interrupted {
			notes = append(notes, fmt.Sprintf("%s: run %s was interrupted; its verdicts are used, its perf figures are not", s.Label, r.ID))
		}
	}
	if len(versions) > 1 {
		notes = append(notes, fmt.Sprintf("%s: runs report different scheduler versions (%s)", s.Label, strings.Join(versions, ", ")))
	}
	return notes
}

// environmentNotes warns when the sides ran on different setups, which makes perf figures compare
// the environments as much as the schedulers.
func environmentNotes(old, new Side) []string {
	var notes []string
	for _, f := range []struct {
		what string
		get  func(results.Environment) string
	}{
		{"provider", func(e results.Environment) string { return e.Provider }},
		{"Kubernetes version", func(e results.Environment) string { return e.KubernetesVersion }},
		{"nodes", func(e results.Environment) string { return fmt.Sprint(e.Nodes) }},
		{"GPUs per node", func(e results.Environment) string { return fmt.Sprint(e.GPUsPerNode) }},
		{"host cores", func(e results.Environment) string { return fmt.Sprint(e.Host.Cores) }},
	} {
		var o, n []string
		for _, r := range old.Runs {
			o = appendNew(o, f.get(r.Environment))
		}
		for _, r := range new.Runs {
			n = appendNew(n, f.get(r.Environment))
		}
		if !slices.Equal(o, n) {
			notes = append(notes, fmt.Sprintf("environments differ in %s: %s on %s, %s on %s; perf figures may reflect the setup, not the scheduler",
				f.what, strings.Join(o, ", "), old.Label, strings.Join(n, ", "), new.Label))
		}
	}
	return notes
}

// appendNew appends v unless it is empty or already present, keeping first-seen order.
func appendNew(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// labelString is the canonical one-line form of labels, "k=v,k=v" sorted by key.
func labelString(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// LabelString formats labels as "k=v,k=v", sorted by key; "" for none.
func LabelString(labels map[string]string) string { return labelString(labels) }
