package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/perf"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/results"
)

// TestReferenceRunsRounds: perf run --reference --rounds 2 runs scheduler_perf three times (before,
// between and after the rounds), records each run under its own name, compares every round with
// the two runs around it and adds their median; with one round the record is the bracket alone.
func TestReferenceRunsRounds(t *testing.T) {
	for _, rounds := range []int{1, 2} {
		dir := t.TempDir()
		tputs := []float64{100, 120, 80}
		r := &referenceRuns{runDir: dir, f: &perfRunFlags{rounds: rounds}, stderr: io.Discard,
			scs: []*scenario.Scenario{{Name: "s", Reference: &scenario.Reference{}}}, none: []string{"plain"}}
		r.measure = func(context.Context, io.Writer) (map[string]*perf.ReferenceResult, error) {
			v := tputs[len(r.runs)]
			return map[string]*perf.ReferenceResult{"s": {Benchmark: "b", Items: map[string]results.DataItem{
				perf.RefThroughput: {Unit: "pods/s", Data: map[string]float64{"Average": v}},
			}}}, nil
		}
		run := &results.Run{ID: "x"}
		for n := 1; n <= rounds; n++ {
			l := map[string]string{"scenario": "s", "repetition": "1"}
			if rounds > 1 {
				l[perf.LabelRound] = []string{"", "1", "2"}[n]
			}
			// 110 pods/s in each round: 1.0× of round 1's bracket (100, 120), 1.1× of round 2's (120, 80).
			run.DataItems = append(run.DataItems, results.DataItem{Name: measure.ItemBindingRate, Labels: l, Data: map[string]float64{"Average": 110}})
		}
		ctx := context.Background()
		if err := r.runAll(ctx); err != nil {
			t.Fatal(err)
		}
		if rounds > 1 {
			if err := r.between(ctx, 2); err == nil {
				t.Error("a reference out of turn must be refused")
			}
			if err := r.between(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.finish(ctx, run); err != nil {
			t.Fatal(err)
		}
		whens := map[string]float64{}
		ratios := map[string]float64{}
		for _, d := range run.DataItems {
			switch d.Name {
			case perf.ItemReference:
				whens[d.Labels["run"]] = d.Data["Average"]
			case perf.ItemReferenceRatio:
				ratios[d.Labels[perf.LabelRound]] = d.Data["BindingRate"]
			}
		}
		logs, _ := filepath.Glob(filepath.Join(dir, "reference-*.log"))
		switch rounds {
		case 1:
			if len(whens) != 2 || whens["before"] != 100 || whens["after"] != 120 || len(ratios) != 1 || !nearly(ratios[""], 110.0/110) {
				t.Errorf("one round: references %v, ratios %v", whens, ratios)
			}
		case 2:
			if len(whens) != 3 || whens["before"] != 100 || whens["after round 1"] != 120 || whens["after round 2"] != 80 {
				t.Errorf("two rounds: references %v", whens)
			}
			if len(ratios) != 3 || !nearly(ratios["1"], 1) || !nearly(ratios["2"], 1.1) || !nearly(ratios[perf.RoundMedian], 1.05) {
				t.Errorf("two rounds: ratios %v, want 1.0, 1.1 and their median 1.05", ratios)
			}
		}
		if len(logs) != rounds+1 {
			t.Errorf("%d rounds: reference logs %v", rounds, logs)
		}
		back, err := results.Read(dir)
		if err != nil || len(back.DataItems) != len(run.DataItems) || !strings.Contains(strings.Join(back.Notes, "\n"), "scenario plain names no scheduler_perf workload") {
			t.Errorf("run.json not rewritten with the references: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "run.json")); err != nil {
			t.Error(err)
		}
	}
}

func nearly(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
