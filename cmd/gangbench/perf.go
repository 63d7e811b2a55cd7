package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/providers"
	"github.com/gangbench/gangbench/clusters/request"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/observe/speedprobe"
	"github.com/gangbench/gangbench/perf"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/perf/slo"
	"github.com/gangbench/gangbench/results"
)

// exitSLOViolation is the exit code of a run whose figures violate an SLO (the harness worked).
const exitSLOViolation = 3

// maxRounds bounds --rounds: a round of a 5000-node scenario with its reference takes minutes.
const maxRounds = 20

type perfRunFlags struct {
	cluster    clusterFlags
	scenarios  []string
	labels     []string
	slo        string
	params     []string
	runDir     string
	kubeconfig string
	workers    int
	loadQPS    float32
	grace      time.Duration
	quietWait  time.Duration
	deadline   time.Duration
	faults     []string
	safety     providers.SafetyOptions
	reference  bool
	profile    string
	cpuProfile time.Duration
	rounds     int
}

func newPerfCmd(g *globalOpts, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "perf",
		Short: "Throughput benchmarks of gang scheduling, with SLO verdicts",
		Long: `Measure how fast the scheduler under test binds gangs on simulated GPU nodes.

'perf run' creates a local cluster shaped for each scenario (or uses --kubeconfig), creates the
scenario's PodGroups and pods, measures binding throughput (from a pod watch and from the apiserver's
binding counter), gang latency, the scheduler's own histograms and the gang invariants under load,
judges them against an SLO file, and writes run.json and events.jsonl. 'perf report' renders a
finished run from those files.`,
	}
	cmd.AddCommand(newPerfRunCmd(g, stdout, stderr), newPerfReportCmd(stdout), newPerfListCmd(stdout), newPerfReferenceCmd(g, stdout, stderr))
	return cmd
}

func newPerfRunCmd(g *globalOpts, stdout, stderr io.Writer) *cobra.Command {
	cmd, _ := perfRunCommand(g, stdout, stderr)
	return cmd
}

