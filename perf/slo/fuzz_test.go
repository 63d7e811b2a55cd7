package slo

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/perf/internal/strictyaml"
	"github.com/gangbench/gangbench/results"
)

// maxFuzzInput bounds what the fuzz targets decode: SLO files are hand-written and small, and "no
// hang" is a promise about bounded input.
const maxFuzzInput = 64 << 10

// fuzzDeadline is how long one decode may take; it takes well under a millisecond, the margin is
// for a loaded 2-core CI machine running the fuzzer's workers.
const fuzzDeadline = 5 * time.Second

// within runs fn and fails the test if it does not return in d, so a decoder that loops forever
// fails with a message instead of stalling the fuzzer until -fuzztime ends.
// fn runs on another goroutine, where t.Fatal must not be called, so it returns its failure.
func within(t *testing.T, d time.Duration, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-timer.C:
		t.Fatalf("%s did not return within %s", what, d)
	}
}

// FuzzDecodeSLO feeds arbitrary bytes to Load. It must not panic or hang; errors must be
// strictyaml.Errors naming the file on every line; every objective it accepts must have a source,
// a finite threshold and an expression that parses back to the same objective; and judging it
// against an item must not panic.
func FuzzDecodeSLO(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "slo", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, true)
	}
	f.Add(Default(), false)
	f.Add([]byte("apiVersion: gangbench.dev/v1alpha1\nkind: SLO\nobjectives:\n- {expr: 'x{a=b, c=\"d\"}.p99 != -1.5e-3ms', source: s, scenarios: [a]}\n"), false)

	f.Fuzz(func(t *testing.T, data []byte, checkItems bool) {
		if len(data) > maxFuzzInput {
			t.Skip("larger than any SLO file")
		}
		opts := Options{}
		if checkItems {
			opts.Items, opts.Scenarios = items, []string{"smoke", "a"}
		}
		const file = "fuzz.yaml"
		var objs []Objective
		var err error
		within(t, fuzzDeadline, "slo.Load", func() error { objs, err = Load(file, data, opts); return nil })
		if err != nil {
			var es strictyaml.Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %T is not strictyaml.Errors: %v", err, err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, file+":") {
					t.Fatalf("error line %q does not name the file", line)
				}
			}
			return
		}
		if len(objs) == 0 {
			t.Fatal("a file without objectives was accepted")
		}
		for _, o := range objs {
			if strings.TrimSpace(o.Source) == "" || o.File != file || o.Line < 1 {
				t.Fatalf("objective without source or position: %+v", o)
			}
			checkObjective(t, o)
			if checkItems && !slices.Contains(items, o.Item) {
				t.Fatalf("unknown item %q accepted", o.Item)
			}
		}
		within(t, fuzzDeadline, "slo.Evaluate", func() error {
			var its []results.DataItem
			for _, o := range objs {
				its = append(its, results.DataItem{Name: o.Item, Unit: o.Unit, Labels: o.Labels, Data: map[string]float64{o.Bucket: 1}})
			}
			if cases := Evaluate(objs, its); len(cases) < len(objs) {
				return fmt.Errorf("%d cases for %d objectives", len(cases), len(objs))
			}
			return nil
		})
	})
}

// FuzzParseSLOExpr fuzzes the objective expression parser alone, which the file decoder reaches
// only through valid YAML: an accepted expression must parse back from its own Expr unchanged.
func FuzzParseSLOExpr(f *testing.F) {
	for _, s := range []string{
		"bindingRate.avg >= 50/s", "gangLatency.p99 <= 30s", "partialGangs == 0",
		"phaseGangLatency{phase=gangs}.max < 1500ms", "x{a=\"b\",c=d} != -1e-3h", "x{} == 0", "x == 0 furlongs",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxFuzzInput {
			t.Skip()
		}
		var o Objective
		var err error
		within(t, fuzzDeadline, "ParseExpr", func() error { o, err = ParseExpr(s); return nil })
		if err != nil {
			if !strings.Contains(err.Error(), "objective") && !strings.Contains(err.Error(), "label selector") &&
				!strings.Contains(err.Error(), "bad number") && !strings.Contains(err.Error(), "unknown unit") {
				t.Fatalf("unexplained error: %v", err)
			}
			return
		}
		checkObjective(t, o)
	})
}

// checkObjective asserts what an accepted objective promises: a known operator and unit, a finite
// threshold, and an Expr that parses back to the same objective.
func checkObjective(t *testing.T, o Objective) {
	t.Helper()
	switch o.Op {
	case ">=", "<=", ">", "<", "==", "!=":
	default:
		t.Fatalf("operator %q accepted", o.Op)
	}
	switch o.Unit {
	case "", "s", "pods/s", "claims/s":
	default:
		t.Fatalf("unit %q accepted", o.Unit)
	}
	if math.IsNaN(o.Value) || math.IsInf(o.Value, 0) || o.Item == "" || o.Bucket == "" {
		t.Fatalf("objective %+v", o)
	}
	again, err := ParseExpr(o.Expr)
	if err != nil {
		t.Fatalf("Expr %q does not parse again: %v", o.Expr, err)
	}
	again.Source, again.Scenarios, again.File, again.Line = o.Source, o.Scenarios, o.File, o.Line
	if !reflect.DeepEqual(again, o) {
		t.Fatalf("Expr %q parses to\n%+v\nnot\n%+v", o.Expr, again, o)
	}
	o.Holds(o.Value)
	o.Holds(math.NaN())
}
