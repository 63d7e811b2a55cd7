package kind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kind/nodeimage"
	kwokcfg "github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/internal/proc"
)

// Create implements clusters.Provider. It asks for a container engine before anything else, so on a
// machine without one it fails within seconds, naming each engine and what it said, having created
// nothing (no state, no containers). Then: kind creates the nodes from the rendered config (each
// worker with its node group's labels and taints); the fake device plugin image is built and loaded
// into every worker and its DaemonSets deployed (one per GPU worker inventory), and Create waits
// until every GPU worker advertises its GPUs; the scheduler under test, if any (an image from the
// engine, or Spec.SchedulerBinary wrapped into one), replaces the scheduler's; the kwok controller
// and the simulated nodes, if any (each group's with its own inventory, labels and taints), are
// started last.
//
// kind's own create cannot be cancelled (its API takes no context): when ctx ends during it, Create
// waits for it to return and then deletes what it made. Any failure deletes the cluster.
func (p *Provider) Create(ctx context.Context, spec clusters.Spec) (*clusters.Cluster, error) {
	pl, err := resolve(spec)
	if err != nil {
		return nil, err
	}
	engine, err := DetectEngineWith(ctx, p.opts.Engine, p.opts.Runner)
	if err != nil {
		return nil, err
	}
	// Fail before creating anything when the scheduler under test cannot be had.
	sched, err := p.resolveScheduler(ctx, pl.Spec, engine)
	if err != nil {
		return nil, err
	}
	// gangbench's own node image is built (or found) now, before any container exists: it carries
	// the exact version asked for and preloads the device plugin of this source tree.
	ownImage := pl.NodeImage == ""
	if ownImage {
		if pl.NodeImage, err = p.opts.EnsureNodeImage(ctx, pl.Spec.KubernetesVersion, engine); err != nil {
			return nil, fmt.Errorf("kind node image: %w", err)
		}
	}
	// Whether the engine runs kind's --privileged nodes, asked with a throwaway container of the
	// node image: on an engine that refuses them kind would wait 30 s for a node that never starts.
	privArgs, err := p.opts.ProbePrivilege(ctx, engine, pl.NodeImage)
	if err != nil {
		return nil, err
	}
	if privArgs != nil {
		p.log.Info("the engine refuses privileged containers; kind nodes run with every capability it grants instead", "engine", engine, "args", strings.Join(privArgs, " "))
	}
	port := p.opts.SchedulerMetricsPort
	if port == 0 {
		if port, err = p.freePort(); err != nil {
			return nil, err
		}
	}
	cfg, err := renderPlan(pl, port)
	if err != nil {
		return nil, err
	}
	name := pl.Spec.Name
	root := p.opts.StateDir
	st := &state{
		Name: name, Engine: engine, Created: time.Now().UTC(), Phase: phaseCreating, Owner: proc.RefOf(os.Getpid()),
		NodeImage: pl.NodeImage, Network: clusterNetwork(engine, name), SchedulerImage: sched.image(), SchedulerBinary: sched.binary(), SchedulerMetricsPort: port,
		Workers: pl.Workers, PlainWorkers: pl.PlainWorkers, KwokNodes: pl.KwokNodes, GPU: pl.GPU,
		Kubeconfig: filepath.Join(clusterDir(root, name), "kubeconfig"),
	}
	if err := p.claim(ctx, st); err != nil {
		return nil, err
	}
	api := p.newKind(engine)
	// A kind cluster of this name that gangbench has no state for was made by someone else: creating
	// would fail, and the cleanup after the failure would delete their cluster.
	existing, err := api.List()
	if err == nil && slices.Contains(existing, name) {
		err = fmt.Errorf("a kind cluster named %q already exists in %s and was not made by gangbench; delete it with kind or choose another --name", name, engine)
	}
	if err != nil {
		return nil, errors.Join(err, removeState(root, name))
	}
	c := &creation{p: p, pl: pl, st: st, api: api, dir: clusterDir(root, name), config: cfg, privArgs: privArgs, pluginPreloaded: ownImage && nodeimage.IsGangbench(pl.NodeImage), sched: sched}
	start := time.Now()
	cl, err := c.run(ctx)
	if err != nil {
		// Teardown must run even when ctx is already cancelled (Ctrl-C during create).
		if derr := p.destroy(context.WithoutCancel(ctx), c.st); derr != nil {
			err = fmt.Errorf("%w\n(cleanup after the failed create also failed: %v)", err, derr)
		}
		return nil, err
	}
	p.log.Info("kind cluster ready", "name", name, "engine", engine, "workers", pl.Workers, "kwokNodes", pl.KwokNodes, "elapsed", time.Since(start).Round(time.Millisecond))
	return cl, nil
}