// perfRunCommand is newPerfRunCmd with the flags it parses into, for tests.
func perfRunCommand(g *globalOpts, stdout, stderr io.Writer) (*cobra.Command, *perfRunFlags) {
	var f perfRunFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run perf scenarios and judge them against SLOs",
		Long: `Run perf scenarios: by default the shipped scenarios labelled "default" ('gangbench perf list').

Each scenario gets a local cluster of its shape (--nodes overrides every scenario's node count);
consecutive scenarios of one shape share it. Results go to --run-dir: run.json (environment,
figures, SLO verdicts) and events.jsonl (every create and bind with its time). The figures are
also printed as Go benchmark lines, so repeated runs can be compared with benchstat.

Built-in objectives (no partial gangs, every pod that fits is bound, PodGroup status never
regresses) are always judged; --slo adds thresholds from a file ('default' is perf/slo/default.yaml).

--fault injects a fault into every repetition's measured window, e.g. --fault scheduler-kill@50%
(SIGKILL the kube-scheduler once half the measured pods are created, then start it again). The run
then also reports the time to recover (fault → first bind after the restart), pod and PodGroup
counts before and after, and partial gangs after recovery, which must be 0 (built-in objectives).
gpu-unhealthy marks fake GPUs unhealthy for a while (through the device plugin on kind, in the node
status on the local provider's simulated nodes). kubelet faults need --provider kind, which then
runs --workers real worker nodes (default 2) and simulates the rest of each scenario's nodes with
kwok; the run also reports when the device plugin registered again and the GPUs came back.
Faults a provider cannot inject are refused before any cluster starts; --kubeconfig takes none.

Exit codes: 0 every objective holds; 3 an SLO is violated; 2 usage; 1 harness or cluster error.
Results are written in every case.`,
		Example: `  gangbench perf run --scenario smoke --nodes 50
  gangbench perf run --nodes 500 --slo default
  gangbench perf run --scenario perf/scenarios/upstream-1000gangs-3pods.yaml --nodes 5000 --param groups=2000
  gangbench perf run --labels upstream --scheduler-binary ./my-kube-scheduler
  gangbench perf run --scenario upstream-1000gangs-3pods --nodes 5000 --reference --rounds 5
  gangbench perf run --scenario smoke --nodes 50 --fault scheduler-kill@50% --fault kwok-restart@5s
  gangbench perf run --scenario smoke --param groups=40 --nodes 20 --fault gpu-unhealthy:8x2:10s@50%
  gangbench perf run --provider kind --workers 2 --scenario smoke --param groups=40 --nodes 20 --fault kubelet-restart@50%`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPerf(cmd, g, &f, stdout, stderr)
		},
	}
	f.cluster.register(cmd, g, 0)
	fs := cmd.Flags()
	fs.Lookup("nodes").Usage = "simulated nodes for every scenario (default: each scenario's cluster.nodes)"
	fs.StringSliceVar(&f.scenarios, "scenario", nil, "scenario files or shipped scenario names, comma-separated or repeated (default: the shipped set selected by --labels)")
	fs.StringSliceVar(&f.labels, "labels", nil, "select shipped scenarios by label: x or +x requires, -x excludes (default: default)")
	fs.StringVar(&f.slo, "slo", "", "SLO file to judge the figures against; 'default' is the shipped perf/slo/default.yaml")
	fs.StringArrayVar(&f.params, "param", nil, "override a scenario $param as name=value (repeatable)")
	fs.StringVar(&f.runDir, "run-dir", "", "where results go (default _output/runs/<id>)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "run against this existing cluster instead of creating one (it is not deleted)")
	safetyFlags(fs, &f.safety)
	fs.IntVar(&f.workers, "load-workers", 0, "PodGroups the load generator creates concurrently (default 64)")
	fs.Float32Var(&f.loadQPS, "load-qps", 0, "the load generator's client QPS and burst (default 5000)")
	fs.DurationVar(&f.quietWait, "quiet-wait", perf.QuietTimeout, fmt.Sprintf("before each measured window, wait up to this long for the apiserver to serve fewer than %d requests/s besides heartbeats (a new cluster is busy for a while after its nodes are Ready); 0 skips the wait", perf.QuietRate))
	fs.DurationVar(&f.grace, "partial-grace", 0, "how long a partially bound gang may go without a member bound before it counts as a partial placement (default 30s)")
	fs.DurationVar(&f.deadline, "deadline", 60*time.Minute, "the whole run's deadline")
	fs.StringArrayVar(&f.faults, "fault", nil, "inject a fault into each repetition (repeatable): "+perf.FaultForms)
	fs.StringVar(&f.profile, "profile", perf.ProfileQuiet, "load beside the scheduler: quiet (node leases renewed every 15 min, only the controllers a run needs, bound pods left Pending as in scheduler_perf) or realistic (kubelet-like 10 s lease renewal, every controller, bound pods made Running); ignored with --kubeconfig")
	fs.DurationVar(&f.cpuProfile, "cpu-profile", 0, "fetch Go CPU profiles of the apiserver and the scheduler over this much of the start of every measured window into the run directory (cpu-SCENARIO-REP-COMPONENT.pprof, for go tool pprof); switches on their /debug/pprof on clusters gangbench creates")
	fs.IntVar(&f.rounds, "rounds", 1, "run the scenario set this many times, each round on clusters of its own; with --reference, scheduler_perf runs before the first round, between rounds and after the last, each round is compared with the runs right before and after it, and the targets are judged by the median of the rounds' ratios")
	fs.BoolVar(&f.reference, "reference", false, "run the upstream scheduler_perf workload each scenario names (reference.schedulerPerf) in-process right before and right after the run, and report gangbench's figures as ratios of their mean")
	return cmd, &f
}

func parseParams(vals []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vals {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("--param %q: want name=value", v)}
		}
		out[k] = val
	}
	return out, nil
}

