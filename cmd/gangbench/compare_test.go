package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/results/compare"
)

func readCompare(t *testing.T, dir string) compare.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "compare.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep compare.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("compare.json: %v", err)
	}
	return rep
}

// TestIntegrationCompareBrokenScheduler compares the stock scheduler with one whose gang scheduling
// is off: the conformance diff must report regressions and --fail-on-regression must exit 3.
func TestIntegrationCompareBrokenScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real clusters; skipped with -short")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"compare", "--new-scheduler-feature-gates", "GenericWorkload=false", "--no-perf",
		"--suites", "experiments", "--fail-on-regression", "--run-dir", dir}, &out, &errb)
	if code != exitRegression {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitRegression, out.String(), errb.String())
	}
	rep := readCompare(t, dir)
	var regressed []string
	for _, a := range rep.Assertions {
		if a.Change == compare.ChangeRegressed {
			regressed = append(regressed, a.ID)
		}
	}
	if !rep.Regressed || !strings.Contains(strings.Join(regressed, ","), "EXP-1b") {
		t.Errorf("regressed assertions %v (Regressed=%v), want EXP-1b among them", regressed, rep.Regressed)
	}
	for _, f := range []string{"compare.md", "compare.html"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
}

// TestIntegrationCompareSelf compares v1.37.2 with itself on the smoke scenario, interleaved: the
// binding rate must not be reported as changed. Five samples a side at alpha 0.01: with fewer, no
// difference could ever be significant and the test could not fail.
func TestIntegrationCompareSelf(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real clusters; skipped with -short")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"compare", "--no-conformance", "--repetitions", "5", "--alpha", "0.01", "--scenario", "smoke",
		"--fail-on-regression", "--run-dir", dir}, &out, &errb)
	t.Logf("stdout:\n%s", out.String())
	if code != 0 && code != exitRegression {
		t.Fatalf("exit %d\nstderr:\n%s", code, errb.String())
	}
	rep := readCompare(t, dir)
	found := false
	for _, m := range rep.Metrics {
		if !strings.HasPrefix(m.Metric, "apiserverBindingRate.") && !strings.HasPrefix(m.Metric, "bindingRate.") {
			continue
		}
		found = true
		if m.Verdict == compare.Faster || m.Verdict == compare.Slower {
			t.Errorf("self-comparison reports %s %s (ratio %.3f, p %.4f)", m.Metric, m.Verdict, m.Ratio, m.PValue)
		}
	}
	if !found {
		t.Errorf("no binding-rate metric in the comparison: %+v", rep.Metrics)
	}
}