// claim takes the cluster name. A state left by a create that died, or by a cluster that no longer
// exists in its engine, is cleaned up and the claim retried once; a live one is an error.
func (p *Provider) claim(ctx context.Context, st *state) error {
	root := p.opts.StateDir
	err := claimState(root, st)
	if !errors.Is(err, os.ErrExist) {
		return err
	}
	old, rerr := readState(root, st.Name)
	if rerr != nil {
		return fmt.Errorf("kind cluster %q: state %s exists but cannot be read (%v); remove it or run `gangbench cluster delete %s`", st.Name, statePath(root, st.Name), rerr, st.Name)
	}
	if old.Phase != phaseReady && old.Owner.Alive() {
		return fmt.Errorf("kind cluster %q is being created by process %d", st.Name, old.Owner.PID)
	}
	if old.Phase == phaseReady {
		l := &engineLister{p: p}
		names, lerr := l.list(ctx, old.Engine)
		if lerr != nil {
			return fmt.Errorf("kind cluster %q is recorded but its engine cannot be asked: %w", st.Name, lerr)
		}
		if slices.Contains(names, st.Name) {
			return fmt.Errorf("kind cluster %q already exists; delete it with `gangbench cluster delete %s` or choose another --name", st.Name, st.Name)
		}
	}
	p.log.Info("removing leftovers of an earlier kind cluster", "name", st.Name, "phase", old.Phase)
	if err := p.destroy(ctx, old); err != nil {
		return err
	}
	return claimState(root, st)
}

// creation is one Create in progress.
type creation struct {
	p      *Provider
	pl     plan
	st     *state
	api    kindAPI
	dir    string
	config []byte
	sched  *schedulerSource // nil: the node image's scheduler runs
	cs     kubernetes.Interface
	nodes  *clusterNodes
	// privArgs replace kind's --privileged (nil: it works as is).
	privArgs []string
	// pluginPreloaded: the node image was built in this create with the device plugin image of
	// this source tree in it, so it needs no loading.
	pluginPreloaded bool
}

func (c *creation) logDir() string { return filepath.Join(c.dir, "logs") }

