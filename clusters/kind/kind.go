// Package kind is the cluster provider that runs real Kubernetes nodes as containers with the
// sigs.k8s.io/kind Go library (never the kind CLI): one control-plane node and the spec's real-kubelet worker
// nodes whose real kubelets get fake GPUs from gangbench's device plugin, optionally the scheduler
// under test swapped in from a user image or binary, and optionally kwok-simulated GPU nodes on top.
//
// It needs a container engine (docker, podman or nerdctl) whose daemon answers; Create checks that
// first and fails within seconds, naming every engine it tried, when none does.
//
// State: every cluster this package creates has a state file <StateDir>/<name>.json and a directory
// <StateDir>/<name>/ (kubeconfig, client certificate for the scheduler's metrics, kwok config and log).
// List, Get and Delete only ever touch clusters with a state file, so `cluster delete --all` never
// removes a kind cluster that someone made by hand.
package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
	kwokcfg "github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/fakegpu"
)

// ProviderName is how users select this provider.
const ProviderName = "kind"

// Kubelet names the kubelets of a kind cluster for ComponentControl, which clusters.Component has no
// constant for because only this provider has real kubelets. "kubelet" means every node's kubelet,
// "kubelet/<node>" one node's (e.g. "kubelet/gangbench-worker2").
const Kubelet clusters.Component = "kubelet"

// Labels kind puts on its worker nodes (through the kind config, i.e. the kubelet's --node-labels).
const (
	// LabelWorker marks the kind worker nodes that run the fake device plugin; its DaemonSets select
	// on it and readiness waits use it, so the control-plane node and kwok nodes are never waited for.
	LabelWorker = "gangbench.dev/kind-worker"
	// LabelPlainWorker marks the kind workers without GPUs (a node group of real kubelets without GPUs).
	LabelPlainWorker = "gangbench.dev/kind-plain-worker"
	// LabelGPUInventory is on every GPU worker: the index of its inventory and GPU API among the
	// cluster's distinct GPU worker inventories and APIs ("0", "1", …). With more than one, each
	// one's device plugin DaemonSet selects its workers on it (a DaemonSet advertises one inventory,
	// one way).
	LabelGPUInventory = "gangbench.dev/kind-gpu-inventory"
	// schedulerMetricsContainerPort is kube-scheduler's secure port inside the control-plane node.
	schedulerMetricsContainerPort = 10259
	// kwokNodePrefix names the simulated nodes, as the local provider does.
	kwokNodePrefix = "gpu-node"
)

// Engines are the container engines kind can run nodes on, in the order DetectEngine tries them.
func Engines() []string { return []string{"docker", "podman", "nerdctl"} }

// PluginDeployment is what one fake device plugin DaemonSet is deployed with (a cluster has one per
// GPU worker inventory).
type PluginDeployment struct {
	// Image is the plugin image reference, already loaded into every worker node.
	Image string
	// Inventory is the fake GPUs each worker advertises.
	Inventory fakegpu.Inventory
	// API is how the workers publish them: the device plugin, the DRA plugin or both.
	API fakegpu.API
	// CliqueLabel is the node label the DRA plugin reads its GPUs' NVLink clique from (the
	// topology's rack key).
	CliqueLabel string
	// NodeSelector restricts the DaemonSet to the kind workers of Inventory.
	NodeSelector map[string]string
	// Instance tells apart the DaemonSets of a cluster whose GPU workers have several inventories
	// (fakegpu/deploy Options.Instance); "" for the one DaemonSet of a cluster with one inventory.
	Instance string
}

// Selector is NodeSelector as a label selector string, for the readiness wait.
func (d PluginDeployment) Selector() string { return labels.SelectorFromSet(d.NodeSelector).String() }

