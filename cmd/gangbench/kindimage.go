package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/clusters/kind/nodeimage"
)

func newKindCmd(g *globalOpts, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "kind", Short: "kind node images built offline"}
	var version, cacheDir, engine, mirror string
	var prune, rebuild bool
	img := &cobra.Command{
		Use:   "node-image",
		Short: "Build (or reuse) a kind node image for a Kubernetes version, with no registry",
		Long: `Build a kind node image from sources reachable without a container registry: a Debian root
filesystem (debootstrap), kind's base files from the sigs.k8s.io/kind module, kubelet, kubeadm,
kubectl, kube-proxy, containerd, runc, CNI plugins and crictl built from their Go modules, and every
image the cluster starts preloaded into containerd (control plane, etcd, kube-proxy, pause and the
fake GPU device plugin). It is cached by content: a second run returns in seconds. The kind provider
uses it whenever --node-image is not given. --prune removes every cached node image of gangbench
from the engine and the cache instead.`,
		Example: "  gangbench kind node-image --k8s-version v1.37.2\n  gangbench kind node-image --prune",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bins := k8sbin.Options{CacheDir: cacheDir}
			if prune {
				removed, err := kind.PruneNodeImages(cmd.Context(), engine, bins, nil)
				for _, r := range removed {
					fmt.Fprintln(stdout, "removed", r)
				}
				return err
			}
			if err := k8sbin.ValidateKubeVersion(version); err != nil {
				return usageError{err}
			}
			log := g.logger(stderr)
			im, what, err := showNodeImage(cmd.Context(), kind.NodeImageOptions{
				KubernetesVersion: version, Engine: engine, Bins: bins, Mirror: mirror, Rebuild: rebuild,
				Log: func(s string) { log.Info(s) },
			}, stderr)
			if err != nil {
				return err
			}
			archive := "archive " + im.Archive
			if _, err := os.Stat(im.Archive); err != nil {
				// In the engine, but its archive was pruned from the cache (or built elsewhere).
				archive = "no archive cached: removed from the engine, it would be built again"
			}
			fmt.Fprintf(stdout, "%s (%s; %s)\n", im.Ref, what, archive)
			return nil
		},
	}
	f := img.Flags()
	f.StringVar(&version, "k8s-version", clusters.DefaultKubernetesVersion, "Kubernetes version of the node")
	f.StringVar(&cacheDir, "cache-dir", "", "cache dir (default: user cache dir/gangbench/bin, or $GANGBENCH_CACHE_DIR)")
	f.StringVar(&engine, "engine", "", "container engine to load the image into (default: the first that answers)")
	f.StringVar(&mirror, "debian-mirror", "", "Debian archive for debootstrap (default: the one this machine's apt sources use)")
	f.BoolVar(&prune, "prune", false, "remove gangbench's node images from the engine and the cache")
	f.BoolVar(&rebuild, "rebuild", false, "build the image again even when it is cached (binaries and root filesystem stay cached)")
	cmd.AddCommand(img)
	return cmd
}

// ensureNodeImage builds (or reuses) the kind node image the flags ask for, its phases and times on
// stderr, before a command hands the cluster to a process that would build it out of sight (the
// suite binary, whose output goes to suites.log); nothing when --node-image gives one. A machine
// that cannot build it is told so, with the fix, before anything is built (kind.EnsureNodeImage).
func (f *clusterFlags) ensureNodeImage(ctx context.Context, moduleRoot string, stderr io.Writer) error {
	if f.nodeImage != "" {
		return nil
	}
	started := time.Now()
	im, what, err := showNodeImage(ctx, kind.NodeImageOptions{
		// The options the kind provider builds with, so that it finds this image.
		KubernetesVersion: f.k8sVersion, Engine: f.engine, Bins: f.binOptions(nil), ModuleRoot: moduleRoot,
		Log: func(s string) { fmt.Fprintln(stderr, s) },
	}, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "node image %s %s in %s\n", im.Ref, what, time.Since(started).Round(time.Second))
	return nil
}

// showNodeImage is kind.EnsureNodeImage with its steps shown on w; it says whether the image was
// "built" or "reused".
func showNodeImage(ctx context.Context, o kind.NodeImageOptions, w io.Writer) (*nodeimage.Image, string, error) {
	prog := k8sbin.NewProgress(w)
	defer prog.Close()
	o.Progress = prog
	im, err := kind.EnsureNodeImage(ctx, o)
	if err != nil {
		return nil, "", err
	}
	// Closed before the caller prints, so its line does not land inside the display.
	prog.Close()
	if im.Built {
		return im, "built", nil
	}
	return im, "reused", nil
}
