package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/providers"
	"github.com/gangbench/gangbench/clusters/request"
	"github.com/gangbench/gangbench/fakegpu"
)

// clusterFlags are the flags that shape a cluster; e2e and perf reuse them.
type clusterFlags struct {
	provider      string
	name          string
	nodes         int
	gpusPerNode   int
	gpuProduct    string
	k8sVersion    string
	kubeBinDir    string
	schedulerBin  string
	cacheDir      string
	featureGates  []string
	features      []string
	topology      string
	gpuAPI        string
	schedGates    []string
	schedulerArgs []string
	timeout       time.Duration
	// kind only
	engine         string
	workers        int
	nodeImage      string
	schedulerImage string
	kwokNodes      int
	// fs is the command's flag set, to tell a flag the user gave from its default.
	fs *pflag.FlagSet
	// newProvider is the command's one constructor of providers (globalOpts.newProvider).
	newProvider request.Factory
}

func (f *clusterFlags) register(cmd *cobra.Command, g *globalOpts, defaultNodes int) {
	fs := cmd.Flags()
	f.fs = fs
	f.newProvider = g.newProvider
	fs.StringVar(&f.provider, "provider", defaultProvider, "cluster provider: local (processes + kwok nodes, no container engine), kind (real kubelets, needs a container engine), or auto (kind when an engine answers, else local)")
	fs.StringVar(&f.name, "name", clusters.DefaultName, "cluster name")
	fs.IntVar(&f.nodes, "nodes", defaultNodes, "number of simulated GPU nodes")
	fs.IntVar(&f.gpusPerNode, "gpus-per-node", 8, "nvidia.com/gpu per node")
	fs.StringVar(&f.gpuProduct, "gpu-product", "", "GPU product label (default "+fakegpu.Default().Product+")")
	fs.StringVar(&f.k8sVersion, "k8s-version", clusters.DefaultKubernetesVersion, "Kubernetes version of the control plane (built from source and cached)")
	fs.StringVar(&f.kubeBinDir, "kube-bin-dir", "", "use kube-apiserver, kube-controller-manager, kube-scheduler (and etcd, kwok if present) from DIR instead of building")
	fs.StringVar(&f.schedulerBin, "scheduler-binary", "", "run this kube-scheduler binary as the scheduler under test (a fork, a PR build); kind wraps it into an image, so it must be static (CGO_ENABLED=0)")
	fs.StringVar(&f.cacheDir, "cache-dir", "", "where built binaries are cached (default: user cache dir/gangbench/bin, or $GANGBENCH_CACHE_DIR)")
	fs.StringSliceVar(&f.featureGates, "feature-gates", nil, "extra feature gates for every component, e.g. TopologyAwareWorkloadScheduling=true")
	fs.StringSliceVar(&f.features, "features", nil, "workload features to switch on, with every gate and API version each needs on every component: "+strings.Join(clusters.FeatureNames(), ", ")+" (--feature-gates still has the last word)")
	fs.StringVar(&f.topology, "topology", "", "lay the GPU nodes out in blocks and racks, as node labels: blocks=B,racks-per-block=R,nodes-per-rack=N[,block-key=K][,rack-key=K] (B×R×N nodes; kind: the real workers)")
	fs.StringVar(&f.gpuAPI, "gpu-api", string(fakegpu.APIDevicePlugin), "how the GPU nodes publish their fake GPUs: device-plugin (the nvidia.com/gpu count), dra (one ResourceSlice per node, a DeviceClass "+fakegpu.DeviceClassName+"; pods claim GPUs with ResourceClaims) or both")
	fs.StringSliceVar(&f.schedGates, "scheduler-feature-gates", nil, "feature gates for the scheduler only, e.g. GenericWorkload=false")
	fs.StringArrayVar(&f.schedulerArgs, "scheduler-arg", nil, "extra kube-scheduler flag as name=value, e.g. kube-api-qps=5000 (repeatable)")
	fs.DurationVar(&f.timeout, "timeout", 3*time.Minute, "how long components and nodes may take to become ready")
	fs.StringVar(&f.engine, "engine", "", "kind: container engine docker, podman or nerdctl (default: the first that answers)")
	fs.IntVar(&f.workers, "workers", 0, "kind: worker nodes with real kubelets and the fakegpu device plugin (default: --nodes)")
	fs.StringVar(&f.nodeImage, "node-image", "", "kind: kindest/node image (default: kind's image for the Kubernetes version)")
	fs.StringVar(&f.schedulerImage, "scheduler-image", "", "kind: run this kube-scheduler image from the container engine as the scheduler under test (instead of --scheduler-binary)")
	fs.IntVar(&f.kwokNodes, "kwok-nodes", 0, "kind: kwok-simulated GPU nodes next to the workers, for scale")
}

