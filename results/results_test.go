package results

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func fixture() *Run {
	start := time.Date(2026, 11, 29, 16, 15, 0, 0, time.UTC)
	return &Run{
		APIVersion: SchemaVersion, Kind: Kind, ID: "20261129-161500-ab12", Command: "e2e",
		Started: start, Finished: start.Add(62*time.Second + 500*time.Millisecond),
		Environment: Environment{
			Provider: "local", KubernetesVersion: "v1.37.2", SchedulerVersion: "v1.37.2-gang.1",
			SchedulerBinary: "/tmp/kube-scheduler", Nodes: 4, GPUsPerNode: 8,
			Host:         Host{Hostname: "ci-runner", Cores: 2, GOOS: "linux", GOARCH: "amd64"},
			FeatureGates: map[string]string{"GenericWorkload": "true", "AnotherGate": "false"},
			Extra:        map[string]string{"zone": "a|b", "ci": "true"},
		},
		Cases: []Case{
			{ID: "BAR-01", Suite: "barriers", Name: "pods wait for the PodGroup object", Ref: "gang-semantics §11.A.1",
				Verdict: Pass, Duration: 2100 * time.Millisecond,
				Measurements: map[string]float64{"bindSpreadSeconds": 0.12, "bindCount": 8}},
			{ID: "BAR-03", Suite: "barriers", Name: "no member binds before minCount fit", Ref: "gang-semantics §11.A.3",
				Verdict: Fail, Duration: 30 * time.Second,
				Message:   "\x1b[31m3 of 4 pods bound\x1b[0m before quorum <&> \"quoted\" ]]> end\npod team-a-3: Pending\n```\nyaml\n```",
				Artifacts: []string{"cases/BAR-03/events.txt"}},
			{ID: "PG-02", Suite: "podgroups", Name: "status conditions are set", Verdict: Skip,
				Message: "needs feature gate WorkloadStatus"},
			{ID: "PG-07", Suite: "podgroups", Name: "deleted group frees GPUs", Verdict: Error,
				Duration: 500 * time.Millisecond, Message: "creating namespace: connection refused"},
			{ID: "THR-01", Suite: "throughput", Name: "100 gangs scheduled within 60s", Verdict: SLOViolation,
				Duration: 75 * time.Second, Message: "took 75.0s, SLO 60s",
				Measurements: map[string]float64{"gangsPerSecond": 1.3333333333333333}},
		},
		DataItems: []DataItem{{Name: "SchedulingThroughput", Unit: "pods/s",
			Labels: map[string]string{"suite": "throughput"}, Data: map[string]float64{"Perc50": 120.5}}},
		Notes: []string{"scheduler restarted once"},
	}
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		write func(*bytes.Buffer, *Run) error
	}{
		{"run.txt.golden", func(b *bytes.Buffer, r *Run) error { return WriteText(b, r) }},
		{"run.md.golden", func(b *bytes.Buffer, r *Run) error { return WriteMarkdown(b, r) }},
		{"run.xml.golden", func(b *bytes.Buffer, r *Run) error { return WriteJUnit(b, r) }},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var got, again bytes.Buffer
			if err := tc.write(&got, fixture()); err != nil {
				t.Fatal(err)
			}
			if err := tc.write(&again, fixture()); err != nil || got.String() != again.String() {
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

func TestWriteReadRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs", "x")
	in := fixture()
	in.APIVersion, in.Kind = "", "" // Write fills them in without touching in
	if err := Write(dir, in); err != nil {
		t.Fatal(err)
	}
	if in.APIVersion != "" {
		t.Error("Write modified its argument")
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := fixture(); !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
	st, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("stat run.json: %v, mode %v", err, st.Mode())
	}
	data, _ := os.ReadFile(filepath.Join(dir, FileName))
	for _, s := range []string{`"apiVersion": "gangbench.dev/v1alpha1"`, `"kind": "Run"`, `"durationSeconds": 2.1`} {
		if !strings.Contains(string(data), s) {
			t.Errorf("run.json lacks %s", s)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("run dir holds %d entries, want only run.json", len(ents))
	}
	// Rewriting (partial results then final) replaces the file.
	in.Notes = nil
	if err := Write(dir, in); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(dir); err != nil || got.Notes != nil {
		t.Errorf("rewrite: %v, notes %v", err, got.Notes)
	}
}

func TestWriteRejectsInvalid(t *testing.T) {
	r := fixture()
	r.Cases[0].Measurements["bad"] = math.NaN()
	if err := Write(t.TempDir(), r); err == nil || !strings.Contains(err.Error(), "measurement bad") {
		t.Errorf("NaN: got %v", err)
	}
	r = fixture()
	r.Cases[1].Artifacts = []string{"../escape"}
	if err := Write(t.TempDir(), r); err == nil || !strings.Contains(err.Error(), "../escape") {
		t.Errorf("artifact outside run dir: got %v", err)
	}
}

func TestReadErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := Read(missing); err == nil || !errors.Is(err, fs.ErrNotExist) ||
		!strings.Contains(err.Error(), filepath.Join(missing, FileName)) {
		t.Errorf("missing file: %v", err)
	}
	for _, tc := range []struct{ name, json, want string }{
		{"future", `{"apiVersion":"gangbench.dev/v2","kind":"Run"}`,
			"run.json in DIR has apiVersion gangbench.dev/v2; this gangbench reads gangbench.dev/v1alpha1"},
		{"no apiVersion", `{"kind":"Run"}`, "DIR/run.json has no apiVersion"},
		{"no kind", `{"apiVersion":"gangbench.dev/v1alpha1"}`, "DIR/run.json has no kind"},
		{"wrong kind", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"Bench"}`, `DIR/run.json has kind "Bench"`},
		{"unknown field", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"Run","colour":1}`, `DIR/run.json: json: unknown field "colour"`},
		{"unknown case field", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"Run","cases":[{"id":"A","verdict":"pass","speed":1}]}`, `unknown field "speed"`},
		{"unknown env field", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"Run","environment":{"cloud":"x"}}`, `unknown field "cloud"`},
		{"bad verdict", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"Run","cases":[{"id":"A","verdict":"maybe"}]}`, `DIR/run.json: case 0 (A): unknown verdict "maybe" (accepted: pass, fail, skip, error, slo-violation)`},
		// Issue 7 audit: a duration that does not fit a time.Duration used to come back as an
		// arbitrary (negative) value; a negative one is not a measurement.
		{"huge duration", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"Run","cases":[{"id":"A","verdict":"pass","durationSeconds":1e300}]}`,
			`parsing DIR/run.json: case "A": durationSeconds 1e+300 is out of range (accepted: 0 to 9.223372036e+09)`},
		{"negative duration", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"Run","cases":[{"id":"A","verdict":"pass","durationSeconds":-1}]}`,
			`parsing DIR/run.json: case "A": durationSeconds -1 is out of range`},
		{"wrong type", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"Run","environment":{"nodes":"many"}}`,
			`parsing DIR/run.json: json: cannot unmarshal string into Go struct field Environment.environment.nodes of type int`},
		{"kind case", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"run"}`, `DIR/run.json has kind "run"; want "Run"`},
		{"trailing", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"Run"} {}`, "after top-level value"},
		{"syntax", `{"apiVersion":`, "parsing DIR/run.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, FileName), []byte(tc.json), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Read(dir)
			if want := strings.ReplaceAll(tc.want, "DIR", dir); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("got %v, want it to contain %q", err, want)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	s := fixture().Summary()
	if s.Total != 5 || s.Passed != 1 || s.Failed != 1 || s.Skipped != 1 || s.Errors != 1 || s.SLOViolations != 1 ||
		s.Duration != 107600*time.Millisecond || s.OK() {
		t.Errorf("summary %+v", s)
	}
	if !reflect.DeepEqual(s.Suites, []string{"barriers", "podgroups", "throughput"}) {
		t.Errorf("suites %v", s.Suites)
	}
	if b := s.BySuite["barriers"]; b != (SuiteSummary{Total: 2, Passed: 1, Failed: 1, Duration: 32100 * time.Millisecond}) {
		t.Errorf("barriers %+v", b)
	}
	if p := s.BySuite["podgroups"]; p.Total != 2 || p.Skipped != 1 || p.Errors != 1 {
		t.Errorf("podgroups %+v", p)
	}
	r := &Run{Cases: []Case{{ID: "A", Verdict: Pass}, {ID: "B", Verdict: Skip}}}
	if !r.Passed() || r.Headline() != "PASS" {
		t.Error("all pass/skip should pass")
	}
	if r.Interrupted = true; r.Passed() || r.Headline() != "FAIL" {
		t.Error("an interrupted run must not pass")
	}
}

