package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/kind/schedimage"
	"github.com/gangbench/gangbench/clusters/providers"
	"github.com/gangbench/gangbench/clusters/request"
	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/suites"
	"github.com/gangbench/gangbench/suites/framework"
	"github.com/gangbench/gangbench/suites/mutants"
)

// exitFailures is the exit code when assertions failed (the harness itself worked).
const exitFailures = 1

type e2eFlags struct {
	cluster     clusterFlags
	suites      []string
	runDir      string
	kubeconfig  string
	keepCluster bool
	scale       float64
	runtimeCfg  []string
	deadline    time.Duration
	safety      providers.SafetyOptions
	upstream    bool
	verbose     bool // gangbench's --verbose, for a holder process this run starts
	// coverage is --scheduler-coverage's directory; env is added to the suite binary's environment.
	coverage string
	env      []string
}

func newE2ECmd(g *globalOpts, stdout, stderr io.Writer) *cobra.Command {
	cmd, _ := e2eCommand(g, stdout, stderr)
	return cmd
}

// e2eCommand is newE2ECmd with the flags it parses into, for tests.
func e2eCommand(g *globalOpts, stdout, stderr io.Writer) (*cobra.Command, *e2eFlags) {
	var f e2eFlags
	cmd := &cobra.Command{
		Use:   "e2e",
		Short: "Run the gang-scheduling conformance suites against a scheduler",
		Long: `Create a cluster (or use --kubeconfig), run the conformance suites, print one line per assertion,
write run.json, junit.xml and summary.md into the run directory, and delete the cluster.

Suites: ` + strings.Join(suites.SuiteNames(), ", ") + `.
The suites are Go tests (e2e-framework features); this command compiles them from the source tree,
so run it from the gangbench repository (make e2e does).

Exit codes: 0 every assertion passed; 1 an assertion failed; 2 usage; 4 the harness could not run
(cluster, preflight, build).`,
		Example: `  gangbench e2e
  gangbench e2e --suites barriers,preemption
  gangbench e2e --scheduler-binary ./my-kube-scheduler
  gangbench e2e --upstream            # and upstream's GangScheduling, Workload and WorkloadAwarePreemption specs
  gangbench e2e --kubeconfig ~/.kube/config --suites validation`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.complete(cmd, g)
			return runE2E(cmd.Context(), g, &f, stdout, stderr)
		},
	}
	f.cluster.register(cmd, g, 0)
	cmd.Flags().Lookup("nodes").Usage = "simulated GPU nodes besides the suites' own lane nodes (default: 1 on local; on kind the GPU nodes are --workers plus kwok nodes, default 2 workers + 1)"
	cmd.Flags().Lookup("name").Usage = "cluster name (default: e2e-<pid>, unique to the run)"
	cmd.Flags().Lookup("name").DefValue = ""
	// Conformance runs follow the mission's default: kind where a container engine answers.
	_ = cmd.Flags().Set("provider", providers.Auto)
	cmd.Flags().Lookup("provider").DefValue = providers.Auto
	fs := cmd.Flags()
	fs.StringSliceVar(&f.suites, "suites", nil, "suites to run (default all): "+strings.Join(suites.SuiteNames(), ","))
	fs.StringVar(&f.runDir, "run-dir", "", "where results go (default _output/runs/<id>)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "run against this existing cluster (it must run a kwok controller for lane nodes)")
	fs.BoolVar(&f.keepCluster, "keep-cluster", false, "leave the cluster running after the run, until gangbench cluster delete (a local one is held by a background gangbench process, as cluster create does)")
	fs.Float64Var(&f.scale, "timeout-scale", 1, "multiply every wait's timeout (slow machines)")
	fs.StringSliceVar(&f.runtimeCfg, "runtime-config", nil, "kube-apiserver runtime-config overrides, e.g. scheduling.k8s.io/v1beta1=false")
	fs.DurationVar(&f.deadline, "deadline", 45*time.Minute, "the whole run's deadline")
	fs.BoolVar(&f.upstream, "upstream", false, "also run upstream's own gang e2e specs (test/e2e/scheduling at the cluster's version, built and cached) after the suites, as suite \"upstream\", and with --features jobs its Job gang specs (test/e2e/apps/job.go) as suite \"upstream-jobs\"")
	fs.StringVar(&f.coverage, "scheduler-coverage", "", "build the scheduler of --k8s-version with coverage instrumentation, run the suites against it, and write its gang code's coverage into this directory (coverage.md, coverage.html, scheduler.coverprofile); providers whose scheduler is a local process only")
	safetyFlags(fs, &f.safety)
	cmd.AddCommand(newE2EListCmd(stdout))
	return cmd, &f
}

