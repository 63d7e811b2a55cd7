package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/results/compare"
)

var update = flag.Bool("update", false, "rewrite golden files")

var start = time.Date(2026, 11, 29, 16, 15, 0, 0, time.UTC)

// side builds n interleaved repetitions of one scheduler version. rate and latency scale the perf
// figures; verdicts overrides case verdicts per repetition.
func side(label, version string, n int, rate, latency float64, verdicts func(rep int, id string) results.Verdict) compare.Side {
	s := compare.Side{Label: label}
	jitter := []float64{0, 0.8, -0.6, 0.3, -0.2, 0.5}
	for i := range n {
		j := 1 + jitter[i%len(jitter)]/100
		r := &results.Run{
			APIVersion: results.SchemaVersion, Kind: results.Kind, Command: "perf",
			ID:      start.Add(time.Duration(2*i)*time.Minute).Format("20060102-150405") + "-" + version[len(version)-2:],
			Started: start.Add(time.Duration(2*i) * time.Minute), Finished: start.Add(time.Duration(2*i)*time.Minute + 61*time.Second),
			Environment: results.Environment{Provider: "kind", KubernetesVersion: "v1.37.2", SchedulerVersion: version,
				SchedulerBinary: "/opt/" + version + "/kube-scheduler", Nodes: 4, GPUsPerNode: 8,
				Host:         results.Host{Hostname: "ci-runner", Cores: 2, GOOS: "linux", GOARCH: "amd64"},
				FeatureGates: map[string]string{"GenericWorkload": "true"}},
			DataItems: []results.DataItem{
				{Name: "bindingRate", Unit: "pods/s", Data: map[string]float64{"Average": rate * j, "Perc90": 1.3 * rate * j}},
				{Name: "gangLatency", Unit: "s", Data: map[string]float64{"Perc50": latency * j, "Perc99": 3 * latency / j}},
				{Name: "phaseGangLatency", Unit: "s", Labels: map[string]string{"phase": "measure"}, Data: map[string]float64{"Perc50": 1.01 * latency * j}},
				{Name: "partialGangs", Unit: "gangs", Data: map[string]float64{"Value": 0}},
			},
		}
		for _, c := range []results.Case{
			{ID: "BAR-01", Suite: "barriers", Name: "pods wait for the PodGroup object"},
			{ID: "BAR-03", Suite: "barriers", Name: "no member binds before minCount fit <&>"},
			{ID: "BAR-02", Suite: "barriers", Name: "a gang binds all members or none"},
			{ID: "PG-02", Suite: "podgroups", Name: "status conditions are set"},
			{ID: "PG-05", Suite: "podgroups", Name: "minCount defaults to the member count"},
			{ID: "PG-07", Suite: "podgroups", Name: "deleted group frees GPUs"},
			{ID: "MC-04", Suite: "mincount", Name: "minCount | ties resolved"},
		} {
			c.Verdict, c.Duration = verdicts(i, c.ID), 1500*time.Millisecond
			if c.Verdict != "" {
				r.Cases = append(r.Cases, c)
			}
		}
		s.Runs = append(s.Runs, r)
	}
	return s
}

