package perf

import (
	"slices"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/perf/scenario"
)

// TestShippedScenarios: every shipped file decodes at its own size, says where its shape comes
// from, and is named after its file.
func TestShippedScenarios(t *testing.T) {
	lib, err := Library()
	if err != nil {
		t.Fatal(err)
	}
	if len(lib) < 8 {
		t.Fatalf("only %d shipped scenarios", len(lib))
	}
	for _, e := range lib {
		t.Run(e.Name, func(t *testing.T) {
			scs, _, err := LoadScenarios(Selection{Refs: []string{e.Name}}, scenario.Options{})
			if err != nil {
				t.Fatal(err)
			}
			s := scs[0]
			if e.File != LibraryDir+"/"+s.Name+".yaml" {
				t.Errorf("file %s holds scenario %s", e.File, s.Name)
			}
			if s.Source == "" || s.Description == "" || len(s.Labels) == 0 {
				t.Errorf("source %q, description %q, labels %v: all are required of a shipped scenario", s.Source, s.Description, s.Labels)
			}
			if s.MeasuredPods() == 0 {
				t.Error("measures nothing")
			}
			// An upstream shape names its scheduler_perf workload, so `perf reference` pairs by data.
			if slices.Contains(s.Labels, "upstream") && (s.Reference == nil || !strings.Contains(s.Source, s.Reference.Workload)) {
				t.Errorf("upstream scenario: reference %+v does not name the workload of its source %q", s.Reference, s.Source)
			}
		})
	}
}

