package suites_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/existing"
	"github.com/gangbench/gangbench/clusters/providers"
	"github.com/gangbench/gangbench/clusters/request"
	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/suites"
	"github.com/gangbench/gangbench/suites/framework"
)

// Flags of the suite binary. `gangbench e2e` passes the cluster as one -cluster-request file (every
// cluster flag of e2e in it), read once here and handed to the harness with the one constructor of
// providers (clusters/providers.New; this file is the test binary's edge, the only one that imports
// it); the individual cluster flags below remain for go test users and the proof tests, and build
// the same request:
//
//	go test ./suites/ -args -kubeconfig ~/.kube/config
var (
	clusterRequest = flag.String("cluster-request", "", "create the cluster of this request `file` (clusters/request; gangbench e2e writes <run-dir>/"+request.FileName+"); excludes the individual cluster flags")
	kubeconfig     = flag.String("kubeconfig", "", "run against this cluster instead of creating a local one (needs a kwok controller for lane nodes)")
	runDir         = flag.String("run-dir", "", "write monitor.json, cluster.json and failure artifacts here")
	schedulerBin   = flag.String("scheduler-binary", "", "run this kube-scheduler as the scheduler under test (local, or kind: wrapped into an image)")
	kubeBinDir     = flag.String("kube-bin-dir", "", "prebuilt control-plane binaries (local cluster)")
	k8sVersion     = flag.String("k8s-version", clusters.DefaultKubernetesVersion, "Kubernetes version (local cluster)")
	schedulerGates = flag.String("scheduler-feature-gates", "", "feature gates for the scheduler only, e.g. GenericWorkload=false (local cluster)")
	runtimeConfig  = flag.String("runtime-config", "", "kube-apiserver runtime-config overrides, e.g. scheduling.k8s.io/v1beta1=false (local cluster)")
	featureSets    = flag.String("features", "", "workload features to switch on, comma-separated (clusters.FeatureNames), e.g. tas")
	keepCluster    = flag.Bool("keep-cluster", false, "leave the created cluster running (kind; a local cluster dies with this binary: use gangbench e2e --keep-cluster)")
	scale          = flag.Float64("timeout-scale", 1, "multiply every timeout")
	provider       = flag.String("provider", "local", "cluster provider when no -kubeconfig is given: local or kind")
	workers        = flag.Int("workers", 0, "kind: worker nodes (default 2)")
	nodeImage      = flag.String("node-image", "", "kind: kindest/node image")
	schedulerImage = flag.String("scheduler-image", "", "kind: kube-scheduler image under test")
	upstreamBin    = flag.String("upstream-binary", "", "also run upstream's gang e2e specs from this binary (k8sbin.EnsureUpstreamE2E) as TestUpstream, after the suites")
	upstreamDir    = flag.String("upstream-report-dir", "", "where TestUpstream writes upstream's JUnit report and log (default <run-dir>/upstream)")
	suiteList      = flag.String("suites", "", "comma-separated suites to run (default all): "+strings.Join(suites.SuiteNames(), ","))
)

// harness is set once by TestMain and read by the tests: the e2e-framework pattern.
var harness *framework.Harness

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// The suites need a cluster; -short runs only the hermetic tests in this package.
		os.Exit(m.Run())
	}
	os.Exit(runMain(m))
}

func parseKV(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
			out[k] = v
		}
	}
	return out
}

// clusterFlags are the flags that -cluster-request replaces.
var clusterFlags = []string{"scheduler-binary", "kube-bin-dir", "k8s-version", "scheduler-feature-gates", "runtime-config", "features", "keep-cluster", "provider", "workers", "node-image", "scheduler-image"}