func TestJUnitParsesBack(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, fixture()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "\x1b") || strings.Count(out, "]]>") != strings.Count(out, "<![CDATA[") {
		t.Errorf("ANSI or unbalanced ]]> in output")
	}
	var doc junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Tests != 5 || doc.Failures != 2 || doc.Errors != 1 || doc.Skipped != 1 || len(doc.Suites) != 3 {
		t.Errorf("totals %d/%d/%d/%d, %d suites", doc.Tests, doc.Failures, doc.Errors, doc.Skipped, len(doc.Suites))
	}
	bar := doc.Suites[0]
	if bar.Name != "barriers" || bar.Tests != 2 || bar.Failures != 1 || bar.Time != "32.100" || len(bar.Cases) != 2 {
		t.Fatalf("barriers suite %+v", bar)
	}
	c := bar.Cases[1]
	if c.Classname != "gangbench.barriers" || c.Name != "BAR-03 no member binds before minCount fit" || c.Failure == nil {
		t.Fatalf("case %+v", c)
	}
	wantMsg := `3 of 4 pods bound before quorum <&> "quoted" ]]> end`
	if c.Failure.Message != wantMsg || !strings.HasPrefix(c.Failure.Text, wantMsg+"\npod team-a-3: Pending\n") {
		t.Errorf("failure message %q, text %q", c.Failure.Message, c.Failure.Text)
	}
	if pg := doc.Suites[1].Cases; pg[0].Skipped == nil || pg[1].Error == nil || doc.Suites[2].Cases[0].Failure.Type != "slo-violation" {
		t.Errorf("podgroups/throughput verdict elements wrong: %+v %+v", pg, doc.Suites[2].Cases)
	}
}