// Options configure the provider: its mechanics (engine, state, ports, keep, seams for tests).
// The cluster's shape (workers, kwok nodes, images, GPUs) is the Spec's, never an option, so one
// provider creates clusters of any shape. Zero fields get the defaults documented on each.
type Options struct {
	// Engine is "docker", "podman", "nerdctl" or "" to take the first whose daemon answers.
	Engine string
	// SchedulerMetricsPort is the host loopback port the scheduler's 10259 is published on; 0 means a
	// free one chosen at create time. RenderConfig leaves the port mapping out when it is 0.
	SchedulerMetricsPort int
	// KwokBinary is the kwok controller binary; "" means the k8sbin cache (built there if missing).
	KwokBinary string
	// Bins says where the kwok binary is cached and built (CacheDir, Progress).
	Bins k8sbin.Options
	// Keep makes Cluster.Close leave the cluster running (it is then removed with Delete).
	Keep bool
	// StateDir is where cluster state files live; "" means DefaultStateDir().
	StateDir string
	// ModuleRoot is the gangbench module source the device plugin binary is built from; "" means the
	// enclosing module of the working directory.
	ModuleRoot string
	// Logger receives progress (kind's own messages included); nil discards.
	Logger *slog.Logger
	// Runner runs container engine CLI commands (`<engine> info`, `<engine> save`); nil means
	// ExecRunner. Tests inject fakes.
	Runner Runner

	// BuildPluginArchive writes a docker-archive tar of the device plugin image tagged ref to w; nil
	// means building it with the fakegpu/image package (see defaults.go).
	BuildPluginArchive func(ctx context.Context, w io.Writer, ref string) error
	// DeployDevicePlugin applies one device plugin DaemonSet (Create calls it once per GPU worker
	// inventory); nil means fakegpu/deploy.Apply.
	DeployDevicePlugin func(ctx context.Context, cs kubernetes.Interface, d PluginDeployment) error
	// EnsureNodeImage returns gangbench's node image for a Kubernetes version in engine, building it
	// when missing; nil means EnsureNodeImage with Bins and ModuleRoot.
	EnsureNodeImage func(ctx context.Context, kubeVersion, engine string) (string, error)
	// ProbePrivilege says how engine runs kind nodes of image (see ProbePrivilege); nil means
	// ProbePrivilege with Runner.
	ProbePrivilege func(ctx context.Context, engine, image string) ([]string, error)
	// WaitAllocatable waits until every node matching selector advertises inv's GPUs; nil means
	// fakegpu/deploy.WaitAllocatable.
	WaitAllocatable func(ctx context.Context, cs kubernetes.Interface, selector string, inv fakegpu.Inventory, timeout time.Duration) error
	// WaitPublished waits until every node matching selector publishes inv's GPUs in its
	// ResourceSlice (workers whose GPU API is DRA); nil means fakegpu/deploy.WaitPublished.
	WaitPublished func(ctx context.Context, cs kubernetes.Interface, selector string, inv fakegpu.Inventory, timeout time.Duration) error
}

// Option changes Options.
type Option func(*Options)

// WithOptions replaces all options at once (later Options still apply on top).
func WithOptions(o Options) Option { return func(p *Options) { *p = o } }

// WithEngine selects the container engine ("docker", "podman", "nerdctl"; "" auto-detects).
func WithEngine(engine string) Option { return func(o *Options) { o.Engine = engine } }

// WithStateDir keeps cluster state under dir.
func WithStateDir(dir string) Option { return func(o *Options) { o.StateDir = dir } }

// WithLogger sets where progress goes.
func WithLogger(l *slog.Logger) Option { return func(o *Options) { o.Logger = l } }

// WithKeep makes Cluster.Close leave the cluster running.
func WithKeep(keep bool) Option { return func(o *Options) { o.Keep = keep } }

// WithBinaries says where the kwok binary is cached.
func WithBinaries(b k8sbin.Options) Option { return func(o *Options) { o.Bins = b } }

// Provider creates kind clusters. The zero value is not usable; call New.
type Provider struct {
	opts Options
	log  *slog.Logger

	// Seams for tests; New sets the real implementations.
	newKind   func(engine string) kindAPI
	newClient func(*rest.Config) (kubernetes.Interface, error)
	startKwok func(ctx context.Context, k kwokLaunch) (*kwokProc, error)
	freePort  func() (int, error)
}

var _ clusters.Provider = (*Provider)(nil)