// requestOf is the cluster request of the flags: the -cluster-request file, or one built from the
// individual flags.
func requestOf() (request.Request, error) {
	var set []string
	flag.Visit(func(f *flag.Flag) {
		if slices.Contains(clusterFlags, f.Name) {
			set = append(set, "-"+f.Name)
		}
	})
	if *clusterRequest != "" {
		if len(set) > 0 {
			return request.Request{}, fmt.Errorf("-cluster-request %s and %s both say which cluster to create; the request file holds them all", *clusterRequest, strings.Join(set, ", "))
		}
		return request.Read(*clusterRequest)
	}
	spec := clusters.Spec{KubernetesVersion: *k8sVersion, KubeBinDir: *kubeBinDir, SchedulerBinary: *schedulerBin, RuntimeConfig: parseKV(*runtimeConfig)}
	if g := parseKV(*schedulerGates); len(g) > 0 {
		gates := map[string]bool{}
		for k, v := range g {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return request.Request{}, fmt.Errorf("-scheduler-feature-gates %s=%s: want true or false", k, v)
			}
			gates[k] = b
		}
		spec.ComponentFeatureGates = map[clusters.Component]map[string]bool{clusters.Scheduler: gates}
	}
	if *featureSets != "" {
		if err := clusters.ApplyFeatures(&spec, strings.Split(*featureSets, ",")); err != nil {
			return request.Request{}, err
		}
	}
	r := request.New(*provider, spec)
	r.Keep = *keepCluster
	p, err := providers.New(r, request.Env{})
	if err != nil {
		return request.Request{}, err
	}
	caps := p.Capabilities()
	shape := request.FlagShape{Workers: *workers}
	if *upstreamBin != "" && !caps.RealKubelets {
		// Upstream's preemption specs spread victims over two nodes; lanes are gone by then.
		shape.Nodes = 2
	}
	if err := shape.ForSuites(caps.RealKubelets).Apply(&r.Spec, caps.RealKubelets); err != nil {
		return request.Request{}, fmt.Errorf("-workers %d: %w", *workers, err)
	}
	r.Spec.Images = clusters.Images{Node: *nodeImage, Scheduler: *schedulerImage}
	if r, err = framework.ClusterRequest(r, caps, os.Getpid()); err != nil {
		return request.Request{}, err
	}
	return r, p.Validate(r.Spec)
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// A cluster someone else made is reached through the existing provider, as every other one.
	req := request.New(existing.ProviderName, clusters.Spec{})
	req.Kubeconfig = *kubeconfig
	if *kubeconfig == "" {
		var err error
		if req, err = requestOf(); err != nil {
			fmt.Fprintf(os.Stderr, "gangbench suites: %v\n", err)
			return 2
		}
	}
	// Ctrl-C (or `gangbench e2e` being interrupted) must not leave a cluster behind: tear it down and
	// exit. A second signal exits at once; Pdeathsig then takes the components with us. The handler
	// is installed before the cluster is created: a signal during the create used to kill the
	// binary outright, leaving the cluster's state directory behind. Now it cancels the create,
	// which tears down what it had started.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	started := make(chan *framework.Harness, 1) // the harness, or nil when Start failed
	go func() {
		<-sigs
		// Whoever reads our output (go tool test2json, gangbench e2e) may be gone already, e.g.
		// after a second Ctrl-C; a write to a closed stdout or stderr would then kill this process
		// with SIGPIPE halfway through the teardown.
		signal.Ignore(syscall.SIGPIPE)
		fmt.Fprintln(os.Stderr, "gangbench suites: interrupted, deleting the cluster")
		go func() { <-sigs; os.Exit(130) }()
		cancel()
		if h := <-started; h != nil {
			_, _, _ = h.Finish()
			_ = h.Close(context.Background())
		}
		os.Exit(130)
	}()
	h, err := framework.Start(ctx, framework.Options{
		Request: req, NewProvider: providers.New, RunDir: *runDir, Scale: *scale, Log: os.Stderr,
	})
	started <- h
	if err != nil {
		fmt.Fprintf(os.Stderr, "gangbench suites: %v\n", err)
		return 1
	}
	harness = h
	code := m.Run()
	violations, known, err := h.Finish()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gangbench suites: monitor: %v\n", err)
		code = 1
	}
	for _, v := range known {
		fmt.Fprintf(os.Stderr, "known scheduler issue seen (reported, not failed): %s\n", v)
	}
	for _, v := range violations {
		fmt.Fprintf(os.Stderr, "STATUS MONOTONICITY VIOLATION: %s\n", v)
		code = 1
	}
	if err := h.Close(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "gangbench suites: delete cluster: %v\n", err)
		code = 1
	}
	return code
}