// complete fills in what only the parsed command knows.
func (f *e2eFlags) complete(cmd *cobra.Command, g *globalOpts) {
	if !cmd.Flags().Changed("name") {
		// Left to the suites (framework.ClusterRequest): a name unique to this run, so that it never
		// collides with a user's cluster "gangbench" or another run.
		f.cluster.name = ""
	}
	f.verbose = g.verbose
}

func newE2EListCmd(stdout io.Writer) *cobra.Command {
	var markdown bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List every assertion: ID, suite, statement, reference",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cat := framework.Catalogue(suites.All())
			if markdown {
				return writeAssertionDoc(stdout, cat)
			}
			for _, a := range cat {
				fmt.Fprintf(stdout, "%-8s %-13s %s  [%s]\n", a.ID, a.Suite, a.Statement, a.Ref)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&markdown, "markdown", false, "print the assertion reference as markdown (docs/assertions.md)")
	return cmd
}

// writeAssertionDoc renders docs/assertions.md; a test keeps the committed file in sync.
func writeAssertionDoc(w io.Writer, cat []framework.Assertion) error {
	fmt.Fprintln(w, "# Conformance assertions")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Generated by `gangbench e2e list --markdown` from the suites' code; do not edit by hand.")
	fmt.Fprintln(w, "References point into the shared `reference/gang-semantics-v1.37.md` (section and item of its list of")
	fmt.Fprintln(w, "testable assertions) and `reference/seed-experiments.md`.")
	suite := ""
	for _, a := range cat {
		if a.Suite != suite {
			suite = a.Suite
			fmt.Fprintf(w, "\n## %s\n\n| ID | statement | reference |\n|---|---|---|\n", suite)
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", a.ID, strings.ReplaceAll(a.Statement, "|", `\|`), a.Ref)
	}
	fmt.Fprintln(w, "\n## Differences in v1.36")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Against a v1.36 control plane (gang API `scheduling.k8s.io/v1alpha2`, which the harness converts to and")
	fmt.Fprintln(w, "from v1beta1) these assertions do not hold by design: a failure of one of them is reported as a skip that")
	fmt.Fprintln(w, "says so, and `gangbench compare` across v1.36 and v1.37 reports them as not comparable. Every other")
	fmt.Fprintln(w, "assertion is held to its v1.37 statement on v1.36 too. Source: `suites/versions.go`.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| ID | kind | why |\n|---|---|---|")
	for _, d := range suites.VersionDifferences() {
		kind := "behaviour differs"
		if d.NotExpressible {
			kind = "not expressible in v1alpha2"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", d.ID, kind, strings.ReplaceAll(d.Reason, "|", `\|`))
	}
	fmt.Fprintln(w, "\n## upstream")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "`gangbench e2e --upstream` also runs upstream's own gang specs (the `[FeatureGate:GenericWorkload]` specs of")
	fmt.Fprintln(w, "`k8s.io/kubernetes` `test/e2e/scheduling` at the cluster's version: GangScheduling, Workload,")
	fmt.Fprintln(w, "WorkloadAwarePreemption) on the same cluster after the suites. Each becomes an assertion `UPS-NN` of suite")
	fmt.Fprintln(w, "`upstream`, numbered in the order of the specs' names; their statements are upstream's spec names.")
	fmt.Fprintln(w, "Where the apiserver has `WorkloadWithJob` on (`--features jobs`), upstream's Job gang specs (`test/e2e/apps/job.go`,")
	fmt.Fprintln(w, "label `FeatureGate:WorkloadWithJob`) run after them as suite `upstream-jobs`, assertions `UPJ-NN`;")
	fmt.Fprintln(w, "where some node the Job's pods can land on is simulated, the spec that waits for its Job to complete is")
	fmt.Fprintln(w, "reported skipped, with that reason (kwok keeps pods Running).")
	ms, err := mutants.All(suites.SuiteNames())
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "\n## Proofs: deliberately wrong builds")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "`make test` (suites' `TestProofMutants`) builds each of these from the `k8s.io/kubernetes` source with a")
	fmt.Fprintln(w, "patch of a line or two (`suites/mutants/patches/`, cached by patch content) and runs, of the suite it is")
	fmt.Fprintln(w, "wrong for, the features that hold the assertions listed (the whole suite where the run-wide monitor")
	fmt.Fprintln(w, "STA-MON is one): those must fail (others may too). The builds report the version they were built from,")
	fmt.Fprintln(w, "so none is excused by a version-specific known issue.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "\"A or B\" is met when either fails (which step a wrong build trips first can depend on timing). Where")
	fmt.Fprintln(w, "upstream has specs about the behaviour, `make test-long` also runs upstream's gang specs against the build")
	fmt.Fprintln(w, "and reports whether they notice (a report, not a proof, so `make test` leaves it out).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| build | binary | suite | what it gets wrong | must fail | upstream's specs run (test-long) |\n|---|---|---|---|---|---|")
	for _, m := range ms {
		up := "no (no upstream spec about it)"
		if m.Upstream {
			up = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", m.Name, m.Patch.Binary, m.Suite, strings.ReplaceAll(m.Wrong, "|", `\|`),
			strings.ReplaceAll(strings.Join(m.CaughtBy, ", "), "|", " or "), up)
	}
	return nil
}

