package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/perf"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/results"
)

type perfReferenceFlags struct {
	scenarios  []string
	k8sVersion string
	cacheDir   string
	logPath    string
	against    string
	profileDir string
}

func newPerfReferenceCmd(g *globalOpts, stdout, stderr io.Writer) *cobra.Command {
	var f perfReferenceFlags
	cmd := &cobra.Command{
		Use:   "reference",
		Short: "Run the upstream scheduler_perf workload a scenario reproduces, in-process, as the yardstick",
		Long: `Build upstream scheduler_perf's test binary for the Kubernetes version (cached by version and
package) and run the workload each scenario names under reference.schedulerPerf, on this machine:
scheduler, apiserver and etcd in one process, nodes that are API objects only. It prints
scheduler_perf's SchedulingThroughput, the podgroup attempt and algorithm durations, and the CPU its
process tree spent per pod bound; with --against RUN_DIR, gangbench's figures of the same scenarios
in that run and the ratios. 'perf run --reference' does both in one go, with a reference run right
before and right after its own measurement.`,
		Example: `  gangbench perf reference --scenario upstream-1000gangs-3pods
  gangbench perf reference --scenario upstream-3gangs-1000pods --against _output/runs/<id>`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPerfReference(cmd.Context(), g, &f, stdout, stderr)
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&f.scenarios, "scenario", nil, "scenarios whose reference workload to run (default: every shipped scenario that names one)")
	fs.StringVar(&f.k8sVersion, "k8s-version", clusters.DefaultKubernetesVersion, "Kubernetes version whose scheduler_perf to build and run")
	fs.StringVar(&f.cacheDir, "cache-dir", "", "binary cache (default $"+k8sbin.CacheDirEnv+" or ~/.cache/gangbench/bin)")
	fs.StringVar(&f.logPath, "log", "", "write scheduler_perf's output to this file")
	fs.StringVar(&f.profileDir, "cpu-profile-dir", "", "write a Go CPU profile of each benchmark's whole process (scheduler, apiserver and its setup: creating the nodes) here as reference-SCENARIO.pprof, for go tool pprof")
	fs.StringVar(&f.against, "against", "", "a finished perf run directory: print its figures of the same scenarios and the ratios")
	return cmd
}

func runPerfReference(ctx context.Context, g *globalOpts, f *perfReferenceFlags, stdout, stderr io.Writer) error {
	var scs []*scenario.Scenario
	var err error
	if len(f.scenarios) > 0 {
		scs, _, err = perf.LoadScenarios(perf.Selection{Refs: f.scenarios}, scenario.Options{})
	} else {
		scs, _, err = perf.LoadScenarios(perf.Selection{Labels: []string{"upstream"}}, scenario.Options{})
	}
	if err != nil {
		return usageError{err}
	}
	for _, sc := range scs {
		if sc.Reference == nil {
			return usageError{fmt.Errorf("%s: scenario %s names no reference.schedulerPerf workload", sc.File, sc.Name)}
		}
	}
	var against *results.Run
	if f.against != "" {
		if against, err = results.Read(f.against); err != nil {
			return usageError{err}
		}
	}
	var log io.Writer
	if f.logPath != "" {
		lf, err := os.Create(f.logPath)
		if err != nil {
			return usageError{err}
		}
		defer lf.Close()
		log = lf
	}
	if f.profileDir != "" {
		if f.profileDir, err = filepath.Abs(f.profileDir); err == nil {
			err = os.MkdirAll(f.profileDir, 0o755)
		}
		if err != nil {
			return usageError{fmt.Errorf("--cpu-profile-dir: %w", err)}
		}
	}
	refs, err := runReferences(ctx, scs, f.k8sVersion, k8sbin.Options{CacheDir: f.cacheDir, Progress: stderr}, log, stderr, f.profileDir)
	if err != nil {
		return codedError{err, exitError}
	}
	for _, sc := range scs {
		fmt.Fprintln(stdout, perf.ReferenceLine(sc.Name, refs[sc.Name]))
		if against != nil {
			for _, l := range perf.RatioLines(against, sc.Name, refs[sc.Name]) {
				fmt.Fprintln(stdout, "  "+l)
			}
		}
	}
	return nil
}

// runReferences builds what the references need (etcd, scheduler_perf per package) and runs each
// scenario's workload, in order; scenarios naming the same workload share one run. profileDir,
// when set, receives a CPU profile of each benchmark run.
func runReferences(ctx context.Context, scs []*scenario.Scenario, version string, opts k8sbin.Options, log, stderr io.Writer, profileDir string) (map[string]*perf.ReferenceResult, error) {
	set, err := k8sbin.Ensure(ctx, version, opts)
	if err != nil {
		return nil, err
	}
	out := map[string]*perf.ReferenceResult{}
	byBench := map[string]*perf.ReferenceResult{}
	for _, sc := range scs {
		if sc.Reference == nil {
			continue
		}
		r := *sc.Reference
		if res, ok := byBench[r.Package+"|"+r.Config+"|"+r.Benchmark()]; ok {
			out[sc.Name] = res
			continue
		}
		dir, err := k8sbin.EnsureSchedulerPerf(ctx, version, r.Package, opts)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "reference: running scheduler_perf %s (%s, %s) in %s\n", r.Benchmark(), r.Package, version, filepath.Base(dir))
		ro := perf.ReferenceOptions{Dir: dir, Etcd: set.Etcd, Reference: r, Log: log}
		if profileDir != "" {
			ro.CPUProfile = filepath.Join(profileDir, "reference-"+sc.Name+".pprof")
			fmt.Fprintf(stderr, "reference: CPU profile of the whole benchmark process: %s (go tool pprof -top %s)\n", ro.CPUProfile, ro.CPUProfile)
		}
		res, err := perf.RunReference(ctx, ro)
		if err != nil {
			return nil, err
		}
		if res == nil {
			return nil, errors.New("reference: no result")
		}
		byBench[r.Package+"|"+r.Config+"|"+r.Benchmark()] = res
		out[sc.Name] = res
	}
	return out, nil
}