// defaultProvider is what `cluster create` uses without --provider: the one that works everywhere.
// e2e and perf default to auto.
const defaultProvider = providers.Default

// resolveProvider turns auto into a provider by asking the machine (providers.Detect), and says on
// stderr which it chose and why.
func (f *clusterFlags) resolveProvider(ctx context.Context, stderr io.Writer) string {
	if f.provider != providers.Auto {
		return f.provider
	}
	c := providers.Detect(ctx, providers.DetectOptions{Engine: f.engine, KubernetesVersion: f.k8sVersion, CacheDir: f.cacheDir, NodeImage: f.nodeImage})
	if c.Blocked {
		fmt.Fprintf(stderr, "provider auto: %s\nprovider auto: using %s (`gangbench doctor` lists what is missing)\n", c.Reason, c.Provider)
	} else {
		fmt.Fprintf(stderr, "provider auto: %s, using %s\n", c.Reason, c.Provider)
	}
	return c.Provider
}

// request resolves the flags into the cluster request for provider (local or kind, already
// resolved from auto): one request, whichever process then creates the cluster, with the cluster's
// whole shape in its spec (--nodes, --workers and --kwok-nodes become node groups here, once, by the
// provider's capabilities). A flag the provider cannot take (no images, no real kubelets) is
// refused naming itself rather than ignored. Paths are made absolute, as the request may be read in another directory (the suites binary runs in
// suites/). Callers fill what their run needs and then call validateRequest.
func (f *clusterFlags) request(provider string) (request.Request, error) {
	return f.requestShaped(provider, nil)
}

// requestShaped is request with the flags' shape adjusted first, for the run's needs (the suites'
// lanes, upstream's two nodes).
func (f *clusterFlags) requestShaped(provider string, adjust func(*request.FlagShape, clusters.Capabilities)) (request.Request, error) {
	// The flags first: a --provider that names no provider is refused in the flag's words.
	spec, err := f.spec()
	if err != nil {
		return request.Request{}, err
	}
	p, err := providerOf(f.newProvider, request.New(provider, clusters.Spec{}), request.Env{})
	if err != nil {
		return request.Request{}, usageError{err}
	}
	caps := p.Capabilities()
	var given []string
	for _, o := range []struct {
		flag string
		set  bool
		val  any
	}{{"engine", f.engine != "" && !caps.Images, f.engine}, {"workers", f.workers != 0 && !caps.RealKubelets, f.workers}, {"node-image", f.nodeImage != "" && !caps.Images, f.nodeImage},
		{"scheduler-image", f.schedulerImage != "" && !caps.Images, f.schedulerImage}, {"kwok-nodes", f.kwokNodes != 0 && !caps.RealKubelets, f.kwokNodes}} {
		if o.set {
			given = append(given, fmt.Sprintf("--%s %v", o.flag, o.val))
		}
	}
	if len(given) > 0 {
		how := "add --provider kind"
		if f.provider == providers.Auto {
			how = "provider auto chose " + caps.Provider + "; add --provider kind to insist"
		}
		if f.schedulerImage != "" {
			how += "; --scheduler-binary works with every provider"
		}
		return request.Request{}, usageError{fmt.Errorf("%s: kind options, but the cluster is %s (%s)", strings.Join(given, ", "), caps.Provider, how)}
	}
	r := request.New(provider, spec)
	r.Spec.SchedulerBinary = absOrEmpty(spec.SchedulerBinary)
	r.Spec.KubeBinDir = absOrEmpty(spec.KubeBinDir)
	r.Spec.Images = clusters.Images{Node: f.nodeImage, Scheduler: f.schedulerImage}
	r.CacheDir = absOrEmpty(f.cacheDir)
	r.Engine = f.engine
	api, err := fakegpu.ParseAPI(f.gpuAPI)
	if err != nil {
		return request.Request{}, usageError{fmt.Errorf("--gpu-api: %w", err)}
	}
	shape := request.FlagShape{Nodes: f.nodes, Workers: f.workers, KwokNodes: f.kwokNodes, GPU: spec.GPU, GPUAPI: api}
	if f.topology != "" {
		t, err := clusters.ParseTopology(f.topology)
		if err != nil {
			return request.Request{}, usageError{err}
		}
		// --nodes defaults to a number of its own; with a topology only a --nodes the user gave
		// must agree with it.
		if len(f.changed("nodes")) == 0 && f.fs != nil {
			shape.Nodes = 0
		}
		shape.Topology = &t
	}
	if adjust != nil {
		adjust(&shape, caps)
	}
	if err := shape.Apply(&r.Spec, caps.RealKubelets); err != nil {
		return request.Request{}, usageError{fmt.Errorf("cluster request: %w", err)}
	}
	return r, nil
}