// perfScenarioOptions are what the flags change in every scenario: its parameters, and the node
// shape where the flags give one (perf's --nodes, --gpus-per-node and --gpu-product size the
// scenarios, whose clusters follow them).
func perfScenarioOptions(cmd *cobra.Command, f *perfRunFlags) (scenario.Options, error) {
	params, err := parseParams(f.params)
	if err != nil {
		return scenario.Options{}, err
	}
	flags := cmd.Flags()
	if f.cluster.nodes < 0 {
		return scenario.Options{}, usageError{fmt.Errorf("--nodes %d: want a positive count", f.cluster.nodes)}
	}
	opts := scenario.Options{Params: params, Nodes: f.cluster.nodes}
	if flags.Changed("gpus-per-node") {
		opts.GPUsPerNode = f.cluster.gpusPerNode
	}
	if flags.Changed("gpu-product") {
		opts.Product = f.cluster.gpuProduct
	}
	// Only when given: a scenario written for one GPU API keeps it unless the flag says otherwise
	// (and then the scenario is refused or, in a label-selected set, skipped).
	if flags.Changed("gpu-api") {
		api, err := fakegpu.ParseAPI(f.cluster.gpuAPI)
		if err != nil {
			return scenario.Options{}, usageError{fmt.Errorf("--gpu-api: %w", err)}
		}
		opts.GPUAPI = api
	}
	return opts, nil
}

