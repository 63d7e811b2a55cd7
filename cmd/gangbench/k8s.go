package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
)

func newK8sCmd(g *globalOpts, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "k8s", Short: "Build and cache Kubernetes component binaries"}
	var version, cacheDir string
	build := &cobra.Command{
		Use:   "build",
		Short: "Build kube-apiserver, kube-controller-manager, kube-scheduler, etcd and kwok for a version",
		Long: `Build the control-plane binaries of a Kubernetes release from the k8s.io/kubernetes module source
(through the Go module proxy), with etcd at the version that release pins and the kwok controller, and
cache them by version. A cold build takes about 20 minutes on 2 cores; a cached one returns at once.`,
		Example: "  gangbench k8s build --version v1.37.2",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := k8sbin.ValidateKubeVersion(version); err != nil {
				return usageError{err}
			}
			set, err := k8sbin.Ensure(cmd.Context(), version, k8sbin.Options{CacheDir: cacheDir, Progress: stderr})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "kubernetes %s, etcd %s, kwok %s\n", set.KubernetesVersion, set.EtcdVersion, set.KwokVersion)
			for _, p := range []string{set.APIServer, set.ControllerManager, set.Scheduler, set.Etcd, set.Kwok} {
				fmt.Fprintln(stdout, " ", p)
			}
			return nil
		},
	}
	build.Flags().StringVar(&version, "version", clusters.DefaultKubernetesVersion, "Kubernetes version")
	build.Flags().StringVar(&cacheDir, "cache-dir", "", "cache dir (default: user cache dir/gangbench/bin, or $GANGBENCH_CACHE_DIR)")
	cmd.AddCommand(build)
	return cmd
}