func run(t *testing.T, suite string) {
	if harness == nil {
		t.Skip("needs a cluster; skipped with -short")
	}
	if *suiteList != "" && !strings.Contains(","+*suiteList+",", ","+suite+",") {
		t.Skipf("suite %s not selected", suite)
	}
	fs, err := framework.Select(suites.All(), []string{suite})
	if err != nil {
		t.Fatal(err)
	}
	harness.Run(t, fs)
}

func TestExperiments(t *testing.T)      { run(t, "experiments") }
func TestBarriers(t *testing.T)         { run(t, "barriers") }
func TestMinCount(t *testing.T)         { run(t, "mincount") }
func TestPreemption(t *testing.T)       { run(t, "preemption") }
func TestStatus(t *testing.T)           { run(t, "status") }
func TestValidation(t *testing.T)       { run(t, "validation") }
func TestObservability(t *testing.T)    { run(t, "observability") }
func TestFaults(t *testing.T)           { run(t, "faults") }
func TestTopology(t *testing.T)         { run(t, "topology") }
func TestPreemptionPolicy(t *testing.T) { run(t, "preemption-policy") }
func TestJobs(t *testing.T)             { run(t, "jobs") }
func TestComposite(t *testing.T)        { run(t, "composite") }
func TestDRA(t *testing.T)              { run(t, "dra") }

// TestUpstream runs upstream's gang specs last, alone on the cluster (they create PriorityClasses
// and patch a node), and reports each as an assertion UPS-NN of suite "upstream", numbered in name
// order, so run.json, JUnit and the reports carry them beside gangbench's own.
func TestUpstream(t *testing.T) {
	runUpstream(t, "upstream", "upstream gang specs", "UPS", framework.UpstreamGangSpecs())
}

// TestUpstreamJobs runs upstream's Job gang specs (test/e2e/apps/job.go) as suite "upstream-jobs",
// assertions UPJ-NN, where the apiserver has WorkloadWithJob on (--features jobs).
func TestUpstreamJobs(t *testing.T) {
	if *upstreamBin == "" {
		t.Skip("upstream's specs not requested (-upstream-binary)")
	}
	if harness == nil {
		t.Skip("needs a cluster; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	on, err := harness.Env.APIServerGate(ctx, "WorkloadWithJob")
	switch {
	case err != nil:
		t.Skipf("cannot tell whether the apiserver has WorkloadWithJob: %v", err)
	case !on:
		t.Skip("needs feature gate WorkloadWithJob, which the apiserver reports off (gangbench e2e --features jobs)")
	}
	kubelets, err := framework.EveryNodeRunsKubelet(ctx, harness.Env.Client)
	if err != nil {
		t.Fatal(err)
	}
	runUpstream(t, "upstream-jobs", "upstream Job gang specs", "UPJ", framework.UpstreamJobSpecs(kubelets))
}

func runUpstream(t *testing.T, suite, feature, prefix string, sel framework.UpstreamSelection) {
	if *upstreamBin == "" {
		t.Skip("upstream's specs not requested (-upstream-binary)")
	}
	if harness == nil {
		t.Skip("needs a cluster; skipped with -short")
	}
	dir := *upstreamDir
	if dir == "" {
		if *runDir == "" {
			dir = t.TempDir()
		} else {
			dir = filepath.Join(*runDir, "upstream")
		}
	}
	if suite != "upstream" {
		// Each selection writes its own junit_01.xml; the gang specs keep the documented place.
		dir = filepath.Join(dir, strings.TrimPrefix(suite, "upstream-"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	specs, err := framework.RunUpstream(ctx, harness.Env.Client, *upstreamBin, harness.Kubeconfig(), dir, sel)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("upstream's specs (%s) took %s; report and log in %s", suite, time.Since(start).Round(time.Second), dir)
	t.Run(feature, func(t *testing.T) {
		for i, s := range specs {
			t.Run(fmt.Sprintf("%s-%02d_%s", prefix, i+1, s.Name), func(t *testing.T) {
				t.Logf("measurement specSeconds=%.1f", s.Duration.Seconds())
				switch s.Verdict {
				case results.Pass:
				case results.Skip:
					t.Skip(s.Message)
				default:
					t.Errorf("%s\n(upstream's log: %s)", s.Message, filepath.Join(dir, "upstream.log"))
				}
			})
		}
	})
}
