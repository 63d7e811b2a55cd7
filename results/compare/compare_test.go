package compare

import (
	"encoding/json"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aclements/go-moremath/stats"

	"github.com/gangbench/gangbench/results"
)

// perfSide builds one run per value, each with a DataItem name/unit holding {key: value}.
func perfSide(label, name, unit, key string, values []float64) Side {
	s := Side{Label: label}
	for i, v := range values {
		s.Runs = append(s.Runs, &results.Run{
			ID:          label + "-" + string(rune('a'+i)),
			Environment: results.Environment{SchedulerVersion: label, Nodes: 4},
			DataItems:   []results.DataItem{{Name: name, Unit: unit, Data: map[string]float64{key: v}}},
		})
	}
	return s
}

func scale(vs []float64, f float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = v * f
	}
	return out
}

var (
	base   = []float64{100, 101, 99, 100.5, 99.5, 100.2}
	jitter = []float64{100.1, 100.9, 99.2, 100.4, 99.6, 100.0} // same distribution, tiny jitter
)

func compareOne(t *testing.T, name, unit, key string, old, new []float64, opts Options) (MetricResult, *Report) {
	t.Helper()
	rep, err := Compare(perfSide("old", name, unit, key, old), perfSide("new", name, unit, key, new), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Metrics) != 1 {
		t.Fatalf("got %d metrics, want 1: %+v", len(rep.Metrics), rep.Metrics)
	}
	return rep.Metrics[0], rep
}

func TestMetricVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		item, unit string
		key        string
		old, new   []float64
		opts       Options
		want       MetricVerdict
		regression bool
	}{
		{"equal distributions", "bindingRate", "pods/s", "Average", base, jitter, Options{}, NoChange, false},
		{"rate up 20%", "bindingRate", "pods/s", "Average", base, scale(base, 1.2), Options{}, Faster, false},
		{"rate down 20%", "bindingRate", "pods/s", "Average", base, scale(base, 0.8), Options{}, Slower, true},
		{"latency up 20%", "gangLatency", "s", "Perc99", base, scale(jitter, 1.2), Options{}, Slower, true},
		{"latency down 20%", "gangLatency", "s", "Perc99", base, scale(jitter, 0.8), Options{}, Faster, false},
		{"noisy with overlap", "bindingRate", "pods/s", "Average",
			[]float64{80, 120, 95, 110, 100, 90}, []float64{85, 125, 100, 115, 105, 92}, Options{}, NoChange, false},
		{"significant below min effect", "gangLatency", "s", "Perc99", base, scale(base, 1.02), Options{}, NoChange, false},
		{"same shift with 1% min effect", "gangLatency", "s", "Perc99", base, scale(base, 1.02), Options{MinEffect: 0.01}, Slower, true},
		{"too few samples to be significant", "bindingRate", "pods/s", "Average", base[:3], scale(base[:3], 0.5), Options{}, NoChange, false},
		{"one sample per side", "bindingRate", "pods/s", "Average", base[:1], scale(base[:1], 0.5), Options{}, NotComparable, false},
		{"custom direction", "bindCountMismatch", "pods", "Value", base, scale(base, 1.2),
			Options{HigherIsBetter: func(string, string) bool { return true }}, Faster, false},
		{"from zero", "partialGangs", "gangs", "Value", []float64{0, 0, 0, 0, 0, 0}, []float64{1, 2, 1, 3, 1, 2}, Options{}, Slower, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, rep := compareOne(t, tc.item, tc.unit, tc.key, tc.old, tc.new, tc.opts)
			if m.Verdict != tc.want || m.Regression != tc.regression || rep.Regressed != tc.regression {
				t.Errorf("verdict %q regression %v (report %v), want %q %v; p=%v ratio=%v warnings %v",
					m.Verdict, m.Regression, rep.Regressed, tc.want, tc.regression, m.PValue, m.Ratio, m.Warnings)
			}
			if m.Metric != tc.item+"."+tc.key || m.Unit != tc.unit {
				t.Errorf("metric %q unit %q", m.Metric, m.Unit)
			}
		})
	}
}