// providerOf builds req's provider through the one constructor.
func providerOf(newProvider request.Factory, req request.Request, env request.Env) (clusters.Provider, error) {
	if newProvider == nil {
		return nil, errors.New("no cluster provider constructor wired (main passes clusters/providers.New)")
	}
	return newProvider(req, env)
}

// validateRequest checks req with its provider's rules (Provider.Validate) before anything is built
// or started; a bad request is the user's, so a usage error naming the field.
func validateRequest(newProvider request.Factory, req request.Request) error {
	p, err := providerOf(newProvider, req, request.Env{})
	if err != nil {
		return usageError{err}
	}
	if err := p.Validate(req.Spec); err != nil {
		return usageError{fmt.Errorf("cluster request: %w", err)}
	}
	return nil
}

// lookup is the named flag when the flags were registered on a command (tests build clusterFlags
// by hand), else nil.
func (f *clusterFlags) lookup(name string) *pflag.Flag {
	if f.fs == nil {
		return nil
	}
	return f.fs.Lookup(name)
}

// changed lists the named flags the user gave.
func (f *clusterFlags) changed(names ...string) []string {
	var out []string
	for _, n := range names {
		if v := f.lookup(n); v != nil && v.Changed {
			out = append(out, "--"+n)
		}
	}
	return out
}

// clusterShaping are the flags that shape a cluster gangbench creates; with --kubeconfig there is
// none to shape. (--k8s-version and --cache-dir still choose what is built, e.g. upstream's specs.)
var clusterShaping = []string{"name", "nodes", "gpus-per-node", "gpu-product", "kube-bin-dir", "scheduler-binary", "feature-gates", "features", "topology", "gpu-api", "scheduler-feature-gates", "scheduler-arg", "timeout", "engine", "workers", "node-image", "scheduler-image", "kwok-nodes"}

// refuseWithKubeconfig refuses flags that would shape a cluster when the run uses an existing one.
func (f *clusterFlags) refuseWithKubeconfig(kubeconfig string, names []string) error {
	if kubeconfig == "" {
		return nil
	}
	given := f.changed(names...)
	if p := f.lookup("provider"); p != nil && p.Value.String() != p.DefValue {
		given = append(given, "--provider")
	}
	if len(given) > 0 {
		return usageError{fmt.Errorf("%s shape a cluster gangbench creates; with --kubeconfig %s the cluster is used as it is", strings.Join(given, ", "), kubeconfig)}
	}
	return nil
}

func absOrEmpty(p string) string {
	if p == "" {
		return ""
	}
	return absPath(p)
}

func parseGates(flag string, vals []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, v := range vals {
		k, b, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("--%s %q: want Name=true|false", flag, v)}
		}
		val, err := strconv.ParseBool(b)
		if err != nil {
			return nil, usageError{fmt.Errorf("--%s %q: value %q is not true or false", flag, v, b)}
		}
		out[k] = val
	}
	return out, nil
}

