package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/results/coverage"
)

// coverageRaw is where the instrumented scheduler writes its counter files (GOCOVERDIR).
const coverageRaw = "raw"

// prepareCoverage builds the scheduler of --k8s-version with coverage instrumentation (cached by
// content, like the mutants) and makes it the scheduler under test, with GOCOVERDIR in the suite
// binary's environment for the cluster's scheduler process to inherit. A binary or image the user
// gives cannot be instrumented after the fact, so those are refused.
func prepareCoverage(ctx context.Context, f *e2eFlags, stderr io.Writer) error {
	switch {
	case f.cluster.schedulerBin != "":
		return usageError{fmt.Errorf("--scheduler-coverage %s with --scheduler-binary %s: gangbench instruments the scheduler it builds from --k8s-version; a given binary cannot be", f.coverage, f.cluster.schedulerBin)}
	case f.cluster.schedulerImage != "":
		return usageError{fmt.Errorf("--scheduler-coverage %s with --scheduler-image %s: only a scheduler gangbench builds can be instrumented", f.coverage, f.cluster.schedulerImage)}
	case f.kubeconfig != "":
		return usageError{fmt.Errorf("--scheduler-coverage %s with --kubeconfig: the scheduler of an existing cluster is not gangbench's to instrument", f.coverage)}
	}
	dir, err := filepath.Abs(f.coverage)
	if err != nil {
		return usageError{err}
	}
	raw := filepath.Join(dir, coverageRaw)
	// Counters of an earlier run would be merged into this one's.
	if err := os.RemoveAll(raw); err != nil {
		return codedError{err, 4}
	}
	if err := os.MkdirAll(raw, 0o755); err != nil {
		return codedError{err, 4}
	}
	bin, err := k8sbin.EnsurePatched(ctx, f.cluster.k8sVersion, k8sbin.SchedulerCoveragePatch(), f.cluster.binOptions(stderr))
	if err != nil {
		return codedError{err, 4}
	}
	f.coverage = dir
	f.cluster.schedulerBin = bin
	f.env = append(f.env, "GOCOVERDIR="+raw)
	return nil
}

// writeCoverage merges the counter files into dir/scheduler.coverprofile and writes the gang code's
// coverage as dir/coverage.md and dir/coverage.html, read against the module source of version.
func writeCoverage(ctx context.Context, dir, version string, stdout io.Writer) error {
	raw := filepath.Join(dir, coverageRaw)
	profile := filepath.Join(dir, "scheduler.coverprofile")
	if out, err := exec.CommandContext(ctx, "go", "tool", "covdata", "textfmt", "-i", raw, "-o", profile).CombinedOutput(); err != nil {
		return fmt.Errorf("go tool covdata textfmt -i %s: %v: %s", raw, err, bytes.TrimSpace(out))
	}
	modCache, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		return fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	src := filepath.Join(strings.TrimSpace(string(modCache)), coverage.Module+"@"+version)
	data, err := os.ReadFile(profile)
	if err != nil {
		return err
	}
	blocks, err := coverage.ParseProfile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %w", profile, err)
	}
	if len(blocks) == 0 {
		return fmt.Errorf("%s holds no counters: the scheduler wrote none to %s (did it run?)", profile, raw)
	}
	rs, err := coverage.Report(blocks, coverage.GangCode(), coverage.Rules(), src)
	if err != nil {
		return err
	}
	title := "Gang code of kube-scheduler " + version + " run by the suites"
	if err := os.WriteFile(filepath.Join(dir, "coverage.md"), []byte(coverage.Markdown(title, rs)), 0o644); err != nil {
		return err
	}
	page, err := coverage.HTML(title, rs, blocks, src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "coverage.html"), []byte(page), 0o644); err != nil {
		return err
	}
	stmts, cov := coverage.Total(rs)
	reach, kinds := coverage.Unrun(rs)
	fmt.Fprintf(stdout, "scheduler coverage: %d of %d statements of the gang code (%.1f %%), %.1f %% of the %d that run with the default gates; %d never-run statements are gaps; %s (coverage.md lists each with its reason, coverage.html, scheduler.coverprofile)\n",
		cov, stmts, 100*float64(cov)/float64(max(stmts, 1)), 100*float64(cov)/float64(max(reach, 1)), reach, kinds[coverage.Gap], dir)
	return nil
}