func runPerf(cmd *cobra.Command, g *globalOpts, f *perfRunFlags, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), f.deadline)
	defer cancel()
	opts, err := perfScenarioOptions(cmd, f)
	if err != nil {
		return err
	}
	if len(f.scenarios) > 0 && len(f.labels) > 0 {
		return usageError{errors.New("--scenario and --labels select scenarios two ways; give one")}
	}
	faults, err := perf.ParseFaults(f.faults)
	if err != nil {
		return usageError{fmt.Errorf("--fault: %w", err)}
	}
	// --nodes, --gpus-per-node and --gpu-product still size the scenarios on an existing cluster.
	perfShaping := slices.DeleteFunc(slices.Clone(clusterShaping), func(n string) bool { return n == "nodes" || n == "gpus-per-node" || n == "gpu-product" })
	if err := f.cluster.refuseWithKubeconfig(f.kubeconfig, perfShaping); err != nil {
		return err
	}
	if len(faults) > 0 && f.kubeconfig != "" {
		// Refused before anything starts: an existing cluster's components are not ours to kill.
		return usageError{fmt.Errorf("--fault with --kubeconfig: %w", perf.ErrFaultsNeedControl)}
	}
	var source perf.ClusterSource
	if f.kubeconfig != "" {
		if err := checkKubeconfig(f.kubeconfig, f.safety); err != nil {
			return err
		}
		ex, err := existingSource(ctx, f.kubeconfig)
		if err != nil {
			return codedError{err, exitError}
		}
		// Scenarios are resolved for the cluster as it is: fill is a fraction of its GPUs.
		nodes, gpus, err := ex.Inventory(ctx)
		if err != nil {
			return codedError{err, exitError}
		}
		if opts.Nodes == 0 {
			opts.Nodes = nodes
		}
		if opts.GPUsPerNode == 0 && gpus > 0 {
			opts.GPUsPerNode = gpus
		}
		source = ex
	}
	scs, skipped, err := perf.LoadScenarios(perf.Selection{Refs: f.scenarios, Labels: f.labels}, opts)
	if err != nil {
		return usageError{err}
	}
	var objectives []slo.Objective
	if f.slo != "" {
		if objectives, err = perf.LoadSLO(f.slo); err != nil {
			return usageError{err}
		}
	}
	if f.rounds < 1 || f.rounds > maxRounds {
		return usageError{fmt.Errorf("--rounds %d: accepted: 1 to %d", f.rounds, maxRounds)}
	}
	if f.cpuProfile < 0 {
		return usageError{fmt.Errorf("--cpu-profile %s: a profile's length must be positive", f.cpuProfile)}
	}
	profile := f.profile
	if !slices.Contains(perf.Profiles(), profile) {
		return usageError{fmt.Errorf("--profile %q: accepted: %s", profile, strings.Join(perf.Profiles(), ", "))}
	}
	if source != nil {
		profile = "" // an existing cluster runs as it was made
	}
	if source == nil {
		provider := f.cluster.resolveProvider(ctx, stderr)
		src, req, err := perfSource(cmd, &f.cluster, profile, provider, f.cpuProfile > 0, stderr)
		if err != nil {
			return err
		}
		// Refused here, before binaries are built or any cluster starts.
		if err := perf.CheckFaults(faults, src.Capabilities(), scs); err != nil {
			return usageError{fmt.Errorf("--fault: %w", err)}
		}
		if err := perf.CheckGPUAPIs(scs, src.Capabilities(), faults); err != nil {
			return usageError{err}
		}
		if err := ensureBinaries(ctx, src.Capabilities(), req, stderr); err != nil {
			return err
		}
		source = src
	}

	started := time.Now()
	id := results.NewRunID(started)
	runDir := f.runDir
	if runDir == "" {
		runDir = filepath.Join("_output", "runs", id)
	}
	runDir, _ = filepath.Abs(runDir)
	var progress *perf.Progress
	log := g.logger(stderr)
	if file, ok := stdout.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
		progress = perf.NewProgress(stdout)
		// Log lines go above the bars, or they would tear them.
		log = g.logger(progress)
	}
	fmt.Fprintf(stderr, "running %d scenario(s): %s\n", len(scs), scenarioNames(scs))
	for _, sk := range skipped {
		fmt.Fprintf(stderr, "skipping %s: it does not fit this cluster: %s\n", sk.Name, sk.Reason)
	}
	var refs *referenceRuns
	var between func(context.Context, int) error
	var probe *speedprobe.Probe
	if f.reference {
		// The machine's speed over the whole run, so that each window, gangbench's and the
		// references', can be set beside the others.
		pctx, stop := context.WithCancel(ctx)
		probe = speedprobe.Start(pctx, speedprobe.DefaultInterval)
		defer func() {
			stop()
			_ = probe.Wait() // a probe that failed only leaves its figure out
		}()
		// Before the run, while no cluster runs; the second reference follows the run.
		if refs, err = newReferenceRuns(ctx, runDir, scs, f, probe, stderr); err != nil {
			return codedError{err, exitError}
		}
		between = refs.between
	}
	run, runErr := perf.Run(ctx, perf.Options{
		Scenarios: scs, Objectives: objectives, Source: source, RunDir: runDir, ID: id, Started: started,
		SchedulerBinary: f.cluster.schedulerBin, Workers: f.workers, LoadQPS: f.loadQPS, LoadBurst: int(f.loadQPS),
		PartialGrace: f.grace, QuietWait: quietWait(f.quietWait), Faults: faults, Progress: progress, Log: log, Skipped: skipped, Profile: profile,
		CPUProfile: f.cpuProfile, Rounds: f.rounds, BetweenRounds: between, SpeedProbe: probe,
	})
	progress.Wait()
	if refs != nil && runErr == nil {
		// After the run: its cluster is gone, so the reference has the machine to itself.
		if err := refs.finish(ctx, run); err != nil {
			runErr = err
		}
	}
	fmt.Fprintln(stdout)
	if err := perf.WriteReport(stdout, run, perf.FormatText); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nresults: %s (run.json, events.jsonl)\n", runDir)
	v := perf.VerdictOf(run)
	switch {
	case runErr != nil:
		return codedError{runErr, exitError}
	case v.ExitCode == exitSLOViolation:
		return codedError{fmt.Errorf("%d SLO violation(s); see the SLOs above", run.Summary().SLOViolations), exitSLOViolation}
	case v.ExitCode != 0:
		return codedError{errors.New("the run has errors; see the SLOs above"), v.ExitCode}
	}
	return nil
}