func (f *clusterFlags) spec() (clusters.Spec, error) {
	// Only the name is checked here: which options (images, workers) a provider takes is a question
	// of its capabilities, asked once auto is resolved (requestShaped).
	if !slices.Contains(providers.Choices(), f.provider) {
		return clusters.Spec{}, usageError{fmt.Errorf("--provider %q: accepted %s", f.provider, strings.Join(providers.Choices(), ", "))}
	}
	if f.schedulerImage != "" && f.schedulerBin != "" {
		return clusters.Spec{}, usageError{fmt.Errorf("--scheduler-image %s and --scheduler-binary %s both give the scheduler under test; give one", f.schedulerImage, f.schedulerBin)}
	}
	gates, err := parseGates("feature-gates", f.featureGates)
	if err != nil {
		return clusters.Spec{}, err
	}
	sg, err := parseGates("scheduler-feature-gates", f.schedGates)
	if err != nil {
		return clusters.Spec{}, err
	}
	sargs := map[string]string{}
	for _, a := range f.schedulerArgs {
		k, v, ok := strings.Cut(a, "=")
		if !ok || strings.TrimLeft(k, "-") == "" {
			return clusters.Spec{}, usageError{fmt.Errorf("--scheduler-arg %q: want name=value", a)}
		}
		sargs[strings.TrimLeft(k, "-")] = v
	}
	inv := fakegpu.Inventory{Count: f.gpusPerNode, Product: f.gpuProduct}
	spec := clusters.Spec{
		Name: f.name, Nodes: f.nodes, GPU: inv, KubernetesVersion: f.k8sVersion,
		KubeBinDir: f.kubeBinDir, SchedulerBinary: f.schedulerBin, ReadyTimeout: f.timeout,
	}
	// Left nil when not given, so that the recorded request shows only what was asked.
	if len(gates) > 0 {
		spec.FeatureGates = gates
	}
	if len(sg) > 0 {
		spec.ComponentFeatureGates = map[clusters.Component]map[string]bool{clusters.Scheduler: sg}
	}
	if len(sargs) > 0 {
		spec.ExtraArgs = map[clusters.Component]map[string]string{clusters.Scheduler: sargs}
	}
	if err := clusters.ApplyFeatures(&spec, f.features); err != nil {
		return clusters.Spec{}, usageError{err}
	}
	// The provider's own rules (Provider.Validate) apply to the whole request, once its user has
	// filled in what it needs (validateRequest).
	return spec, nil
}

func (f *clusterFlags) binOptions(progress io.Writer) k8sbin.Options {
	return k8sbin.Options{CacheDir: f.cacheDir, KubeBinDir: f.kubeBinDir, SchedulerBinary: f.schedulerBin, Progress: progress}
}

func newClusterCmd(g *globalOpts, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Create, list and delete clusters with fake GPU nodes"}
	cmd.AddCommand(newClusterCreateCmd(g, stdout, stderr), newClusterDeleteCmd(g, stdout), newClusterListCmd(g, stdout), newClusterKubeconfigCmd(g, stdout))
	return cmd
}

func newClusterCreateCmd(g *globalOpts, stdout, stderr io.Writer) *cobra.Command {
	cmd, _ := clusterCreateCommand(g, stdout, stderr)
	return cmd
}