func TestInterrupted(t *testing.T) {
	r := fixture()
	r.Interrupted, r.Finished = true, time.Time{}
	var txt, md, x bytes.Buffer
	if err := WriteText(&txt, r); err != nil || !strings.Contains(strings.SplitN(txt.String(), "\n", 3)[1], "INTERRUPTED: partial results") {
		t.Errorf("text (err %v) lacks INTERRUPTED on its second line:\n%s", err, txt.String())
	}
	if err := WriteMarkdown(&md, r); err != nil || !strings.Contains(md.String(), "**INTERRUPTED: partial results.**") {
		t.Errorf("markdown (err %v):\n%s", err, md.String())
	}
	var doc junitSuites
	if err := WriteJUnit(&x, r); err != nil || xml.Unmarshal(x.Bytes(), &doc) != nil || doc.Errors != 2 || doc.Tests != 6 {
		t.Errorf("junit (err %v) errors %d tests %d", err, doc.Errors, doc.Tests)
	}
	dir := t.TempDir()
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(dir); err != nil || !got.Interrupted || !got.Finished.IsZero() {
		t.Errorf("read back interrupted run: %v %+v", err, got)
	}
}

func TestNewRunID(t *testing.T) {
	now := time.Date(2026, 11, 29, 17, 15, 0, 0, time.FixedZone("CET", 3600))
	a, b := NewRunID(now), NewRunID(now.Add(time.Second))
	if !regexp.MustCompile(`^20261129-161500-[0-9a-f]{4}$`).MatchString(a) || !(a < b) {
		t.Errorf("ids %q %q", a, b)
	}
	seen := map[string]bool{}
	for range 20 {
		seen[NewRunID(now)] = true
	}
	if len(seen) < 2 {
		t.Error("run IDs are not random")
	}
}

