package main

import (
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/providers"
	"github.com/gangbench/gangbench/clusters/request"
	"github.com/gangbench/gangbench/perf"
	"github.com/gangbench/gangbench/perf/scenario"
)

// Issue 31: every flag of the commands that make clusters reaches the cluster, or the run, it
// should. Each command's table names, for every flag it has, what the flag changes; a flag without
// a row fails the test, and each row shows that giving the flag changes that thing (against the
// command without it). A flag that cannot apply is refused naming itself. All hermetic: the flags
// are mapped to the cluster request and the run's options, no cluster starts.

// testGlobals are the global options main wires: the one constructor of providers.
func testGlobals() *globalOpts {
	return &globalOpts{newProvider: providers.New, providerNames: providers.Names()}
}

// flagRow is one flag: args that give it, the provider "auto" resolves to (local unless said), and
// what it must change. An empty what is a refusal: the error must contain refused.
type flagRow[P any] struct {
	flag     string
	args     []string
	provider string
	what     func(P) any
	refused  string
}

// checkFlagTable runs the rows against plan and checks that every flag of cmd has a row.
func checkFlagTable[P any](t *testing.T, cmd *cobra.Command, plan func(t *testing.T, args []string, provider string) (P, error), rows []flagRow[P]) {
	t.Helper()
	covered := map[string]bool{}
	for _, r := range rows {
		covered[r.flag] = true
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !covered[f.Name] {
			t.Errorf("%s: flag --%s has no row saying what it changes", cmd.Name(), f.Name)
		}
	})
	for _, r := range rows {
		t.Run(strings.Join(append([]string{cmd.Name()}, r.args...), " "), func(t *testing.T) {
			provider := r.provider
			if provider == "" {
				provider = "local"
			}
			got, err := plan(t, r.args, provider)
			if r.what == nil {
				if err == nil || !strings.Contains(err.Error(), r.refused) {
					t.Fatalf("err = %v, want a refusal naming %q", err, r.refused)
				}
				var ue usageError
				if !errors.As(err, &ue) {
					t.Errorf("refusal %v is not a usage error (exit 2)", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// A kind flag is compared with the same command on kind, so that the provider alone
			// does not make the difference.
			var baseArgs []string
			if len(r.args) >= 2 && r.args[0] == "--provider" && r.flag != "provider" {
				baseArgs = r.args[:2]
			}
			base, err := plan(t, baseArgs, provider)
			if err != nil {
				t.Fatalf("without flags: %v", err)
			}
			if a, b := r.what(got), r.what(base); reflect.DeepEqual(a, b) {
				t.Errorf("--%s changed nothing it should: %#v both with and without it", r.flag, a)
			}
		})
	}
}

// resolved is the provider a command runs on: the flag's, with auto standing for what the engines
// would say (the row's provider), which a hermetic test does not ask.
func resolved(flag, auto string) string {
	if flag == "auto" {
		return auto
	}
	return flag
}

func parse(t *testing.T, cmd *cobra.Command, args []string) {
	t.Helper()
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
}

type e2ePlan struct {
	req  request.Request
	args []string
	f    *e2eFlags
}

func planE2E(t *testing.T, args []string, provider string) (e2ePlan, error) {
	cmd, f := e2eCommand(testGlobals(), io.Discard, io.Discard)
	parse(t, cmd, args)
	f.complete(cmd, testGlobals())
	provider = resolved(f.cluster.provider, provider)
	p := e2ePlan{f: f}
	if err := f.refuseWithKubeconfig(); err != nil {
		return p, err
	}
	if f.kubeconfig == "" {
		req, err := e2eRequest(f, provider, 42)
		if err != nil {
			return p, err
		}
		p.req = req
	}
	up := ""
	if f.upstream {
		up = "/cache/e2e.test" // what EnsureUpstreamE2E returns
	}
	p.args, _ = suitesArgs(f, "/bin/suites.test", "/run", up)
	return p, nil
}

func spec(p e2ePlan) any { return p.req.Spec }

// kindFields is what the kind flags change in a request: the engine, the node groups (--workers,
// --kwok-nodes) and the images.
func kindFields(r request.Request) any { return [3]any{r.Engine, r.Spec.NodeGroups, r.Spec.Images} }

func TestE2EFlagsReachTheRun(t *testing.T) {
	kindOpts := func(p e2ePlan) any { return kindFields(p.req) }
	cmd, _ := e2eCommand(testGlobals(), io.Discard, io.Discard)
	checkFlagTable(t, cmd, planE2E, []flagRow[e2ePlan]{
		{flag: "provider", args: []string{"--provider", "kind"}, what: func(p e2ePlan) any { return p.req.Provider }},
		{flag: "name", args: []string{"--name", "foo"}, what: func(p e2ePlan) any { return p.req.Spec.Name }},
		{flag: "nodes", args: []string{"--nodes", "3"}, what: func(p e2ePlan) any { return clusters.GPUNodes(p.req.Spec.Groups()) }},
		{flag: "gpus-per-node", args: []string{"--gpus-per-node", "4"}, what: spec},
		{flag: "gpu-product", args: []string{"--gpu-product", "NVIDIA-A100"}, what: spec},
		{flag: "k8s-version", args: []string{"--k8s-version", "v1.36.3"}, what: spec},
		{flag: "kube-bin-dir", args: []string{"--kube-bin-dir", "/k"}, what: spec},
		{flag: "scheduler-binary", args: []string{"--scheduler-binary", "/s"}, what: spec},
		{flag: "cache-dir", args: []string{"--cache-dir", "/c"}, what: func(p e2ePlan) any { return p.req.CacheDir }},
		{flag: "feature-gates", args: []string{"--feature-gates", "TopologyAwareWorkloadScheduling=true"}, what: func(p e2ePlan) any { return p.req.Spec.FeatureGates }},
		{flag: "features", args: []string{"--features", "composite"}, what: func(p e2ePlan) any {
			return []any{p.req.Spec.Features, p.req.Spec.FeatureGates, p.req.Spec.RuntimeConfig}
		}},
		{flag: "topology", args: []string{"--topology", "blocks=1,racks-per-block=2,nodes-per-rack=2"}, what: func(p e2ePlan) any { return p.req.Spec.NodeGroups }},
		{flag: "features", args: []string{"--features", "gpus"}, refused: "--features"},
		{flag: "topology", args: []string{"--topology", "blocks=1"}, refused: "--topology"},
		{flag: "gpu-api", args: []string{"--gpu-api", "dra"}, what: func(p e2ePlan) any { return p.req.Spec.Groups() }},
		{flag: "gpu-api", args: []string{"--gpu-api", "cuda"}, refused: "--gpu-api"},
		{flag: "scheduler-feature-gates", args: []string{"--scheduler-feature-gates", "GenericWorkload=false"}, what: func(p e2ePlan) any { return p.req.Spec.ComponentFeatureGates }},
		{flag: "scheduler-arg", args: []string{"--scheduler-arg", "kube-api-qps=5000"}, what: func(p e2ePlan) any { return p.req.Spec.ExtraArgs }},
		{flag: "timeout", args: []string{"--timeout", "7m"}, what: func(p e2ePlan) any { return p.req.Spec.ReadyTimeout }},
		{flag: "engine", args: []string{"--provider", "kind", "--engine", "podman"}, provider: "kind", what: kindOpts},
		{flag: "workers", args: []string{"--provider", "kind", "--workers", "3"}, provider: "kind", what: kindOpts},
		{flag: "node-image", args: []string{"--provider", "kind", "--node-image", "img:1"}, provider: "kind", what: kindOpts},
		{flag: "scheduler-image", args: []string{"--provider", "kind", "--scheduler-image", "sched:1"}, provider: "kind", what: kindOpts},
		{flag: "kwok-nodes", args: []string{"--provider", "kind", "--kwok-nodes", "5"}, provider: "kind", what: kindOpts},
		{flag: "suites", args: []string{"--suites", "validation"}, what: func(p e2ePlan) any { return p.args }},
		{flag: "run-dir", args: []string{"--run-dir", "/r"}, what: func(p e2ePlan) any { return p.f.runDir }},
		{flag: "kubeconfig", args: []string{"--kubeconfig", "/kc"}, what: func(p e2ePlan) any { return p.args }},
		{flag: "keep-cluster", args: []string{"--keep-cluster"}, what: func(p e2ePlan) any { return [2]bool{p.req.Keep, p.req.Held} }},
		{flag: "timeout-scale", args: []string{"--timeout-scale", "2"}, what: func(p e2ePlan) any { return p.args }},
		{flag: "runtime-config", args: []string{"--runtime-config", "scheduling.k8s.io/v1beta1=false"}, what: func(p e2ePlan) any { return p.req.Spec.RuntimeConfig }},
		{flag: "deadline", args: []string{"--deadline", "5m"}, what: func(p e2ePlan) any { return p.args }},
		{flag: "upstream", args: []string{"--upstream"}, what: func(p e2ePlan) any { return [2]any{p.args, clusters.GPUNodes(p.req.Spec.Groups())} }},
		{flag: "scheduler-coverage", args: []string{"--scheduler-coverage", "/cov"}, what: func(p e2ePlan) any { return p.f.coverage }},
		{flag: "allow-existing-cluster", args: []string{"--allow-existing-cluster"}, what: func(p e2ePlan) any { return p.f.safety }},
		{flag: "force", args: []string{"--force"}, what: func(p e2ePlan) any { return p.f.safety }},

		// Refused, naming the flag, rather than ignored.
		{flag: "engine", args: []string{"--engine", "docker"}, refused: "--engine docker"},
		{flag: "kwok-nodes", args: []string{"--kwok-nodes", "2"}, refused: "--kwok-nodes 2"},
		{flag: "feature-gates", args: []string{"--kubeconfig", "/kc", "--feature-gates", "A=true"}, refused: "--feature-gates"},
		{flag: "keep-cluster", args: []string{"--kubeconfig", "/kc", "--keep-cluster"}, refused: "--keep-cluster"},
		{flag: "runtime-config", args: []string{"--runtime-config", "scheduling.k8s.io/v1beta1"}, refused: "--runtime-config"},
		{flag: "kube-bin-dir", args: []string{"--provider", "kind", "--kube-bin-dir", "/k"}, provider: "kind", refused: "kube bin dir"},
		{flag: "feature-gates", args: []string{"--feature-gates", "A=maybe"}, refused: "--feature-gates"},
	})
}

// TestE2ERequestIsTheCluster: the done-check's command line becomes the request of a cluster named
// foo, with 3 nodes and the gate on every component, kept by a holder; and the suites binary gets
// that request as its only cluster flag.
func TestE2ERequestIsTheCluster(t *testing.T) {
	p, err := planE2E(t, []string{"--provider", "local", "--suites", "validation", "--feature-gates", "TopologyAwareWorkloadScheduling=true", "--nodes", "3", "--name", "foo", "--keep-cluster"}, "local")
	if err != nil {
		t.Fatal(err)
	}
	if s := p.req.Spec; s.Name != "foo" || s.Nodes != 3 || !s.FeatureGates["TopologyAwareWorkloadScheduling"] || !p.req.Keep || !p.req.Held {
		t.Errorf("request = %+v", p.req)
	}
	all, per := effectiveGates(p.req.Spec)
	if all["TopologyAwareWorkloadScheduling"] != "true" || all["GenericWorkload"] != "true" {
		t.Errorf("gates = %v", all)
	}
	for c, g := range per {
		if g["TopologyAwareWorkloadScheduling"] != "true" {
			t.Errorf("%s runs without the gate: %v", c, g)
		}
	}
	if !slices.Contains(p.args, "-cluster-request") || slices.Contains(p.args, "-keep-cluster") || slices.Contains(p.args, "-provider") {
		t.Errorf("suite binary args %q: want the request file and no flattened cluster flag", p.args)
	}
}

type perfPlan struct {
	req request.Request
	// workers are the real-kubelet nodes per scenario (perf.ProviderSource.Workers).
	workers int
	opts    scenario.Options
	f       *perfRunFlags
}

func planPerf(t *testing.T, args []string, provider string) (perfPlan, error) {
	cmd, f := perfRunCommand(testGlobals(), io.Discard, io.Discard)
	parse(t, cmd, args)
	provider = resolved(f.cluster.provider, provider)
	p := perfPlan{f: f}
	var err error
	if p.opts, err = perfScenarioOptions(cmd, f); err != nil {
		return p, err
	}
	if err := f.cluster.refuseWithKubeconfig(f.kubeconfig, slices.DeleteFunc(slices.Clone(clusterShaping), func(n string) bool {
		return n == "nodes" || n == "gpus-per-node" || n == "gpu-product"
	})); err != nil {
		return p, err
	}
	src, req, err := perfSource(cmd, &f.cluster, f.profile, provider, f.cpuProfile > 0, io.Discard)
	if err != nil {
		return p, err
	}
	p.req, p.workers = req, src.Workers
	if !reflect.DeepEqual(src.Base, req.Spec) {
		t.Errorf("the source's base spec %+v is not the request's %+v", src.Base, req.Spec)
	}
	return p, nil
}

func TestPerfRunFlagsReachTheRun(t *testing.T) {
	spec := func(p perfPlan) any { return p.req.Spec }
	kindOpts := func(p perfPlan) any { return [2]any{kindFields(p.req), p.workers} }
	cmd, _ := perfRunCommand(testGlobals(), io.Discard, io.Discard)
	checkFlagTable(t, cmd, planPerf, []flagRow[perfPlan]{
		{flag: "provider", args: []string{"--provider", "kind"}, what: func(p perfPlan) any { return [2]any{p.req.Spec, p.req.Provider} }},
		{flag: "name", args: []string{"--name", "foo"}, what: spec},
		{flag: "nodes", args: []string{"--nodes", "50"}, what: func(p perfPlan) any { return p.opts }},
		{flag: "gpus-per-node", args: []string{"--gpus-per-node", "4"}, what: func(p perfPlan) any { return p.opts }},
		{flag: "gpu-product", args: []string{"--gpu-product", "NVIDIA-A100"}, what: func(p perfPlan) any { return p.opts }},
		{flag: "k8s-version", args: []string{"--k8s-version", "v1.36.3"}, what: spec},
		{flag: "kube-bin-dir", args: []string{"--kube-bin-dir", "/k"}, what: spec},
		{flag: "scheduler-binary", args: []string{"--scheduler-binary", "/s"}, what: spec},
		{flag: "cache-dir", args: []string{"--cache-dir", "/c"}, what: func(p perfPlan) any { return p.req.CacheDir }},
		{flag: "feature-gates", args: []string{"--feature-gates", "X=true"}, what: spec},
		{flag: "features", args: []string{"--features", "tas"}, what: spec},
		{flag: "topology", args: []string{"--topology", "blocks=1,racks-per-block=1,nodes-per-rack=1"}, refused: "--topology"},
		{flag: "gpu-api", args: []string{"--gpu-api", "dra"}, what: func(p perfPlan) any { return [2]any{p.req.Spec.GPUAPI, p.opts.GPUAPI} }},
		{flag: "gpu-api", args: []string{"--gpu-api", "both"}, refused: "--gpu-api"},
		{flag: "scheduler-feature-gates", args: []string{"--scheduler-feature-gates", "GenericWorkload=false"}, what: spec},
		{flag: "scheduler-arg", args: []string{"--scheduler-arg", "kube-api-qps=5000"}, what: spec},
		{flag: "timeout", args: []string{"--timeout", "7m"}, what: spec},
		{flag: "engine", args: []string{"--provider", "kind", "--engine", "podman"}, provider: "kind", what: kindOpts},
		{flag: "workers", args: []string{"--provider", "kind", "--workers", "3"}, provider: "kind", what: kindOpts},
		{flag: "node-image", args: []string{"--provider", "kind", "--node-image", "img:1"}, provider: "kind", what: kindOpts},
		{flag: "scheduler-image", args: []string{"--provider", "kind", "--scheduler-image", "sched:1"}, provider: "kind", what: kindOpts},
		{flag: "profile", args: []string{"--profile", perf.ProfileRealistic}, what: spec},
		{flag: "cpu-profile", args: []string{"--cpu-profile", "10s"}, what: spec},
		{flag: "param", args: []string{"--param", "groups=3"}, what: func(p perfPlan) any { return p.opts }},
		{flag: "scenario", args: []string{"--scenario", "smoke"}, what: func(p perfPlan) any { return p.f.scenarios }},
		{flag: "labels", args: []string{"--labels", "upstream"}, what: func(p perfPlan) any { return p.f.labels }},
		{flag: "slo", args: []string{"--slo", "default"}, what: func(p perfPlan) any { return p.f.slo }},
		{flag: "run-dir", args: []string{"--run-dir", "/r"}, what: func(p perfPlan) any { return p.f.runDir }},
		{flag: "kubeconfig", args: []string{"--kubeconfig", "/kc"}, what: func(p perfPlan) any { return p.f.kubeconfig }},
		{flag: "allow-existing-cluster", args: []string{"--allow-existing-cluster"}, what: func(p perfPlan) any { return p.f.safety }},
		{flag: "force", args: []string{"--force"}, what: func(p perfPlan) any { return p.f.safety }},
		{flag: "load-workers", args: []string{"--load-workers", "8"}, what: func(p perfPlan) any { return p.f.workers }},
		{flag: "load-qps", args: []string{"--load-qps", "100"}, what: func(p perfPlan) any { return p.f.loadQPS }},
		{flag: "quiet-wait", args: []string{"--quiet-wait", "0"}, what: func(p perfPlan) any { return quietWait(p.f.quietWait) }},
		{flag: "partial-grace", args: []string{"--partial-grace", "5s"}, what: func(p perfPlan) any { return p.f.grace }},
		{flag: "deadline", args: []string{"--deadline", "5m"}, what: func(p perfPlan) any { return p.f.deadline }},
		{flag: "fault", args: []string{"--fault", "scheduler-kill@50%"}, what: func(p perfPlan) any { return p.f.faults }},
		{flag: "rounds", args: []string{"--rounds", "3"}, what: func(p perfPlan) any { return p.f.rounds }},
		{flag: "reference", args: []string{"--reference"}, what: func(p perfPlan) any { return p.f.reference }},

		{flag: "kwok-nodes", args: []string{"--provider", "kind", "--kwok-nodes", "5"}, provider: "kind", refused: "--kwok-nodes"},
		{flag: "engine", args: []string{"--engine", "docker"}, refused: "--engine docker"},
		{flag: "feature-gates", args: []string{"--kubeconfig", "/kc", "--feature-gates", "X=true"}, refused: "--feature-gates"},
	})
}

type comparePlan struct {
	conformance request.Request
	old, new    request.Request
	f           *compareFlags
}

func planCompare(t *testing.T, args []string, provider string) (comparePlan, error) {
	cmd, f := compareCommand(testGlobals(), io.Discard, io.Discard)
	parse(t, cmd, args)
	provider = resolved(f.cluster.provider, provider)
	p := comparePlan{f: f}
	ef := f.conformanceFlags(&f.old)
	var err error
	if p.conformance, err = e2eRequest(&ef, provider, 42); err != nil {
		return p, err
	}
	if p.old, err = f.perfRequest(&f.old, provider); err != nil {
		return p, err
	}
	p.new, err = f.perfRequest(&f.new, provider)
	return p, err
}

func TestCompareFlagsReachTheRun(t *testing.T) {
	both := func(p comparePlan) any { return [2]any{p.conformance.Spec, p.old.Spec} }
	kindOpts := func(p comparePlan) any { return kindFields(p.conformance) }
	field := func(get func(*compareFlags) any) func(comparePlan) any {
		return func(p comparePlan) any { return get(p.f) }
	}
	cmd, _ := compareCommand(testGlobals(), io.Discard, io.Discard)
	checkFlagTable(t, cmd, planCompare, []flagRow[comparePlan]{
		{flag: "provider", args: []string{"--provider", "kind"}, what: func(p comparePlan) any { return p.conformance.Provider }},
		{flag: "name", args: []string{"--name", "foo"}, what: field(func(f *compareFlags) any { return f.cluster.name })},   // each side names its own clusters (sideFlags)
		{flag: "nodes", args: []string{"--nodes", "50"}, what: field(func(f *compareFlags) any { return f.cluster.nodes })}, // sizes the perf scenarios
		{flag: "gpus-per-node", args: []string{"--gpus-per-node", "4"}, what: both},
		{flag: "gpu-product", args: []string{"--gpu-product", "NVIDIA-A100"}, what: both},
		{flag: "k8s-version", args: []string{"--k8s-version", "v1.36.3"}, what: field(func(f *compareFlags) any { return f.cluster.k8sVersion })}, // each side's --*-version decides
		{flag: "kube-bin-dir", args: []string{"--kube-bin-dir", "/k"}, what: both},
		{flag: "scheduler-binary", args: []string{"--scheduler-binary", "/s"}, what: field(func(f *compareFlags) any { return f.cluster.schedulerBin })}, // each side's --*-scheduler-binary decides
		{flag: "cache-dir", args: []string{"--cache-dir", "/c"}, what: func(p comparePlan) any { return [2]any{p.conformance.CacheDir, p.old.CacheDir} }},
		{flag: "feature-gates", args: []string{"--feature-gates", "X=true"}, what: both},
		{flag: "features", args: []string{"--features", "tas"}, what: both},
		{flag: "topology", args: []string{"--topology", "blocks=1,racks-per-block=1,nodes-per-rack=1"}, refused: "--topology"},
		{flag: "gpu-api", args: []string{"--gpu-api", "dra"}, what: func(p comparePlan) any { return [2]any{p.old.Spec.GPUAPI, p.new.Spec.GPUAPI} }},
		{flag: "gpu-api", args: []string{"--gpu-api", "both"}, refused: "--gpu-api"},
		{flag: "scheduler-feature-gates", args: []string{"--scheduler-feature-gates", "A=false"}, what: field(func(f *compareFlags) any { return f.cluster.schedGates })}, // each side's --*-scheduler-feature-gates decides
		{flag: "scheduler-arg", args: []string{"--scheduler-arg", "kube-api-qps=5000"}, what: both},
		{flag: "timeout", args: []string{"--timeout", "7m"}, what: func(p comparePlan) any { return p.conformance.Spec.ReadyTimeout }},
		{flag: "engine", args: []string{"--provider", "kind", "--engine", "podman"}, provider: "kind", what: kindOpts},
		{flag: "workers", args: []string{"--provider", "kind", "--workers", "3"}, provider: "kind", what: kindOpts},
		{flag: "node-image", args: []string{"--provider", "kind", "--node-image", "img:1"}, provider: "kind", what: kindOpts},
		{flag: "scheduler-image", args: []string{"--provider", "kind", "--scheduler-image", "sched:1"}, provider: "kind", what: field(func(f *compareFlags) any { return f.cluster.schedulerImage })},
		{flag: "kwok-nodes", args: []string{"--provider", "kind", "--kwok-nodes", "5"}, provider: "kind", what: kindOpts},
		{flag: "old-version", args: []string{"--old-version", "v1.36.3"}, what: func(p comparePlan) any {
			return [2]any{p.conformance.Spec.KubernetesVersion, p.old.Spec.KubernetesVersion}
		}},
		{flag: "new-version", args: []string{"--new-version", "v1.36.3"}, what: func(p comparePlan) any { return p.new.Spec.KubernetesVersion }},
		{flag: "old-scheduler-binary", args: []string{"--old-scheduler-binary", "/o"}, what: func(p comparePlan) any { return [2]any{p.conformance.Spec.SchedulerBinary, p.old.Spec.SchedulerBinary} }},
		{flag: "new-scheduler-binary", args: []string{"--new-scheduler-binary", "/n"}, what: func(p comparePlan) any { return p.new.Spec.SchedulerBinary }},
		{flag: "old-scheduler-image", args: []string{"--provider", "kind", "--old-scheduler-image", "o:1"}, provider: "kind", what: func(p comparePlan) any { return [2]any{kindFields(p.conformance), kindFields(p.old)} }},
		{flag: "new-scheduler-image", args: []string{"--provider", "kind", "--new-scheduler-image", "n:1"}, provider: "kind", what: func(p comparePlan) any { return kindFields(p.new) }},
		{flag: "old-scheduler-feature-gates", args: []string{"--old-scheduler-feature-gates", "GenericWorkload=false"}, what: func(p comparePlan) any {
			return [2]any{p.conformance.Spec.ComponentFeatureGates, p.old.Spec.ComponentFeatureGates}
		}},
		{flag: "new-scheduler-feature-gates", args: []string{"--new-scheduler-feature-gates", "GenericWorkload=false"}, what: func(p comparePlan) any { return p.new.Spec.ComponentFeatureGates }},
		{flag: "old-label", args: []string{"--old-label", "base"}, what: field(func(f *compareFlags) any { return f.old.describe() })},
		{flag: "new-label", args: []string{"--new-label", "pr"}, what: field(func(f *compareFlags) any { return f.new.describe() })},
		{flag: "old-runs", args: []string{"--old-runs", "/a"}, what: field(func(f *compareFlags) any { return f.old.runDirs })},
		{flag: "new-runs", args: []string{"--new-runs", "/b"}, what: field(func(f *compareFlags) any { return f.new.runDirs })},
		{flag: "repetitions", args: []string{"--repetitions", "8"}, what: field(func(f *compareFlags) any { return f.repetitions })},
		{flag: "conformance-repetitions", args: []string{"--conformance-repetitions", "2"}, what: field(func(f *compareFlags) any { return f.conformanceRep })},
		{flag: "profile", args: []string{"--profile", perf.ProfileRealistic}, what: func(p comparePlan) any { return p.old.Spec }},
		{flag: "scenario", args: []string{"--scenario", "x"}, what: field(func(f *compareFlags) any { return f.scenarios })},
		{flag: "suites", args: []string{"--suites", "validation"}, what: field(func(f *compareFlags) any { return f.conformanceFlags(&f.old).suites })},
		{flag: "no-conformance", args: []string{"--no-conformance"}, what: field(func(f *compareFlags) any { return f.noConformance })},
		{flag: "no-perf", args: []string{"--no-perf"}, what: field(func(f *compareFlags) any { return f.noPerf })},
		{flag: "run-dir", args: []string{"--run-dir", "/r"}, what: field(func(f *compareFlags) any { return f.runDir })},
		{flag: "min-effect", args: []string{"--min-effect", "0.2"}, what: field(func(f *compareFlags) any { return f.minEffect })},
		{flag: "alpha", args: []string{"--alpha", "0.01"}, what: field(func(f *compareFlags) any { return f.alpha })},
		{flag: "fail-on-regression", args: []string{"--fail-on-regression"}, what: field(func(f *compareFlags) any { return f.failOnRegression })},
		{flag: "gate-metrics", args: []string{"--gate-metrics", "*"}, what: field(func(f *compareFlags) any { return f.gateMetrics })},
		{flag: "deadline", args: []string{"--deadline", "1h"}, what: field(func(f *compareFlags) any { return f.deadline })},

		{flag: "engine", args: []string{"--engine", "docker"}, refused: "--engine docker"},
	})
}

func planLab(t *testing.T, args []string, provider string) (request.Request, error) {
	cmd, f := labCommand(testGlobals(), io.Discard, io.Discard)
	parse(t, cmd, args)
	provider = resolved(f.provider, provider)
	r, err := labRequest(f, provider)
	if err == nil && f.timeout != 2*time.Minute {
		// --timeout bounds the lab's waits (lab.Options.Timeout); carried here for the table.
		r.Spec.Name += "/timeout=" + f.timeout.String()
	}
	return r, err
}

func TestLabFlagsReachTheRun(t *testing.T) {
	id := func(r request.Request) any { return r }
	cmd, _ := labCommand(testGlobals(), io.Discard, io.Discard)
	checkFlagTable(t, cmd, planLab, []flagRow[request.Request]{
		{flag: "provider", args: []string{"--provider", "kind"}, what: func(r request.Request) any { return r.Provider }},
		{flag: "k8s-version", args: []string{"--k8s-version", "v1.36.3"}, what: id},
		{flag: "scheduler-binary", args: []string{"--scheduler-binary", "/s"}, what: id},
		{flag: "scheduler-image", args: []string{"--provider", "kind", "--scheduler-image", "s:1"}, provider: "kind", what: id},
		{flag: "node-image", args: []string{"--provider", "kind", "--node-image", "img:1"}, provider: "kind", what: id},
		{flag: "engine", args: []string{"--provider", "kind", "--engine", "podman"}, provider: "kind", what: id},
		{flag: "cache-dir", args: []string{"--cache-dir", "/c"}, what: id},
		{flag: "keep", args: []string{"--provider", "kind", "--keep"}, provider: "kind", what: id},
		{flag: "timeout", args: []string{"--timeout", "5m"}, what: id},
		{flag: "gpu-api", args: []string{"--gpu-api", "dra"}, what: id},
		{flag: "gpu-api", args: []string{"--provider", "kind", "--gpu-api", "dra"}, provider: "kind", what: id},

		{flag: "gpu-api", args: []string{"--gpu-api", "cuda"}, refused: "--gpu-api"},
		{flag: "engine", args: []string{"--engine", "docker"}, refused: "--engine"},
		{flag: "keep", args: []string{"--keep"}, refused: "--keep"},
	})
}

func planCreate(t *testing.T, args []string, provider string) (request.Request, error) {
	cmd, f := clusterCreateCommand(testGlobals(), io.Discard, io.Discard)
	parse(t, cmd, args)
	provider = resolved(f.provider, provider)
	r, err := f.request(provider)
	if err != nil {
		return r, err
	}
	if err := validateRequest(f.newProvider, r); err != nil {
		return r, err
	}
	// The holder's internal flags: how the cluster is held, not what it is.
	for _, n := range []string{"foreground", "ready-fd", "cluster-request"} {
		if fl := cmd.Flags().Lookup(n); fl.Changed {
			r.CacheDir += "/" + n + "=" + fl.Value.String()
		}
	}
	return r, nil
}

func TestClusterCreateFlagsReachTheCluster(t *testing.T) {
	id := func(r request.Request) any { return r }
	cmd, _ := clusterCreateCommand(testGlobals(), io.Discard, io.Discard)
	checkFlagTable(t, cmd, planCreate, []flagRow[request.Request]{
		{flag: "provider", args: []string{"--provider", "kind"}, what: func(r request.Request) any { return r.Provider }},
		{flag: "name", args: []string{"--name", "foo"}, what: id},
		{flag: "nodes", args: []string{"--nodes", "3"}, what: id},
		{flag: "gpus-per-node", args: []string{"--gpus-per-node", "4"}, what: id},
		{flag: "gpu-product", args: []string{"--gpu-product", "NVIDIA-A100"}, what: id},
		{flag: "k8s-version", args: []string{"--k8s-version", "v1.36.3"}, what: id},
		{flag: "kube-bin-dir", args: []string{"--kube-bin-dir", "/k"}, what: id},
		{flag: "scheduler-binary", args: []string{"--scheduler-binary", "/s"}, what: id},
		{flag: "cache-dir", args: []string{"--cache-dir", "/c"}, what: id},
		{flag: "feature-gates", args: []string{"--feature-gates", "X=true"}, what: id},
		{flag: "features", args: []string{"--features", "jobs"}, what: id},
		{flag: "topology", args: []string{"--topology", "blocks=2,racks-per-block=1,nodes-per-rack=1"}, what: id},
		{flag: "gpu-api", args: []string{"--gpu-api", "both"}, what: id},
		{flag: "scheduler-feature-gates", args: []string{"--scheduler-feature-gates", "GenericWorkload=false"}, what: id},
		{flag: "scheduler-arg", args: []string{"--scheduler-arg", "kube-api-qps=5000"}, what: id},
		{flag: "timeout", args: []string{"--timeout", "7m"}, what: id},
		{flag: "engine", args: []string{"--provider", "kind", "--engine", "podman"}, provider: "kind", what: id},
		// --nodes defaults to 4 here, so --workers 4 alone is the default cluster (4 real workers);
		// with the rest simulated it is a different one.
		{flag: "workers", args: []string{"--provider", "kind", "--workers", "1", "--kwok-nodes", "3"}, provider: "kind", what: id},
		{flag: "node-image", args: []string{"--provider", "kind", "--node-image", "img:1"}, provider: "kind", what: id},
		{flag: "scheduler-image", args: []string{"--provider", "kind", "--scheduler-image", "s:1"}, provider: "kind", what: id},
		{flag: "kwok-nodes", args: []string{"--provider", "kind", "--kwok-nodes", "2"}, provider: "kind", what: id},
		{flag: "foreground", args: []string{"--foreground"}, what: id},
		{flag: "ready-fd", args: []string{"--ready-fd", "3"}, what: id},
		{flag: "cluster-request", args: []string{"--cluster-request", "-"}, what: id},

		{flag: "workers", args: []string{"--workers", "2"}, refused: "--workers 2"},
		{flag: "engine", args: []string{"--engine", "docker"}, refused: "--engine docker"},
		{flag: "nodes", args: []string{"--nodes", "0"}, refused: "nodes: 0"},
	})
}
