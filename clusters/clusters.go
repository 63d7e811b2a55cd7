// Package clusters defines what every cluster provider hands to the suites and benchmarks: a small
// Provider interface and the Cluster handle. Suites and perf never care which provider made a cluster.
package clusters

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/gangbench/gangbench/fakegpu"
)

// Component names one control-plane process. The strings are the binary names, so they can be used
// in flags, log file names and error messages without translation.
type Component string

const (
	Etcd              Component = "etcd"
	APIServer         Component = "kube-apiserver"
	ControllerManager Component = "kube-controller-manager"
	Scheduler         Component = "kube-scheduler"
	Kwok              Component = "kwok-controller"
)

// AllComponents lists the components in start order. Teardown uses StopOrder instead.
func AllComponents() []Component {
	return []Component{Etcd, APIServer, ControllerManager, Scheduler, Kwok}
}

// StopOrder is the safe teardown order: the apiserver's clients first, then the apiserver (it waits on
// etcd for a long time if etcd goes first), then etcd.
func StopOrder() []Component {
	return []Component{Scheduler, ControllerManager, Kwok, APIServer, Etcd}
}

// ParseComponent accepts a binary name and returns the Component, so CLI flags can name components.
func ParseComponent(s string) (Component, error) {
	for _, c := range AllComponents() {
		if string(c) == s {
			return c, nil
		}
	}
	return "", fmt.Errorf("unknown component %q (accepted: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok-controller)", s)
}

// ErrNotFound is returned (wrapped) when a named cluster does not exist.
var ErrNotFound = errors.New("cluster not found")

// Spec is what a caller asks of a new cluster. Providers refuse in their validation what does not apply
// to them. It is serialisable (package clusters/request carries it from the CLI to the suites binary):
// ReadyTimeout is written in nanoseconds, as encoding/json writes a time.Duration.
type Spec struct {
	// Name identifies the cluster for list/delete/kubeconfig; empty means "gangbench".
	Name string `json:"name,omitempty"`
	// NodeGroups are the cluster's nodes: how many, real kubelets or simulated, their GPUs and how
	// those are published, labels and taints. Empty means the shorthand Nodes and GPU (see Groups).
	NodeGroups []NodeGroup `json:"nodeGroups,omitempty"`
	// Nodes is shorthand for one group of Nodes GPU nodes of the provider's default kind (simulated
	// by kwok on the local provider, real kubelets on kind); give it or NodeGroups, not both.
	Nodes int `json:"nodes,omitempty"`
	// GPU describes each node's fake GPUs in the Nodes shorthand.
	GPU fakegpu.Inventory `json:"gpu,omitzero"`
	// GPUAPI is how the GPUs of the Nodes shorthand are published; "" is the device plugin's.
	GPUAPI GPUAPI `json:"gpuAPI,omitempty"`
	// Topology records the blocks and racks the GPU node groups were laid out in (--topology): the
	// groups already carry its labels, one group per rack; this says which keys mean what, for
	// reports and for runs that place gangs by topology.
	Topology *Topology `json:"topology,omitempty"`
	// Images are the node, scheduler and device plugin images, for providers whose nodes are
	// containers (Capabilities.Images).
	Images Images `json:"images,omitzero"`
	// KubernetesVersion of the control plane, e.g. "v1.37.2".
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// Features are the workload features (FeatureSets) the cluster was asked to host; ApplyFeatures
	// has already put their gates and API versions into FeatureGates and RuntimeConfig.
	Features []string `json:"features,omitempty"`
	// FeatureGates are set on every Kubernetes component, over the defaults (GangFeatureGates).
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// ComponentFeatureGates override FeatureGates for one component, e.g. the scheduler with
	// GenericWorkload=false to prove that a suite can fail.
	ComponentFeatureGates map[Component]map[string]bool `json:"componentFeatureGates,omitempty"`
	// RuntimeConfig is passed to kube-apiserver --runtime-config over the default
	// (GangRuntimeConfig: scheduling.k8s.io/v1beta1=true on v1.37). A value of "false" removes an API.
	RuntimeConfig map[string]string `json:"runtimeConfig,omitempty"`
	// ExtraArgs are flags per component ("--name" without dashes → value); they override defaults.
	ExtraArgs map[Component]map[string]string `json:"extraArgs,omitempty"`
	// SchedulerBinary, when set, is run as the scheduler under test instead of the built one.
	SchedulerBinary string `json:"schedulerBinary,omitempty"`
	// KubeBinDir, when set, holds prebuilt kube-apiserver, kube-controller-manager, kube-scheduler
	// (and optionally etcd, kwok) used instead of the build cache.
	KubeBinDir string `json:"kubeBinDir,omitempty"`
	// ReadyTimeout bounds the whole create (components and nodes Ready); zero means a default.
	ReadyTimeout time.Duration `json:"readyTimeout,omitempty"`
	// NodeLeaseSeconds is the lease duration of the simulated nodes; kwok renews each lease a
	// quarter of it apart, as a kubelet does. Zero means the kubelet's default, 40 s. A longer one
	// (perf's quiet profile) takes the renewal load off the control plane; the controller-manager's
	// node-monitor-grace-period is then raised to match (NodeMonitorGracePeriod), so that the node
	// lifecycle controller does not mark nodes NotReady between renewals.
	NodeLeaseSeconds int `json:"nodeLeaseSeconds,omitempty"`
	// PodsStayPending: kwok leaves a pod bound to a simulated node as its binding left it
	// (PodScheduled=True, phase Pending) instead of making it Running and Ready, as in upstream
	// scheduler_perf, which runs no kubelet. perf's quiet profile sets it: the status write per pod
	// and its watch events were a fifth of the apiserver's CPU at 5000 nodes. Real kubelets' pods
	// (kind workers) are not affected, and deleted pods still go away.
	PodsStayPending bool `json:"podsStayPending,omitempty"`
}