func TestMetricStatistics(t *testing.T) {
	m, rep := compareOne(t, "bindingRate", "pods/s", "Average", base, scale(base, 1.2), Options{})
	if m.Old.N != 6 || m.New.N != 6 || !slices.Equal(m.Old.Samples, base) {
		t.Errorf("summaries %+v %+v", m.Old, m.New)
	}
	if want := (100 + 100.2) / 2; math.Abs(m.Old.Center-want) > 1e-9 {
		t.Errorf("old median %v, want %v", m.Old.Center, want)
	}
	if !(m.Old.Lo <= m.Old.Center && m.Old.Center <= m.Old.Hi) || math.IsInf(m.Old.Lo, 0) || math.IsInf(m.Old.Hi, 0) {
		t.Errorf("old CI [%v, %v] around %v", m.Old.Lo, m.Old.Hi, m.Old.Center)
	}
	if math.Abs(m.Ratio-1.2) > 1e-9 {
		t.Errorf("ratio %v, want 1.2", m.Ratio)
	}
	if !(m.RatioLo > 1.1 && m.RatioLo <= m.Ratio && m.Ratio <= m.RatioHi && m.RatioHi < 1.3) {
		t.Errorf("ratio CI [%v, %v] around %v", m.RatioLo, m.RatioHi, m.Ratio)
	}
	// Two disjoint samples of 6: the exact two-sided U test p value is 2/C(12,6).
	if want := 2.0 / 924; math.Abs(m.PValue-want) > 1e-12 {
		t.Errorf("p %v, want %v", m.PValue, want)
	}
	if len(rep.Notes) != 0 {
		t.Errorf("unexpected notes %q", rep.Notes)
	}

	// Equal distributions: the ratio interval straddles 1.
	m, _ = compareOne(t, "bindingRate", "pods/s", "Average", base, jitter, Options{})
	if !(m.RatioLo < 1 && 1 < m.RatioHi) || m.PValue < 0.05 {
		t.Errorf("equal: ratio CI [%v, %v], p %v", m.RatioLo, m.RatioHi, m.PValue)
	}
}

