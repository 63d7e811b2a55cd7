package k8sbin

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// TargetSchedulerPerf is one package of upstream's scheduler_perf (test/integration/scheduler_perf
// of k8s.io/kubernetes at a version) compiled into a test binary: `gangbench perf reference` runs
// its workload in-process on this machine, as the yardstick for gangbench's own figures. The cache
// directory holds the binary with the package's workload configs and templates beside it, because
// scheduler_perf reads them relative to its working directory.
const TargetSchedulerPerf = "kubernetes-scheduler-perf"

// SchedulerPerfBinary is the binary TargetSchedulerPerf produces.
const SchedulerPerfBinary = "scheduler-perf.test"

// SchedulerPerfRoot is where scheduler_perf lives in k8s.io/kubernetes.
const SchedulerPerfRoot = "test/integration/scheduler_perf"

// schedPerfRecipe changes when the way the binary is built changes, so a cached one is rebuilt.
const schedPerfRecipe = "2"

// schedPerfPackage is a package path below SchedulerPerfRoot: lower-case words joined by '/'.
var schedPerfPackage = regexp.MustCompile(`^[a-z0-9_]+(/[a-z0-9_]+)*$`)

// ValidateSchedulerPerfPackage checks a package path below SchedulerPerfRoot, e.g.
// "podgroup/gangscheduling".
func ValidateSchedulerPerfPackage(pkg string) error {
	if !schedPerfPackage.MatchString(pkg) {
		return fmt.Errorf("%q: want a package below %s such as podgroup/gangscheduling", pkg, SchedulerPerfRoot)
	}
	return nil
}

// EnsureSchedulerPerf returns the directory holding scheduler_perf's test binary for pkg at
// kubeVersion and the package's config files, building and caching it first when needed.
func EnsureSchedulerPerf(ctx context.Context, kubeVersion, pkg string, opts Options) (string, error) {
	if kubeVersion == "" {
		kubeVersion = DefaultKubernetesVersion
	}
	if err := ValidateKubeVersion(kubeVersion); err != nil {
		return "", err
	}
	if err := ValidateSchedulerPerfPackage(pkg); err != nil {
		return "", err
	}
	return EnsureTarget(ctx, Target{Name: TargetSchedulerPerf, Version: kubeVersion, Package: pkg}, opts, nil)
}

// buildSchedulerPerf compiles the package's tests against k8s.io/kubernetes at the version in the
// control plane's wrapper module, then copies the package's YAML files (the workload configs and
// their templates) next to the binary.
func (g *GoBuilder) buildSchedulerPerf(ctx context.Context, t Target, work, outDir string, progress func(string, bool)) error {
	const sources = "scheduler_perf sources"
	progress(sources, false)
	mf, err := g.kubernetesGoMod(ctx, work, t.Version)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(wrapperGoMod(t.Version, mf)), 0o644); err != nil {
		return err
	}
	pkg := kubernetesModule + "/" + SchedulerPerfRoot + "/" + t.Package
	// The shared scheduler_perf package has non-test files, so `go get` of it records every
	// requirement the benchmark needs; the package under test may have test files only.
	if err := g.run(ctx, work, nil, "get", kubernetesModule+"/"+SchedulerPerfRoot+"@"+t.Version); err != nil {
		return err
	}
	var dir bytes.Buffer
	cmd := g.command(ctx, work, g.goEnv(), "list", "-f", "{{.Dir}}", pkg)
	cmd.Stdout = &dir
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go list %s: %w", pkg, err)
	}
	progress(sources, true)
	progress(SchedulerPerfBinary, false)
	// No -trimpath: the in-process test apiserver finds its fixtures from its own source path
	// (runtime.Caller), which must stay absolute ("can't construct an absolute path from
	// k8s.io/kubernetes@v1.37.2/cmd/kube-apiserver/app/testing" otherwise).
	if err := g.run(ctx, work, nil, "test", "-c", "-ldflags", kubeLDFlags(t.Version), "-o", filepath.Join(outDir, SchedulerPerfBinary), pkg); err != nil {
		return err
	}
	if err := copyYAML(strings.TrimSpace(dir.String()), outDir); err != nil {
		return fmt.Errorf("copying %s's configs: %w", pkg, err)
	}
	progress(SchedulerPerfBinary, true)
	return nil
}

// copyYAML copies every .yaml file below src into dst, keeping the relative paths.
func copyYAML(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return copyFile(path, out)
	})
}
