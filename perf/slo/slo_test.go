package slo

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/results"
)

var items = []string{"bindingRate", "gangLatency", "partialGangs", "phaseGangLatency", "podGroupScheduleAttempts"}

func fixture(name string) string { return filepath.Join("..", "testdata", "slo", name) }

func TestLoadValid(t *testing.T) {
	objs, err := LoadFile(fixture("valid.yaml"), Options{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	want := []Objective{
		{Expr: "bindingRate.avg >= 50/s", Item: "bindingRate", Bucket: "Average", Op: ">=", Value: 50, Unit: "pods/s", Source: "fixture", Line: 7},
		{Expr: "gangLatency.p99 <= 30s", Item: "gangLatency", Bucket: "Perc99", Op: "<=", Value: 30, Unit: "s", Source: "fixture", Scenarios: []string{"smoke"}, Line: 9},
		{Expr: "partialGangs == 0", Item: "partialGangs", Bucket: "Value", Op: "==", Value: 0, Source: "gang semantics", Line: 12},
		{Expr: "phaseGangLatency{phase=gangs}.max < 1500ms", Item: "phaseGangLatency", Labels: map[string]string{"phase": "gangs"}, Bucket: "Max", Op: "<", Value: 1.5, Unit: "s", Source: "fixture", Line: 14},
		{Expr: "podGroupScheduleAttempts.unschedulable <= 10", Item: "podGroupScheduleAttempts", Bucket: "unschedulable", Op: "<=", Value: 10, Source: "fixture", Line: 16},
	}
	if len(objs) != len(want) {
		t.Fatalf("%d objectives, want %d", len(objs), len(want))
	}
	for i, o := range objs {
		w := want[i]
		w.File = fixture("valid.yaml")
		if o.Expr != w.Expr || o.Item != w.Item || o.Bucket != w.Bucket || o.Op != w.Op || o.Value != w.Value || o.Unit != w.Unit ||
			o.Source != w.Source || o.File != w.File || o.Line != w.Line || strings.Join(o.Scenarios, ",") != strings.Join(w.Scenarios, ",") ||
			len(o.Labels) != len(w.Labels) || o.Labels["phase"] != w.Labels["phase"] {
			t.Errorf("objective %d:\n got %+v\nwant %+v", i, o, w)
		}
	}
}

func TestLoadInvalid(t *testing.T) {
	_, err := LoadFile(fixture("invalid.yaml"), Options{Items: items})
	f := fixture("invalid.yaml")
	want := strings.Join([]string{
		f + ":6: objectives[0].source: missing; every threshold must say where its number came from (machine, date, runs)",
		f + `:7: objectives[1].expr: unknown data item "bindngRate" (known: bindingRate, gangLatency, partialGangs, phaseGangLatency, podGroupScheduleAttempts)`,
		f + `:9: objectives[2].expr: "gangLatency.p99 <= 30 parsecs": unknown unit "parsecs" (accepted: /s or pods/s for rates, claims/s for claimAllocationRate; ms, s, m, h for durations; none for counts)`,
		f + `:11: objectives[3].expr: "gangLatency.p99 about 30s" is not an objective; want ITEM[{label=value}][.STAT] OP NUMBER[UNIT], e.g. bindingRate.avg >= 50/s, gangLatency.p99 <= 30s, partialGangs == 0`,
		f + ":14: objectives[4].source: empty; say where the number came from (machine, date, runs)",
		f + ":15: objectives[4].owner: unknown field (accepted: expr, source, scenarios)",
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("errors:\n got:\n%v\nwant:\n%s", err, want)
	}
	if _, err := Load("s.yaml", []byte("apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\n"), Options{}); err == nil || err.Error() != `s.yaml:2: kind: "Scenario" where a SLO is expected` {
		t.Errorf("wrong kind: %v", err)
	}
}

func TestParseExprUnits(t *testing.T) {
	for _, tc := range []struct {
		expr, unit string
		value      float64
	}{
		{"gangLatency.p99 <= 250ms", "s", 0.25},
		{"gangLatency.max <= 2m", "s", 120},
		{"bindingRate.p50 > 10 pods/s", "pods/s", 10},
		{"partialGangs != 1", "", 1},
		{"bindSpread.p90 < 1e-1s", "s", 0.1},
		{"bindSpread.p90 < 1.5h", "s", 5400},
		{"claimAllocationRate{gpuAPI=dra}.avg >= 12 claims/s", "claims/s", 12},
	} {
		o, err := ParseExpr(tc.expr)
		if err != nil || o.Unit != tc.unit || o.Value != tc.value {
			t.Errorf("%s: %+v %v", tc.expr, o, err)
		}
	}
	if _, err := ParseExpr("x{phase} == 0"); err == nil {
		t.Error("a label selector without a value must not parse")
	}
	if _, err := ParseExpr("x == 0 furlongs"); err == nil || !strings.Contains(err.Error(), `unknown unit "furlongs"`) {
		t.Errorf("unknown unit: %v", err)
	}
}

func TestEvaluate(t *testing.T) {
	mk := func(expr string, scenarios ...string) Objective {
		o, err := ParseExpr(expr)
		if err != nil {
			t.Fatal(err)
		}
		o.Source, o.Scenarios = "test", scenarios
		return o
	}
	data := []results.DataItem{
		{Name: "bindingRate", Unit: "pods/s", Labels: map[string]string{"scenario": "a", "repetition": "1"}, Data: map[string]float64{"Average": 60}},
		{Name: "bindingRate", Unit: "pods/s", Labels: map[string]string{"scenario": "b", "repetition": "1"}, Data: map[string]float64{"Average": 40}},
		{Name: "gangLatency", Unit: "s", Labels: map[string]string{"scenario": "a"}, Data: map[string]float64{"Perc99": 3}},
		{Name: "partialGangs", Unit: "gangs", Labels: map[string]string{"scenario": "a"}, Data: map[string]float64{"Value": 1}},
	}
	cases := Evaluate([]Objective{
		mk("bindingRate.avg >= 50/s"),
		mk("gangLatency.p99 <= 30s"),
		mk("gangLatency.p99 <= 2000ms", "a"),
		mk("partialGangs == 0"),
		mk("bindSpread.p99 <= 1s"),
		mk("gangLatency.p50 <= 1s"),
		mk("gangLatency.p99 <= 5/s"),
	}, data)
	type v struct {
		id      string
		verdict results.Verdict
	}
	var got []v
	for _, c := range cases {
		got = append(got, v{c.ID, c.Verdict})
	}
	want := []v{
		{"SLO-01", results.Pass}, {"SLO-01", results.SLOViolation}, // one case per matching item
		{"SLO-02", results.Pass},
		{"SLO-03", results.SLOViolation},
		{"SLO-04", results.SLOViolation},
		{"SLO-05", results.Skip},  // no data: the scenario did not measure it
		{"SLO-06", results.Error}, // the item has no Perc50
		{"SLO-07", results.Error}, // a rate threshold on a latency
	}
	if len(got) != len(want) {
		t.Fatalf("cases %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("case %d: %v, want %v", i, got[i], want[i])
		}
	}
	b := cases[1]
	if b.Name != "bindingRate.avg >= 50/s [scenario=b repetition=1]" || b.Ref != "test" ||
		b.Message != "bindingRate.Average = 40 pods/s, want >= 50 pods/s (threshold source: test)" ||
		b.Measurements["value"] != 40 || b.Measurements["threshold"] != 50 {
		t.Errorf("violation case: %+v", b)
	}
	if data[1].Data["AverageThreshold"] != 50 {
		t.Errorf("the threshold is recorded in the item, as scheduler_perf does: %v", data[1].Data)
	}
}

func TestDefaultFileLoads(t *testing.T) {
	objs, err := Load(DefaultFile, Default(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatal("the default SLO file has no objectives")
	}
	for _, o := range objs {
		if len(o.Source) < 20 {
			t.Errorf("%s: source %q does not say where the number came from", o.Expr, o.Source)
		}
	}
}

// TestLoadInvalidInline covers the issue 7 audit: every error names the file, the line, the field
// and what is accepted; unknown fields and kinds fail closed; a file that judges nothing is refused.
func TestLoadInvalidInline(t *testing.T) {
	const head = "apiVersion: gangbench.dev/v1alpha1\nkind: SLO\n"
	for _, tc := range []struct {
		name, yaml string
		opts       Options
		want       string
	}{
		{"empty file", "", Options{}, "s.yaml: empty file"},
		{"no kind", "apiVersion: gangbench.dev/v1alpha1\n", Options{}, "s.yaml:1: kind: missing; want SLO"},
		{"unknown kind", "apiVersion: gangbench.dev/v1alpha1\nkind: Slo\n", Options{}, `s.yaml:2: kind: "Slo" where a SLO is expected`},
		{"unknown apiVersion", "apiVersion: gangbench.dev/v2\nkind: SLO\n", Options{}, `s.yaml:1: apiVersion: "gangbench.dev/v2" is not supported; want gangbench.dev/v1alpha1`},
		{"no objectives", head, Options{}, "s.yaml:1: objectives: missing; an SLO file lists objectives"},
		{"empty objectives", head + "objectives: []\n", Options{}, "s.yaml:3: objectives: empty; list at least one objective, e.g. - {expr: bindingRate.avg >= 50/s, source: ...}"},
		{"objectives not a list", head + "objectives: {expr: x}\n", Options{}, "s.yaml:3: objectives: want a list, got a mapping"},
		{"unknown top-level field", head + "objective: []\nobjectives:\n- {expr: x == 0, source: s}\n", Options{},
			"s.yaml:3: objective: unknown field (accepted: apiVersion, kind, metadata, objectives)"},
		{"unknown metadata field", head + "metadata: {name: a, owner: b}\nobjectives:\n- {expr: x == 0, source: s}\n", Options{},
			"s.yaml:3: metadata.owner: unknown field (accepted: name, description)"},
		{"expr not a string", head + "objectives:\n- {expr: [a], source: s}\n", Options{},
			"s.yaml:4: objectives[0].expr: want a string, got a list"},
		{"unknown scenario", head + "objectives:\n- expr: x == 0\n  source: s\n  scenarios: [smoke, smoek]\n", Options{Scenarios: []string{"smoke", "gpu-mix"}},
			`s.yaml:6: objectives[0].scenarios[1]: unknown scenario "smoek" (known: smoke, gpu-mix)`},
		{"duplicate scenario", head + "objectives:\n- expr: x == 0\n  source: s\n  scenarios: [smoke, smoke]\n", Options{},
			`s.yaml:6: objectives[0].scenarios[1]: "smoke" listed twice`},
		{"unknown operator", head + "objectives:\n- {expr: x => 0, source: s}\n", Options{},
			`s.yaml:4: objectives[0].expr: "x => 0" is not an objective; want ITEM[{label=value}][.STAT] OP NUMBER[UNIT], e.g. bindingRate.avg >= 50/s, gangLatency.p99 <= 30s, partialGangs == 0`},
		{"number out of range", head + "objectives:\n- {expr: x <= 1e999, source: s}\n", Options{},
			`s.yaml:4: objectives[0].expr: "x <= 1e999": bad number "1e999"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("s.yaml", []byte(tc.yaml), tc.opts)
			if err == nil || err.Error() != tc.want {
				t.Errorf("\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}
