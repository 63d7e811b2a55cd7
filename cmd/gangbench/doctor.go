package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/kind"
)

// check is one line of `gangbench doctor`.
type check struct {
	name, verdict, detail string
}

func newDoctorCmd(g *globalOpts, stdout io.Writer) *cobra.Command {
	var version, cacheDir string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say which providers can run on this machine, and why not",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := doctorChecks(cmd.Context(), version, cacheDir)
			for _, c := range checks {
				fmt.Fprintf(stdout, "%-28s %-5s %s\n", c.name, c.verdict, c.detail)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&version, "k8s-version", clusters.DefaultKubernetesVersion, "Kubernetes version to look for in the cache")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", "", "binary cache dir")
	return cmd
}

func doctorChecks(ctx context.Context, version, cacheDir string) []check {
	var out []check
	goPath, err := exec.LookPath("go")
	if err != nil {
		out = append(out, check{"go toolchain", "no", "not on PATH: binaries cannot be built (use --kube-bin-dir with prebuilt ones)"})
	} else {
		v, _ := exec.CommandContext(ctx, goPath, "version").Output()
		out = append(out, check{"go toolchain", "yes", strings.TrimSpace(string(v))})
	}
	if set, err := k8sbin.Ensure(ctx, version, k8sbin.Options{CacheDir: cacheDir, Builder: cacheOnly{}}); err == nil {
		out = append(out, check{"binaries " + version, "yes", "cached: " + filepath.Dir(set.Scheduler)})
	} else {
		out = append(out, check{"binaries " + version, "no", "not cached: the first cluster create builds them (~20 min on 2 cores), or run `gangbench k8s build`"})
	}
	out = append(out, check{"provider local", "yes", "needs no container engine"})
	out = append(out, engineChecks(ctx, version, cacheDir)...)
	return out
}

// engineChecks asks each container engine whether its daemon answers, the same way the kind provider
// does before it creates anything, so doctor and `cluster create --provider kind` say the same thing.
func engineChecks(ctx context.Context, version, cacheDir string) []check {
	var out []check
	answering, usable := false, false
	for _, engine := range kind.Engines() {
		if _, err := exec.LookPath(engine); err != nil {
			out = append(out, check{"engine " + engine, "no", "not installed"})
			continue
		}
		if _, err := kind.DetectEngine(ctx, engine); err != nil {
			out = append(out, check{"engine " + engine, "no", strings.TrimPrefix(err.Error(), "no container engine answers: ")})
			continue
		}
		answering = true
		out = append(out, check{"engine " + engine, "yes", "its daemon answers"})
		pr := kind.ProbeEngine(ctx, kind.ExecRunner, engine, "")
		switch {
		case pr.Privileged:
			usable = true
			out = append(out, check{"privileged " + engine, "yes", "privileged containers run"})
		case pr.Err == nil:
			usable = true
			out = append(out, check{"privileged " + engine, "no", "refused; kind nodes run with every capability it grants instead (" + strings.Join(pr.Args, " ") + ")"})
		case pr.Usable():
			usable = true
			out = append(out, check{"privileged " + engine, "?", pr.Err.Error()})
		default:
			out = append(out, check{"privileged " + engine, "no", pr.Err.Error()})
		}
		img, err := kind.CachedNodeImage(ctx, kind.NodeImageOptions{KubernetesVersion: version, Engine: engine, Bins: k8sbin.Options{CacheDir: cacheDir}})
		switch {
		case err != nil:
			out = append(out, check{"node image " + version, "no", err.Error()})
		default:
			out = append(out, check{"node image " + version, "yes", img})
		}
	}
	switch {
	case usable:
		out = append(out, check{"provider kind", "yes", "a container engine answers and can run kind nodes"})
	case answering:
		out = append(out, check{"provider kind", "no", "the container engine cannot run kind nodes (see above); use --provider local"})
	default:
		out = append(out, check{"provider kind", "no", "no container engine answers; use --provider local"})
	}
	return out
}

// cacheOnly is a Builder that refuses to build, so Ensure answers "is it cached?" without side effects.
type cacheOnly struct{}

func (cacheOnly) Build(context.Context, k8sbin.Target, string, func(string, bool)) error {
	return errors.New("not cached")
}