// New returns a kind provider. Nothing is checked against the machine here (so `gangbench doctor`
// and `cluster list` work without an engine); Create checks the engine first.
func New(opts ...Option) (*Provider, error) {
	var o Options
	for _, f := range opts {
		f(&o)
	}
	if o.Engine != "" && !isEngine(o.Engine) {
		return nil, fmt.Errorf("kind: unknown container engine %q (accepted: %s, or empty to detect)", o.Engine, strings.Join(Engines(), ", "))
	}
	if o.StateDir == "" {
		d, err := DefaultStateDir()
		if err != nil {
			return nil, err
		}
		o.StateDir = d
	}
	if o.Runner == nil {
		o.Runner = ExecRunner
	}
	wireDefaults(&o)
	p := &Provider{opts: o, log: o.Logger}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.newKind = func(engine string) kindAPI { return newKindProvider(engine, p.log) }
	p.newClient = func(c *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(c) }
	p.startKwok = startKwokProcess
	p.freePort = freeLoopbackPort
	return p, nil
}

// Name implements clusters.Provider.
func (p *Provider) Name() string { return ProviderName }

func isEngine(s string) bool {
	for _, e := range Engines() {
		if e == s {
			return true
		}
	}
	return false
}

// nameRE is the local provider's rule; kind also needs the name to be a valid container name prefix,
// which this is.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$`)

func validateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("cluster name %q: must be 1-42 lowercase letters, digits or '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// plan is a Spec resolved into what will be created.
type plan struct {
	Spec clusters.Spec
	// Workers, PlainWorkers and KwokNodes count the nodes of each kind over all of its groups.
	Workers      int
	PlainWorkers int
	KwokNodes    int
	// GPU is the first GPU group's inventory, the one the handle and the state report
	// (clusters.Cluster carries one inventory, as on the local provider).
	GPU fakegpu.Inventory
	// Inventories are the distinct inventories and GPU APIs of the real GPU workers in the order
	// the groups first use them: each gets its own device plugin DaemonSet (see plugins).
	Inventories []workerGPUs
	// GPUGroups, PlainGroups and KwokGroups are the node groups of each kind, in spec order.
	GPUGroups, PlainGroups, KwokGroups []nodeGroup
	NodeImage                          string
}

// workerGPUs is what one device plugin DaemonSet gives its workers.
type workerGPUs struct {
	Inventory fakegpu.Inventory
	API       fakegpu.API
}

// nodeGroup is one node group as the kind provider creates it.
type nodeGroup struct {
	// Field names the group in messages: "nodeGroups[2]", or "nodes" for the shorthand.
	Field string
	Count int
	// GPU is each node's inventory with defaults applied; the zero value for plain workers.
	GPU fakegpu.Inventory
	// API is how the GPUs are published (defaulted to the device plugin's); "" for plain workers.
	API fakegpu.API
	// Inventory is the index of GPU and API in plan.Inventories (real GPU workers only).
	Inventory int
	Labels    map[string]string
	Taints    []corev1.Taint
	// Spec is the group as the spec gives it.
	Spec clusters.NodeGroup
}

// Nodes is the number of GPU nodes: kind workers plus kwok nodes.
func (pl plan) Nodes() int { return pl.Workers + pl.KwokNodes }

// plugins are the device plugin DaemonSets of the cluster, each with the image ref. GPU workers that
// share one inventory and GPU API get the one DaemonSet a kind cluster always had (selecting
// LabelWorker); several get one DaemonSet each, selecting its workers on LabelGPUInventory too,
// because a DaemonSet's pods all run with the same arguments (the inventory, the API).
func (pl plan) plugins(ref string) []PluginDeployment {
	clique := pl.cliqueLabel()
	if len(pl.Inventories) == 1 {
		w := pl.Inventories[0]
		return []PluginDeployment{{Image: ref, Inventory: w.Inventory, API: w.API, CliqueLabel: clique, NodeSelector: map[string]string{LabelWorker: "true"}}}
	}
	out := make([]PluginDeployment, 0, len(pl.Inventories))
	for i, w := range pl.Inventories {
		idx := strconv.Itoa(i)
		out = append(out, PluginDeployment{
			Image: ref, Inventory: w.Inventory, API: w.API, CliqueLabel: clique, Instance: idx,
			NodeSelector: map[string]string{LabelWorker: "true", LabelGPUInventory: idx},
		})
	}
	return out
}

// cliqueLabel is the label whose value is a worker's NVLink clique for the DRA plugin: the rack
// key, which is what clusters.Spec.SimulatedNodeOptions takes the clique of simulated nodes from.
// A worker without it is its own clique.
func (pl plan) cliqueLabel() string {
	if t := pl.Spec.Topology; t != nil && t.RackKey != "" {
		return t.RackKey
	}
	return clusters.DefaultRackKey
}

// kwokNodeNames are the simulated nodes' names, group by group: one numbering over all kwok groups
// (gpu-node-0 …), as on the local provider, so that names are unique across groups and a cluster of
// one group keeps the names it always had.
func (pl plan) kwokNodeNames() [][]string {
	all := kwokcfg.NodeNames(kwokNodePrefix, pl.KwokNodes)
	out := make([][]string, len(pl.KwokGroups))
	for i, g := range pl.KwokGroups {
		out[i], all = all[:g.Count:g.Count], all[g.Count:]
	}
	return out
}

// defaultWorkers is the number of GPU workers of a spec that gives no nodes.
const defaultWorkers = 2

// Validate implements clusters.Provider: the rules Create applies, checked before anything is built
// or started, so callers that hand a cluster request to another process (gangbench e2e to the
// suites binary) refuse a bad one before compiling anything.
func (p *Provider) Validate(spec clusters.Spec) error {
	_, err := resolve(spec)
	return err
}

// Capabilities implements clusters.Provider. Component control offers what perf's faults were
// proven with: the scheduler's and controller-manager's static pods and the kubelets (systemd in the
// node containers). Control also restarts the apiserver and the kwok controller, which the
// conformance suites' own fault features use directly, but perf has not measured those on kind,
// so they are not advertised (perf refuses such a fault as before).
func (p *Provider) Capabilities() clusters.Capabilities { return capabilities() }

func capabilities() clusters.Capabilities {
	return clusters.Capabilities{
		Provider: ProviderName, Creates: true,
		ComponentControl: []clusters.Component{clusters.Scheduler, clusters.ControllerManager, clusters.Kubelet},
		RealKubelets:     true, SimulatedNodes: true, GPUFaults: true,
		GPUAPIs:       clusters.GPUAPIs(),
		FeatureGates:  []clusters.Component{clusters.APIServer, clusters.ControllerManager, clusters.Scheduler},
		RuntimeConfig: true, Images: true, KeepRunning: true, ProcessAccounting: true,
	}
}

// maxRealWorkers bounds the kind worker containers: each runs a kubelet and containerd, and more
// than a few dozen on one machine is a mistake (kwok nodes are for scale).
const maxRealWorkers = 50

// resolvedInventory is a group's inventory as its nodes get it: the zero inventory means
// fakegpu's default GPUs (8), any other gets the defaults of its empty fields.
func resolvedInventory(inv fakegpu.Inventory) fakegpu.Inventory {
	if inv == (fakegpu.Inventory{}) {
		inv = fakegpu.Default()
	}
	return inv.WithDefaults()
}

// groups sorts the spec's node groups into the three kinds of node a kind cluster has: GPU workers
// (real kubelets and the device plugin), plain workers (real, no GPUs) and kwok nodes (simulated
// GPU nodes). Any number of groups of each kind, each with its own labels, taints and inventory:
// real workers get theirs through their kind config node (labels as kubelet flags, taints at
// kubeadm join, one device plugin DaemonSet per distinct inventory), kwok nodes at creation.
func (pl *plan) groups(spec clusters.Spec) []error {
	var errs []error
	groups := spec.Groups()
	if len(groups) == 0 {
		groups = []clusters.NodeGroup{{Count: defaultWorkers, GPUs: &clusters.GroupGPUs{Inventory: spec.GPU, API: spec.GPUAPI}}}
	}
	first := true
	for i, g := range groups {
		ng := nodeGroup{Field: fmt.Sprintf("nodeGroups[%d]", i), Count: g.Count, Labels: g.Labels, Taints: g.Taints, Spec: g}
		invField := ng.Field + ".gpus.inventory"
		if len(spec.NodeGroups) == 0 {
			ng.Field, invField = "nodes", "gpu"
		}
		errs = append(errs, nodeMetaErrors(ng)...)
		real := g.Kubelet != clusters.SimulatedNodes
		if g.GPUs != nil {
			ng.GPU = resolvedInventory(g.GPUs.Inventory)
			ng.API = g.GPUs.API
			if ng.API == "" {
				ng.API = clusters.GPUAPIDevicePlugin
			}
			if len(spec.NodeGroups) == 0 {
				// The shorthand's inventory is spec.GPU, which ValidateShape does not check.
				if err := ng.GPU.Validate(); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", invField, err))
				}
			}
			if first && g.Count > 0 {
				pl.GPU, first = ng.GPU, false
			}
		}
		switch {
		case real && g.GPUs != nil:
			if ng.GPU.Count < 1 {
				errs = append(errs, fmt.Errorf("%s.count: %d: real GPU workers need at least one GPU (leave gpus out for workers without GPUs)", invField, ng.GPU.Count))
			}
			w := workerGPUs{Inventory: ng.GPU, API: ng.API}
			ng.Inventory = slices.Index(pl.Inventories, w)
			if ng.Inventory < 0 && g.Count > 0 {
				ng.Inventory = len(pl.Inventories)
				pl.Inventories = append(pl.Inventories, w)
			}
			pl.GPUGroups = append(pl.GPUGroups, ng)
			pl.Workers += g.Count
		case real:
			pl.PlainGroups = append(pl.PlainGroups, ng)
			pl.PlainWorkers += g.Count
		case g.GPUs != nil:
			pl.KwokGroups = append(pl.KwokGroups, ng)
			pl.KwokNodes += g.Count
		default:
			errs = append(errs, fmt.Errorf("%s: simulated nodes without GPUs: the kind provider's kwok nodes all have GPUs", ng.Field))
		}
	}
	if pl.Workers < 1 {
		errs = append(errs, fmt.Errorf("nodes: %d real GPU workers: the kind provider needs at least one (it runs the device plugin)", pl.Workers))
	}
	return errs
}