// moduleRoot finds the gangbench source tree the suites are compiled from.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("gangbench e2e compiles the suites with the Go toolchain, which did not answer: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("gangbench e2e must run inside the gangbench source tree (it compiles ./suites); run it from the repository, e.g. `make e2e`")
	}
	b, err := os.ReadFile(mod)
	if err != nil || !strings.Contains(string(b), "module github.com/gangbench/gangbench") {
		return "", fmt.Errorf("%s is not gangbench's go.mod; run gangbench e2e from the gangbench repository", mod)
	}
	return filepath.Dir(mod), nil
}

func runE2E(ctx context.Context, g *globalOpts, f *e2eFlags, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, f.deadline)
	defer cancel()
	if _, err := framework.Select(suites.All(), f.suites); err != nil {
		return usageError{err}
	}
	if f.kubeconfig != "" {
		if err := checkKubeconfig(f.kubeconfig, f.safety); err != nil {
			return err
		}
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return codedError{err, 4}
	}
	id := results.NewRunID(time.Now())
	runDir := f.runDir
	if runDir == "" {
		runDir = filepath.Join(root, "_output", "runs", id)
	}
	if f.coverage != "" {
		if err := prepareCoverage(ctx, f, stderr); err != nil {
			return err
		}
	}
	r, logPath, err := runSuites(ctx, f, root, runDir, id, stdout, stderr)
	if err != nil {
		return err
	}
	if f.coverage != "" && !r.Interrupted {
		// After the suite binary returned: the cluster is down and the scheduler wrote its last
		// counters on its way out.
		if err := writeCoverage(ctx, f.coverage, f.cluster.k8sVersion, stdout); err != nil {
			return codedError{fmt.Errorf("scheduler coverage: %w", err), 4}
		}
	}
	fmt.Fprintln(stdout)
	if err := writeE2EReport(stdout, r); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nresults: %s (run.json, junit.xml, summary.md, suites.log)\n", runDir)
	s := r.Summary()
	switch {
	case r.Interrupted:
		return codedError{fmt.Errorf("interrupted (%v) after %d assertion(s); partial results in %s", context.Cause(ctx), s.Total, runDir), exitFailures}
	case s.Errors > 0 && s.Passed == 0 && s.Failed == 0:
		return codedError{fmt.Errorf("the suites could not run; see %s", logPath), 4}
	case !s.OK() || r.Interrupted:
		return codedError{fmt.Errorf("%d of %d assertions failed", s.Failed+s.Errors, s.Total), exitFailures}
	}
	return nil
}