// clusterCreateCommand is newClusterCreateCmd with the cluster flags it parses into, for tests.
func clusterCreateCommand(g *globalOpts, stdout, stderr io.Writer) (*cobra.Command, *clusterFlags) {
	var f clusterFlags
	var foreground bool
	var readyFD int
	var requestFile string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a cluster and leave it running",
		Long: `Create a local cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the kwok
controller as processes on 127.0.0.1, GenericWorkload=true and scheduling.k8s.io/v1beta1 served, and
--nodes simulated nodes with --gpus-per-node nvidia.com/gpu each.

The cluster keeps running after this command returns (a small gangbench process holds it, so that
nothing outlives it by accident); use 'gangbench cluster delete' to stop it.

With --provider kind the nodes are kind containers with real kubelets. A scheduler under test given
with --scheduler-binary runs on either provider: kind wraps it into an image (it must be static) and
swaps it in on the control-plane node, as it does an image given with --scheduler-image.`,
		Example: `  gangbench cluster create --nodes 4 --gpus-per-node 8
  gangbench cluster create --name mine --scheduler-binary ./_output/kube-scheduler
  gangbench cluster create --provider kind --scheduler-binary ./_output/kube-scheduler   # wrapped into an image
  gangbench cluster create --scheduler-feature-gates GenericWorkload=false   # a scheduler without gang scheduling`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var req request.Request
			var err error
			if requestFile != "" {
				// A holder started by createDetached (or by e2e --keep-cluster): the request was
				// resolved by the command that started it.
				if req, err = request.Read(requestFile); err != nil {
					return usageError{err}
				}
			} else {
				if req, err = f.request(f.resolveProvider(cmd.Context(), stderr)); err != nil {
					return err
				}
				if err := validateRequest(g.newProvider, req); err != nil {
					return err
				}
			}
			p, err := providerOf(g.newProvider, req, request.Env{})
			if err != nil {
				return usageError{err}
			}
			if p.Capabilities().KeepRunning {
				return createKept(cmd.Context(), g, req, stdout, stderr)
			}
			if foreground {
				return holdCluster(cmd.Context(), g, req, stderr, readyFD)
			}
			cl, err := createDetached(cmd.Context(), g, req, stderr)
			if err != nil {
				return err
			}
			printClusterReady(stdout, cl)
			return nil
		},
	}
	f.register(cmd, g, 4)
	cmd.Flags().BoolVar(&foreground, "foreground", false, "hold the cluster in this process until interrupted (Ctrl-C deletes it)")
	cmd.Flags().IntVar(&readyFD, "ready-fd", 0, "internal: file descriptor to report readiness on")
	_ = cmd.Flags().MarkHidden("ready-fd")
	cmd.Flags().StringVar(&requestFile, "cluster-request", "", "internal: create the cluster of this request file (- reads standard input) instead of the flags'")
	_ = cmd.Flags().MarkHidden("cluster-request")
	return cmd, &f
}

// holdCluster creates the cluster in this process and keeps it until a signal arrives.
func holdCluster(ctx context.Context, g *globalOpts, req request.Request, stderr io.Writer, readyFD int) error {
	var ready *os.File
	if readyFD > 0 {
		// The fd arrived without close-on-exec; the components started below would inherit it and keep
		// the pipe open, so the waiting `cluster create` would never see EOF after an error.
		syscall.CloseOnExec(readyFD)
		ready = os.NewFile(uintptr(readyFD), "ready")
		defer ready.Close()
	}
	p, err := providerOf(g.newProvider, req, request.Env{Log: g.logger(stderr), Progress: stderr, Holder: ready != nil})
	if err != nil {
		return err
	}
	cl, err := p.Create(ctx, req.Spec)
	if err != nil {
		if ready != nil {
			fmt.Fprintf(ready, "error: %v\n", err)
		}
		return err
	}
	if ready != nil {
		fmt.Fprintln(ready, "ready")
		ready.Close()
	} else {
		printClusterReady(stderr, cl)
		fmt.Fprintln(stderr, "holding the cluster; press Ctrl-C to delete it")
	}
	<-ctx.Done()
	return cl.Close(context.WithoutCancel(ctx))
}

