package perf_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/local"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/results"
)

func skipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts a real control plane; skipped with -short")
	}
}

// localSource makes clusters in a private state directory, named after the test process so that
// parallel test binaries never collide.
func localSource(tb testing.TB, name string) *perf.ProviderSource {
	tb.Helper()
	src, _ := localSourceIn(tb, name)
	return src
}

// localSourceIn is localSource and its state directory, for tests that check what is left there.
func localSourceIn(tb testing.TB, name string) (*perf.ProviderSource, string) {
	tb.Helper()
	dir := tb.TempDir()
	p, err := local.New(local.WithStateDir(dir))
	if err != nil {
		tb.Fatal(err)
	}
	return &perf.ProviderSource{Provider: p, Base: clusters.Spec{Name: fmt.Sprintf("%s-%d", name, os.Getpid())}}, dir
}

func dataItem(t *testing.T, r *results.Run, name string) results.DataItem {
	t.Helper()
	for _, it := range r.DataItems {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("run has no data item %s", name)
	return results.DataItem{}
}

// TestIntegration runs the pipeline end to end on a real local cluster: 20 nodes, 100 gangs of 3.
// The pod watch and the apiserver's binding counter must agree exactly, the invariants must hold,
// and the result files must be complete and readable without the cluster.
func TestIntegration(t *testing.T) {
	skipShort(t)
	sc, err := scenario.LoadFile(filepath.Join("testdata", "scenarios", "integration.yaml"), scenario.Options{Measurements: measure.Names()})
	if err != nil {
		t.Fatal(err)
	}
	objectives, err := perf.LoadSLO("default")
	if err != nil {
		t.Fatal(err)
	}
	src, stateDir := localSourceIn(t, "perf-it")
	perf.EnableCPUProfiling(&src.Base)
	runDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run, err := perf.Run(ctx, perf.Options{Scenarios: []*scenario.Scenario{sc}, Objectives: objectives, Source: src, RunDir: runDir, CPUProfile: 2 * time.Second})
	if err != nil {
		t.Fatalf("run: %v\nnotes: %v", err, run.Notes)
	}

	watch := dataItem(t, run, measure.ItemBindingRate)
	server := dataItem(t, run, measure.ItemAPIServerBindingRate)
	if watch.Data["Count"] != 300 || server.Data["Count"] != 300 {
		t.Errorf("binds: watch %v, apiserver %v; want exactly 300 each", watch.Data["Count"], server.Data["Count"])
	}
	if dataItem(t, run, measure.ItemBindCountMismatch).Data[measure.Value] != 0 {
		t.Error("watch and apiserver binding counts differ")
	}
	if watch.Data["Average"] <= 0 || watch.Data["Max"] <= 0 || watch.Data["Samples"] <= 0 {
		t.Errorf("binding rate figures missing: %v", watch.Data)
	}
	// Percentiles only from enough one-second samples, and a note when they are withheld.
	if _, ok := watch.Data["Perc50"]; ok != (watch.Data["Samples"] >= 10) {
		t.Errorf("Perc50 reported %v with %v samples: %v", ok, watch.Data["Samples"], watch.Data)
	}
	if watch.Data["Samples"] < 10 && !slices.ContainsFunc(run.Notes, func(n string) bool { return strings.Contains(n, "too few for Perc50") }) {
		t.Errorf("percentiles withheld without a note saying why: %v", run.Notes)
	}
	// Resource accounting on a real cluster: the scheduler's own process was found and read.
	var sched *results.DataItem
	for i, d := range run.DataItems {
		if d.Name == measure.ItemResources && d.Labels["component"] == "kube-scheduler" {
			sched = &run.DataItems[i]
		}
	}
	if sched == nil || sched.Data["CPUSeconds"] <= 0 || sched.Data["PeakRSSMiB"] <= 0 {
		t.Errorf("no resource figures for the scheduler: %+v", sched)
	}
	// The Go runtime of both components, read from their own /metrics: a real v1.37 binary serves
	// every family the item reads.
	for _, c := range []string{"kube-apiserver", "kube-scheduler"} {
		i := slices.IndexFunc(run.DataItems, func(d results.DataItem) bool { return d.Name == measure.ItemGoRuntime && d.Labels["component"] == c })
		if i < 0 {
			t.Errorf("no %s item for %s", measure.ItemGoRuntime, c)
			continue
		}
		d := run.DataItems[i].Data
		if d["AllocMiBPerPod"] <= 0 || d["GoroutinesPerPod"] <= 0 || d["StackStartKiB"] <= 0 || len(d) != 7 {
			t.Errorf("%s runtime of %s: %v", measure.ItemGoRuntime, c, d)
		}
	}
	checkCPUProfiles(t, run, runDir)
	for _, name := range []string{measure.ItemPartialGangs, measure.ItemUnboundFitting, measure.ItemStatusRegressions} {
		if v := dataItem(t, run, name).Data[measure.Value]; v != 0 {
			t.Errorf("%s = %v, want 0 (notes: %v)", name, v, run.Notes)
		}
	}
	if n := dataItem(t, run, measure.ItemStatusRegressions).Data["PodGroupsWatched"]; n < 100 {
		t.Errorf("the status monitor watched %v PodGroups; a blind monitor proves nothing", n)
	}
	if g := dataItem(t, run, measure.ItemGangLatency); g.Data["Count"] != 100 || g.Data["Incomplete"] != 0 {
		t.Errorf("gang latency over %v gangs (%v incomplete), want 100", g.Data["Count"], g.Data["Incomplete"])
	}
	if c := dataItem(t, run, measure.ItemCreationRate); c.Data["Pods"] != 300 || c.Data["PodGroups"] != 100 {
		t.Errorf("creation: %v", c.Data)
	}
	if a := dataItem(t, run, "podGroupScheduleAttempts"); a.Data["scheduled"] != 100 {
		t.Errorf("scheduler counted %v scheduled PodGroup attempts, want 100", a.Data)
	}
	if v := perf.VerdictOf(run); v.ExitCode != 0 {
		for _, c := range run.Cases {
			t.Logf("%s %s %s: %s", c.ID, c.Verdict, c.Name, c.Message)
		}
		t.Errorf("verdict %s", v.Headline)
	}

	// The files alone make the report.
	back, err := results.Read(runDir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Environment.Provider != "local" || back.Environment.SchedulerVersion == "" || back.Environment.Nodes != 20 ||
		back.Environment.Extra["scenario.integration.hash"] != sc.Hash || back.Environment.Extra["scenario.integration.schedulerKubeAPIQPS"] != "5000" ||
		back.Environment.Extra["goVersion"] == "" || back.Environment.Host.Cores == 0 {
		t.Errorf("environment: %+v", back.Environment)
	}
	if len(back.Cases) == 0 || len(back.DataItems) != len(run.DataItems) {
		t.Errorf("run.json: %d cases, %d items (in memory %d)", len(back.Cases), len(back.DataItems), len(run.DataItems))
	}
	var b bytes.Buffer
	if err := perf.WriteReport(&b, back, perf.FormatText); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "BenchmarkGang/integration/nodes=20\t1\t") {
		t.Errorf("report lacks the benchmark line:\n%s", b.String())
	}
	counts := map[string]int{}
	f, err := os.Open(filepath.Join(runDir, perf.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc2 := bufio.NewScanner(f)
	for sc2.Scan() {
		var e timeline.Event
		if err := json.Unmarshal(sc2.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Scenario != "integration" || e.Rep != 1 {
			t.Fatalf("event not stamped with its scenario and repetition: %+v", e)
		}
		counts[e.Kind]++
	}
	if counts[timeline.PodGroupCreated] != 100 || counts[timeline.PodCreated] != 300 || counts[timeline.PodBound] != 300 {
		t.Errorf("events.jsonl: %v", counts)
	}
	// Nothing of the cluster may remain.
	if ents, _ := os.ReadDir(stateDir); len(ents) != 0 {
		t.Errorf("cluster state left behind: %v", ents)
	}
}

// checkCPUProfiles: --cpu-profile left a real profile of each component in the run directory, named
// in the notes, and each holds samples of that component's own code.
func checkCPUProfiles(t *testing.T, run *results.Run, runDir string) {
	t.Helper()
	for c, pkg := range map[clusters.Component]string{clusters.APIServer: "k8s.io/apiserver/", clusters.Scheduler: "k8s.io/kubernetes/pkg/scheduler"} {
		path := filepath.Join(runDir, perf.CPUProfileFile("integration", 1, c))
		if !slices.ContainsFunc(run.Notes, func(n string) bool {
			return strings.Contains(n, "CPU profile of "+string(c)) && strings.Contains(n, path)
		}) {
			t.Errorf("no note names the %s profile %s: %v", c, path, run.Notes)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Error(err)
			continue
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		own := 0
		for _, s := range p.Sample {
			for _, loc := range s.Location {
				for _, l := range loc.Line {
					if l.Function != nil && strings.Contains(l.Function.Name, pkg) {
						own++
					}
				}
			}
		}
		if len(p.Sample) == 0 || own == 0 {
			t.Errorf("%s: %d samples, %d in %s: not a profile of %s at work", path, len(p.Sample), own, pkg, c)
		}
	}
}

// BenchmarkGang runs the default scenario set (or PERF_LABELS, e.g. "smoke") on NODES simulated
// nodes (default 500), one cluster per scenario, and reports the binding rate and gang latency so
// `go test -bench Gang -benchtime 1x -run '^$' ./perf` output feeds benchstat. It is skipped with
// -short. Run directories go to PERF_RUN_DIR when set.
func BenchmarkGang(b *testing.B) {
	skipShort(b)
	nodes := 500
	if v := os.Getenv("NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("NODES=%q: want a positive count", v)
		}
		nodes = n
	}
	var labels []string
	if v := os.Getenv("PERF_LABELS"); v != "" {
		labels = strings.Split(v, ",")
	}
	scs, _, err := perf.LoadScenarios(perf.Selection{Labels: labels}, scenario.Options{Nodes: nodes})
	if err != nil {
		b.Fatal(err)
	}
	for _, sc := range scs {
		b.Run(fmt.Sprintf("%s/nodes=%d", sc.Name, nodes), func(b *testing.B) {
			sums := map[string]float64{}
			for i := range b.N {
				dir := b.TempDir()
				if base := os.Getenv("PERF_RUN_DIR"); base != "" {
					dir = filepath.Join(base, fmt.Sprintf("%s-%d", sc.Name, i))
				}
				ctx, cancel := context.WithTimeout(context.Background(), sc.Timeout*time.Duration(sc.Repetitions)+10*time.Minute)
				run, err := perf.Run(ctx, perf.Options{Scenarios: []*scenario.Scenario{sc}, Source: localSource(b, "perf-bench"), RunDir: dir})
				cancel()
				if err != nil {
					b.Fatalf("%s: %v", sc.Name, err)
				}
				if v := perf.VerdictOf(run); v.ExitCode != 0 {
					b.Errorf("%s: %s (see %s)", sc.Name, v.Headline, dir)
				}
				for _, it := range run.DataItems {
					for _, m := range benchMetrics() {
						if it.Name == m.item {
							sums[m.unit] += it.Data[m.bucket]
						}
					}
				}
			}
			for unit, v := range sums {
				b.ReportMetric(v/float64(b.N), unit)
			}
		})
	}
}

type benchMetric struct{ item, bucket, unit string }

func benchMetrics() []benchMetric {
	return []benchMetric{
		{measure.ItemBindingRate, "Average", "pods/s"},
		{measure.ItemAPIServerBindingRate, "Average", "apiserver-pods/s"},
		{measure.ItemCreationRate, "Average", "create-pods/s"},
		{measure.ItemGangLatency, "Perc50", "gang-p50-s"},
		{measure.ItemGangLatency, "Perc99", "gang-p99-s"},
		{measure.ItemBindSpread, "Perc99", "spread-p99-s"},
		{measure.ItemPartialGangs, measure.Value, "partial-gangs"},
	}
}
