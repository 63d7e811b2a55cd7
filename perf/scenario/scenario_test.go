package scenario_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/perf/scenario"
)

func fixture(name string) string { return filepath.Join("..", "testdata", "scenarios", name) }

var measurements = []string{"bindingRate", "gangLatency", "schedulerMetrics", "invariants"}

func load(t *testing.T, name string, opts scenario.Options) (*scenario.Scenario, error) {
	t.Helper()
	if opts.Measurements == nil {
		opts.Measurements = measurements
	}
	return scenario.LoadFile(fixture(name), opts)
}

func TestValidFull(t *testing.T) {
	s, err := load(t, "valid-full.yaml", scenario.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "valid-full" || !slices.Equal(s.Labels, []string{"test", "smoke"}) || s.Source != "hand-written fixture" {
		t.Errorf("metadata: %q %v %q", s.Name, s.Labels, s.Source)
	}
	if s.Cluster != (scenario.Cluster{Nodes: 20, GPUsPerNode: 8, Product: "NVIDIA-A100-SXM4-80GB"}) {
		t.Errorf("cluster: %+v", s.Cluster)
	}
	if s.Scheduler != (scenario.Scheduler{KubeAPIQPS: 50, KubeAPIBurst: 100}) {
		t.Errorf("scheduler: %+v", s.Scheduler)
	}
	if s.Repetitions != 2 || s.Timeout != 2*time.Minute || s.Settle != 15*time.Second {
		t.Errorf("repetitions %d timeout %s settle %s", s.Repetitions, s.Timeout, s.Settle)
	}
	if !slices.Equal(s.Measurements, []string{"bindingRate", "invariants"}) {
		t.Errorf("measurements: %v", s.Measurements)
	}
	if len(s.Phases) != 3 {
		t.Fatalf("phases: %d", len(s.Phases))
	}
	low, gangs, basic := s.Phases[0], s.Phases[1], s.Phases[2]
	if !low.Prefill || low.Groups != 10 || low.MinCount != 2 || !low.DisruptionAll || low.PriorityClass != "low" || low.Priority != 100 {
		t.Errorf("low: %+v", low)
	}
	// fill 0.5 of 20 × 8 = 80 GPUs over groups of 4 pods × 2 GPUs = 8 GPUs: 10 groups.
	if gangs.Groups != 10 || gangs.Fill != 0.5 || gangs.MinCount != 3 || gangs.GroupsPerSecond != 20 || gangs.Arrival() != "20 groups/s" {
		t.Errorf("gangs: %+v", gangs)
	}
	if basic.Policy != scenario.Basic || basic.MinCount != 0 || basic.Start != scenario.WithPrevious || basic.CPU.String() != "100m" || basic.Memory.String() != "100Mi" {
		t.Errorf("basic: %+v", basic)
	}
	if s.MeasuredPods() != 10*4+5*2 || s.TotalPods() != 10*2+10*4+5*2 || s.TotalGroups() != 25 {
		t.Errorf("counts: measured %d total %d groups %d", s.MeasuredPods(), s.TotalPods(), s.TotalGroups())
	}
	if s.Params["groups"] != "10" || s.Params["fill"] != "0.5" || len(s.Hash) != 16 {
		t.Errorf("params %v hash %q", s.Params, s.Hash)
	}
}

func TestDefaults(t *testing.T) {
	s, err := load(t, "valid-minimal.yaml", scenario.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Scheduler != (scenario.Scheduler{KubeAPIQPS: 5000, KubeAPIBurst: 5000}) || s.Cluster.GPUsPerNode != 8 ||
		s.Repetitions != 1 || s.Timeout != scenario.DefaultTimeout || s.Settle != scenario.DefaultSettle {
		t.Errorf("defaults: %+v", s)
	}
	if !slices.Equal(s.Measurements, measurements) {
		t.Errorf("a file without measurements takes them all, got %v", s.Measurements)
	}
	ph := s.Phases[0]
	if ph.Policy != scenario.Gang || ph.MinCount != 3 || ph.Start != scenario.AfterCreated || ph.Arrival() != "burst" {
		t.Errorf("phase defaults (gang, minCount = podsPerGroup, afterCreated, burst): %+v", ph)
	}
}

// arrival: schedulerPerf is scheduler_perf's creation order; the other arrivals leave it off.
func TestArrivalSchedulerPerf(t *testing.T) {
	const head = "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 1}\nphases:\n"
	for _, tc := range []struct {
		arrival string
		inOrder bool
		text    string
	}{
		{"schedulerPerf", true, "schedulerPerf (PodGroups first, then pods in index order, 30 at a time)"},
		{"burst", false, "burst"},
		{"{groupsPerSecond: 2}", false, "2 groups/s"},
	} {
		s, err := scenario.Load("x.yaml", []byte(head+"- {name: a, groups: 2, podsPerGroup: 2, gpusPerPod: 1, arrival: "+tc.arrival+"}\n"), scenario.Options{Measurements: measurements})
		if err != nil {
			t.Fatalf("%s: %v", tc.arrival, err)
		}
		if ph := s.Phases[0]; ph.InOrder != tc.inOrder || ph.Arrival() != tc.text {
			t.Errorf("arrival %s: InOrder %v, Arrival() %q; want %v, %q", tc.arrival, ph.InOrder, ph.Arrival(), tc.inOrder, tc.text)
		}
	}
}

func TestOverrides(t *testing.T) {
	base, err := load(t, "valid-full.yaml", scenario.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := load(t, "valid-full.yaml", scenario.Options{Nodes: 40, Params: map[string]string{"groups": "12", "undeclared": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cluster.Nodes != 40 || s.Phases[0].Groups != 12 || s.Phases[1].Groups != 20 {
		t.Errorf("--nodes 40 --param groups=12: nodes %d, prefill groups %d, fill groups %d (want 40, 12, 20)", s.Cluster.Nodes, s.Phases[0].Groups, s.Phases[1].Groups)
	}
	if _, ok := s.Params["undeclared"]; ok {
		t.Error("an override the file does not declare must not become one of its params")
	}
	if s.Hash == base.Hash {
		t.Error("the hash must change with the params and node count")
	}
	_, err = load(t, "valid-full.yaml", scenario.Options{Params: map[string]string{"groups": "many"}})
	want := fixture("valid-full.yaml") + `:26: phases[0].groups: want an integer, got "many" (from $groups = "many" given with --param)`
	if err == nil || err.Error() != want {
		t.Errorf("bad override:\n got %v\nwant %s", err, want)
	}
}

func TestInvalid(t *testing.T) {
	for _, tc := range []struct {
		file string
		opts scenario.Options
		want []string // lines after "FILE:"
	}{
		{"invalid-unknown-field.yaml", scenario.Options{}, []string{
			"7: cluster.gpuPerNode: unknown field (accepted: nodes, gpusPerNode, product, nodesPerRack, racksPerBlock, gpuAPI)",
			"9: phases[0].podsPerGroup: missing; how many pods does each group have?",
			"11: phases[0].podsPerGroop: unknown field (accepted: name, groups, fill, podsPerGroup, gpusPerPod, cpu, memory, policy, minCount, priorityClass, priority, disruptionMode, arrival, prefill, start, topology, via)",
		}},
		{"invalid-params.yaml", scenario.Options{}, []string{
			"7: params.grops: declared but never used (no field says $grops; typo?)",
			"13: phases[0].podsPerGroup: undefined parameter $pods (declared: $grops, $groups)",
		}},
		{"invalid-shapes.yaml", scenario.Options{}, []string{
			"8: repetitions: 0 is out of range (accepted: 1 to 100)",
			"13: phases[0].gpusPerPod: 16 is more than cluster.gpusPerNode (8): no node can hold such a pod",
			"17: phases[1].minCount: 4 is more than podsPerGroup (3): the gang could never reach its quorum",
			"20: phases[2].groups: -1: want at least 1",
			"21: phases[2].podsPerGroup: 0: want at least 1",
			"28: phases[3].minCount: only gang groups have a quorum; remove minCount or set policy: gang",
		}},
		{"invalid-types.yaml", scenario.Options{}, []string{
			`4: metadata.name: "Bad_Name": want lowercase letters, digits and '-', at most 40 characters (it names namespaces and benchmark lines)`,
			`6: cluster.nodes: want an integer, got "many"`,
			"7: cluster.nodes: duplicate key (first at line 6)",
			`8: timeout: want a duration such as 30s or 5m, got "soon"`,
			`11: phases[0].groups: want an integer, got the string "2"`,
			"12: phases[0].podsPerGroup: want an integer, got a list",
			`14: phases[0].arrival: "trickle" is not an arrival (accepted: burst, schedulerPerf, or {groupsPerSecond: N})`,
			`15: phases[0].policy: "lottery" is not a policy (accepted: gang, basic)`,
		}},
		{"invalid-capacity.yaml", scenario.Options{}, []string{
			"10: phases[0].groups: 6 groups × 2 pods × 8 GPUs = 96 GPUs, but 10 nodes × 8 GPUs hold 80; lower it or raise cluster.nodes",
			"14: phases[1].groups: 1 groups × 1 pods × 1 GPUs = 1 GPUs, 97 with the earlier phases it cannot preempt, but 10 nodes × 8 GPUs hold 80; lower it or raise cluster.nodes",
			"18: phases[2].fill: 0.05 of 10 nodes × 8 GPUs is 4 GPUs, less than one group (64 GPUs)",
		}},
		// A shape that fits its file can stop fitting at the --nodes a user asks for; the error
		// says so. The wave (higher priority) may overrun the lower phases: it preempts them.
		{"valid-full.yaml", scenario.Options{Nodes: 1}, []string{
			"26: phases[0].groups: 10 groups × 2 pods × 4 GPUs = 80 GPUs, but 1 nodes × 8 GPUs (--nodes 1) hold 8; lower it or raise cluster.nodes",
			"33: phases[1].fill: 0.5 of 1 nodes × 8 GPUs (--nodes 1) is 4 GPUs, less than one group (8 GPUs)",
		}},
		{"valid-full.yaml", scenario.Options{GPUsPerNode: 2}, []string{
			"28: phases[0].gpusPerPod: 4 is more than cluster.gpusPerNode (2 (--gpus-per-node 2)): no node can hold such a pod",
		}},
		{"invalid-kind.yaml", scenario.Options{}, []string{`2: kind: "SLO" where a Scenario is expected`}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, err := load(t, tc.file, tc.opts)
			if err == nil {
				t.Fatal("no error")
			}
			var want []string
			for _, l := range tc.want {
				want = append(want, fixture(tc.file)+":"+l)
			}
			if got := err.Error(); got != strings.Join(want, "\n") {
				t.Errorf("errors:\n got:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
			}
		})
	}
}

func TestInvalidInline(t *testing.T) {
	const head = "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 1}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"empty", "", "x.yaml: empty file"},
		{"two documents", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\n---\na: 1\n", "x.yaml:3: more than one YAML document; put one per file"},
		{"syntax", "apiVersion: [\n", "x.yaml:1: did not find expected node content"},
		{"no apiVersion", "kind: Scenario\n", "x.yaml:1: apiVersion: missing; want gangbench.dev/v1alpha1"},
		{"old apiVersion", "apiVersion: gangbench.dev/v1\nkind: Scenario\n", `x.yaml:1: apiVersion: "gangbench.dev/v1" is not supported; want gangbench.dev/v1alpha1`},
		{"no phases", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 1}\n", "x.yaml:1: phases: a scenario needs at least one phase"},
		{"only prefill", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 1}\nphases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1, prefill: true}\n",
			"x.yaml:6: phases: every phase is a prefill: a scenario must measure something"},
		{"unknown measurement", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 1}\nmeasurements: [bindingRate, throughput]\nphases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1}\n",
			`x.yaml:5: measurements[1]: unknown measurement "throughput" (accepted: bindingRate, gangLatency, schedulerMetrics, invariants)`},
		{"prefill after measured", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 1}\nphases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1}\n- {name: b, groups: 1, podsPerGroup: 1, gpusPerPod: 1, prefill: true}\n",
			"x.yaml:7: phases[1].prefill: prefill phases build the starting state and must come before every measured phase"},
		{"duplicate phase", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 1}\nphases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1}\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1, start: withPrevious}\n",
			`x.yaml:7: phases[1].name: "a" is also the name of phases[0]`},
		{"nothing requested", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 1}\nphases:\n- {name: a, groups: 1, podsPerGroup: 1}\n",
			"x.yaml:6: phases[0].gpusPerPod: 0 and no cpu or memory: a pod must request something, or it measures nothing a scheduler decides"},
		{"groups and fill", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 1}\nphases:\n- {name: a, groups: 1, fill: 0.5, podsPerGroup: 1, gpusPerPod: 1}\n",
			"x.yaml:6: phases[0].fill: set groups or fill, not both"},
		{"priority without class", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 1}\nphases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1, priority: 5}\n",
			"x.yaml:6: phases[0].priority: set priorityClass too: the class is created with this value"},
		// Issue 7 audit: impossible requests, negative counts and the fields errors name.
		{"groups overflow", head + "phases:\n- {name: a, groups: 4611686018427387904, podsPerGroup: 4, gpusPerPod: 1}\n",
			"x.yaml:6: phases[0].groups: 4611686018427387904 is out of range (accepted: 1 to 2200000, the pods 20000 nodes × 110 pods per node hold)"},
		{"podsPerGroup overflow", head + "phases:\n- {name: a, groups: 2, podsPerGroup: 4611686018427387904, gpusPerPod: 1}\n",
			"x.yaml:6: phases[0].podsPerGroup: 4611686018427387904 is out of range (accepted: 1 to 2200000, the pods 20000 nodes × 110 pods per node hold)"},
		{"largest counts", head + "phases:\n- {name: a, groups: 2200000, podsPerGroup: 2200000, gpusPerPod: 1}\n",
			"x.yaml:6: phases[0].groups: 2200000 groups × 2200000 pods × 1 GPUs = 4840000000000 GPUs, but 1 nodes × 8 GPUs hold 8; lower it or raise cluster.nodes"},
		{"negative counts", head + "phases:\n- {name: a, groups: -1, podsPerGroup: 2, gpusPerPod: -1, minCount: -2, cpu: -1}\n",
			`x.yaml:6: phases[0].cpu: want a positive quantity such as 100m or 100Mi, got "-1"` + "\n" +
				"x.yaml:6: phases[0].gpusPerPod: -1: want 0 or more\n" +
				"x.yaml:6: phases[0].minCount: -2: want at least 1\n" +
				"x.yaml:6: phases[0].groups: -1: want at least 1"},
		{"zero minCount", head + "phases:\n- {name: a, groups: 1, podsPerGroup: 2, gpusPerPod: 1, minCount: 0}\n",
			"x.yaml:6: phases[0].minCount: 0: want at least 1"},
		{"zero nodes", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 0}\nphases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1}\n",
			"x.yaml:4: cluster.nodes: 0 is out of range (accepted: 1 to 20000)"},
		{"negative nodes", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: -3}\nphases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1}\n",
			"x.yaml:4: cluster.nodes: -3 is out of range (accepted: 1 to 20000)"},
		// A bad cluster shape is reported once, not again as a symptom on every phase.
		{"bad gpusPerNode", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 1, gpusPerNode: -1}\nphases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1}\n- {name: b, fill: 0.5, podsPerGroup: 1, gpusPerPod: 1}\n",
			"x.yaml:4: cluster.gpusPerNode: -1 is out of range (accepted: 1 to 64)"},
		{"gpus per pod above node", head + "phases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 9}\n",
			"x.yaml:6: phases[0].gpusPerPod: 9 is more than cluster.gpusPerNode (8): no node can hold such a pod"},
		{"minCount above group", head + "phases:\n- {name: a, groups: 1, podsPerGroup: 2, gpusPerPod: 1, minCount: 3}\n",
			"x.yaml:6: phases[0].minCount: 3 is more than podsPerGroup (2): the gang could never reach its quorum"},
		// Skipped list items must not shift the index and line an error names.
		{"measurement index", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 1}\nmeasurements:\n- bindingRate\n- bindingRate\n- throughput\nphases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1}\n",
			`x.yaml:7: measurements[1]: "bindingRate" listed twice` + "\n" +
				`x.yaml:8: measurements[2]: unknown measurement "throughput" (accepted: bindingRate, gangLatency, schedulerMetrics, invariants)`},
		{"bad product", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 1, product: NVIDIA A100}\nphases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1}\n",
			`x.yaml:4: cluster.product: "NVIDIA A100" is not a valid label value: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
		{"reserved priority class", head + "phases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1, priorityClass: system-high, priority: 5}\n",
			`x.yaml:6: phases[0].priorityClass: "system-high": the system- prefix is reserved for Kubernetes' own PriorityClasses`},
		{"unknown kind", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenarios\n", `x.yaml:2: kind: "Scenarios" where a Scenario is expected`},
		{"no kind", "apiVersion: gangbench.dev/v1alpha1\n", "x.yaml:1: kind: missing; want Scenario"},
		{"unknown top-level field", head + "phase:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1}\n",
			"x.yaml:1: phases: a scenario needs at least one phase\n" +
				"x.yaml:5: phase: unknown field (accepted: apiVersion, kind, metadata, description, source, reference, params, cluster, scheduler, repetitions, timeout, settle, measurements, phases)"},
		{"bad reference", head + "reference:\n  schedulerPerf: {package: ../gang, config: perf/x.yaml, testCase: Gang-Scheduling}\nphases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1}\n",
			`x.yaml:6: reference.schedulerPerf.package: "../gang": want a package below test/integration/scheduler_perf, e.g. podgroup/gangscheduling` + "\n" +
				`x.yaml:6: reference.schedulerPerf.config: "perf/x.yaml": want a workload file of the package, e.g. performance-config.yaml` + "\n" +
				`x.yaml:6: reference.schedulerPerf.testCase: "Gang-Scheduling": want a scheduler_perf name (letters, digits, _)` + "\n" +
				"x.yaml:6: reference.schedulerPerf.workload: missing"},
		{"unknown policy", head + "phases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1, policy: Gang}\n",
			`x.yaml:6: phases[0].policy: "Gang" is not a policy (accepted: gang, basic)`},
		// Topology and Job-driven phases (issue 34).
		{"rack without racks", head + "phases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1, topology: rack}\n",
			"x.yaml:6: phases[0].topology: topology.gangbench.dev/rack needs the cluster in racks: set cluster.nodesPerRack"},
		{"bad topology key", head + "phases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1, topology: not a key}\n",
			`x.yaml:6: phases[0].topology: "not a key" is neither rack, block nor zone, nor a label key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
		{"gang larger than a rack", "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\ncluster: {nodes: 8, nodesPerRack: 2}\nphases:\n- {name: a, groups: 1, podsPerGroup: 3, gpusPerPod: 8, topology: rack}\n",
			"x.yaml:6: phases[0].topology: one domain of topology.gangbench.dev/rack holds 2 nodes, room for 2 pods of 8 GPUs, fewer than the 3 each group needs in one domain"},
		{"blocks without racks", head[:len(head)-len("cluster: {nodes: 1}\n")] + "cluster: {nodes: 4, racksPerBlock: 2}\nphases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1}\n",
			"x.yaml:4: cluster.racksPerBlock: set cluster.nodesPerRack too: blocks are made of racks"},
		{"bad rack size", head[:len(head)-len("cluster: {nodes: 1}\n")] + "cluster: {nodes: 4, nodesPerRack: 0}\nphases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1}\n",
			"x.yaml:4: cluster.nodesPerRack: 0 is out of range (accepted: 1 to 20000)"},
		{"unknown via", head + "phases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1, via: deployment}\n",
			`x.yaml:6: phases[0].via: "deployment" is not a way to create groups (accepted: podGroup, job)`},
		{"job in scheduler_perf order", head + "phases:\n- {name: a, groups: 1, podsPerGroup: 1, gpusPerPod: 1, via: job, arrival: schedulerPerf}\n",
			"x.yaml:6: phases[0].arrival: schedulerPerf creates PodGroups ahead of their pods, and a Job's PodGroup is the job controller's to create; use burst or groupsPerSecond"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scenario.Load("x.yaml", []byte(tc.yaml), scenario.Options{Measurements: measurements})
			if err == nil || err.Error() != tc.want {
				t.Errorf("\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestPeek(t *testing.T) {
	name, labels := scenario.Peek([]byte("metadata: {name: a, labels: [x, y]}\nbogus: [1\n"))
	if name != "" || labels != nil {
		t.Errorf("a file that does not parse peeks as nothing, got %q %v", name, labels)
	}
	name, labels = scenario.Peek([]byte("metadata: {name: a, labels: [x, y]}\nphases: whatever\n"))
	if name != "a" || !slices.Equal(labels, []string{"x", "y"}) {
		t.Errorf("peek: %q %v", name, labels)
	}
}

// TestTopologyAndJobs: the shipped topology and Job scenarios resolve to the racks, keys and
// features their clusters need, and racks scale with --nodes (never one rack at the sizes the
// issue names).
func TestTopologyAndJobs(t *testing.T) {
	for _, tc := range []struct {
		file        string
		nodes       int
		racks       int
		key         string
		viaJob      bool
		features    []string
		firstGroups int
	}{
		{"gpu-tas-8x8.yaml", 500, 10, "topology.gangbench.dev/rack", false, []string{"tas"}, 56},
		{"gpu-tas-8x8.yaml", 5000, 100, "topology.gangbench.dev/rack", false, []string{"tas"}, 562},
		{"gpu-job-8x8.yaml", 500, 0, "", true, []string{"jobs"}, 56},
		{"gpu-job-tas-8x8.yaml", 500, 10, "topology.gangbench.dev/rack", true, []string{"jobs", "tas"}, 56},
		{"upstream-tas-750gangs-4pods.yaml", 5000, 50, "topology.gangbench.dev/rack", false, []string{"tas"}, 750},
		{"gpu-tas-cost.yaml", 500, 10, "topology.gangbench.dev/rack", false, []string{"tas"}, 28},
	} {
		s, err := scenario.LoadFile(filepath.Join("..", "scenarios", tc.file), scenario.Options{Nodes: tc.nodes, Measurements: measurements})
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		ph := s.Phases[0]
		if s.Cluster.Racks() != tc.racks || ph.TopologyKey != tc.key || ph.ViaJob != tc.viaJob || !slices.Equal(s.Features(), tc.features) || ph.Groups != tc.firstGroups {
			t.Errorf("%s at %d nodes: racks %d, key %q, via job %v, features %v, groups %d; want %d, %q, %v, %v, %d",
				tc.file, tc.nodes, s.Cluster.Racks(), ph.TopologyKey, ph.ViaJob, s.Features(), ph.Groups, tc.racks, tc.key, tc.viaJob, tc.features, tc.firstGroups)
		}
	}
}

// TestGPUAPI: cluster.gpuAPI names the one API a scenario is written for; --gpu-api
// (Options.GPUAPI) gives the API of the scenarios that name none and contradicts, at the file's
// field, those that name another. Neither is the API of the hash when unset.
func TestGPUAPI(t *testing.T) {
	const head = "apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\n"
	const phases = "phases:\n- {name: a, groups: 1, podsPerGroup: 2, gpusPerPod: 8}\n"
	load := func(cluster string, opts scenario.Options) (*scenario.Scenario, error) {
		opts.Measurements = measurements
		return scenario.Load("x.yaml", []byte(head+"cluster: "+cluster+"\n"+phases), opts)
	}
	for _, tc := range []struct {
		name, cluster string
		flag, want    clusters.GPUAPI
	}{
		{"none named", "{nodes: 2}", "", ""},
		{"the file's", "{nodes: 2, gpuAPI: dra}", "", clusters.GPUAPIDRA},
		{"the flag's where the file names none", "{nodes: 2}", clusters.GPUAPIDRA, clusters.GPUAPIDRA},
		{"the flag agreeing with the file", "{nodes: 2, gpuAPI: device-plugin}", clusters.GPUAPIDevicePlugin, clusters.GPUAPIDevicePlugin},
	} {
		s, err := load(tc.cluster, scenario.Options{GPUAPI: tc.flag})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if s.Cluster.GPUAPI != tc.want {
			t.Errorf("%s: GPU API %q, want %q", tc.name, s.Cluster.GPUAPI, tc.want)
		}
	}
	for _, tc := range []struct {
		name, cluster string
		flag          clusters.GPUAPI
		want          string
	}{
		{"the flag against the file", "{nodes: 2, gpuAPI: dra}", clusters.GPUAPIDevicePlugin,
			"x.yaml:4: cluster.gpuAPI: dra, but --gpu-api device-plugin was given: the scenario is written for dra GPUs only; leave the flag out or select other scenarios"},
		{"both", "{nodes: 2, gpuAPI: both}", "",
			`x.yaml:4: cluster.gpuAPI: "both": a scenario's pods claim their GPUs one way; nodes publishing both would let a pod take a GPU each way, and no capacity check would hold (accepted: device-plugin, dra)`},
		{"unknown", "{nodes: 2, gpuAPI: cuda}", "", `x.yaml:4: cluster.gpuAPI: "cuda" is not a GPU API (accepted: device-plugin, dra)`},
		{"not a string", "{nodes: 2, gpuAPI: [dra]}", "", "x.yaml:4: cluster.gpuAPI: want a string, got a list"},
		{"a flag no scenario runs on", "{nodes: 2}", clusters.GPUAPIBoth, "x.yaml:4: cluster.gpuAPI: --gpu-api both: a scenario runs on device-plugin or dra GPUs"},
	} {
		if _, err := load(tc.cluster, scenario.Options{GPUAPI: tc.flag}); err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got %v\nwant %s", tc.name, err, tc.want)
		}
	}
	a, _ := load("{nodes: 2}", scenario.Options{})
	b, _ := load("{nodes: 2}", scenario.Options{GPUAPI: clusters.GPUAPIDRA})
	if a == nil || b == nil || a.Hash == b.Hash {
		t.Error("the hash must change with the GPU API: the workload asks for its GPUs another way")
	}
	// The shipped DRA scenario is gpu-gang-8x8's workload with claims.
	dra, err := scenario.LoadFile(filepath.Join("..", "scenarios", "gpu-dra-gangs.yaml"), scenario.Options{Nodes: 500, Measurements: measurements})
	if err != nil {
		t.Fatal(err)
	}
	if dra.Cluster.GPUAPI != clusters.GPUAPIDRA || dra.Phases[0].Groups != 56 || dra.Phases[0].GPUsPerPod != 8 {
		t.Errorf("gpu-dra-gangs at 500 nodes: %+v %+v", dra.Cluster, dra.Phases[0])
	}
}