// DefaultNodeLeaseSeconds is the kubelet's default node lease duration.
const DefaultNodeLeaseSeconds = 40

// NodeMonitorGracePeriod is the kube-controller-manager --node-monitor-grace-period that goes with
// a node lease duration: "" for the default lease (the controller-manager's own default, 50 s,
// then applies), else the lease duration plus the default's 10 s of slack. A lease renewed every
// quarter of its duration is then never older than the grace period while kwok runs.
func NodeMonitorGracePeriod(leaseSeconds int) string {
	if leaseSeconds == 0 || leaseSeconds == DefaultNodeLeaseSeconds {
		return ""
	}
	return strconv.Itoa(leaseSeconds+10) + "s"
}

// DefaultKubernetesVersion is the version built and run when a caller does not choose one.
const DefaultKubernetesVersion = "v1.37.2"

// DefaultName is the cluster name used when none is given.
const DefaultName = "gangbench"

// Info is one line of `cluster list`.
type Info struct {
	Name     string
	Provider string
	Created  time.Time
	// Status is "running", or "stale" when its processes are gone but its state remains.
	Status string
	Nodes  int
}

// Provider creates and deletes clusters of one kind.
type Provider interface {
	// Name is the provider's name as users type it ("local", "kind", "existing").
	Name() string
	// Capabilities say what the provider's clusters can do; callers decide on them, not on Name.
	Capabilities() Capabilities
	// Validate checks a spec with the rules Create applies, before anything is built or started,
	// so a caller that hands the spec on (to another process) refuses a bad one early.
	Validate(spec Spec) error
	// Create starts a cluster and returns once it is ready to schedule pods on Nodes GPU nodes.
	Create(ctx context.Context, spec Spec) (*Cluster, error)
	// Get returns the handle of a cluster created earlier, possibly by another process.
	Get(ctx context.Context, name string) (*Cluster, error)
	// Delete removes a cluster and everything it left on the machine.
	Delete(ctx context.Context, name string) error
	// List returns the clusters this provider knows about.
	List(ctx context.Context) ([]Info, error)
}

// Cluster is the handle suites and perf work with.
type Cluster struct {
	Name     string
	Provider string
	// KubeconfigPath is an admin kubeconfig for the cluster.
	KubeconfigPath string
	// RESTConfig is built from KubeconfigPath; callers copy it before changing QPS or Burst.
	RESTConfig *rest.Config
	// APIServerMetrics and SchedulerMetrics are the /metrics endpoints with credentials that may read
	// them. SchedulerMetrics.URL is empty when the scheduler's metrics are not reachable.
	APIServerMetrics Endpoint
	SchedulerMetrics Endpoint
	// Versions maps each component to the version it reported (`--version`).
	Versions map[Component]string
	// LogDir holds one log file per component (empty when the provider has no logs).
	LogDir string
	// ComponentLog returns the last lines of a component's log for failure artifacts, when its log
	// is not a file in LogDir (on kind the control plane logs inside the node); nil means LogDir.
	ComponentLog func(ctx context.Context, c Component, lines int) ([]byte, error)
	// Nodes is the number of GPU nodes the cluster was created with.
	Nodes int
	// GPU is the per-node inventory.
	GPU fakegpu.Inventory
	// Control stops, kills and restarts components for fault injection; nil when the provider cannot.
	Control ComponentControl
	// GPUs marks the nodes' fake GPUs unhealthy and healthy again for fault injection; nil when the
	// provider cannot (a cluster gangbench did not create: its nodes are not ours to change).
	GPUs GPUControl
	// SchedulerName is the scheduler under test's profile name pods should use.
	SchedulerName string
	// Processes returns the host process ids behind each component, for resource accounting (on
	// kind: the processes inside the node containers, and kwok beside them); ids change when a
	// component restarts, so callers ask again. nil when the provider cannot tell (a cluster
	// gangbench did not create).
	Processes func(ctx context.Context) (map[Component][]int, error)
	// Close releases what this handle holds in this process (for the local provider owned by this
	// process: the whole cluster). It is safe to call more than once.
	Close func(ctx context.Context) error
}