func TestTooFewSamplesSurfaceBenchmathWarnings(t *testing.T) {
	m, rep := compareOne(t, "bindingRate", "pods/s", "Average", base[:3], scale(base[:3], 0.5), Options{})
	if m.RatioLo != 0 || m.RatioHi != 0 || !math.IsInf(m.Old.Lo, -1) || !math.IsInf(m.Old.Hi, 1) {
		t.Errorf("3 samples: want no intervals, got ratio [%v, %v], old [%v, %v]", m.RatioLo, m.RatioHi, m.Old.Lo, m.Old.Hi)
	}
	notes := strings.Join(rep.Notes, "\n")
	for _, want := range []string{"need >= 4 samples to detect a difference at alpha level 0.05", "need >= 6 samples for confidence interval at level 0.95", "1 of 1 metrics"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

func TestNotComparableMetrics(t *testing.T) {
	old := perfSide("old", "bindingRate", "pods/s", "Average", base)
	new := perfSide("new", "bindingRate", "pods/s", "Average", base)
	new.Runs[0].DataItems = append(new.Runs[0].DataItems, results.DataItem{Name: "gangLatency", Unit: "s",
		Labels: map[string]string{"phase": "measure"}, Data: map[string]float64{"Perc50": 1}})
	old.Runs[0].DataItems = append(old.Runs[0].DataItems, results.DataItem{Name: "bindSpread", Unit: "ms", Data: map[string]float64{"Max": 1}})
	for _, r := range new.Runs {
		r.DataItems = append(r.DataItems, results.DataItem{Name: "bindSpread", Unit: "s", Data: map[string]float64{"Max": 1}})
	}
	rep, err := Compare(old, new, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range rep.Metrics {
		got[m.DisplayName()] = string(m.Verdict) + ": " + m.Reason
		if m.Verdict == NotComparable && !math.IsNaN(m.PValue) {
			t.Errorf("%s: p %v, want NaN", m.Metric, m.PValue)
		}
	}
	want := map[string]string{
		"bindSpread.Max":                     "not comparable: units differ: \"ms\" old, \"s\" new",
		"bindingRate.Average":                "no significant change: ",
		"gangLatency.Perc50 {phase=measure}": "not comparable: missing from the old runs",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if names := []string{rep.Metrics[0].Metric, rep.Metrics[1].Metric, rep.Metrics[2].Metric}; !slices.IsSorted(names) {
		t.Errorf("metrics not sorted: %v", names)
	}
}

func TestInterruptedRunsGiveNoSamples(t *testing.T) {
	old := perfSide("old", "bindingRate", "pods/s", "Average", base)
	old.Runs[0].Interrupted = true
	rep, err := Compare(old, perfSide("new", "bindingRate", "pods/s", "Average", base), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Metrics[0].Old.N; n != 5 {
		t.Errorf("old N %d, want 5 (interrupted run left out)", n)
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "old-a was interrupted") {
		t.Errorf("notes %q", rep.Notes)
	}
}

func TestMosesRank(t *testing.T) {
	for _, tc := range []struct{ n1, n2, want int }{{3, 3, 0}, {4, 4, 1}, {5, 5, 3}, {6, 6, 6}, {10, 10, 24}} {
		if got := mosesRank(tc.n1, tc.n2, 0.05); got != tc.want {
			t.Errorf("mosesRank(%d, %d) = %d, want %d", tc.n1, tc.n2, got, tc.want)
		}
	}
	// Past the exact limit the normal approximation stays within a rank of the exact value.
	exact := func(n1, n2 int) int {
		d, c := stats.UDist{N1: n1, N2: n2}, 0
		for d.CDF(float64(c)) <= 0.025 {
			c++
		}
		return c
	}
	if got, want := mosesRank(21, 20, 0.05), exact(21, 20); got < want-1 || got > want+1 {
		t.Errorf("approximate rank %d, exact %d", got, want)
	}
}

func TestDefaultHigherIsBetter(t *testing.T) {
	for _, tc := range []struct {
		metric, unit string
		want         bool
	}{
		{"bindingRate.Average", "pods/s", true},
		{"bindingRate.Perc90", "pods/s", true},
		{"bindingRate.DurationSeconds", "pods/s", false},
		{"creationRate.Average", "", true},
		{"SchedulingThroughput.Perc50", "pods/s", true},
		{"gangLatency.Perc99", "s", false},
		{"bindSpread.Max", "s", false},
		{"partialGangs.Value", "gangs", false},
		{"unboundFittingPods.Value", "pods", false},
	} {
		if got := DefaultHigherIsBetter(tc.metric, tc.unit); got != tc.want {
			t.Errorf("DefaultHigherIsBetter(%q, %q) = %v, want %v", tc.metric, tc.unit, got, tc.want)
		}
	}
}

func confSide(label string, verdicts ...map[string]results.Verdict) Side {
	s := Side{Label: label}
	for i, vs := range verdicts {
		r := &results.Run{ID: label + "-" + string(rune('a'+i))}
		for _, id := range []string{"BAR-01", "BAR-02", "BAR-03", "BAR-04", "PG-01", "PG-02", "PG-03", "PG-04", "PG-05", "PG-06", "PG-07"} {
			if v, ok := vs[id]; ok {
				r.Cases = append(r.Cases, results.Case{ID: id, Suite: strings.ToLower(id[:2]), Name: "statement of " + id, Verdict: v})
			}
		}
		s.Runs = append(s.Runs, r)
	}
	return s
}

func TestConformanceDiff(t *testing.T) {
	const (
		P = results.Pass
		F = results.Fail
		E = results.Error
		S = results.Skip
	)
	old := confSide("old",
		map[string]results.Verdict{"BAR-01": P, "BAR-02": P, "BAR-03": F, "BAR-04": P, "PG-01": P, "PG-02": P, "PG-03": F, "PG-04": P, "PG-06": S},
		map[string]results.Verdict{"BAR-01": P, "BAR-02": P, "BAR-03": F, "BAR-04": P, "PG-01": P, "PG-02": P, "PG-03": F, "PG-04": P, "PG-06": S},
	)
	new := confSide("new",
		map[string]results.Verdict{"BAR-01": P, "BAR-02": F, "BAR-03": P, "BAR-04": P, "PG-01": F, "PG-03": E, "PG-04": E, "PG-05": P, "PG-06": F},
		map[string]results.Verdict{"BAR-01": P, "BAR-02": F, "BAR-03": P, "BAR-04": F, "PG-01": F, "PG-03": F, "PG-04": P, "PG-05": P, "PG-06": F},
	)
	rep, err := Compare(old, new, Options{NotComparable: map[string]string{"PG-01": "v1.37 changed minCount semantics"}})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		old, new results.Verdict
		change   string
	}
	want := map[string]row{
		"BAR-01": {P, P, ChangeUnchanged},
		"BAR-02": {P, F, ChangeRegressed},
		"BAR-03": {F, P, ChangeFixed},
		"BAR-04": {P, F, ChangeFlaky},
		"PG-01":  {P, F, ChangeNotComparable},
		"PG-02":  {P, "", ChangeRemoved},
		"PG-03":  {F, F, ChangeUnchanged}, // fail and error: worst is fail
		"PG-04":  {P, E, ChangeFlaky},
		"PG-05":  {"", P, ChangeNew},
		"PG-06":  {S, F, ChangeNotComparable},
	}
	var order []string
	for _, a := range rep.Assertions {
		order = append(order, a.ID)
		w, ok := want[a.ID]
		if !ok || a.Old != w.old || a.New != w.new || a.Change != w.change {
			t.Errorf("%s: %s→%s %s, want %+v", a.ID, a.Old, a.New, a.Change, w)
		}
	}
	if wantOrder := []string{"BAR-01", "BAR-02", "BAR-03", "BAR-04", "PG-01", "PG-02", "PG-03", "PG-04", "PG-06", "PG-05"}; !slices.Equal(order, wantOrder) {
		t.Errorf("order %v, want %v", order, wantOrder)
	}
	byID := map[string]AssertionChange{}
	for _, a := range rep.Assertions {
		byID[a.ID] = a
	}
	if r := byID["PG-01"].Reason; r != "v1.37 changed minCount semantics" {
		t.Errorf("PG-01 reason %q", r)
	}
	if r := byID["PG-06"].Reason; r != "skipped on the old side" {
		t.Errorf("PG-06 reason %q", r)
	}
	if v := byID["BAR-04"].NewVerdicts; !slices.Equal(v, []results.Verdict{P, F}) {
		t.Errorf("BAR-04 new verdicts %v", v)
	}
	if byID["BAR-01"].Changed() || byID["PG-03"].Changed() || !byID["BAR-02"].Changed() {
		t.Error("Changed: BAR-01 and PG-03 (worst verdict fail on both sides) are unchanged, BAR-02 changed")
	}
	// Failing on both sides in different ways: unchanged, but still a row of the diff.
	a := AssertionChange{Old: F, New: E, OldVerdicts: []results.Verdict{F}, NewVerdicts: []results.Verdict{E}}
	if a.Change, _ = change(a, nil); a.Change != ChangeUnchanged || !a.Changed() {
		t.Errorf("fail→error: %s, Changed %v", a.Change, a.Changed())
	}
	if !rep.Regressed {
		t.Error("Regressed not set despite BAR-02")
	}

	// Without the regression (and the not-comparable PG-01 failing), nothing sets the flag.
	for _, r := range new.Runs {
		for i := range r.Cases {
			if r.Cases[i].ID == "BAR-02" {
				r.Cases[i].Verdict = P
			}
		}
	}
	rep, err = Compare(old, new, Options{NotComparable: map[string]string{"PG-01": ""}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Regressed {
		t.Error("Regressed set with only flaky, new, removed and not comparable changes")
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "2 assertions are flaky") {
		t.Errorf("notes %q", rep.Notes)
	}
}

func TestCompareErrors(t *testing.T) {
	ok := perfSide("ok", "x", "", "y", base)
	for _, tc := range []struct {
		name     string
		old, new Side
		opts     Options
		want     string
	}{
		{"empty side", Side{Label: "old"}, ok, Options{}, `side "old" has no runs`},
		{"nil run", ok, Side{Label: "new", Runs: []*results.Run{nil}}, Options{}, `side "new" has a nil run`},
		{"alpha", ok, ok, Options{Alpha: 1.5}, "alpha 1.5"},
		{"min effect", ok, ok, Options{MinEffect: -1}, "minimum effect -1"},
	} {
		if _, err := Compare(tc.old, tc.new, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestEnvironmentNotes(t *testing.T) {
	old := perfSide("old", "x", "", "y", base)
	new := perfSide("new", "x", "", "y", base)
	for _, r := range new.Runs {
		r.Environment.Nodes = 8
	}
	new.Runs[1].Environment.SchedulerVersion = "other"
	rep, err := Compare(old, new, Options{})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(rep.Notes, "\n")
	for _, want := range []string{"environments differ in nodes: 4 on old, 8 on new", "new: runs report different scheduler versions (new, other)"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if rep.New.SchedulerVersion != "new, other" || rep.Old.Runs != 6 || len(rep.Old.RunIDs) != 6 {
		t.Errorf("side info %+v", rep.New)
	}
}

func TestLoadSide(t *testing.T) {
	dir := t.TempDir()
	var dirs []string
	for i, v := range base[:2] {
		d := filepath.Join(dir, string(rune('a'+i)))
		r := perfSide("x", "bindingRate", "pods/s", "Average", []float64{v}).Runs[0]
		if err := results.Write(d, r); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	s, err := LoadSide("old", dirs)
	if err != nil || len(s.Runs) != 2 || s.Label != "old" || s.Runs[1].DataItems[0].Data["Average"] != base[1] {
		t.Fatalf("LoadSide: %v %+v", err, s)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := LoadSide("old", append(dirs, missing)); err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), `"old"`) {
		t.Errorf("missing dir: %v", err)
	}
	if _, err := LoadSide("new", nil); err == nil || !strings.Contains(err.Error(), `"new"`) {
		t.Errorf("no dirs: %v", err)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	old := perfSide("old", "bindingRate", "pods/s", "Average", base[:3])
	new := perfSide("new", "bindingRate", "pods/s", "Average", base[:3])
	new.Runs[0].DataItems = append(new.Runs[0].DataItems, results.DataItem{Name: "gangLatency", Unit: "s", Data: map[string]float64{"Max": 2}})
	rep, err := Compare(old, new, Options{NotComparable: map[string]string{"X-1": "why"}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	for _, want := range []string{`"lo":null`, `"pValue":null`, `"ratio":null`, `"notComparable":{"X-1":"why"}`, `"verdict":"not comparable"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON lacks %s:\n%s", want, data)
		}
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(&back)
	if err != nil || string(again) != string(data) {
		t.Errorf("round trip differs (%v):\n%s\n%s", err, data, again)
	}
	if m := back.Metrics[0]; !math.IsInf(m.Old.Lo, -1) || !math.IsInf(m.Old.Hi, 1) {
		t.Errorf("decoded interval [%v, %v]", m.Old.Lo, m.Old.Hi)
	}
}

// TestGateMetrics: every metric is tested and reported, but only the gate metrics decide the
// regression flag, so that the chance false alarms of many tests do not fail a CI job.
func TestGateMetrics(t *testing.T) {
	for _, tc := range []struct {
		name      string
		metric    string
		gate      []string
		regressed bool
	}{
		{"default gate, headline metric", "bindingRate.Average", nil, true},
		{"default gate, explanatory metric", "bindingRate.Perc90", nil, false},
		{"explicit gate", "bindingRate.Perc90", []string{"bindingRate.Perc90"}, true},
		{"every metric", "bindingRate.Perc90", []string{"*"}, true},
	} {
		item, key, _ := strings.Cut(tc.metric, ".")
		m, rep := compareOne(t, item, "pods/s", key, base, scale(base, 0.8), Options{GateMetrics: tc.gate})
		if m.Verdict != Slower || !m.Regression {
			t.Fatalf("%s: verdict %s regression %v, want a slower regression", tc.name, m.Verdict, m.Regression)
		}
		if rep.Regressed != tc.regressed || m.Gated != tc.regressed {
			t.Errorf("%s: report regressed %v, metric gated %v; want %v", tc.name, rep.Regressed, m.Gated, tc.regressed)
		}
	}
}

func TestNotComparableMetricKeepsFigures(t *testing.T) {
	opts := Options{NotComparableMetrics: map[string]string{"podGroupAttemptDuration": "boundary moved"}}
	m, rep := compareOne(t, "podGroupAttemptDuration", "s", "Perc99", base, scale(base, 3), opts)
	if m.Verdict != NotComparable || m.Reason != "boundary moved" || m.Regression || rep.Regressed {
		t.Errorf("verdict %s (%q), regression %v/%v; want not comparable, no regression", m.Verdict, m.Reason, m.Regression, rep.Regressed)
	}
	if m.Old.N != 6 || m.New.N != 6 || math.Abs(m.Ratio-3) > 1e-9 {
		t.Errorf("figures dropped: old n=%d new n=%d ratio %v", m.Old.N, m.New.N, m.Ratio)
	}
}