// TestDefaultSet is what `make perf NODES=500` loads; it must decode at 500 nodes, and include the
// shapes the issue asks for.
func TestDefaultSet(t *testing.T) {
	scs, skipped, err := LoadScenarios(Selection{}, scenario.Options{Nodes: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) > 0 {
		t.Errorf("at 500 nodes the whole default set fits; skipped %+v", skipped)
	}
	var names []string
	for _, s := range scs {
		names = append(names, s.Name)
		if s.Cluster.Nodes != 500 {
			t.Errorf("%s: %d nodes", s.Name, s.Cluster.Nodes)
		}
	}
	for _, want := range []string{"smoke", "upstream-1000gangs-3pods", "upstream-3gangs-1000pods", "gpu-gang-8x8", "gpu-gang-16x8", "gpu-gang-64x8", "gpu-mix", "gpu-preemption-wave"} {
		if !slices.Contains(names, want) {
			t.Errorf("default set %v lacks %s", names, want)
		}
	}
	// The upstream shapes too large for the 10-minute default budget are shipped, not run by default.
	up, _, err := LoadScenarios(Selection{Labels: []string{"upstream", "-default", "-topology"}}, scenario.Options{Nodes: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if len(up) != 2 || up[0].Phases[0].Groups != 2000 || up[1].Phases[0].Groups != 3000 {
		t.Errorf("upstream,-default: %v", up)
	}
}

// TestUpstreamShapesCreateAsSchedulerPerf: a shipped scenario that names a scheduler_perf workload
// is compared with it, so it must create its objects in scheduler_perf's order; a 1000-pod gang
// created beside two others is whole only when all three are, and then nothing binds while they
// are created, which scheduler_perf's own order would overlap.
func TestUpstreamShapesCreateAsSchedulerPerf(t *testing.T) {
	scs, _, err := LoadScenarios(Selection{Labels: []string{"upstream"}}, scenario.Options{Nodes: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if len(scs) < 4 {
		t.Fatalf("%d upstream scenarios, want the 4 shipped", len(scs))
	}
	for _, sc := range scs {
		if sc.Reference == nil {
			t.Errorf("%s: labelled upstream but names no scheduler_perf workload", sc.Name)
		}
		for _, ph := range sc.Phases {
			if !ph.InOrder {
				t.Errorf("%s: phase %s arrives %s, want arrival: schedulerPerf", sc.Name, ph.Name, ph.Arrival())
			}
		}
	}
}

func TestLoadScenariosErrors(t *testing.T) {
	for _, tc := range []struct {
		sel  Selection
		opts scenario.Options
		want string
	}{
		{Selection{Refs: []string{"no-such"}}, scenario.Options{}, `no scenario file or shipped scenario named "no-such" (shipped: `},
		{Selection{Refs: []string{"smoke"}}, scenario.Options{Params: map[string]string{"gruops": "3"}}, `--param gruops: no selected scenario declares a parameter "gruops"`},
		{Selection{Labels: []string{"nonesuch"}}, scenario.Options{}, "no shipped scenario has labels nonesuch"},
		{Selection{Refs: []string{"smoke", "smoke"}}, scenario.Options{}, `perf/scenarios/smoke.yaml: metadata.name: "smoke" is also the name of perf/scenarios/smoke.yaml`},
		{Selection{Refs: []string{"gpu-gang-64x8"}}, scenario.Options{Nodes: 50}, "perf/scenarios/gpu-gang-64x8.yaml:19: phases[0].fill: 0.9 of 50 nodes × 8 GPUs (--nodes 50) is 360 GPUs, less than one group (512 GPUs)"},
		{Selection{Refs: []string{"testdata/missing.yaml"}}, scenario.Options{}, "scenario testdata/missing.yaml: open testdata/missing.yaml: no such file or directory"},
	} {
		_, _, err := LoadScenarios(tc.sel, tc.opts)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v %+v:\n got %v\nwant prefix %s", tc.sel, tc.opts, err, tc.want)
		}
	}
	// A file path works as well as a name.
	scs, _, err := LoadScenarios(Selection{Refs: []string{"testdata/scenarios/valid-minimal.yaml"}}, scenario.Options{})
	if err != nil || scs[0].Name != "minimal" {
		t.Errorf("file ref: %v %v", scs, err)
	}
}

// TestDefaultSetSmallCluster is `make perf NODES=50`: the default set runs what fits 50 nodes and
// reports the rest as skipped with the decoder's exact reason, while a scenario named explicitly
// that does not fit stays an error (TestLoadScenariosErrors).
func TestDefaultSetSmallCluster(t *testing.T) {
	scs, skipped, err := LoadScenarios(Selection{}, scenario.Options{Nodes: 50})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range scs {
		names = append(names, s.Name)
	}
	if !slices.Contains(names, "smoke") || slices.Contains(names, "gpu-gang-64x8") {
		t.Errorf("ran %v: smoke fits 50 nodes, gpu-gang-64x8 does not", names)
	}
	i := slices.IndexFunc(skipped, func(s Skipped) bool { return s.Name == "gpu-gang-64x8" })
	if i < 0 {
		t.Fatalf("gpu-gang-64x8 is not reported as skipped: %+v", skipped)
	}
	if want := "perf/scenarios/gpu-gang-64x8.yaml:19: phases[0].fill: 0.9 of 50 nodes × 8 GPUs (--nodes 50) is 360 GPUs, less than one group (512 GPUs)"; skipped[i].Reason != want || skipped[i].File != "perf/scenarios/gpu-gang-64x8.yaml" {
		t.Errorf("skipped %+v, want reason %q", skipped[i], want)
	}
	// A file error that is not about the cluster's size is still an error: only a scenario that
	// loads with its own shape can be skipped.
	if _, _, err := LoadScenarios(Selection{}, scenario.Options{Nodes: 50, GPUsPerNode: 0, Params: map[string]string{"groups": "-1"}}); err == nil {
		t.Error("a bad --param in the default set must stay an error")
	}
	if _, _, err := LoadScenarios(Selection{}, scenario.Options{Nodes: 1}); err == nil || !strings.Contains(err.Error(), "no selected scenario fits the requested cluster") {
		t.Errorf("nothing fits 1 node, want an error saying so: %v", err)
	}
}

func TestMatchLabels(t *testing.T) {
	for _, tc := range []struct {
		have, filter []string
		want         bool
	}{
		{[]string{"a", "b"}, []string{"a"}, true},
		{[]string{"a", "b"}, []string{"+a", "b"}, true},
		{[]string{"a", "b"}, []string{"a", "-b"}, false},
		{[]string{"a"}, []string{"c"}, false},
		{nil, []string{"-c"}, true},
	} {
		if got := matchLabels(tc.have, tc.filter); got != tc.want {
			t.Errorf("matchLabels(%v, %v) = %v", tc.have, tc.filter, got)
		}
	}
}

func TestSLOs(t *testing.T) {
	objs, err := LoadSLO("default")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Error("default SLO file is empty")
	}
	for _, o := range BuiltinObjectives() {
		if !slices.Contains(ItemNames(), o.Item) || o.Source == "" {
			t.Errorf("built-in %+v", o)
		}
	}
	if d := dedupe(append(BuiltinObjectives(), BuiltinObjectives()...)); len(d) != len(BuiltinObjectives()) {
		t.Errorf("dedupe kept %d", len(d))
	}
}

func TestSteps(t *testing.T) {
	ph := func(name string, start scenario.Start) scenario.Phase {
		return scenario.Phase{Name: name, Start: start}
	}
	ss := steps([]scenario.Phase{ph("a", scenario.AfterCreated), ph("b", scenario.WithPrevious), ph("c", scenario.AfterBound), ph("d", scenario.AfterCreated)})
	var got []string
	for _, s := range ss {
		got = append(got, strings.Join(phaseNames(s.phases), "+")+":"+string(s.start))
	}
	if strings.Join(got, " ") != "a+b:afterCreated c:afterBound d:afterCreated" {
		t.Errorf("steps: %v", got)
	}
}