// nodeMetaErrors checks a group's labels and taints as the kubelet (at join) or the apiserver (kwok
// node creation) would, so a bad one fails before any container exists. Emptiness and effects are
// ValidateShape's.
func nodeMetaErrors(g nodeGroup) []error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(g.Labels)) {
		if k == "" {
			continue
		}
		if msgs := content.IsLabelKey(k); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s.labels: key %q: %s", g.Field, k, strings.Join(msgs, "; ")))
		}
		if msgs := content.IsLabelValue(g.Labels[k]); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s.labels[%q]: value %q: %s", g.Field, k, g.Labels[k], strings.Join(msgs, "; ")))
		}
	}
	for j, t := range g.Taints {
		if t.Key == "" {
			continue
		}
		if msgs := content.IsLabelKey(t.Key); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s.taints[%d].key: %q: %s", g.Field, j, t.Key, strings.Join(msgs, "; ")))
		}
		if msgs := content.IsLabelValue(t.Value); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s.taints[%d].value: %q: %s", g.Field, j, t.Value, strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// resolve fills defaults and checks the spec. It is pure, so RenderConfig and Create see the same
// numbers.
func resolve(spec clusters.Spec) (plan, error) {
	if spec.Name == "" {
		spec.Name = clusters.DefaultName
	}
	if spec.ReadyTimeout == 0 {
		spec.ReadyTimeout = 5 * time.Minute
	}
	var errs []error
	if err := validateName(spec.Name); err != nil {
		errs = append(errs, err)
	}
	if err := spec.ValidateShape(capabilities()); err != nil {
		errs = append(errs, err)
	}
	pl := plan{Spec: spec}
	errs = append(errs, pl.groups(spec)...)
	if pl.Workers > maxRealWorkers {
		errs = append(errs, fmt.Errorf("workers: %d real GPU workers over all groups is out of range (accepted: 1 to %d; use kwok nodes for scale)", pl.Workers, maxRealWorkers))
	}
	if pl.PlainWorkers < 0 || pl.Workers+pl.PlainWorkers > maxRealWorkers {
		errs = append(errs, fmt.Errorf("plain workers: %d over all groups next to %d GPU workers is out of range (accepted: 0 to %d)", pl.PlainWorkers, pl.Workers, max(0, maxRealWorkers-pl.Workers)))
	}
	if pl.KwokNodes < 0 || pl.KwokNodes > 20000 {
		errs = append(errs, fmt.Errorf("kwok nodes: %d over all groups is out of range (accepted: 0 to 20000)", pl.KwokNodes))
	}
	img, err := nodeImage(spec.KubernetesVersion, spec.Images.Node)
	if err != nil {
		errs = append(errs, err)
	}
	pl.NodeImage = img
	for c := range spec.ExtraArgs {
		if !argsSupported(c) {
			errs = append(errs, fmt.Errorf("extra args for %q: not supported on kind (accepted: kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok-controller)", c))
		}
	}
	if len(spec.ExtraArgs[clusters.Kwok]) > 0 && pl.KwokNodes == 0 {
		errs = append(errs, errors.New("extra args for kwok-controller given, but no kwok nodes (and so no kwok controller) are requested"))
	}
	for c := range spec.ComponentFeatureGates {
		if _, ok := kubeadmComponent(c); !ok {
			errs = append(errs, fmt.Errorf("feature gates for %q: not supported on kind (accepted: kube-apiserver, kube-controller-manager, kube-scheduler)", c))
		}
	}
	if spec.KubeBinDir != "" {
		errs = append(errs, errors.New("kube bin dir: the kind provider runs the components of its node image; use the node image option instead"))
	}
	if err := errors.Join(errs...); err != nil {
		return plan{}, fmt.Errorf("invalid kind cluster spec: %w", err)
	}
	return pl, nil
}