// runSuites runs the conformance suites once, as `gangbench e2e` does: it prints one line per
// assertion to live, writes run.json, junit.xml and summary.md into runDir, and returns the run.
// compare runs it once per scheduler.
func runSuites(ctx context.Context, f *e2eFlags, root, runDir, id string, live, stderr io.Writer) (*results.Run, string, error) {
	var spec clusters.Spec
	if err := f.refuseWithKubeconfig(); err != nil {
		return nil, "", err
	}
	if f.kubeconfig == "" {
		var err error
		if spec, err = f.cluster.spec(); err != nil {
			return nil, "", err
		}
	}
	started := time.Now()
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, "", codedError{err, 4}
	}
	runDir, _ = filepath.Abs(runDir)
	var req request.Request
	// caps are those of the provider that creates the cluster; none with --kubeconfig.
	var caps clusters.Capabilities
	if f.kubeconfig == "" {
		provider := f.cluster.resolveProvider(ctx, stderr)
		var err error
		if req, err = e2eRequest(f, provider, os.Getpid()); err != nil {
			return nil, "", err
		}
		p, err := providerOf(f.cluster.newProvider, req, request.Env{})
		if err != nil {
			return nil, "", usageError{err}
		}
		caps = p.Capabilities()
		if f.coverage != "" && !caps.SchedulerCoverage {
			return nil, "", usageError{fmt.Errorf("--scheduler-coverage: the %s provider's scheduler does not run as a process of this machine, so it cannot write coverage here (use --provider local)", caps.Provider)}
		}
		spec = req.Spec
		// The suite binary creates (or attaches to) the cluster of this file, and run.json records it.
		if err := req.Write(filepath.Join(runDir, request.FileName)); err != nil {
			return nil, "", codedError{err, 4}
		}
	}
	// An interrupt while building still leaves a run record, marked interrupted, like one during
	// the suites: a run directory without run.json reads as a crash.
	interruptedEarly := func() (*results.Run, string, error) {
		r := &results.Run{ID: id, Command: "e2e", Started: started, Finished: time.Now(), Interrupted: true}
		r.Environment = environmentOf(runDir, f, spec)
		if err := writeRunFiles(runDir, r); err != nil {
			return r, "", codedError{err, 4}
		}
		return r, "", nil
	}
	if caps.Creates && !caps.Images {
		// Built here, with progress on the terminal, rather than silently inside the test binary.
		if _, err := k8sbin.Ensure(ctx, spec.KubernetesVersion, f.cluster.binOptions(stderr)); err != nil {
			if ctx.Err() != nil {
				return interruptedEarly()
			}
			return nil, "", codedError{err, 4}
		}
	}
	if caps.Images && spec.SchedulerBinary != "" {
		// Checked here too: the suite binary's kind provider would refuse a binary that cannot run
		// in an image only after the suites have compiled.
		if _, err := schedimage.Inspect(ctx, spec.SchedulerBinary); err != nil {
			return nil, "", codedError{err, 4}
		}
	}
	if caps.Images {
		// Built (or reused) here, with its phases and times on the terminal: inside the suite binary a
		// cold build is half an hour of silence, and its failure reached only suites.log.
		if err := f.cluster.ensureNodeImage(ctx, root, stderr); err != nil {
			if ctx.Err() != nil {
				return interruptedEarly()
			}
			return nil, "", codedError{err, 4}
		}
	}
	var upstreamBin string
	if f.upstream {
		// The cluster's version when gangbench makes it; an existing cluster is taken to run the
		// default one.
		v := spec.KubernetesVersion
		var err error
		if upstreamBin, err = k8sbin.EnsureUpstreamE2E(ctx, v, f.cluster.binOptions(stderr)); err != nil {
			if ctx.Err() != nil {
				return interruptedEarly()
			}
			return nil, "", codedError{fmt.Errorf("upstream's e2e specs: %w", err), 4}
		}
	}
	bin := filepath.Join(root, "_output", "bin", "suites.test")
	fmt.Fprintln(stderr, "compiling the suites …")
	// An interrupted go command leaves its $GOTMPDIR/go-build* work directory behind, whether
	// killed or interrupted (golang/go#25808): every Ctrl-C during this build, or while `go tool`
	// started test2json below, left one in /tmp. So both get a work directory of ours, removed
	// whatever happens.
	work, err := os.MkdirTemp("", "gangbench-build-")
	if err != nil {
		return nil, "", codedError{err, 4}
	}
	defer os.RemoveAll(work)
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./suites")
	build.Dir = root
	build.Env = append(os.Environ(), "GOTMPDIR="+work)
	// Its own process group, killed as a whole on Ctrl-C: the compilers and the linker would
	// otherwise outlive the go command and keep writing into the directory being removed.
	build.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	build.Cancel = func() error { return syscall.Kill(-build.Process.Pid, syscall.SIGKILL) }
	build.WaitDelay = 10 * time.Second
	if out, err := build.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return interruptedEarly()
		}
		return nil, "", codedError{fmt.Errorf("compile suites: %w\n%s", err, out), 4}
	}

	if req.Held {
		// Created here, after the suites compiled, by a holder process that keeps it running after
		// this run (--keep-cluster on local; see createDetached): a cluster the suite binary
		// created would die with it. The suites attach to it by name and inject faults through the
		// holder.
		fmt.Fprintf(stderr, "creating cluster %q, kept after the run …\n", req.Spec.Name)
		if _, err := createDetached(ctx, &globalOpts{verbose: f.verbose, newProvider: f.cluster.newProvider}, req, stderr); err != nil {
			if ctx.Err() != nil {
				return interruptedEarly()
			}
			return nil, "", codedError{fmt.Errorf("create the kept cluster: %w", err), 4}
		}
	}
	args, selected := suitesArgs(f, bin, runDir, upstreamBin)
	// The selected suites' assertions: each appears in the run, with a skip reason if it never ran.
	fs, err := framework.Select(suites.All(), selected)
	if err != nil {
		return nil, "", usageError{err}
	}
	cat := framework.Catalogue(fs)
	// The version under test decides which failures are version differences (suites/versions.go);
	// the suite binary writes it to cluster.json before its first assertion.
	var kubeVersion string
	coll := framework.NewCollector(cat, func(c results.Case) {
		if kubeVersion == "" {
			kubeVersion = clusterInfoOf(runDir).Versions[string(clusters.APIServer)]
		}
		c = suites.ApplyVersionDifference(c, kubeVersion)
		fmt.Fprintln(live, results.FormatCaseLine(c))
		if c.Verdict != results.Pass {
			if d := results.FormatCaseDetail(c); d != "" {
				fmt.Fprintln(live, d)
			}
		}
	})
	logPath := filepath.Join(runDir, "suites.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, "", codedError{err, 4}
	}
	defer logf.Close()
	// Not CommandContext: on Ctrl-C the suite binary gets SIGINT and tears its cluster down itself;
	// killing it outright would leave that to Pdeathsig and the stale-state cleanup.
	run := exec.Command("go", args...)
	run.Dir = filepath.Join(root, "suites")
	run.Env = append(build.Env, f.env...)
	run.Stderr = io.MultiWriter(logf, prefixWriter{w: stderr})
	pipe, err := run.StdoutPipe()
	if err != nil {
		return nil, "", codedError{err, 4}
	}
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := run.Start(); err != nil {
		return nil, "", codedError{err, 4}
	}
	stopped := make(chan struct{})
	var interrupted atomic.Bool
	go func() {
		select {
		case <-ctx.Done():
			interrupted.Store(true)
			// The whole group: `go tool test2json` and the suite binary under it.
			_ = syscall.Kill(-run.Process.Pid, syscall.SIGINT)
		case <-stopped:
		}
	}()
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		fmt.Fprintln(logf, string(line))
		coll.Line(line)
	}
	waitErr := run.Wait()
	close(stopped)

	r := &results.Run{ID: id, Command: "e2e", Started: started, Finished: time.Now(), Interrupted: interrupted.Load(), Cases: coll.Cases()}
	if r.Interrupted {
		r.Cases = coll.PartialCases()
	}
	// Whether the suite binary's non-zero exit is explained by failed assertions, judged before
	// version differences turn expected failures into skips (the binary still exits non-zero for
	// those). test2json exits 1 whatever went wrong, so a panic or the test timeout is read from the
	// log: no assertion explains those.
	logText, _ := os.ReadFile(logPath)
	crashed := bytes.Contains(logText, []byte("panic: ")) || bytes.Contains(logText, []byte("test timed out after"))
	explained := !r.Summary().OK() && !crashed
	r.Environment = environmentOf(runDir, f, spec)
	// Assertions whose v1.37 statement does not hold by design on the version under test (v1.36)
	// are reported as such, not as failures.
	r.Cases = suites.ApplyVersionDifferences(r.Cases, r.Environment.KubernetesVersion)
	for _, mc := range monitorCases(runDir) {
		r.Cases = append(r.Cases, mc)
		fmt.Fprintln(live, results.FormatCaseLine(mc))
	}
	if waitErr != nil && !explained && r.Summary().OK() && !r.Interrupted {
		// The suite binary failed outside any assertion (cluster start, preflight, a crash, the
		// status monitor): that must not read as a pass.
		tail, _ := os.ReadFile(logPath)
		r.Cases = append(r.Cases, results.Case{ID: harnessCaseID, Suite: "harness", Name: "the suite binary ran to completion", Verdict: results.Error,
			Message: fmt.Sprintf("the suite binary: %v; the end of %s:\n%s", waitErr, logPath, suitesLogTail(tail, 30))})
	}
	if err := writeRunFiles(runDir, r); err != nil {
		return r, logPath, codedError{err, 4}
	}
	if req.Keep {
		printKept(live, runDir, req)
	}
	return r, logPath, nil
}