func (c *creation) run(ctx context.Context) (*clusters.Cluster, error) {
	for _, d := range []string{c.dir, c.logDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	// Kept for whoever debugs a cluster: the exact config kind was given.
	if err := os.WriteFile(filepath.Join(c.dir, "kind-config.yaml"), c.config, 0o600); err != nil {
		return nil, err
	}
	timeout := c.pl.Spec.ReadyTimeout
	if err := c.createNodes(ctx, timeout); err != nil {
		return nil, err
	}
	cfg, err := restConfigFrom(c.st.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := writeAdminCert(cfg, c.dir); err != nil {
		return nil, fmt.Errorf("kind cluster %q: %w", c.st.Name, err)
	}
	// Node creation and readiness watches are the harness's own load; the default 5 QPS would make
	// hundreds of kwok nodes take minutes.
	fast := *cfg
	fast.QPS, fast.Burst = 500, 1000
	if c.cs, err = c.p.newClient(&fast); err != nil {
		return nil, err
	}
	if c.nodes, err = listClusterNodes(c.api, c.st.Name); err != nil {
		return nil, err
	}
	if len(c.nodes.Workers) != c.pl.Workers+c.pl.PlainWorkers {
		return nil, fmt.Errorf("kind cluster %q has %d worker nodes, want %d (nodes: %s)", c.st.Name, len(c.nodes.Workers), c.pl.Workers+c.pl.PlainWorkers, nodeNames(c.nodes.All))
	}
	c.st.ControlPlane = c.nodes.ControlPlane.String()
	// Before the kwok nodes exist and before kube-proxy's readiness is awaited, so its rollout is
	// part of the create and not of the first suite's window.
	if err := placeSystemDaemonSets(ctx, c.cs); err != nil {
		return nil, fmt.Errorf("kind cluster %q: %w", c.st.Name, err)
	}
	if ownCNI(c.pl) {
		if err := setupCNI(ctx, c.cs, c.nodes.All, timeout); err != nil {
			return nil, fmt.Errorf("kind cluster %q: pod network: %w", c.st.Name, err)
		}
	}
	if !nodeimage.IsGangbench(c.pl.NodeImage) {
		if err := tagPodImage(ctx, c.nodes.All); err != nil {
			return nil, fmt.Errorf("kind cluster %q: %w", c.st.Name, err)
		}
	}
	// The class before any plugin publishes: a claim can name it as soon as a slice exists. The
	// DRA plugins' deployment applies it too; simulated DRA nodes need it without them.
	if c.pl.Spec.PublishesDRA() {
		if err := kwokcfg.EnsureDeviceClass(ctx, c.cs); err != nil {
			return nil, fmt.Errorf("kind cluster %q: %w", c.st.Name, err)
		}
	}
	if err := c.devicePlugin(ctx, timeout); err != nil {
		return nil, err
	}
	schedVersion := ""
	if c.sched != nil {
		if schedVersion, err = c.scheduler(ctx, c.sched, timeout); err != nil {
			return nil, err
		}
	} else {
		// kubeadm starts the scheduler's static pod with the apiserver's, so the scheduler's first
		// discovery of events.k8s.io/v1 fails and it writes core/v1 events for its whole life: those
		// carry no related object (a Preempted event would not name its PodGroup). A scheduler under
		// test is swapped in against a serving apiserver; the stock one is restarted once, so both
		// start as on the local provider, after the apiserver answers.
		ctl := &control{api: c.api, name: c.st.Name, timeout: timeout}
		if err := ctl.Restart(ctx, clusters.Scheduler); err != nil {
			return nil, fmt.Errorf("kind cluster %q: restart the scheduler against the running apiserver: %w", c.st.Name, err)
		}
	}
	versions, err := c.versions(ctx, schedVersion)
	if err != nil {
		return nil, err
	}
	c.st.Versions = versions
	if c.pl.KwokNodes > 0 {
		if err := c.kwokNodes(ctx, timeout); err != nil {
			return nil, err
		}
	}
	c.st.Phase = phaseReady
	if err := writeState(c.p.opts.StateDir, c.st); err != nil {
		return nil, err
	}
	cl, err := c.p.handle(c.st, c.api)
	if err != nil {
		return nil, err
	}
	p, st := c.p, c.st
	var once sync.Once
	var closeErr error
	cl.Close = func(ctx context.Context) error {
		if p.opts.Keep {
			return nil
		}
		once.Do(func() { closeErr = p.destroy(context.WithoutCancel(ctx), st) })
		return closeErr
	}
	return cl, nil
}

// ownCNI says whether gangbench configures the pod network itself: a gangbench node image carries
// no kindnetd, and its kind config disables kind's default CNI.
func ownCNI(pl plan) bool { return nodeimage.IsGangbench(pl.NodeImage) }

// createNodes runs kind's create. kind waits for the control plane to be Ready; the workers are
// waited for below, once their device plugin runs (Ready without GPUs is not ready for gangbench).
func (c *creation) createNodes(ctx context.Context, timeout time.Duration) error {
	opts := []cluster.CreateOption{
		cluster.CreateWithRawConfig(c.config),
		// Never the user's ~/.kube/config: the cluster's kubeconfig lives with its state.
		cluster.CreateWithKubeconfigPath(c.st.Kubeconfig),
		cluster.CreateWithDisplayUsage(false),
		cluster.CreateWithDisplaySalutation(false),
	}
	// With gangbench's CNI no node is Ready before setupCNI runs, after kind returns: kind's wait
	// would only use up the timeout (it does not fail).
	if !ownCNI(c.pl) {
		opts = append(opts, cluster.CreateWithWaitForReady(timeout))
	}
	done := make(chan error, 1)
	go func() {
		done <- withKindEnv(c.st.Engine, c.privArgs, c.st.Network, func() error { return c.api.Create(c.st.Name, opts...) })
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		c.p.log.Warn("create cancelled; waiting for kind to finish creating the nodes so that they can be deleted", "name", c.st.Name)
		err = <-done
		if err == nil {
			err = ctx.Err()
		}
	}
	if err != nil {
		return fmt.Errorf("kind create cluster %q (engine %s, image %s): %w", c.st.Name, c.st.Engine, c.st.NodeImage, err)
	}
	return ctx.Err()
}

// devicePlugin builds the plugin image, loads it into every worker, deploys the DaemonSets (one per
// inventory and GPU API, see plan.plugins) and waits until every GPU worker advertises its
// inventory's GPUs: as allocatable extended resources through the device plugin, in its
// ResourceSlice through the DRA plugin, or both.
func (c *creation) devicePlugin(ctx context.Context, timeout time.Duration) error {
	o := c.p.opts
	ref := c.pl.Spec.Images.Plugin
	if ref == "" {
		ref = defaultPluginRef
	}
	if !c.pluginPreloaded || c.pl.Spec.Images.Plugin != "" {
		if err := c.loadPlugin(ctx, ref); err != nil {
			return err
		}
	}
	plugins := c.pl.plugins(ref)
	// Every DaemonSet first, then the waits: their rollouts overlap.
	for _, d := range plugins {
		if err := o.DeployDevicePlugin(ctx, c.cs, d); err != nil {
			return fmt.Errorf("deploy device plugin (workers %s): %w", d.Selector(), err)
		}
	}
	for _, d := range plugins {
		if d.API.ExtendedResource() {
			if err := o.WaitAllocatable(ctx, c.cs, d.Selector(), d.Inventory, timeout); err != nil {
				return fmt.Errorf("kind workers did not advertise their fake GPUs: %w", err)
			}
		}
		if d.API.DRA() {
			if err := o.WaitPublished(ctx, c.cs, d.Selector(), d.Inventory, timeout); err != nil {
				return fmt.Errorf("kind workers did not publish their fake GPUs: %w", err)
			}
		}
	}
	return nil
}

// scheduler loads the scheduler image (saved from the engine, or built from the binary) into the
// control-plane node, points the scheduler's static pod at it and waits for it; it returns the
// version the new scheduler reports.
func (c *creation) scheduler(ctx context.Context, src *schedulerSource, timeout time.Duration) (string, error) {
	image := src.Image
	archive := filepath.Join(c.dir, "scheduler-image.tar")
	f, err := os.OpenFile(archive, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return "", err
	}
	// The tar goes through a file because kind's LoadImageArchive is not cancellable and a pipe
	// would tie the two failure modes.
	err = src.writeArchive(ctx, c.p.opts.Runner, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	cp := c.nodes.ControlPlane
	if err := loadArchive(ctx, archive, nodesOf(cp)); err != nil {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	_ = os.Remove(archive) // it can be hundreds of MB and is in the node now
	// The kubelet looks the image up by the manifest's name, normalised (short names get the
	// default registry's library/ prefix); an engine that saved it under another name (podman: localhost/<short name>)
	// would leave the scheduler in ErrImageNeverPull, so check the name resolves in the node now.
	if _, err := nodeRun(ctx, cp, nil, "crictl", "inspecti", image); err != nil {
		return "", fmt.Errorf("scheduler image %s was loaded, but the node does not find it under that name (give the image's full name as the engine lists it, e.g. localhost/… for podman): %w", image, err)
	}
	if err := swapScheduler(ctx, cp, image, schedulerFlags(c.pl.Spec)); err != nil {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	if err := waitSchedulerPod(ctx, c.cs, cp.String(), image, timeout); err != nil {
		return "", err
	}
	return src.version(schedulerVersion(ctx, cp, image)), nil
}

// versions records what each component runs. The apiserver answers /version; the other control-plane
// components and the kubelets run the node image's Kubernetes (/kind/version) unless the scheduler
// was replaced; etcd's version is its image tag (kubeadm's "3.6.4-0" → "v3.6.4").
func (c *creation) versions(ctx context.Context, schedVersion string) (map[string]string, error) {
	v := map[string]string{}
	sv, err := c.cs.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("apiserver version: %w", err)
	}
	v[string(clusters.APIServer)] = sv.GitVersion
	nodeVersion, err := nodeutils.KubeVersion(c.nodes.ControlPlane)
	if err != nil {
		return nil, fmt.Errorf("node %s: kubernetes version: %w", c.nodes.ControlPlane.String(), err)
	}
	v[string(clusters.ControllerManager)] = nodeVersion
	v[string(Kubelet)] = nodeVersion
	v[string(clusters.Scheduler)] = nodeVersion
	if schedVersion != "" {
		v[string(clusters.Scheduler)] = schedVersion
	}
	etcd, err := c.cs.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, "etcd-"+c.nodes.ControlPlane.String(), metav1.GetOptions{})
	switch {
	case err == nil && len(etcd.Spec.Containers) > 0:
		v[string(clusters.Etcd)] = etcdVersion(etcd.Spec.Containers[0].Image)
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("etcd version: %w", err)
	}
	return v, nil
}

var imageRevisionRE = regexp.MustCompile(`-\d+$`)

func etcdVersion(image string) string {
	t := imageRevisionRE.ReplaceAllString(imageTag(image), "")
	if !strings.HasPrefix(t, "v") && !strings.HasPrefix(t, "sha256:") {
		t = "v" + t
	}
	return t
}

// kwokNodes starts the kwok controller on this machine against the cluster and creates the
// simulated GPU nodes, then waits until all GPU nodes (workers and simulated) are Ready with GPUs.
func (c *creation) kwokNodes(ctx context.Context, timeout time.Duration) error {
	bin, version, err := c.p.resolveKwok(ctx)
	if err != nil {
		return err
	}
	c.st.Versions[string(clusters.Kwok)] = version
	port, err := c.p.freePort()
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(c.dir, "kwok.yaml")
	if err := kwokcfg.WriteConfig(cfgPath, kwokcfg.Options{LeaseSeconds: c.pl.Spec.NodeLeaseSeconds, PodsStayPending: c.pl.Spec.PodsStayPending}); err != nil {
		return err
	}
	logPath := filepath.Join(c.logDir(), string(clusters.Kwok)+".log")
	launch := kwokLaunch{
		Binary: bin, Args: kwokArgs(c.st.Kubeconfig, cfgPath, port, c.pl.Spec.ExtraArgs[clusters.Kwok]),
		LogPath: logPath, Port: port, Timeout: timeout,
	}
	kp, err := c.p.startKwok(ctx, launch)
	if err != nil {
		return err
	}
	c.st.Kwok, c.st.KwokPort, c.st.KwokLaunch = &kp.Ref, port, &launch
	// Recorded now, so that a failure below (or a crash) still lets Delete stop the controller.
	if err := writeState(c.p.opts.StateDir, c.st); err != nil {
		return err
	}
	// Each group's nodes with its own inventory, labels and taints.
	for i, names := range c.pl.kwokNodeNames() {
		g := c.pl.KwokGroups[i]
		if err := kwokcfg.CreateNodes(ctx, c.cs, names, g.GPU, c.pl.Spec.SimulatedNodeOptions(g.Spec), 32); err != nil {
			return fmt.Errorf("create simulated nodes of %s: %w", g.Field, err)
		}
	}
	err = kwokcfg.WaitNodesReady(ctx, c.cs, fakegpu.LabelManaged+"=true", c.pl.Nodes(), timeout)
	return errKwokNotReady(err, logPath)
}

func (p *Provider) resolveKwok(ctx context.Context) (string, string, error) {
	return resolveKwokBinary(ctx, p.opts)
}

// loadPlugin builds the device plugin image archive and loads it into every worker.
func (c *creation) loadPlugin(ctx context.Context, ref string) error {
	o := c.p.opts
	archive := filepath.Join(c.dir, "fakegpu-device-plugin.tar")
	f, err := os.OpenFile(archive, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = o.BuildPluginArchive(ctx, f, ref)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("device plugin image: %w", err)
	}
	c.p.log.Info("loading the fake GPU device plugin image into the workers", "image", ref, "workers", len(c.nodes.Workers))
	if err := loadArchive(ctx, archive, c.nodes.Workers); err != nil {
		return fmt.Errorf("device plugin image: %w", err)
	}
	return nil
}

// podImageScript names the node's own pause image fakegpu.PodImage: a node image gangbench did
// not build (kindest/node) preloads the pause image under its registry's name, which gangbench's
// code never spells, so pods find it under the one name they use on every node.
var podImageScript = `set -e
src=$(ctr -n k8s.io images ls -q | grep -E '/pause:[^@]+$' | grep -vxF '` + fakegpu.PodImage + `' | head -n1)
[ -n "$src" ] || { echo "no pause image in the node's containerd store to run gangbench's pods with" >&2; exit 3; }
ctr -n k8s.io images tag --force "$src" '` + fakegpu.PodImage + `' >/dev/null
`

// tagPodImage runs podImageScript on every node.
func tagPodImage(ctx context.Context, ns []nodes.Node) error {
	return onNodes(ctx, ns, func(ctx context.Context, n nodes.Node) error {
		if _, err := nodeSh(ctx, n, podImageScript); err != nil {
			return fmt.Errorf("tag the pause image as %s: %w", fakegpu.PodImage, err)
		}
		return nil
	})
}