func argsSupported(c clusters.Component) bool {
	if c == clusters.Kwok || c == clusters.Etcd {
		return true
	}
	_, ok := kubeadmComponent(c)
	return ok
}

var kindNodeTagRE = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)`)

// nodeImage picks the node image: the one given, or "" when gangbench's own node image for the
// version is to be built (or reused) at create time (see package nodeimage: no registry is needed,
// and the image carries exactly the version asked for). A Kubernetes older than v1.36 is refused:
// kind renders kubeadm v1beta4 (list-style extraArgs, which our patches use) only from v1.36, and
// the gang API needs v1.37 anyway.
func nodeImage(kubeVersion, explicit string) (string, error) {
	img := explicit
	if img == "" {
		if kubeVersion == "" {
			return "", nil
		}
		if err := k8sbin.ValidateKubeVersion(kubeVersion); err != nil {
			return "", err
		}
		if m := kindNodeTagRE.FindStringSubmatch(kubeVersion); m != nil {
			if major, _ := strconv.Atoi(m[1]); major == 1 {
				if minor, _ := strconv.Atoi(m[2]); minor < 36 {
					return "", fmt.Errorf("kubernetes %s is too old for the kind provider (it needs v1.36 or later: kubeadm v1beta4; gang scheduling needs v1.37)", kubeVersion)
				}
			}
		}
		return "", nil
	}
	ref, _, _ := strings.Cut(img, "@")
	if i := strings.LastIndex(ref, ":"); i >= 0 && !strings.Contains(ref[i:], "/") {
		if m := kindNodeTagRE.FindStringSubmatch(ref[i+1:]); m != nil {
			major, _ := strconv.Atoi(m[1])
			minor, _ := strconv.Atoi(m[2])
			if major == 1 && minor < 36 {
				return "", fmt.Errorf("node image %s: Kubernetes %s is too old (the kind provider needs v1.36 or later: kubeadm v1beta4; gang scheduling needs v1.37)", img, ref[i+1:])
			}
		}
	}
	return img, nil
}
