package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/kind"
)

// check is one line of `gangbench doctor`, and the command that fixes it when it says no.
type check struct {
	name, verdict, detail, fix string
}

func newDoctorCmd(g *globalOpts, stdout io.Writer) *cobra.Command {
	var version, cacheDir string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say which providers can run on this machine, and why not",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := doctorChecks(cmd.Context(), version, cacheDir)
			writeChecks(stdout, checks)
			return nil
		},
	}
	cmd.Flags().StringVar(&version, "k8s-version", clusters.DefaultKubernetesVersion, "Kubernetes version to look for in the cache")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", "", "binary cache dir")
	return cmd
}

func writeChecks(w io.Writer, checks []check) {
	for _, c := range checks {
		fmt.Fprintf(w, "%-28s %-5s %s\n", c.name, c.verdict, c.detail)
		if c.fix != "" {
			fmt.Fprintf(w, "%-28s %-5s fix: %s\n", "", "", c.fix)
		}
	}
}

func doctorChecks(ctx context.Context, version, cacheDir string) []check {
	var out []check
	goPath, err := exec.LookPath("go")
	hasGo := err == nil
	if !hasGo {
		out = append(out, check{"go toolchain", "no", "not on PATH: binaries cannot be built (use --kube-bin-dir with prebuilt ones)", "install Go 1.26 and put its bin directory on PATH"})
	} else {
		v, _ := exec.CommandContext(ctx, goPath, "version").Output()
		out = append(out, check{"go toolchain", "yes", strings.TrimSpace(string(v)), ""})
	}
	// A cache-only Ensure still waits for the lock of a build in progress (another gangbench's):
	// doctor must answer, not wait for that build.
	lookCtx, cancel := context.WithTimeout(ctx, cacheLookTimeout)
	set, err := k8sbin.Ensure(lookCtx, version, k8sbin.Options{CacheDir: cacheDir, Builder: cacheOnly{}})
	cancel()
	cached := err == nil
	switch {
	case cached:
		out = append(out, check{"binaries " + version, "yes", "cached: " + filepath.Dir(set.Scheduler), ""})
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		out = append(out, check{"binaries " + version, "no", "being built right now by another gangbench (it holds the cache's lock)", ""})
	default:
		out = append(out, check{"binaries " + version, "no", "not cached: the first cluster create builds them (~25 min on 2 cores)", "gangbench k8s build --version " + version})
	}
	if hasGo || cached {
		out = append(out, check{"provider local", "yes", "needs no container engine", ""})
	} else {
		out = append(out, check{"provider local", "no", "no Go toolchain to build its binaries and none cached", "install Go 1.26"})
	}
	out = append(out, engineChecks(ctx, kind.ThisHost(), version, cacheDir)...)
	return out
}

// engineChecks asks each container engine whether its daemon answers, the same way the kind provider
// does before it creates anything, so doctor and `cluster create --provider kind` say the same thing;
// then what else kind needs on this machine (kind.Prerequisites, as `--provider auto` judges it).
func engineChecks(ctx context.Context, h kind.Host, version, cacheDir string) []check {
	var out []check
	answering, usable, imageCached := false, false, false
	for _, engine := range kind.Engines() {
		if _, err := exec.LookPath(engine); err != nil {
			out = append(out, check{"engine " + engine, "no", "not installed", ""})
			continue
		}
		if _, err := kind.DetectEngine(ctx, engine); err != nil {
			out = append(out, check{"engine " + engine, "no", strings.TrimPrefix(err.Error(), "no container engine answers: "), ""})
			continue
		}
		answering = true
		out = append(out, check{"engine " + engine, "yes", "its daemon answers", ""})
		pr := kind.ProbeEngine(ctx, kind.ExecRunner, engine, "")
		switch {
		case pr.Privileged:
			usable = true
			out = append(out, check{"privileged " + engine, "yes", "privileged containers run", ""})
		case pr.Err == nil:
			usable = true
			out = append(out, check{"privileged " + engine, "no", "refused; kind nodes run with every capability it grants instead (" + strings.Join(pr.Args, " ") + ")", ""})
		case pr.Usable():
			usable = true
			out = append(out, check{"privileged " + engine, "?", pr.Err.Error(), ""})
		default:
			out = append(out, check{"privileged " + engine, "no", pr.Err.Error(), ""})
		}
		img, err := kind.CachedNodeImage(ctx, kind.NodeImageOptions{KubernetesVersion: version, Engine: engine, Bins: k8sbin.Options{CacheDir: cacheDir}})
		switch {
		case err != nil:
			out = append(out, check{"node image " + version, "no", err.Error(), ""})
		default:
			imageCached = true
			out = append(out, check{"node image " + version, "yes", img, ""})
		}
	}
	// An unresolvable cache dir leaves the disk check on the working directory's filesystem.
	cache, _ := k8sbin.CacheDirOf(k8sbin.Options{CacheDir: cacheDir})
	return append(out, kindChecks(kind.Prerequisites(ctx, h, cache), answering, usable, imageCached)...)
}

// kindChecks are doctor's lines for kind's prerequisites and its verdict on the kind provider.
func kindChecks(ps []kind.Prerequisite, answering, usable, imageCached bool) []check {
	var out []check
	for _, p := range ps {
		c := check{"kind: " + p.Name, "yes", p.Detail, p.Fix}
		if !p.OK {
			c.verdict = "no"
			if p.Warning {
				c.verdict = "low"
			}
			if p.ForBuild && imageCached {
				c.detail += " (not needed while the node image is cached)"
			}
		}
		out = append(out, c)
	}
	missing := kind.MissingPrerequisites(ps, !imageCached)
	var names []string
	for _, p := range missing {
		names = append(names, p.Name)
	}
	switch {
	case !answering:
		out = append(out, check{"provider kind", "no", "no container engine answers; use --provider local", ""})
	case !usable:
		out = append(out, check{"provider kind", "no", "the container engine cannot run kind nodes (see above); use --provider local", ""})
	case len(missing) > 0:
		out = append(out, check{"provider kind", "no", "missing " + strings.Join(names, ", ") + " (see above); --provider auto uses local",
			strings.Join(kind.PrerequisiteFixes(missing), "; then ")})
	case imageCached:
		out = append(out, check{"provider kind", "yes", "a container engine answers and can run kind nodes; the node image is cached", ""})
	default:
		out = append(out, check{"provider kind", "yes", "a container engine answers and can run kind nodes; the first run builds the node image (about 10 min)", ""})
	}
	return out
}

// cacheLookTimeout bounds doctor's look into the binary cache: a hit takes milliseconds, only a
// lock held by a build in progress takes longer.
const cacheLookTimeout = 3 * time.Second

// cacheOnly is a Builder that refuses to build, so Ensure answers "is it cached?" without side effects.
type cacheOnly struct{}

func (cacheOnly) Build(context.Context, k8sbin.Target, string, func(string, bool)) error {
	return errors.New("not cached")
}