// suitesArgs is the command line of `go tool test2json` running the suite binary bin, and the
// suites it selects.
func suitesArgs(f *e2eFlags, bin, runDir, upstreamBin string) (args, selected []string) {
	args = []string{"tool", "test2json", "-t", bin, "-test.v=test2json", "-test.count=1", "-test.timeout=" + f.deadline.String(),
		"-run-dir", runDir, "-timeout-scale", fmt.Sprint(f.scale)}
	selected = f.suites
	if len(selected) == 0 {
		selected = suites.SuiteNames()
	}
	var tests []string
	for _, s := range selected {
		tests = append(tests, suites.TestFunc(s))
	}
	if upstreamBin != "" {
		tests = append(tests, "TestUpstream", "TestUpstreamJobs")
		args = append(args, "-upstream-binary", upstreamBin)
	}
	// Only the suites: the package's own proof tests start clusters of their own and belong to `make test`.
	args = append(args, "-test.run", "^("+strings.Join(tests, "|")+")$", "-suites", strings.Join(selected, ","))
	// The suite binary runs in suites/, where a path relative to the user's directory names another
	// file. Every cluster flag reaches it in the one request file, none flattened into its flags.
	if f.kubeconfig != "" {
		args = append(args, "-kubeconfig", absPath(f.kubeconfig))
	} else {
		args = append(args, "-cluster-request", filepath.Join(runDir, request.FileName))
	}
	return args, selected
}