// createDetached builds binaries here (so progress is visible), then starts `cluster create
// --foreground` in its own session to hold the local cluster of req, waits for it to report ready,
// and returns the cluster's handle (its Control asks the holder). `cluster create` and `e2e
// --keep-cluster` keep local clusters this way.
func createDetached(ctx context.Context, g *globalOpts, req request.Request, stderr io.Writer) (*clusters.Cluster, error) {
	spec := req.Spec
	if spec.Name == "" {
		spec.Name = clusters.DefaultName
		req.Spec.Name = spec.Name
	}
	if _, err := k8sbin.Ensure(ctx, spec.KubernetesVersion, req.Binaries(stderr)); err != nil {
		return nil, err
	}
	// The holder's log goes beside the cluster's state, where the provider keeps it.
	stateDir, err := providers.StateDir(req.Provider)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(stateDir, spec.Name+".supervisor.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// The request goes whole on standard input: nothing of it is flattened into flags again.
	args := []string{"cluster", "create", "--foreground", "--ready-fd", "3", "--cluster-request", "-"}
	if g.verbose {
		args = append(args, "--verbose")
	}
	child := exec.Command(self, args...)
	child.Stdin = bytes.NewReader(reqJSON)
	child.Stdout, child.Stderr = logf, logf
	child.ExtraFiles = []*os.File{w}
	// Its own session: the holder must survive this command and the terminal it ran in.
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start cluster holder: %w", err)
	}
	w.Close()
	pid := child.Process.Pid
	_ = child.Process.Release()

	lines := make(chan string, 1)
	go func() {
		// "ready" is one line; an error is everything until the holder exits.
		s := bufio.NewScanner(r)
		var all []string
		for s.Scan() {
			if len(all) == 0 && s.Text() == "ready" {
				lines <- "ready"
				return
			}
			all = append(all, s.Text())
		}
		lines <- strings.Join(all, "\n")
	}()
	select {
	case msg := <-lines:
		if msg != "ready" {
			// The holder has torn the cluster down; its log goes too, once what it says is in the
			// error: a failed create leaves nothing behind.
			defer os.Remove(logPath)
			if msg != "" {
				return nil, fmt.Errorf("cluster %q did not start: %s", spec.Name, strings.TrimPrefix(msg, "error: "))
			}
			// The holder died without a word (killed, or crashed before it could report).
			tail, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("cluster %q did not start: its holder process exited; the last lines of its log:\n%s", spec.Name, lastLines(string(tail), 20))
		}
	case <-ctx.Done():
		// The user gave up: the holder is ours to stop, and it tears the cluster down on SIGTERM.
		_ = syscall.Kill(pid, syscall.SIGTERM)
		return nil, ctx.Err()
	}
	p, err := providerOf(g.newProvider, req, request.Env{})
	if err != nil {
		return nil, err
	}
	return p.Get(ctx, spec.Name)
}

// createKept creates a cluster of a provider whose clusters outlive this command by themselves
// (kind's containers), so no holder.
func createKept(ctx context.Context, g *globalOpts, req request.Request, stdout, stderr io.Writer) error {
	req.Keep = true
	p, err := providerOf(g.newProvider, req, request.Env{Log: g.logger(stderr), Progress: stderr})
	if err != nil {
		return usageError{err}
	}
	cl, err := p.Create(ctx, req.Spec)
	if err != nil {
		return err
	}
	printClusterReady(stdout, cl)
	return nil
}