func fixture(t *testing.T) Page {
	t.Helper()
	old := side("old v1.37.1", "v1.37.1-gang.01", 6, 120, 2.0, func(rep int, id string) results.Verdict {
		switch id {
		case "BAR-03":
			return results.Fail
		case "MC-04":
			return ""
		}
		return results.Pass
	})
	new := side("new v1.37.2", "v1.37.2-gang.02", 6, 96, 2.0, func(rep int, id string) results.Verdict {
		switch {
		case id == "BAR-01":
			return results.Fail
		case id == "PG-07" && rep%3 == 1:
			return results.Error
		case id == "PG-02":
			return results.Skip
		}
		return results.Pass
	})
	rep, err := compare.Compare(old, new, compare.Options{NotComparable: map[string]string{"PG-02": "condition names changed in v1.37"}})
	if err != nil {
		t.Fatal(err)
	}
	page := Page{Title: "gangbench compare <v1.37.1 vs v1.37.2>", Compare: rep,
		Runs: append(old.Runs[:2:2], new.Runs[:2]...), Timelines: map[string][]TimePoint{}, Latencies: map[string][]float64{}}
	for i, l := range []string{old.Label, new.Label} {
		peak := []float64{120, 96}[i]
		for s := 0.0; s <= 20; s += 2 {
			page.Timelines[l] = append(page.Timelines[l], TimePoint{T: s, V: peak * math.Sin(math.Pi*s/20)})
		}
		for g := range 8 {
			page.Latencies[l] = append(page.Latencies[l], 1.5+float64(g)*0.25+float64(i)*0.4)
		}
	}
	page.Runs[0].Notes = []string{"scheduler restarted once"}
	return page
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		write func(io.Writer, Page) error
	}{
		{"compare.txt.golden", func(w io.Writer, p Page) error { return WriteCompareText(w, p.Compare) }},
		{"compare.md.golden", func(w io.Writer, p Page) error { return WriteCompareMarkdown(w, p.Compare) }},
		{"compare.json.golden", func(w io.Writer, p Page) error { return WriteCompareJSON(w, p.Compare) }},
		{"compare.html.golden", WriteHTML},
		{"run.html.golden", func(w io.Writer, p Page) error {
			return WriteHTML(w, Page{Title: "gangbench perf run", Runs: p.Runs[:1], Timelines: map[string][]TimePoint{"run": p.Timelines["old v1.37.1"]}})
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var got, again bytes.Buffer
			if err := tc.write(&got, fixture(t)); err != nil {
				t.Fatal(err)
			}
			if err := tc.write(&again, fixture(t)); err != nil || got.String() != again.String() {
				t.Fatalf("output is not deterministic (err %v)", err)
			}
			path := filepath.Join("testdata", tc.file)
			if *update {
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if got.String() != string(want) {
				t.Errorf("%s differs from output (run with -update to rewrite); got:\n%s", path, got.String())
			}
		})
	}
}

func TestFixtureVerdicts(t *testing.T) {
	rep := fixture(t).Compare
	if !rep.Regressed {
		t.Error("fixture should regress (BAR-01, binding rate)")
	}
	verdicts := map[string]compare.MetricVerdict{}
	for _, m := range rep.Metrics {
		verdicts[m.DisplayName()] = m.Verdict
	}
	for name, want := range map[string]compare.MetricVerdict{
		"bindingRate.Average": compare.Slower, "gangLatency.Perc50": compare.NoChange, "partialGangs.Value": compare.NoChange,
	} {
		if verdicts[name] != want {
			t.Errorf("%s: %q, want %q", name, verdicts[name], want)
		}
	}
}

// TestHTMLSanity checks what a golden file cannot: the page is well-formed XML, draws SVG, and
// references nothing outside itself.
func TestHTMLSanity(t *testing.T) {
	for name, page := range map[string]Page{"compare": fixture(t), "empty": {}, "runs only": {Runs: fixture(t).Runs}} {
		var b bytes.Buffer
		if err := WriteHTML(&b, page); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		html := b.String()
		dec := xml.NewDecoder(strings.NewReader(html))
		dec.Strict = true
		var elements []string
		for {
			tok, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: not well-formed XML: %v", name, err)
			}
			if se, ok := tok.(xml.StartElement); ok {
				elements = append(elements, se.Name.Local)
				if se.Name.Local == "script" || se.Name.Local == "img" || se.Name.Local == "link" {
					t.Errorf("%s: has <%s>", name, se.Name.Local)
				}
			}
		}
		if len(elements) == 0 || elements[0] != "html" {
			t.Errorf("%s: root element %v", name, elements[:min(1, len(elements))])
		}
		external := regexp.MustCompile(`https?://`)
		for _, loc := range external.FindAllStringIndex(html, -1) {
			if !strings.HasPrefix(html[loc[0]:], "http://www.w3.org/2000/svg") {
				t.Errorf("%s: external reference at %q", name, html[loc[0]:min(len(html), loc[0]+40)])
			}
		}
		if strings.Contains(html, "ZgotmplZ") {
			t.Errorf("%s: html/template rejected a value (ZgotmplZ)", name)
		}
		if name == "compare" {
			for _, want := range []string{"<svg", "<polyline class=\"series s0\"", "&lt;v1.37.1 vs v1.37.2&gt;", "no member binds before minCount fit &lt;&amp;&gt;",
				`class="c-regressed"`, `class="m-slower"`, "Gang latency CDF", "Binding rate over time", "scheduler restarted once"} {
				if !strings.Contains(html, want) {
					t.Errorf("compare page lacks %q", want)
				}
			}
		}
	}
}