// e2eRequest is the cluster request of an e2e run on provider: the cluster flags, the e2e-only
// ones (--runtime-config, --keep-cluster) and what the suites need (framework.ClusterRequest), so that
// the recorded request is the cluster created. pid names the cluster when --name is not given.
// It is validated here, once, by the provider's rules; the suites binary creates from it as it is.
func e2eRequest(f *e2eFlags, provider string, pid int) (request.Request, error) {
	req, err := f.cluster.requestShaped(provider, func(s *request.FlagShape, caps clusters.Capabilities) {
		*s = s.ForSuites(caps.RealKubelets)
		if f.upstream && !caps.RealKubelets && s.Nodes < 2 {
			// Upstream's preemption specs spread victims over two nodes; the lanes are gone by then.
			s.Nodes = 2
		}
	})
	if err != nil {
		return request.Request{}, err
	}
	if len(f.runtimeCfg) > 0 {
		// Over what --features asked for: the raw flag has the last word.
		if req.Spec.RuntimeConfig == nil {
			req.Spec.RuntimeConfig = map[string]string{}
		}
		for _, kv := range f.runtimeCfg {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return request.Request{}, usageError{fmt.Errorf("--runtime-config %q: want group/version=true|false", kv)}
			}
			req.Spec.RuntimeConfig[k] = v
		}
	}
	p, err := providerOf(f.cluster.newProvider, req, request.Env{})
	if err != nil {
		return request.Request{}, usageError{err}
	}
	caps := p.Capabilities()
	req.Keep = f.keepCluster
	// A cluster whose processes die with whoever started them is, when kept after the run, created
	// and held by a holder process instead (createDetached), which the suites attach to.
	req.Held = f.keepCluster && caps.NeedsHolder
	if req, err = framework.ClusterRequest(req, caps, pid); err != nil {
		return request.Request{}, usageError{err}
	}
	if err := validateRequest(f.cluster.newProvider, req); err != nil {
		return request.Request{}, err
	}
	return req, nil
}

