package perf

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata/report")

// testdata/runs/default-500 is the run.json of a real `perf run --nodes 500` of the default set on
// the 2-core development machine (2026-11-29); the reports are computed from it alone.
func fixtureRun(t *testing.T) *results.Run {
	t.Helper()
	r, err := results.Read(filepath.Join("testdata", "runs", "default-500"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReportGolden(t *testing.T) {
	r := fixtureRun(t)
	for _, format := range []string{FormatText, FormatMarkdown, FormatBench} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteReport(&b, r, format); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "report", "default-500."+format)
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (create it with go test ./perf -run TestReportGolden -update)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s report differs from %s (rerun with -update and review the diff):\n%s", format, path, b.String())
			}
		})
	}
	var b bytes.Buffer
	if err := WriteReport(&b, r, FormatJSON); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"apiVersion": "gangbench.dev/v1alpha1"`) {
		t.Error("json report is not the run record")
	}
	if err := WriteReport(&b, r, "yaml"); err == nil || !strings.Contains(err.Error(), "accepted: text, markdown, json, bench") {
		t.Errorf("unknown format: %v", err)
	}
}

func TestBenchLines(t *testing.T) {
	lines := BenchLines(fixtureRun(t))
	if lines[0] != "goos: linux" || len(lines) != 3+8 {
		t.Fatalf("lines: %q", lines)
	}
	for _, l := range lines[3:] {
		f := strings.Split(l, "\t")
		// name, iterations, then value-unit pairs, as `go test -bench` prints them.
		if !strings.HasPrefix(f[0], "BenchmarkGang/") || !strings.HasSuffix(f[0], "/nodes=500") || f[1] != "1" {
			t.Errorf("line %q", l)
		}
		for _, m := range f[2:] {
			if v, u, ok := strings.Cut(m, " "); !ok || v == "" || strings.Contains(u, " ") {
				t.Errorf("metric %q in %q is not 'value unit'", m, l)
			}
		}
	}
	if !strings.Contains(lines[3], "pods/s") || !strings.Contains(lines[3], "gang-p99-s") {
		t.Errorf("line %q lacks the binding rate or gang latency", lines[3])
	}
}

func TestVerdictOf(t *testing.T) {
	for _, tc := range []struct {
		run  results.Run
		code int
	}{
		{results.Run{Cases: []results.Case{{Verdict: results.Pass}, {Verdict: results.Skip}}}, 0},
		{results.Run{Cases: []results.Case{{Verdict: results.Pass}, {Verdict: results.SLOViolation}}}, 3},
		{results.Run{Cases: []results.Case{{Verdict: results.SLOViolation}, {Verdict: results.Error}}}, 1},
		{results.Run{Interrupted: true, Cases: []results.Case{{Verdict: results.Pass}}}, 1},
	} {
		if v := VerdictOf(&tc.run); v.ExitCode != tc.code {
			t.Errorf("%+v: %+v, want exit %d", tc.run.Cases, v, tc.code)
		}
	}
}

// TestReportResources: every text and markdown report carries the resource table, scheduler first,
// with the machine's busy cores after each window.
func TestReportResources(t *testing.T) {
	lab := func(c string) map[string]string {
		return map[string]string{"scenario": "smoke", "repetition": "1", "nodes": "50", "component": c}
	}
	r := &results.Run{Command: "perf run", ID: "x", DataItems: []results.DataItem{
		{Name: measure.ItemBindingRate, Unit: "pods/s", Labels: map[string]string{"scenario": "smoke", "repetition": "1", "nodes": "50"}, Data: map[string]float64{"Average": 100}},
		{Name: measure.ItemResources, Labels: lab("harness"), Data: map[string]float64{"CPUSeconds": 1.5, "CPUShare": 0.5, "PeakRSSMiB": 120, "WaitSeconds": 0.2}},
		{Name: measure.ItemResources, Labels: lab("kube-scheduler"), Data: map[string]float64{"CPUSeconds": 2.25, "CPUShare": 0.75, "PeakRSSMiB": 80, "WaitSeconds": 1.5}},
		{Name: measure.ItemMachineCPU, Unit: "cores", Labels: map[string]string{"scenario": "smoke", "repetition": "1", "nodes": "50"}, Data: map[string]float64{"Value": 1.9, "StealCores": 0.25, "CPUs": 2, "WindowSeconds": 3}},
	}}
	var text, md bytes.Buffer
	if err := WriteReport(&text, r, FormatText); err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(&md, r, FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	sched, harness := strings.Index(out, "kube-scheduler"), strings.Index(out, "harness")
	if sched < 0 || harness < sched || !regexp.MustCompile(`kube-scheduler\s+2\.[23]\s+0\.75\s+80\s+1\.5\n`).MatchString(out) {
		t.Errorf("text report lacks the scheduler's row before the harness's:\n%s", out)
	}
	if !strings.Contains(out, "machine: 1.90 of 2 cores busy over 3.0 s (0.25 of them taken by the host: steal time)") {
		t.Errorf("text report lacks the machine line:\n%s", out)
	}
	if !strings.Contains(md.String(), "| smoke | 1 | kube-scheduler | 2.2 | 0.75 | 80 | 1.5 |") && !strings.Contains(md.String(), "| smoke | 1 | kube-scheduler | 2.3 | 0.75 | 80 | 1.5 |") {
		t.Errorf("markdown report lacks the resource row:\n%s", md.String())
	}
	// The per-component items must not leak into the figures table as a scenario row of their own.
	if rs := rows(r); len(rs) != 1 || rs[0].items[measure.ItemResources].Name != "" {
		t.Errorf("rows = %+v", rs)
	}
}

// TestReportTraffic: the apiserver's traffic per pod is one line per window in both formats, the
// sums first and then the busiest kinds, at most trafficShown of each.
func TestReportTraffic(t *testing.T) {
	lab := func(k, v string) map[string]string {
		return map[string]string{"scenario": "smoke", "repetition": "2", "nodes": "50", k: v}
	}
	items := []results.DataItem{
		{Name: measure.ItemBindingRate, Unit: "pods/s", Labels: map[string]string{"scenario": "smoke", "repetition": "2", "nodes": "50"}, Data: map[string]float64{"Average": 100}},
		{Name: measure.ItemAPIRequests, Labels: lab(measure.LabelRequest, measure.All), Data: map[string]float64{"PerPod": 12.345}},
	}
	for i := range trafficShown + 2 {
		items = append(items, results.DataItem{Name: measure.ItemAPIRequests, Labels: lab(measure.LabelRequest, fmt.Sprintf("GET kind%d", i)), Data: map[string]float64{"PerPod": 1.5 / float64(i+1)}})
	}
	items = append(items,
		results.DataItem{Name: measure.ItemWatchEvents, Labels: lab(measure.LabelResource, measure.All), Data: map[string]float64{"PerPod": 41}},
		results.DataItem{Name: measure.ItemWatchEvents, Labels: lab(measure.LabelResource, "pods"), Data: map[string]float64{"PerPod": 40.6}},
		results.DataItem{Name: measure.ItemWatchEvents, Labels: lab(measure.LabelResource, "events"), Data: map[string]float64{"PerPod": 0.004}},
		results.DataItem{Name: measure.ItemWatches, Labels: lab(measure.LabelResource, measure.All), Data: map[string]float64{measure.Value: 9}},
		results.DataItem{Name: measure.ItemWatches, Labels: lab(measure.LabelResource, "pods"), Data: map[string]float64{measure.Value: 5}},
		results.DataItem{Name: measure.ItemWatches, Labels: lab(measure.LabelResource, "podgroups"), Data: map[string]float64{measure.Value: 4}},
	)
	r := &results.Run{Command: "perf run", ID: "x", DataItems: items}
	var text, md bytes.Buffer
	if err := WriteReport(&text, r, FormatText); err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(&md, r, FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	want := "smoke rep 2: 12 requests (GET kind0 1.50, GET kind1 0.75, GET kind2 0.50, GET kind3 0.38, GET kind4 0.30, GET kind5 0.25); 41 watch events sent (pods 41, events 0.004); 9 watches open at the end (pods 5, podgroups 4)"
	for name, out := range map[string]string{"text": text.String(), "markdown": md.String()} {
		if !strings.Contains(out, want) {
			t.Errorf("%s report lacks %q:\n%s", name, want, out)
		}
		if strings.Contains(out, "kind6") {
			t.Errorf("%s report names more than %d kinds:\n%s", name, trafficShown, out)
		}
	}
	if rs := rows(r); len(rs) != 1 {
		t.Errorf("the traffic items made rows of their own: %+v", rs)
	}
}