// allProviders are the providers whose clusters list/delete/kubeconfig look at: those of the
// edge's list (globalOpts.providerNames) that create clusters, built by the one constructor.
func allProviders(g *globalOpts) ([]clusters.Provider, error) {
	var ps []clusters.Provider
	for _, name := range g.providerNames {
		p, err := providerOf(g.newProvider, request.New(name, clusters.Spec{}), request.Env{})
		if err != nil {
			// A provider that needs more than a name to exist (existing: a kubeconfig) has no
			// clusters of its own to list.
			continue
		}
		if p.Capabilities().Creates {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return nil, errors.New("no cluster provider wired (main passes clusters/providers)")
	}
	return ps, nil
}

// findCluster returns the provider that knows the named cluster.
func findCluster(ctx context.Context, g *globalOpts, name string) (clusters.Provider, *clusters.Cluster, error) {
	ps, err := allProviders(g)
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, p := range ps {
		cl, err := p.Get(ctx, name)
		if err == nil {
			return p, cl, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
	}
	return nil, nil, fmt.Errorf("no usable cluster named %q: %w", name, errors.Join(errs...))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func printClusterReady(w io.Writer, cl *clusters.Cluster) {
	fmt.Fprintf(w, "cluster %q is ready: %d nodes × %d %s (%s)\n", cl.Name, cl.Nodes, cl.GPU.Count, cl.GPU.ResourceName, cl.Versions[clusters.Scheduler])
	fmt.Fprintf(w, "  export KUBECONFIG=%s\n", cl.KubeconfigPath)
	fmt.Fprintf(w, "  kubectl get nodes -o custom-columns=NAME:.metadata.name,GPU:.status.allocatable.nvidia\\.com/gpu\n")
	fmt.Fprintf(w, "  logs: %s\n", cl.LogDir)
	fmt.Fprintf(w, "  delete: gangbench cluster delete --name %s\n", cl.Name)
}

func newClusterDeleteCmd(g *globalOpts, stdout io.Writer) *cobra.Command {
	var name, kubeconfig string
	var all bool
	var safety providers.SafetyOptions
	cmd := &cobra.Command{
		Use:   "delete [NAME]",
		Short: "Stop a cluster and remove everything it left on this machine",
		Long: `Stop a cluster gangbench created and remove everything it left on this machine.

With --kubeconfig, delete from a cluster gangbench did not create only the objects gangbench made
there: namespaces, PriorityClasses, ClusterRoles, ClusterRoleBindings and nodes labelled
gangbench.dev/managed=true. Nothing else is touched.`,
		Example: `  gangbench cluster delete
  gangbench cluster delete --all
  gangbench cluster delete --kubeconfig ~/.kube/config --allow-existing-cluster`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if kubeconfig != "" {
				return deleteManagedObjects(cmd.Context(), kubeconfig, safety, stdout)
			}
			if len(args) == 1 {
				name = args[0]
			}
			ps, err := allProviders(g)
			if err != nil {
				return err
			}
			var errs []error
			deleted := 0
			for _, p := range ps {
				names := []string{name}
				if all {
					// Only clusters this provider recorded as gangbench's own: a user's other kind
					// clusters or processes are never touched.
					infos, err := p.List(cmd.Context())
					if err != nil {
						errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
						continue
					}
					names = names[:0]
					for _, i := range infos {
						names = append(names, i.Name)
					}
				}
				for _, n := range names {
					if err := p.Delete(cmd.Context(), n); err != nil {
						if !errors.Is(err, clusters.ErrNotFound) {
							errs = append(errs, fmt.Errorf("%s cluster %q: %w", p.Name(), n, err))
						}
						continue
					}
					deleted++
					fmt.Fprintf(stdout, "deleted %s cluster %q\n", p.Name(), n)
				}
			}
			if deleted == 0 && !all && len(errs) == 0 {
				errs = append(errs, fmt.Errorf("no cluster named %q (see `gangbench cluster list`)", name))
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVar(&name, "name", clusters.DefaultName, "cluster name")
	cmd.Flags().BoolVar(&all, "all", false, "delete every cluster gangbench created on this machine")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "delete gangbench's labelled objects from this existing cluster instead")
	safetyFlags(cmd.Flags(), &safety)
	return cmd
}

// deleteManagedObjects removes what gangbench created in a cluster it does not own, after the same
// safety checks as a run against that cluster.
func deleteManagedObjects(ctx context.Context, kubeconfig string, safety providers.SafetyOptions, stdout io.Writer) error {
	if err := checkKubeconfig(kubeconfig, safety); err != nil {
		return err
	}
	name, err := providers.DeleteManagedObjects(ctx, kubeconfig)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "deleted the objects labelled %s=true from %s\n", providers.ManagedLabel, name)
	return nil
}

func newClusterListCmd(g *globalOpts, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List clusters gangbench created on this machine",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, err := allProviders(g)
			if err != nil {
				return err
			}
			var infos []clusters.Info
			for _, p := range ps {
				is, err := p.List(cmd.Context())
				if err != nil {
					fmt.Fprintf(stdout, "# %s: %v\n", p.Name(), err)
					continue
				}
				infos = append(infos, is...)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPROVIDER\tSTATUS\tNODES\tCREATED")
			for _, i := range infos {
				created := ""
				if !i.Created.IsZero() {
					created = i.Created.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", i.Name, i.Provider, i.Status, i.Nodes, created)
			}
			return tw.Flush()
		},
	}
}

func newClusterKubeconfigCmd(g *globalOpts, stdout io.Writer) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:     "kubeconfig [NAME]",
		Short:   "Print the path of a cluster's admin kubeconfig",
		Example: "  export KUBECONFIG=$(gangbench cluster kubeconfig)",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				name = args[0]
			}
			_, cl, err := findCluster(cmd.Context(), g, name)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, cl.KubeconfigPath)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", clusters.DefaultName, "cluster name")
	return cmd
}