func TestFormatting(t *testing.T) {
	c := Case{ID: "BAR-03", Verdict: Fail, Duration: 2140 * time.Millisecond, Name: "pods wait\nextra", Message: "\n\x1b[1mboom\x1b[0m\nmore"}
	if got, want := FormatCaseLine(c), "BAR-03   fail    2.1s  pods wait"; got != want {
		t.Errorf("FormatCaseLine = %q, want %q", got, want)
	}
	if got, want := FormatCaseDetail(c), "         boom"; got != want {
		t.Errorf("FormatCaseDetail = %q, want %q", got, want)
	}
	for in, want := range map[string]string{
		"plain":                 "plain",
		"\x1b[1;31mred\x1b[0m!": "red!",
		"a\x1b]8;;http://x\x07link\x1b]8;;\x1b\\b": "alinkb",
		"x\x1b(By": "xy",
		"cut\x1b":  "cut",
	} {
		if got := StripANSI(in); got != want {
			t.Errorf("StripANSI(%q) = %q, want %q", in, got, want)
		}
	}
	if got := xmlText("a\x00b\xffc"); got != "a\uFFFDb\uFFFDc" {
		t.Errorf("xmlText = %q", got)
	}
}

func TestDataItemUnitOf(t *testing.T) {
	rate := DataItem{Name: "bindingRate", Unit: "pods/s"}
	lat := DataItem{Name: "gangLatency", Unit: "s"}
	partial := DataItem{Name: "partialGangs", Unit: "gangs"}
	harness := DataItem{Name: "harness"}
	for _, tc := range []struct {
		d         DataItem
		key, want string
	}{
		{rate, "Average", "pods/s"}, {rate, "Perc50", "pods/s"}, {rate, "Max", "pods/s"},
		{rate, "Count", "pods"}, {rate, "DurationSeconds", "s"}, {rate, "Samples", "samples"},
		{lat, "Perc99", "s"}, {lat, "Count", ""},
		{partial, "Value", "gangs"}, {partial, "LongestPartialSeconds", "s"}, {partial, "Gangs", "gangs"},
		{harness, "PeakRSSMiB", "MiB"}, {harness, "CPUShare", "cores"}, {harness, "CPUSeconds", "s"},
		{DataItem{Unit: "pods/s"}, "RatioToBindingRate", "×"},
		{harness, "StackStartKiB", "KiB"}, {harness, "SchedDelayMs", "ms"}, {harness, "AllocMiBPerPod", "MiB/pod"},
		{harness, "GoroutinesPerPod", "goroutines/pod"}, {harness, "GCCycles", "cycles"}, {harness, "CPUPerPodMs", "ms"},
	} {
		if got := tc.d.UnitOf(tc.key); got != tc.want {
			t.Errorf("%s (%q).%s: unit %q, want %q", tc.d.Name, tc.d.Unit, tc.key, got, tc.want)
		}
	}
}

// TestEnvironmentClusterRoundTrip: the effective cluster a run records (per-component gates, the
// cluster's name and the request verbatim) comes back from run.json, and a run.json written before
// these fields existed still reads.
func TestEnvironmentClusterRoundTrip(t *testing.T) {
	dir := t.TempDir()
	in := fixture()
	in.Environment.ClusterName = "foo"
	in.Environment.ComponentFeatureGates = map[string]map[string]string{
		"kube-scheduler": {"GenericWorkload": "false", "TopologyAwareWorkloadScheduling": "true"},
		"kube-apiserver": {"GenericWorkload": "true", "TopologyAwareWorkloadScheduling": "true"},
	}
	in.Environment.ClusterRequest = []byte(`{"provider":"local","spec":{"name":"foo","nodes":3,"readyTimeout":180000000000}}`)
	if err := Write(dir, in); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Environment.ClusterName != "foo" || !reflect.DeepEqual(got.Environment.ComponentFeatureGates, in.Environment.ComponentFeatureGates) {
		t.Errorf("environment = %+v", got.Environment)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, got.Environment.ClusterRequest); err != nil || compact.String() != string(in.Environment.ClusterRequest) {
		t.Errorf("cluster request = %s (%v), want %s", got.Environment.ClusterRequest, err, in.Environment.ClusterRequest)
	}
	old := fixture()
	if err := Write(dir, old); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, FileName))
	if strings.Contains(string(data), "clusterRequest") || strings.Contains(string(data), "componentFeatureGates") {
		t.Errorf("empty fields are written:\n%s", data)
	}
}
