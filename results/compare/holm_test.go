package compare

import (
	"math"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/results"
)

// multiSide builds one run per index, each holding every metric's i-th value as its own DataItem
// (metric "item.key" → values; unit "pods/s" for rates, "s" otherwise).
func multiSide(label string, metrics map[string][]float64, runs int) Side {
	s := Side{Label: label}
	for i := 0; i < runs; i++ {
		r := &results.Run{ID: label + "-" + string(rune('a'+i)), Environment: results.Environment{SchedulerVersion: label, Nodes: 4}}
		for metric, vs := range metrics {
			item, key, _ := strings.Cut(metric, ".")
			unit := "s"
			if strings.Contains(strings.ToLower(item), "rate") {
				unit = "pods/s"
			}
			r.DataItems = append(r.DataItems, results.DataItem{Name: item, Unit: unit, Data: map[string]float64{key: vs[i]}})
		}
		s.Runs = append(s.Runs, r)
	}
	return s
}

func metricByName(t *testing.T, rep *Report, metric string) MetricResult {
	t.Helper()
	for _, m := range rep.Metrics {
		if m.Metric == metric {
			return m
		}
	}
	t.Fatalf("no metric %s in %+v", metric, rep.Metrics)
	return MetricResult{}
}

// Two gate metrics, each worse on the new side with a little overlap among 6+6 samples: each is
// significant on its own (U = 4 and 5: p 0.026 and 0.041 at alpha 0.05), but under Holm the smaller
// p doubled is above alpha, and the step-down stops there: neither verdict stands.
func TestHolmTakesBackAWeakGateVerdict(t *testing.T) {
	old := map[string][]float64{
		"bindingRate.Average": {100, 101, 102, 103, 104, 105},
		"gangLatency.Perc50":  {1.00, 1.01, 1.02, 1.03, 1.04, 1.05},
	}
	new := map[string][]float64{
		"bindingRate.Average": {90, 91, 92, 93, 100.5, 102.5},
		"gangLatency.Perc50":  {1.025, 1.035, 1.10, 1.11, 1.12, 1.13},
	}
	gate := Options{GateMetrics: []string{"bindingRate.Average", "gangLatency.Perc50"}}
	rep, err := Compare(multiSide("old", old, 6), multiSide("new", new, 6), gate)
	if err != nil {
		t.Fatal(err)
	}
	rate, lat := metricByName(t, rep, "bindingRate.Average"), metricByName(t, rep, "gangLatency.Perc50")
	if !(rate.PValue < lat.PValue && lat.PValue < DefaultAlpha && 2*rate.PValue > DefaultAlpha) {
		t.Fatalf("test data: want alpha/2 < p(rate) < p(latency) < alpha; got %.4f, %.4f", rate.PValue, lat.PValue)
	}
	for _, m := range []MetricResult{rate, lat} {
		if m.Verdict != NoChange || m.Regression {
			t.Errorf("%s: %s (p %.4f, Holm %.4f), want no significant change after the correction", m.Metric, m.Verdict, m.PValue, m.PAdjusted)
		}
	}
	if rep.Regressed {
		t.Error("report regressed")
	}
	// Holm: the smallest p times 2, the next times 1, never below the one before.
	if want := math.Max(2*rate.PValue, lat.PValue); math.Abs(lat.PAdjusted-want) > 1e-12 {
		t.Errorf("latency Holm p %.4f, want %.4f", lat.PAdjusted, want)
	}
	if math.Abs(rate.PAdjusted-2*rate.PValue) > 1e-12 {
		t.Errorf("rate Holm p %.4f, want %.4f", rate.PAdjusted, 2*rate.PValue)
	}
	// Without the correction both would be regressions: the gate is what changed them.
	raw, err := Compare(multiSide("old", old, 6), multiSide("new", new, 6), Options{GateMetrics: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range raw.Metrics {
		if m.Verdict != Slower {
			t.Errorf("ungated %s: %s at p %.4f, want slower (the data must be significant alone)", m.Metric, m.Verdict, m.PValue)
		}
	}
}

// A clear regression next to a borderline one: the step-down keeps both, since the second is
// compared with alpha itself once the first is rejected.
func TestHolmStepDownKeepsTheSecondAfterAClearFirst(t *testing.T) {
	old := map[string][]float64{"bindingRate.Average": {100, 101, 102, 103, 104, 105}, "gangLatency.Perc50": {1.00, 1.01, 1.02, 1.03, 1.04, 1.05}}
	new := map[string][]float64{"bindingRate.Average": {80, 81, 82, 83, 84, 85}, "gangLatency.Perc50": {1.025, 1.035, 1.10, 1.11, 1.12, 1.13}}
	rep, err := Compare(multiSide("old", old, 6), multiSide("new", new, 6), Options{GateMetrics: []string{"bindingRate.Average", "gangLatency.Perc50"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bindingRate.Average", "gangLatency.Perc50"} {
		if m := metricByName(t, rep, name); m.Verdict != Slower {
			t.Errorf("%s: %s (p %.4f, Holm %.4f), want slower", name, m.Verdict, m.PValue, m.PAdjusted)
		}
	}
}

// A self-comparison's chance of a false flag: with five noisy gate metrics each just significant
// alone, the uncorrected gate would raise the flag; the corrected one does not.
func TestHolmKeepsTheFlagDownOnBorderlineNoise(t *testing.T) {
	old, new := map[string][]float64{}, map[string][]float64{}
	gate := []string{"bindingRate.Average", "apiserverBindingRate.Average", "gangLatency.Perc50", "gangLatency.Perc99", "podGroupAttemptDuration.Perc99"}
	for _, m := range gate {
		// U = 5 of 36 pairs: p 0.041 alone, worse by 5% or more.
		if strings.Contains(strings.ToLower(m), "rate") {
			old[m] = []float64{100, 101, 102, 103, 104, 105}
			new[m] = []float64{90, 91, 92, 93, 101.5, 102.5}
		} else {
			old[m] = []float64{1.00, 1.01, 1.02, 1.03, 1.04, 1.05}
			new[m] = []float64{1.025, 1.035, 1.10, 1.11, 1.12, 1.13}
		}
	}
	rep, err := Compare(multiSide("old", old, 6), multiSide("new", new, 6), Options{GateMetrics: gate})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range rep.Metrics {
		if !(m.PValue < DefaultAlpha) {
			t.Fatalf("test data: %s p %.4f, want each significant alone", m.Metric, m.PValue)
		}
		if m.Regression {
			t.Errorf("%s: regression at p %.4f, Holm %.4f", m.Metric, m.PValue, m.PAdjusted)
		}
	}
	if rep.Regressed {
		t.Error("report regressed on five borderline gate metrics")
	}
	if !slicesContainsPrefix(rep.Notes, "Holm's correction across the 5 testable gate metrics took back 5 verdict(s)") {
		t.Errorf("no note of the withdrawn verdicts: %q", rep.Notes)
	}
}

// Gate metrics that are 0 in every run (no partial gangs) are not in Holm's family: a clear
// regression of the one metric that moves is flagged as it would be alone.
func TestHolmFamilyLeavesOutConstantMetrics(t *testing.T) {
	zeros := []float64{0, 0, 0, 0, 0, 0}
	old := map[string][]float64{"bindingRate.Average": {100, 101, 102, 103, 104, 105}, "partialGangs.Value": zeros, "unboundFittingPods.Value": zeros, "statusRegressions.Value": zeros}
	new := map[string][]float64{"bindingRate.Average": {80, 81, 82, 83, 84, 85}, "partialGangs.Value": zeros, "unboundFittingPods.Value": zeros, "statusRegressions.Value": zeros}
	rep, err := Compare(multiSide("old", old, 6), multiSide("new", new, 6), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rate := metricByName(t, rep, "bindingRate.Average")
	if rate.PAdjusted != rate.PValue || !rep.Regressed {
		t.Errorf("rate p %.4f, Holm %.4f, regressed %v: want the p unchanged (a family of one) and the flag raised", rate.PValue, rate.PAdjusted, rep.Regressed)
	}
	if pg := metricByName(t, rep, "partialGangs.Value"); !math.IsNaN(pg.PAdjusted) {
		t.Errorf("partialGangs has a Holm p %.4f; a constant metric is outside the family", pg.PAdjusted)
	}
}

func slicesContainsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