// referenceRuns brackets a perf run with scheduler_perf's: one reference run of each scenario's
// upstream workload right before the run, one right after, and the ratios against their mean. A
// single reference run after an hour's measurement can land on a machine that has since sped up
// or slowed down by 10 % or more (seen here); the mean of the two carries the same drift as the run
// between them, and the drift itself is reported. With --rounds, a reference run also sits between
// every two rounds, serving as the one after the first and the one before the second.
type referenceRuns struct {
	runDir string
	scs    []*scenario.Scenario // the run's scenarios that name an upstream workload
	none   []string             // those that name none
	f      *perfRunFlags
	stderr io.Writer
	// measure runs scheduler_perf once for every scenario in scs (runReferences; tests stand in).
	measure func(ctx context.Context, log io.Writer) (map[string]*perf.ReferenceResult, error)
	// runs[0] ran before the first round, runs[n] after round n.
	runs []map[string]*perf.ReferenceResult
	// probe is the run's speed probe: each reference gets the machine's speed while it ran.
	probe *speedprobe.Probe
}

// newReferenceRuns runs the references before the run. Scenarios without an upstream workload are
// left out (the run notes them at the end).
func newReferenceRuns(ctx context.Context, runDir string, scs []*scenario.Scenario, f *perfRunFlags, probe *speedprobe.Probe, stderr io.Writer) (*referenceRuns, error) {
	r := &referenceRuns{runDir: runDir, f: f, stderr: stderr, probe: probe}
	r.measure = func(ctx context.Context, log io.Writer) (map[string]*perf.ReferenceResult, error) {
		return runReferences(ctx, r.scs, f.cluster.k8sVersion, k8sbin.Options{CacheDir: f.cluster.cacheDir, Progress: stderr}, log, stderr, "")
	}
	for _, sc := range scs {
		if sc.Reference != nil {
			r.scs = append(r.scs, sc)
		} else {
			r.none = append(r.none, sc.Name)
		}
	}
	if len(r.scs) == 0 {
		return r, nil
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}
	return r, r.runAll(ctx)
}

// when names reference run n: "before", "after" for a single round, "after round n" for rounds.
func (r *referenceRuns) when(n int) string {
	switch {
	case n == 0:
		return "before"
	case r.f.rounds == 1:
		return "after"
	}
	return fmt.Sprintf("after round %d", n)
}

// runAll runs the next reference of every scenario.
func (r *referenceRuns) runAll(ctx context.Context) error {
	when := r.when(len(r.runs))
	log, err := os.Create(filepath.Join(r.runDir, "reference-"+strings.ReplaceAll(when, " ", "-")+".log"))
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(r.stderr, "reference: scheduler_perf %s\n", when)
	refs, err := r.measure(ctx, log)
	if err != nil {
		return fmt.Errorf("reference (%s): %w", when, err)
	}
	for _, res := range refs {
		if unit, n := r.probe.Between(res.Started, res.Started.Add(res.Wall)); n > 0 {
			res.Items[perf.RefMachineSpeed] = perf.MachineSpeedItem(unit, n)
		}
	}
	r.runs = append(r.runs, refs)
	return nil
}

// between runs the references after round n (perf.Options.BetweenRounds).
func (r *referenceRuns) between(ctx context.Context, n int) error {
	if len(r.scs) == 0 {
		return nil
	}
	if len(r.runs) != n {
		return fmt.Errorf("reference after round %d: %d reference runs so far, want %d", n, len(r.runs), n)
	}
	return r.runAll(ctx)
}