func TestNilReport(t *testing.T) {
	for _, f := range []func(io.Writer, *compare.Report) error{WriteCompareText, WriteCompareMarkdown, WriteCompareJSON} {
		if err := f(io.Discard, nil); err == nil {
			t.Error("nil report accepted")
		}
	}
	if err := WriteHTML(io.Discard, Page{Runs: []*results.Run{nil}}); err == nil {
		t.Error("nil run accepted")
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 120.5: "120.5", 0.12345: "0.1235", 15230: "15230", 1.2e9: "1.2e+09",
		-3.5: "-3.500", math.Inf(1): "∞", math.NaN(): "-", 1e-6: "1e-06"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi    float64
		n         int
		wantLo    float64
		wantHi    float64
		wantTicks int
	}{
		{0, 118.7, 5, 0, 120, 7},     // step 20
		{0, 20, 8, 0, 20, 11},        // step 2
		{0, 0, 5, 0, 1, 6},           // empty range
		{1.5, 3.65, 8, 1.4, 3.8, 13}, // step 0.2
	} {
		lo, hi, ticks, _ := niceTicks(tc.lo, tc.hi, tc.n)
		if math.Abs(lo-tc.wantLo) > 1e-9 || math.Abs(hi-tc.wantHi) > 1e-9 || len(ticks) != tc.wantTicks {
			t.Errorf("niceTicks(%v, %v, %d) = %v, %v, %v", tc.lo, tc.hi, tc.n, lo, hi, ticks)
		}
	}
}

// inOrder checks that every string of order is on the page, each after the one before it.
func inOrder(t *testing.T, page string, order []string) {
	t.Helper()
	at := -1
	for _, s := range order {
		i := strings.Index(page, s)
		if i < 0 {
			t.Fatalf("page lacks %q", s)
		}
		if i < at {
			t.Errorf("%q comes before what precedes it in %v", s, order)
		}
		at = i
	}
}

// TestRunPageLeadsWithFailures: a red run's page opens with the per-suite counts and the failed
// assertions (message and artifact links), before the environment and the full list.
func TestRunPageLeadsWithFailures(t *testing.T) {
	r := fixture(t).Runs[0]
	r.Cases = append(r.Cases, results.Case{ID: "BAR-99", Suite: "barriers", Name: "a failing one", Verdict: results.Fail,
		Message: "want 3 bound\nlast seen: 2 bound", Artifacts: []string{"artifacts/gb-x/pods.yaml"}})
	var b bytes.Buffer
	if err := WriteHTML(&b, Page{Title: "run", Runs: []*results.Run{r}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	order := []string{`id="suites"`, `id="failures"`, `id="fail-BAR-99"`, "last seen: 2 bound", `href="artifacts/gb-x/pods.yaml"`, `id="environment"`, `id="assertions"`}
	inOrder(t, page, order)
	if !strings.Contains(page, `class="headline bad">FAIL`) {
		t.Error("a failing run's page does not open with a FAIL headline")
	}
}

// TestComparePageLeadsWithDecision: a regressed comparison opens with the verdict, then what decided
// it (the gate metric that moved, with its interval), then the plots; the metrics and assertions that
// did not change come after, collapsed.
func TestComparePageLeadsWithDecision(t *testing.T) {
	p := fixture(t)
	var b strings.Builder
	if err := WriteHTML(&b, p); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	order := []string{`class="headline bad">REGRESSED`, `<p class="decision">`, `<li>bindingRate.Average slower (regression): new/old 0.800 [0.794, 0.806]`,
		`id="binding-rate"`, `id="gang-latency"`, `id="metrics"`, `<details id="metrics-unchanged">`, `id="assertions"`, `<details id="assertions-unchanged">`}
	inOrder(t, page, order)
	// The unchanged gate metric gangLatency.Perc50 is inside the collapsed part, not above it.
	if i := strings.Index(page, ">gangLatency.Perc50<"); i < strings.Index(page, `<details id="metrics-unchanged">`) {
		t.Error("an unchanged metric is listed above the collapsed section")
	}
}