// refuseWithKubeconfig refuses the flags that shape a cluster gangbench creates when the run uses
// an existing one: they would be ignored.
func (f *e2eFlags) refuseWithKubeconfig() error {
	if f.kubeconfig == "" {
		return nil
	}
	if len(f.runtimeCfg) > 0 || f.keepCluster {
		return usageError{fmt.Errorf("--runtime-config and --keep-cluster apply to a cluster gangbench creates; with --kubeconfig %s the cluster is used as it is", f.kubeconfig)}
	}
	return f.cluster.refuseWithKubeconfig(f.kubeconfig, clusterShaping)
}

// printKept tells how to reach a cluster kept after the run, and how to remove it.
func printKept(w io.Writer, runDir string, req request.Request) {
	name := req.Spec.Name
	fmt.Fprintf(w, "\nthe %s cluster %q keeps running:\n", req.Provider, name)
	if kc := clusterInfoOf(runDir).Kubeconfig; kc != "" {
		fmt.Fprintf(w, "  export KUBECONFIG=%s\n", kc)
	}
	fmt.Fprintf(w, "  export KUBECONFIG=$(gangbench cluster kubeconfig --name %s)\n", name)
	fmt.Fprintf(w, "  delete: gangbench cluster delete --name %s\n", name)
}

// absPath is p made absolute against the working directory (p itself if that fails).
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// prefixWriter marks the suite binary's own stderr (cluster start, preflight) so users can tell it
// from gangbench's output.
type prefixWriter struct{ w io.Writer }

func (p prefixWriter) Write(b []byte) (int, error) {
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if l != "" {
			fmt.Fprint(p.w, "  | "+l)
		}
	}
	return len(b), nil
}

func environmentOf(runDir string, f *e2eFlags, spec clusters.Spec) results.Environment {
	env := results.Environment{Host: results.CurrentHost(), SchedulerBinary: f.cluster.schedulerBin, Nodes: spec.Nodes, GPUsPerNode: spec.GPU.Count}
	// With node groups (real kubelets beside simulated nodes) the GPU nodes are counted over the
	// groups and the GPUs per node are the first GPU group's.
	for _, g := range spec.NodeGroups {
		if g.GPUs != nil {
			env.Nodes += g.Count
			if env.GPUsPerNode == 0 {
				env.GPUsPerNode = g.GPUs.Inventory.Count
			}
		}
	}
	info := clusterInfoOf(runDir)
	env.Provider = info.Provider
	env.KubernetesVersion = info.Versions[string(clusters.APIServer)]
	env.SchedulerVersion = info.Versions[string(clusters.Scheduler)]
	env.GangAPI = info.GangAPI
	env.ClusterName = info.Name
	if info.Nodes > 0 {
		env.Nodes = info.Nodes // what was created (on kind: workers plus kwok nodes)
	}
	if len(f.cluster.schedGates) > 0 || len(f.runtimeCfg) > 0 {
		env.Extra = map[string]string{"schedulerFeatureGates": strings.Join(f.cluster.schedGates, ","), "runtimeConfig": strings.Join(f.runtimeCfg, ",")}
	}
	// The request the cluster was created from, written by runSuites before the suites started;
	// none for --kubeconfig, whose gates gangbench does not know.
	b, err := os.ReadFile(filepath.Join(runDir, request.FileName))
	if err != nil {
		return env
	}
	req, err := request.Decode(bytes.NewReader(b))
	if err != nil {
		return env
	}
	if env.ClusterName == "" {
		env.ClusterName = req.Spec.Name
	}
	if env.Nodes == 0 {
		env.Nodes = clusters.GPUNodes(req.Spec.Groups())
	}
	env.FeatureGates, env.ComponentFeatureGates = effectiveGates(req.Spec)
	var compact bytes.Buffer
	if json.Compact(&compact, b) == nil {
		env.ClusterRequest = compact.Bytes()
	}
	return env
}