// finish runs the references after the last round and records them all, and the ratios (per round
// and their median, with rounds), in the run (run.json is written again).
func (r *referenceRuns) finish(ctx context.Context, run *results.Run) error {
	for _, sc := range r.none {
		run.Notes = append(run.Notes, "reference: scenario "+sc+" names no scheduler_perf workload")
	}
	if len(r.scs) == 0 {
		return nil
	}
	if err := r.runAll(ctx); err != nil {
		return err
	}
	for _, sc := range r.scs {
		for n, refs := range r.runs {
			run.DataItems = append(run.DataItems, perf.ReferenceItems(sc.Name, r.when(n), refs[sc.Name])...)
		}
		var rounds []results.DataItem
		for n := 1; n < len(r.runs); n++ {
			round := ""
			if r.f.rounds > 1 {
				round = strconv.Itoa(n)
			}
			if item, ok := perf.BracketRatios(run, sc.Name, round, r.runs[n-1][sc.Name], r.runs[n][sc.Name]); ok {
				rounds = append(rounds, item)
			}
		}
		run.DataItems = append(run.DataItems, rounds...)
		if r.f.rounds > 1 {
			run.DataItems = append(run.DataItems, perf.MedianRatio(rounds))
		}
	}
	return results.Write(r.runDir, run)
}

func scenarioNames(scs []*scenario.Scenario) string {
	var n []string
	for _, s := range scs {
		n = append(n, fmt.Sprintf("%s (%d nodes)", s.Name, s.Cluster.Nodes))
	}
	return strings.Join(n, ", ")
}

// perfRequest is the cluster request every scenario's cluster starts from; its node count is set
// per scenario, so the rest is validated with a placeholder.
func perfRequest(cmd *cobra.Command, f *clusterFlags, profile, provider string, cpuProfile bool) (request.Request, error) {
	if !cmd.Flags().Changed("name") {
		// Unique per run, so a perf run never collides with a user's cluster or another run.
		f.name = fmt.Sprintf("perf-%d", os.Getpid())
	}
	req, err := f.scenarioBaseRequest(provider, profile)
	if err != nil {
		return request.Request{}, err
	}
	spec := req.Spec
	if !cmd.Flags().Changed("timeout") {
		spec.ReadyTimeout = 0 // the source scales it with the node count
	}
	if cpuProfile {
		perf.EnableCPUProfiling(&spec)
	}
	req.Spec = spec
	return req, nil
}

// scenarioBaseRequest is the request perf's clusters start from, before a scenario sets the node
// shape (left empty): the flags validated with a placeholder shape, and the load profile applied.
func (f *clusterFlags) scenarioBaseRequest(provider, profile string) (request.Request, error) {
	if f.topology != "" {
		// Each scenario sets the node shape; a topology must come with it, not from a flag that
		// every scenario's node count would contradict.
		return request.Request{}, usageError{fmt.Errorf("--topology %s: perf's scenarios set the nodes of each cluster, so the topology of a perf run is not a flag", f.topology)}
	}
	api, err := fakegpu.ParseAPI(f.gpuAPI)
	if err != nil {
		return request.Request{}, usageError{fmt.Errorf("--gpu-api: %w", err)}
	}
	if api == fakegpu.APIBoth {
		// A scenario's pods claim their GPUs one way; nodes publishing them both ways would let a
		// pod take a GPU each way, and neither a scenario's capacity check nor the invariants' fit
		// check would hold.
		return request.Request{}, usageError{fmt.Errorf("--gpu-api %s: perf's pods ask for GPUs one way (device-plugin counts, or dra claims); give one of those", f.gpuAPI)}
	}
	var caps clusters.Capabilities
	// The placeholder: one node where every node is simulated; with real kubelets the workers'
	// default, since there each scenario sets the workers plus the simulated nodes.
	req, err := f.requestShaped(provider, func(s *request.FlagShape, c clusters.Capabilities) {
		caps = c
		s.Nodes = 0
		if !c.RealKubelets {
			s.Nodes = 1
		}
	})
	if err != nil {
		return request.Request{}, err
	}
	if err := validateRequest(f.newProvider, req); err != nil {
		return request.Request{}, err
	}
	// The flag's GPU API stays in the base spec (the node groups that carried it are the
	// placeholder's): every scenario that names none gets it (perf.ProviderSource), and the load
	// generator's pods then ask for GPUs that way.
	req.Spec.Nodes, req.Spec.NodeGroups, req.Spec.GPUAPI = 0, nil, api
	if err := perf.ApplyProfile(&req.Spec, profile, caps); err != nil {
		return request.Request{}, usageError{err}
	}
	return req, nil
}

