package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/request"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/results/compare"
	"github.com/gangbench/gangbench/results/report"
	"github.com/gangbench/gangbench/suites"
)

// exitRegression is the CI gate's code: a significant regression or an assertion that went from pass
// to fail (the same code as an SLO violation: "the scheduler got worse").
const exitRegression = 3

// compareSide is one scheduler under comparison.
type compareSide struct {
	name      string // "old" or "new"
	version   string // Kubernetes version of the whole control plane
	binary    string // scheduler binary, "" = the built one of version
	image     string // kind: scheduler image
	gates     []string
	label     string
	runDirs   []string // offline: existing result directories
	perfRuns  []*results.Run
	e2eRuns   []*results.Run
	perfDirs  []string
	timeline  []report.TimePoint
	latencies []float64
}

type compareFlags struct {
	cluster          clusterFlags
	old, new         compareSide
	repetitions      int
	scenarios        []string
	suites           []string
	noConformance    bool
	noPerf           bool
	runDir           string
	minEffect        float64
	alpha            float64
	failOnRegression bool
	gateMetrics      []string
	deadline         time.Duration
	conformanceRep   int
	profile          string
}

func newCompareCmd(g *globalOpts, stdout, stderr io.Writer) *cobra.Command {
	cmd, _ := compareCommand(g, stdout, stderr)
	return cmd
}