// ComponentControl is the fault-injection seam.
type ComponentControl interface {
	// Stop sends SIGTERM and waits (bounded) for the component to exit.
	Stop(ctx context.Context, c Component) error
	// Kill sends SIGKILL and waits for the component to exit.
	Kill(ctx context.Context, c Component) error
	// Start starts a stopped component with the flags it had and waits until it is ready.
	Start(ctx context.Context, c Component) error
	// Restart is Stop followed by Start.
	Restart(ctx context.Context, c Component) error
}

// Kubelet names the kubelets of a cluster with real nodes (kind) for ComponentControl: "kubelet" is
// every node's kubelet, "kubelet/<node>" one node's. It is not in AllComponents: the local provider
// has no kubelets (kwok plays them), so only providers with real nodes accept it.
const Kubelet Component = "kubelet"

// ErrNoDevicePlugin is returned (wrapped) by GPUControl.PluginRegistrations for a node whose GPUs do
// not come from a device plugin (a kwok-simulated node).
var ErrNoDevicePlugin = errors.New("no device plugin on this node")

// GPUControl is the fault-injection seam for GPUs. On a node with a real kubelet it goes through the
// fake GPU device plugin, and the kubelet then lowers the node's allocatable; on a simulated node,
// where no kubelet runs, it does what that kubelet would do: it lowers the node's allocatable
// nvidia.com/gpu and leaves its capacity.
type GPUControl interface {
	// SetUnhealthyGPUs makes exactly n of node's GPUs unhealthy and the others healthy, so n = 0
	// heals the node. It returns once the change is made where it originates (the device plugin, or
	// the node status); the node's allocatable follows at the kubelet's next status update.
	SetUnhealthyGPUs(ctx context.Context, node string, n int) error
	// PluginNodes lists the nodes whose GPUs come from a device plugin registered with a real
	// kubelet, in name order; none on a provider without kubelets.
	PluginNodes(ctx context.Context) ([]string, error)
	// PluginRegistrations reports how often node's device plugin has registered with its kubelet
	// since the plugin started: a kubelet restart that the plugin survived increments it.
	PluginRegistrations(ctx context.Context, node string) (int, error)
}

// GangFeatureGates are the gates every component of a control plane of that Kubernetes version runs
// with so that it serves and schedules gangs: v1.37 needs GenericWorkload (beta, off by default),
// and rejects the v1.36 gates as unrecognised; v1.36 needs GenericWorkload, GangScheduling and
// WorkloadAwarePreemption, all alpha (gang-semantics-v1.37.md §10). A version that does not parse
// gets v1.37's: version validation reports it where the version is read.
func GangFeatureGates(kubernetesVersion string) map[string]bool {
	if MinorOf(kubernetesVersion) == 36 {
		return map[string]bool{"GenericWorkload": true, "GangScheduling": true, "WorkloadAwarePreemption": true}
	}
	return map[string]bool{"GenericWorkload": true}
}

// GangRuntimeConfig is the kube-apiserver --runtime-config that serves the gang API of that
// Kubernetes version: scheduling.k8s.io/v1beta1 on v1.37, v1alpha2 on v1.36. Neither is on by
// default.
func GangRuntimeConfig(kubernetesVersion string) map[string]string {
	if MinorOf(kubernetesVersion) == 36 {
		return map[string]string{"scheduling.k8s.io/v1alpha2": "true"}
	}
	return map[string]string{"scheduling.k8s.io/v1beta1": "true"}
}

// GangMinMinor is the oldest minor version whose gang API gangbench speaks (v1.36: v1alpha2).
const GangMinMinor = 36

// MinorOf returns the minor version of "v1.37.2", or -1 when it does not parse as v1.MINOR….
func MinorOf(v string) int {
	rest, ok := strings.CutPrefix(v, "v1.")
	if !ok {
		return -1
	}
	m, _, _ := strings.Cut(rest, ".")
	n, err := strconv.Atoi(m)
	if err != nil || n < 0 {
		return -1
	}
	return n
}
