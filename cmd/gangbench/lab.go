package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/clusters/request"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/lab"
	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/scenarios/gangapi"

	"github.com/spf13/cobra"
)

// labCluster is the seed lab's cluster name: its nodes are gpu-lab-control-plane, gpu-lab-worker
// (8 GPUs) and gpu-lab-worker2 (none).
const labCluster = "gpu-lab"

type labFlags struct {
	provider, k8sVersion, schedulerBin, schedulerImage, nodeImage, engine, cacheDir string
	// gpuAPI is how gpu-lab-worker publishes its GPUs (--gpu-api, fakegpu.ParseAPI).
	gpuAPI  string
	timeout time.Duration
	keep    bool
	// newProvider is the one constructor of providers (globalOpts.newProvider).
	newProvider request.Factory
}

func newLabCmd(g *globalOpts, stdout, stderr io.Writer) *cobra.Command {
	cmd, _ := labCommand(g, stdout, stderr)
	return cmd
}

// labCommand is newLabCmd with the flags it parses into, for tests.
func labCommand(g *globalOpts, stdout, stderr io.Writer) (*cobra.Command, *labFlags) {
	f := labFlags{newProvider: g.newProvider}
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Reproduce the seed's native gang-scheduling lab, literally, with a verdict per experiment",
		Long: `lab creates the lab's cluster, "gpu-lab": a tainted control-plane node, gpu-lab-worker with 8
nvidia.com/gpu and gpu-lab-worker2 without GPUs. On kind (the default where a container engine
runs) the workers are real kubelets and the GPUs come from the fake device plugin; on local kwok
plays the three nodes. It applies the lab's manifests in the lab's order (02-basic-control.yaml,
01-native-gang.yaml, 03-elastic.yaml, rewritten from v1alpha2 to v1beta1), prints what the lab's
kubectl commands show next to what the lab reports, gives a verdict per experiment, and deletes the
cluster. It exits 1 when an experiment differs from the lab.

With --gpu-api dra, gpu-lab-worker publishes its 8 GPUs through DRA (a ResourceSlice of the fake
driver, DeviceClass ` + fakegpu.DeviceClassName + `, no nvidia.com/gpu) and the manifests are applied
with DRA GPUs: each container's nvidia.com/gpu: N becomes a pod claim from a ResourceClaimTemplate
gpu-N of the lab's; the GPUs in use are the devices allocated from the worker's pool. With both, the
worker publishes both ways and the manifests stay literal (they ask for nvidia.com/gpu). On kind the
worker's DRA kubelet plugin publishes the GPUs and prepares the claims; a provider whose workers
cannot publish GPUs that way refuses the flag.`,
		Example: `  gangbench lab
  gangbench lab --provider local
  gangbench lab --scheduler-binary ./_output/kube-scheduler   # the lab against a fork
  gangbench lab --provider kind --keep                          # look around afterwards with kubectl
  gangbench lab --gpu-api dra                                   # the same lab with DRA GPUs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runLab(cmd.Context(), g, &f, stdout, stderr) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.provider, "provider", "auto", "kind, local, or auto (kind when a container engine answers)")
	fs.StringVar(&f.k8sVersion, "k8s-version", clusters.DefaultKubernetesVersion, "Kubernetes version of the cluster")
	fs.StringVar(&f.schedulerBin, "scheduler-binary", "", "run this kube-scheduler binary as the scheduler")
	fs.StringVar(&f.schedulerImage, "scheduler-image", "", "kind: run this kube-scheduler image from the engine as the scheduler")
	fs.StringVar(&f.nodeImage, "node-image", "", "kind: node image (default: gangbench's, built offline)")
	fs.StringVar(&f.engine, "engine", "", "kind: container engine (default: the first that answers)")
	fs.StringVar(&f.cacheDir, "cache-dir", "", "where built binaries are cached")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "bound on each wait (a decision, a condition, a deletion)")
	fs.StringVar(&f.gpuAPI, "gpu-api", string(fakegpu.APIDevicePlugin), "how gpu-lab-worker publishes its 8 GPUs: device-plugin (nvidia.com/gpu, the lab's), dra (a ResourceSlice; the pods claim their GPUs from ResourceClaimTemplates) or both (the manifests stay literal)")
	fs.BoolVar(&f.keep, "keep", false, "kind: leave the cluster and the last experiment's namespace for a look with kubectl")
	return cmd, &f
}

func runLab(ctx context.Context, g *globalOpts, f *labFlags, stdout, stderr io.Writer) error {
	cf := clusterFlags{provider: f.provider, engine: f.engine}
	if f.provider != "auto" {
		// The lab creates its cluster: a provider that only attaches to one cannot run it.
		p, err := providerOf(g.newProvider, request.New(f.provider, clusters.Spec{}), request.Env{})
		if err != nil || !p.Capabilities().Creates {
			return usageError{fmt.Errorf("--provider %q: accepted kind, local, auto", f.provider)}
		}
	}
	provider := cf.resolveProvider(ctx, stderr)
	req, err := labRequest(f, provider)
	if err != nil {
		return err
	}
	p, err := providerOf(g.newProvider, req, request.Env{Log: g.logger(stderr), Progress: stderr})
	if err != nil {
		return usageError{err}
	}
	cl, err := p.Create(ctx, req.Spec)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := cl.Close(context.WithoutCancel(ctx)); cerr != nil {
			fmt.Fprintf(stderr, "lab: deleting the cluster: %v\n", cerr)
		}
	}()
	cs, err := kubernetes.NewForConfig(cl.RESTConfig)
	if err != nil {
		return err
	}
	// labRequest refused a bad --gpu-api already; parsed again for the lab's worker and options.
	api, err := fakegpu.ParseAPI(f.gpuAPI)
	if err != nil {
		return usageError{fmt.Errorf("--gpu-api: %w", err)}
	}
	if !p.Capabilities().RealKubelets {
		if err := shapeLocalLab(ctx, cs, api, f.timeout); err != nil {
			return err
		}
	}
	gang, err := gangapi.ForConfig(ctx, cl.RESTConfig, cs)
	if err != nil {
		return err
	}
	here := fmt.Sprintf("%s, %s", provider, cl.Versions[clusters.Scheduler])
	res, err := lab.Run(ctx, cs, gang, lab.Options{
		Worker: labCluster + "-worker", Image: scenarios.PauseImage, Out: stdout, Timeout: f.timeout, Here: here, Keep: f.keep,
		GPUAPI: api,
	})
	if err != nil {
		return err
	}
	if f.keep {
		fmt.Fprintf(stdout, "\nthe cluster stays: export KUBECONFIG=%s; delete it with: gangbench cluster delete --name %s\n", cl.KubeconfigPath, labCluster)
	}
	if !res.Reproduced() {
		return codedError{errors.New("the lab did not reproduce (see the verdicts above)"), exitFailures}
	}
	return nil
}

// labRequest is the lab's cluster on provider: its name and shape are the lab's, the flags choose
// the scheduler, the version, and where nodes are containers the engine and images.
func labRequest(f *labFlags, provider string) (request.Request, error) {
	req := request.New(provider, clusters.Spec{
		Name: labCluster, KubernetesVersion: f.k8sVersion,
		SchedulerBinary: absOrEmpty(f.schedulerBin), ReadyTimeout: 5 * time.Minute,
	})
	req.CacheDir = absOrEmpty(f.cacheDir)
	p, err := providerOf(f.newProvider, req, request.Env{})
	if err != nil {
		return request.Request{}, usageError{err}
	}
	caps := p.Capabilities()
	var given []string
	for flag, set := range map[string]bool{"--keep": f.keep && !caps.KeepRunning, "--scheduler-image": f.schedulerImage != "" && !caps.Images, "--node-image": f.nodeImage != "" && !caps.Images, "--engine": f.engine != "" && !caps.Images} {
		if set {
			given = append(given, flag)
		}
	}
	if len(given) > 0 {
		slices.Sort(given)
		return request.Request{}, usageError{fmt.Errorf("%s: kind options, but the lab runs on %s here (add --provider kind)", strings.Join(given, ", "), caps.Provider)}
	}
	api, err := fakegpu.ParseAPI(f.gpuAPI)
	if err != nil {
		return request.Request{}, usageError{fmt.Errorf("--gpu-api: %w", err)}
	}
	if !slices.Contains(caps.GPUAPIs, api) {
		// Said here, naming the flag, rather than by the provider's validation of a node group.
		var accepted []string
		for _, a := range caps.GPUAPIs {
			accepted = append(accepted, string(a))
		}
		return request.Request{}, usageError{fmt.Errorf("--gpu-api %s: the %s provider's workers publish GPUs only as %s so far (DRA GPUs need a DRA kubelet plugin on its workers); run the lab with DRA GPUs on local: --provider local --gpu-api %s",
			api, caps.Provider, strings.Join(accepted, ", "), api)}
	}
	req.Engine = f.engine
	req.Spec.Images = clusters.Images{Node: f.nodeImage, Scheduler: f.schedulerImage}
	// The lab's cluster: one worker with 8 GPUs and, with real kubelets, one without (on simulated
	// nodes runLab reshapes the cluster into the lab's three nodes after it is up).
	shape := request.FlagShape{Nodes: 1, GPU: fakegpu.Inventory{Count: 8}, GPUAPI: api}
	if caps.RealKubelets {
		shape.PlainWorkers = 1
		req.Keep = f.keep
	}
	if err := shape.Apply(&req.Spec, caps.RealKubelets); err != nil {
		return request.Request{}, usageError{err}
	}
	if err := validateRequest(f.newProvider, req); err != nil {
		return request.Request{}, err
	}
	return req, nil
}

// shapeLocalLab gives a local cluster the lab's three nodes, played by kwok: the provider's own
// simulated node goes, and gpu-lab-control-plane (tainted as kubeadm taints a control plane),
// gpu-lab-worker (8 GPUs, published as api says) and gpu-lab-worker2 (no GPUs) come, so the
// scheduler's messages count the same nodes for the same reasons as on the lab's kind cluster.
// With DRA GPUs a node's ResourceSlice is owned by the node, so the provider's node takes its slice
// along when it goes (the garbage collector deletes it) and the worker's comes with the worker.
func shapeLocalLab(ctx context.Context, cs kubernetes.Interface, api fakegpu.API, timeout time.Duration) error {
	old, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, n := range old.Items {
		if err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("lab: remove the provider's node %s: %w", n.Name, err)
		}
	}
	const role = "node-role.kubernetes.io/control-plane"
	cp := fakegpu.NodeOptions{
		Labels: map[string]string{role: "", "gangbench.dev/lab": "true"},
		Taints: []corev1.Taint{{Key: role, Effect: corev1.TaintEffectNoSchedule}},
	}
	plain := fakegpu.NodeOptions{Labels: map[string]string{"gangbench.dev/lab": "true"}}
	// Only the GPU worker publishes through api: the lab's other nodes have no GPUs, so nothing
	// publishes a pool for them.
	worker := plain
	worker.GPUAPI = api
	if api.DRA() {
		// The claims' class; the provider made it for its own node already, but the lab's
		// worker depends on it, not on what the provider chose to create.
		if err := kwok.EnsureDeviceClass(ctx, cs); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
	}
	for _, n := range []struct {
		name string
		gpus int
		opts fakegpu.NodeOptions
	}{{labCluster + "-control-plane", 0, cp}, {labCluster + "-worker", 8, worker}, {labCluster + "-worker2", 0, plain}} {
		if err := kwok.CreateNodes(ctx, cs, []string{n.name}, fakegpu.Inventory{Count: n.gpus}.WithDefaults(), n.opts, 1); err != nil {
			return fmt.Errorf("lab: create node %s: %w", n.name, err)
		}
	}
	if err := kwok.WaitNodesReady(ctx, cs, "gangbench.dev/lab=true", 3, timeout); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return kwok.WaitSchedulable(ctx, cs, "gangbench.dev/lab=true", 3, timeout, 5*time.Second, nil, role)
}