// compareCommand is newCompareCmd with the flags it parses into, for tests.
func compareCommand(g *globalOpts, stdout, stderr io.Writer) (*cobra.Command, *compareFlags) {
	var f compareFlags
	f.old.name, f.new.name = "old", "new"
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Compare two schedulers: conformance diff and binding-rate statistics, interleaved on one machine",
		Long: `Run the same perf scenarios (and the conformance suites) against two schedulers on this machine,
repetitions interleaved (old, new, new, old, …) so machine noise and drift hit both alike, and report per metric
whether the new scheduler is faster, slower or not significantly different (median ratio with its
confidence interval and a Mann-Whitney p-value, via golang.org/x/perf/benchmath; a change is reported
only when significant and at least --min-effect), plus the assertions that changed verdict.

Sides are released versions (--old-version/--new-version: the whole control plane of that version,
built from source), scheduler binaries (--old-scheduler-binary/--new-scheduler-binary: a fork or a PR
build on the same control plane), or finished result directories (--old-runs/--new-runs: no cluster).
Writes compare.md, compare.json and compare.html (self-contained, with plots) into the run directory.`,
		Example: `  gangbench compare --old-version v1.37.1 --new-version v1.37.2
  gangbench compare --old-scheduler-binary ./base --new-scheduler-binary ./pr --fail-on-regression
  gangbench compare --old-runs _output/runs/a1,_output/runs/a2 --new-runs _output/runs/b1,_output/runs/b2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCompare(cmd.Context(), g, &f, stdout, stderr)
		},
	}
	f.cluster.register(cmd, g, 0)
	fs := cmd.Flags()
	for _, s := range []*compareSide{&f.old, &f.new} {
		fs.StringVar(&s.version, s.name+"-version", clusters.DefaultKubernetesVersion, s.name+" side: Kubernetes version of the control plane")
		fs.StringVar(&s.binary, s.name+"-scheduler-binary", "", s.name+" side: kube-scheduler binary")
		fs.StringVar(&s.image, s.name+"-scheduler-image", "", s.name+" side (kind): kube-scheduler image")
		fs.StringSliceVar(&s.gates, s.name+"-scheduler-feature-gates", nil, s.name+" side: scheduler feature gates, e.g. GenericWorkload=false")
		fs.StringVar(&s.label, s.name+"-label", "", s.name+" side: label in reports (default: version or binary)")
		fs.StringSliceVar(&s.runDirs, s.name+"-runs", nil, s.name+" side: compare these finished run directories instead of running")
	}
	fs.IntVar(&f.repetitions, "repetitions", 6, "perf repetitions per side, interleaved (6 is the fewest for a 95% confidence interval of a median)")
	fs.IntVar(&f.conformanceRep, "conformance-repetitions", 1, "conformance runs per side")
	fs.StringVar(&f.profile, "profile", perf.ProfileQuiet, "perf clusters' load beside the scheduler, as in 'perf run --profile': quiet or realistic (both sides alike)")
	fs.StringSliceVar(&f.scenarios, "scenario", []string{"smoke"}, "perf scenarios (names from `gangbench perf list`, or files)")
	fs.StringSliceVar(&f.suites, "suites", nil, "conformance suites (default all)")
	fs.BoolVar(&f.noConformance, "no-conformance", false, "skip the conformance suites")
	fs.BoolVar(&f.noPerf, "no-perf", false, "skip the perf scenarios")
	fs.StringVar(&f.runDir, "run-dir", "", "where results go (default _output/runs/<id>)")
	fs.Float64Var(&f.minEffect, "min-effect", compare.DefaultMinEffect, "smallest relative change reported (0.05 = 5%)")
	fs.Float64Var(&f.alpha, "alpha", compare.DefaultAlpha, "significance level")
	fs.BoolVar(&f.failOnRegression, "fail-on-regression", false, "exit 3 when a gate metric regresses significantly or an assertion goes from pass to fail")
	fs.StringSliceVar(&f.gateMetrics, "gate-metrics", compare.DefaultGateMetrics(), "metrics whose significant regression sets the regression flag (every metric is still tested and reported); * for all")
	fs.DurationVar(&f.deadline, "deadline", 3*time.Hour, "the whole comparison's deadline")
	return cmd, &f
}

func (s *compareSide) describe() string {
	if s.label != "" {
		return s.label
	}
	parts := []string{s.name}
	switch {
	case len(s.runDirs) > 0:
		parts = append(parts, fmt.Sprintf("(%d runs)", len(s.runDirs)))
	case s.binary != "":
		parts = append(parts, filepath.Base(s.binary))
	case s.image != "":
		parts = append(parts, s.image)
	default:
		parts = append(parts, s.version)
	}
	if len(s.gates) > 0 {
		parts = append(parts, strings.Join(s.gates, ","))
	}
	return strings.Join(parts, " ")
}

// sideFlags are the cluster flags of one side: the shared ones with that side's scheduler.
func (f *compareFlags) sideFlags(s *compareSide) clusterFlags {
	c := f.cluster
	c.k8sVersion = s.version
	c.schedulerBin = s.binary
	c.schedulerImage = s.image
	c.schedGates = s.gates
	c.name = fmt.Sprintf("cmp-%s-%d", s.name, os.Getpid())
	return c
}

// conformanceFlags are the e2e flags of one side's conformance run.
func (f *compareFlags) conformanceFlags(s *compareSide) e2eFlags {
	cf := f.sideFlags(s)
	// Suites bring their own lane nodes (framework.ClusterRequest); --nodes sizes the perf clusters.
	cf.nodes = 0
	return e2eFlags{cluster: cf, suites: f.suites, scale: 1, deadline: time.Hour}
}

// perfRequest is the cluster request one side's perf clusters start from; each scenario sets the
// node count.
func (f *compareFlags) perfRequest(s *compareSide, provider string) (request.Request, error) {
	cf := f.sideFlags(s)
	cf.provider = provider
	req, err := cf.scenarioBaseRequest(provider, f.profile)
	if err != nil {
		return request.Request{}, err
	}
	req.Spec.ReadyTimeout = 0 // the source scales it with the node count
	return req, nil
}

func runCompare(ctx context.Context, g *globalOpts, f *compareFlags, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, f.deadline)
	defer cancel()
	offline := len(f.old.runDirs) > 0 || len(f.new.runDirs) > 0
	if offline && (len(f.old.runDirs) == 0 || len(f.new.runDirs) == 0) {
		return usageError{errors.New("--old-runs and --new-runs go together")}
	}
	if !slices.Contains(perf.Profiles(), f.profile) {
		return usageError{fmt.Errorf("--profile %q: accepted: %s", f.profile, strings.Join(perf.Profiles(), ", "))}
	}
	if f.repetitions < 1 || f.conformanceRep < 0 {
		return usageError{fmt.Errorf("--repetitions %d / --conformance-repetitions %d: want at least 1 / 0", f.repetitions, f.conformanceRep)}
	}
	for _, s := range []*compareSide{&f.old, &f.new} {
		if s.binary != "" && s.image != "" {
			return usageError{fmt.Errorf("--%[1]s-scheduler-binary and --%[1]s-scheduler-image both give the %[1]s scheduler; give one", s.name)}
		}
		if err := k8sbin.ValidateKubeVersion(s.version); err != nil {
			return usageError{fmt.Errorf("--%s-version: %w", s.name, err)}
		}
		if clusters.MinorOf(s.version) < clusters.GangMinMinor {
			return usageError{fmt.Errorf("--%s-version %s: gangbench speaks gang scheduling from v1.%d on (scheduling.k8s.io/v1alpha2 on v1.36, v1beta1 from v1.37)", s.name, s.version, clusters.GangMinMinor)}
		}
	}
	started := time.Now()
	id := results.NewRunID(started)
	root, _ := moduleRoot(ctx)
	runDir := f.runDir
	if runDir == "" {
		base := "."
		if root != "" {
			base = root
		}
		runDir = filepath.Join(base, "_output", "runs", id)
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return codedError{err, exitError}
	}
	runDir, _ = filepath.Abs(runDir)

	if offline {
		for _, s := range []*compareSide{&f.old, &f.new} {
			for _, d := range s.runDirs {
				r, err := results.Read(d)
				if err != nil {
					return codedError{fmt.Errorf("--%s-runs: %w", s.name, err), exitError}
				}
				if len(r.DataItems) > 0 {
					s.perfRuns = append(s.perfRuns, r)
					s.perfDirs = append(s.perfDirs, d)
				} else {
					s.e2eRuns = append(s.e2eRuns, r)
				}
			}
		}
	} else if err := f.runBoth(ctx, g, root, runDir, stdout, stderr); err != nil {
		return err
	}
	return f.reportComparison(runDir, stdout)
}

// runBoth runs both sides: conformance once per side, perf repetitions interleaved.
func (f *compareFlags) runBoth(ctx context.Context, g *globalOpts, root, runDir string, stdout, stderr io.Writer) error {
	sides := []*compareSide{&f.old, &f.new}
	if !f.noConformance {
		if root == "" {
			return codedError{errors.New("the conformance part of compare compiles ./suites: run it from the gangbench repository, or pass --no-conformance"), 4}
		}
		for rep := 1; rep <= f.conformanceRep; rep++ {
			for _, s := range sides {
				fmt.Fprintf(stdout, "== conformance, %s (%d/%d)\n", s.describe(), rep, f.conformanceRep)
				ef := f.conformanceFlags(s)
				dir := filepath.Join(runDir, s.name, fmt.Sprintf("e2e-%d", rep))
				r, _, err := runSuites(ctx, &ef, root, dir, results.NewRunID(time.Now()), io.Discard, stderr)
				if err != nil {
					return err
				}
				sum := r.Summary()
				fmt.Fprintf(stdout, "   passed %d, failed %d, skipped %d, errors %d\n", sum.Passed, sum.Failed, sum.Skipped, sum.Errors)
				s.e2eRuns = append(s.e2eRuns, r)
			}
		}
	}
	if f.noPerf {
		return nil
	}
	opts := scenario.Options{Nodes: f.cluster.nodes}
	scs, _, err := perf.LoadScenarios(perf.Selection{Refs: f.scenarios}, opts)
	if err != nil {
		return usageError{err}
	}
	sources := map[*compareSide]perf.ClusterSource{}
	// Both sides run on one provider, asked once: a comparison across providers measures them.
	provider := f.cluster.resolveProvider(ctx, stderr)
	for _, s := range sides {
		cf := f.sideFlags(s)
		cf.provider = provider
		req, err := f.perfRequest(s, provider)
		if err != nil {
			return err
		}
		spec := req.Spec
		if _, err := k8sbin.Ensure(ctx, spec.KubernetesVersion, req.Binaries(stderr)); err != nil {
			return codedError{err, exitError}
		}
		p, err := providerOf(g.newProvider, req, request.Env{Progress: stderr})
		if err != nil {
			return codedError{err, exitError}
		}
		if p.Capabilities().RealKubelets && cf.kwokNodes != 0 {
			return usageError{errors.New("--kwok-nodes: compare derives the kwok nodes from each scenario's node count minus --workers")}
		}
		sources[s] = &perf.ProviderSource{Provider: p, Base: spec, Workers: cf.workers}
	}
	for rep := 1; rep <= f.repetitions; rep++ {
		for _, s := range pairOrder(sides, rep) {
			fmt.Fprintf(stdout, "== perf, %s (%d/%d)\n", s.describe(), rep, f.repetitions)
			dir := filepath.Join(runDir, s.name, fmt.Sprintf("perf-%d", rep))
			r, err := perf.Run(ctx, perf.Options{Scenarios: scs, Source: sources[s], RunDir: dir, Command: "compare", SchedulerBinary: s.binary, Log: g.logger(io.Discard), Profile: f.profile})
			if err != nil {
				return codedError{fmt.Errorf("%s side, repetition %d: %w", s.name, rep, err), exitError}
			}
			for _, line := range perf.BenchLines(r) {
				fmt.Fprintln(stdout, "  ", line)
			}
			s.perfRuns = append(s.perfRuns, r)
			s.perfDirs = append(s.perfDirs, dir)
		}
	}
	return nil
}

// pairOrder is the order of the sides in repetition rep: old then new in odd repetitions, new then
// old in even ones (old, new, new, old, …). Run always in one order, one side would always start
// right after the other's cluster was torn down, and always end before the other's next start; a
// self-comparison of six plain pairs once put every new-side gang-latency p99 above every old one.
// Alternating gives each side each position equally often, and cancels a linear drift of the machine.
func pairOrder(sides []*compareSide, rep int) []*compareSide {
	if rep%2 == 1 {
		return sides
	}
	return []*compareSide{sides[1], sides[0]}
}

// ranVersion is the Kubernetes version a side's runs recorded (the control plane's --version),
// falling back to the requested one.
func (s *compareSide) ranVersion() string {
	for _, r := range slices.Concat(s.e2eRuns, s.perfRuns) {
		if v := r.Environment.KubernetesVersion; v != "" {
			return v
		}
	}
	return s.version
}

// reportComparison computes the verdicts and writes compare.{md,json,html}.
func (f *compareFlags) reportComparison(runDir string, stdout io.Writer) error {
	var sides [2]compare.Side
	for i, s := range []*compareSide{&f.old, &f.new} {
		sides[i] = compare.Side{Label: s.describe(), Runs: slices.Concat(s.e2eRuns, schedulerFigures(s.perfRuns))}
		s.timeline, s.latencies = plotData(s.perfDirs)
	}
	// Across minor versions (v1.36 vs v1.37) some assertions state what only one of them does.
	notComparable := suites.NotComparable(f.old.ranVersion(), f.new.ranVersion())
	metricDiffs := measure.MetricDifferences(clusters.MinorOf(f.old.ranVersion()), clusters.MinorOf(f.new.ranVersion()))
	rep, err := compare.Compare(sides[0], sides[1], compare.Options{Alpha: f.alpha, MinEffect: f.minEffect,
		NotComparable: notComparable, NotComparableMetrics: metricDiffs, GateMetrics: f.gateMetrics})
	if err != nil {
		return codedError{err, exitError}
	}
	page := report.Page{
		Title: "gangbench compare: " + sides[0].Label + " vs " + sides[1].Label, Compare: rep,
		Runs:      slices.Concat(sides[0].Runs, sides[1].Runs),
		Timelines: map[string][]report.TimePoint{}, Latencies: map[string][]float64{},
	}
	for _, s := range []*compareSide{&f.old, &f.new} {
		if len(s.timeline) > 0 {
			page.Timelines[s.describe()] = s.timeline
		}
		if len(s.latencies) > 0 {
			page.Latencies[s.describe()] = s.latencies
		}
	}
	files := map[string]func(io.Writer) error{
		"compare.md":   func(w io.Writer) error { return report.WriteCompareMarkdown(w, rep) },
		"compare.json": func(w io.Writer) error { return report.WriteCompareJSON(w, rep) },
		"compare.html": func(w io.Writer) error { return report.WriteHTML(w, page) },
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fh, err := os.Create(filepath.Join(runDir, n))
		if err != nil {
			return codedError{err, exitError}
		}
		werr := files[n](fh)
		if cerr := fh.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return codedError{fmt.Errorf("write %s: %w", n, werr), exitError}
		}
	}
	fmt.Fprintln(stdout)
	if err := report.WriteCompareText(stdout, rep); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nresults: %s (compare.md, compare.json, compare.html; each side's runs under old/ and new/)\n", runDir)
	if f.failOnRegression && rep.Regressed {
		return codedError{errors.New("the new scheduler regressed (see above)"), exitRegression}
	}
	return nil
}

// schedulerFigures drops the data items that describe the harness, not the scheduler (the load
// generator's achieved rate, harness diagnostics, the apiserver's traffic by kind, the components'
// Go runtime): a "regression" there says nothing about the scheduler, and every extra metric is one
// more chance of a false positive at the chosen alpha.
func schedulerFigures(runs []*results.Run) []*results.Run {
	out := make([]*results.Run, 0, len(runs))
	for _, r := range runs {
		c := *r
		c.DataItems = slices.DeleteFunc(slices.Clone(r.DataItems), func(d results.DataItem) bool {
			switch d.Name {
			case measure.ItemCreationRate, perf.ItemHarness, perf.ItemQuietWait, measure.ItemAPIRequests, measure.ItemAPIErrors, measure.ItemWatchEvents, measure.ItemWatches, measure.ItemGoRuntime:
				return true
			}
			return false
		})
		out = append(out, &c)
	}
	return out
}

// plotData reads the bind timelines of a side's perf runs: the binding-rate timeline of its first
// run (pods bound per second since the first pod was created) and every gang's latency.
func plotData(dirs []string) ([]report.TimePoint, []float64) {
	var points []report.TimePoint
	var lat []float64
	for i, d := range dirs {
		fh, err := os.Open(filepath.Join(d, perf.EventsFile))
		if err != nil {
			continue
		}
		events, err := timeline.ReadJSONL(fh)
		fh.Close()
		if err != nil {
			continue
		}
		var phases []string
		for _, e := range events {
			if e.Phase != "" && !slices.Contains(phases, e.Phase) {
				phases = append(phases, e.Phase)
			}
		}
		for _, g := range measure.Groups(events, phases) {
			if g.Complete() {
				lat = append(lat, g.Latency().Seconds())
			}
		}
		if i == 0 {
			points = bindTimeline(events)
		}
	}
	return points, lat
}

func bindTimeline(events []timeline.Event) []report.TimePoint {
	var start time.Time
	perSec := map[int]float64{}
	last := 0
	for _, e := range timeline.Sorted(events) {
		if start.IsZero() && e.Kind == timeline.PodCreated {
			start = e.Time
		}
		if e.Kind == timeline.PodBound && !start.IsZero() {
			s := int(e.Time.Sub(start).Seconds())
			perSec[s]++
			last = max(last, s)
		}
	}
	if start.IsZero() {
		return nil
	}
	out := make([]report.TimePoint, 0, last+1)
	for s := 0; s <= last; s++ {
		out = append(out, report.TimePoint{T: float64(s), V: perSec[s]})
	}
	return out
}