// perfSource builds the source of perf's clusters on provider from the cluster flags, through the
// one constructor: on a provider with real kubelets --workers of them per cluster, the rest of each
// scenario's nodes simulated.
func perfSource(cmd *cobra.Command, f *clusterFlags, profile, provider string, cpuProfile bool, stderr io.Writer) (*perf.ProviderSource, request.Request, error) {
	req, err := perfRequest(cmd, f, profile, provider, cpuProfile)
	if err != nil {
		return nil, request.Request{}, err
	}
	p, err := providerOf(f.newProvider, req, request.Env{Progress: stderr})
	if err != nil {
		return nil, request.Request{}, usageError{err}
	}
	if p.Capabilities().RealKubelets && f.kwokNodes != 0 {
		return nil, request.Request{}, usageError{errors.New("--kwok-nodes: perf run derives the kwok nodes from each scenario's node count minus --workers")}
	}
	return &perf.ProviderSource{Provider: p, Base: req.Spec, Workers: f.workers}, req, nil
}

// ensureBinaries builds the control-plane binaries of a provider that runs them from the cache
// (one without node images), here, with progress on the terminal, rather than silently inside the
// first cluster create.
func ensureBinaries(ctx context.Context, caps clusters.Capabilities, req request.Request, stderr io.Writer) error {
	if caps.Images {
		return nil
	}
	if _, err := k8sbin.Ensure(ctx, req.Spec.KubernetesVersion, req.Binaries(stderr)); err != nil {
		return codedError{err, exitError}
	}
	return nil
}

// existingSource opens --kubeconfig (providers.Attach). When it is the kubeconfig of a cluster
// gangbench created and left running, its provider's handle is used: it knows where the
// scheduler's /metrics is.
func existingSource(ctx context.Context, kubeconfig string) (*perf.ExistingSource, error) {
	a, err := providers.Attach(ctx, kubeconfig)
	if err != nil {
		return nil, err
	}
	if a.GangAPIMissing != "" {
		return nil, fmt.Errorf("cluster %s: %s", a.Cluster.Name, a.GangAPIMissing)
	}
	return &perf.ExistingSource{Cluster: a.Cluster}, nil
}

func newPerfReportCmd(stdout io.Writer) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "report RUN_DIR",
		Short: "Render a finished perf run from its files (no cluster needed)",
		Example: `  gangbench perf report _output/runs/20261129-161500-a3f0
  gangbench perf report _output/runs/<id> --format markdown >> "$GITHUB_STEP_SUMMARY"
  gangbench perf report _output/runs/<id> --format bench > new.txt && benchstat old.txt new.txt`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(perf.Formats(), format) {
				return usageError{fmt.Errorf("--format %q: accepted: %s", format, strings.Join(perf.Formats(), ", "))}
			}
			run, err := results.Read(args[0])
			if err != nil {
				return err
			}
			return perf.WriteReport(stdout, run, format)
		},
	}
	cmd.Flags().StringVar(&format, "format", perf.FormatText, "text, markdown, json, or bench (Go benchmark lines only)")
	return cmd
}

func newPerfListCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the shipped scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lib, err := perf.Library()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tLABELS\tFILE")
			for _, e := range lib {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, strings.Join(e.Labels, ","), e.File)
			}
			return tw.Flush()
		},
	}
}

// quietWait maps the flag (0 skips) to perf.Options.QuietWait (0 is the default, negative skips).
func quietWait(flag time.Duration) time.Duration {
	if flag <= 0 {
		return -1
	}
	return flag
}