// effectiveGates are the feature gates of a spec as the providers apply them: the gang defaults of
// the version, the cluster-wide gates over them, and each component's own over those.
func effectiveGates(spec clusters.Spec) (all map[string]string, perComponent map[string]map[string]string) {
	base := clusters.GangFeatureGates(spec.KubernetesVersion)
	maps.Copy(base, spec.FeatureGates)
	str := func(g map[string]bool) map[string]string {
		out := map[string]string{}
		for k, v := range g {
			out[k] = strconv.FormatBool(v)
		}
		return out
	}
	perComponent = map[string]map[string]string{}
	for _, c := range []clusters.Component{clusters.APIServer, clusters.ControllerManager, clusters.Scheduler} {
		g := maps.Clone(base)
		maps.Copy(g, spec.ComponentFeatureGates[c])
		perComponent[string(c)] = str(g)
	}
	return str(base), perComponent
}

// clusterInfo is what the suite binary records in cluster.json about the cluster it ran against.
type clusterInfo struct {
	Name       string            `json:"name"`
	Kubeconfig string            `json:"kubeconfig"`
	Nodes      int               `json:"nodes"`
	Provider   string            `json:"provider"`
	Versions   map[string]string `json:"versions"`
	GangAPI    string            `json:"gangAPI"`
}

// clusterInfoOf reads cluster.json; a missing or unreadable file gives the zero value, which every
// caller treats as "unknown".
func clusterInfoOf(runDir string) clusterInfo {
	var info clusterInfo
	if b, err := os.ReadFile(filepath.Join(runDir, "cluster.json")); err == nil {
		_ = json.Unmarshal(b, &info)
	}
	return info
}

// monitorCases turn the run-wide status monitor's report into an assertion of its own, plus a
// skipped case naming any known scheduler issue it saw (found, reported, not failed).
func monitorCases(runDir string) []results.Case {
	b, err := os.ReadFile(filepath.Join(runDir, "monitor.json"))
	if err != nil {
		return nil
	}
	var rep framework.MonitorReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return []results.Case{{ID: "STA-MON", Suite: "status", Name: "PodGroup status monitor report readable", Verdict: results.Error, Message: err.Error()}}
	}
	c := results.Case{
		ID: "STA-MON", Suite: "status", Verdict: results.Pass, Ref: "gang-semantics §4",
		Name:         "no PodGroup's PodGroupInitiallyScheduled ever returned from True to False, across the whole run",
		Measurements: map[string]float64{"podGroupsWatched": float64(rep.PodGroups), "transitions": float64(len(rep.Transitions))},
		Artifacts:    []string{"monitor.json"},
	}
	if len(rep.Violations) > 0 {
		c.Verdict = results.Fail
		c.Message = strings.Join(rep.Violations, "\n")
	}
	out := []results.Case{c}
	if len(rep.Known) > 0 {
		out = append(out, results.Case{ID: "STA-KNOWN", Suite: "status", Ref: "gang-semantics §4", Verdict: results.Skip,
			Name:    "status regressions matching a known issue of this scheduler version (reported, not failed)",
			Message: strings.Join(rep.Known, "\n")})
	}
	return out
}

func writeRunFiles(dir string, r *results.Run) error {
	if err := results.Write(dir, r); err != nil {
		return err
	}
	for name, fn := range map[string]func(io.Writer, *results.Run) error{"junit.xml": results.WriteJUnit, "summary.md": results.WriteMarkdown} {
		var b strings.Builder
		if err := fn(&b, r); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
