package clusters

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gangbench/gangbench/fakegpu"
)

// Kubelet kinds of a node group: whether its nodes run a real kubelet (a container with containerd
// on kind) or are simulated by the kwok controller (node objects whose status kwok keeps).
const (
	RealKubelets   = "real"
	SimulatedNodes = "simulated"
)

// GPUAPI is how a node group's GPUs are published to the scheduler (fakegpu.API: the device plugin's
// extended resource, DRA ResourceSlices, or both).
type GPUAPI = fakegpu.API

// The GPU APIs, named here for callers of this package.
const (
	GPUAPIDevicePlugin = fakegpu.APIDevicePlugin
	GPUAPIDRA          = fakegpu.APIDRA
	GPUAPIBoth         = fakegpu.APIBoth
)

// GPUAPIs lists the accepted GPU APIs.
func GPUAPIs() []GPUAPI { return fakegpu.APIs() }

// NodeGroup is a set of alike nodes of a cluster.
type NodeGroup struct {
	// Count is the number of nodes.
	Count int `json:"count"`
	// Kubelet is RealKubelets or SimulatedNodes; "" is the provider's default (real where it has
	// real kubelets, see Capabilities.RealKubelets).
	Kubelet string `json:"kubelet,omitempty"`
	// GPUs are the fake GPUs of every node of the group; nil means nodes without GPUs.
	GPUs *GroupGPUs `json:"gpus,omitempty"`
	// Labels are added to every node of the group.
	Labels map[string]string `json:"labels,omitempty"`
	// Taints are set on every node of the group.
	Taints []corev1.Taint `json:"taints,omitempty"`
}

// GroupGPUs are a node group's fake GPUs and how they are published.
type GroupGPUs struct {
	// Inventory is each node's GPUs; zero fields get fakegpu's defaults.
	Inventory fakegpu.Inventory `json:"inventory"`
	// API is how the GPUs are published; "" means GPUAPIDevicePlugin.
	API GPUAPI `json:"api,omitempty"`
}

// Images are the container images of a cluster whose nodes run containers (kind).
type Images struct {
	// Node is the node image of every node; "" means gangbench's own node image for the Kubernetes
	// version, built offline (or reused) at create time.
	Node string `json:"node,omitempty"`
	// Scheduler, when set, replaces the control plane's kube-scheduler. Spec.SchedulerBinary is the
	// other way to give the scheduler under test; giving both is an error.
	Scheduler string `json:"scheduler,omitempty"`
	// Plugin is the fake GPU device plugin image; "" means gangbench's own.
	Plugin string `json:"plugin,omitempty"`
}

// IsZero reports whether no image is set, so that a provider without images can refuse any.
func (i Images) IsZero() bool { return i == Images{} }

// Groups is the spec's node groups: NodeGroups, or the shorthand Nodes and GPU as one group of GPU
// nodes of the provider's default kind (none when Nodes is 0, for the provider to default).
func (s Spec) Groups() []NodeGroup {
	if len(s.NodeGroups) > 0 {
		return s.NodeGroups
	}
	if s.Nodes == 0 {
		return nil
	}
	return []NodeGroup{{Count: s.Nodes, GPUs: &GroupGPUs{Inventory: s.GPU, API: s.GPUAPI}}}
}

// GPUNodes counts the nodes of the groups with GPUs.
func GPUNodes(groups []NodeGroup) int {
	n := 0
	for _, g := range groups {
		if g.GPUs != nil {
			n += g.Count
		}
	}
	return n
}

// ValidateShape checks the node groups and images against what a provider can do, before anything
// is built. Errors name the field and its value. Provider-specific limits (counts, which components
// take gates and flags) stay with the provider.
func (s Spec) ValidateShape(c Capabilities) error {
	var errs []error
	if len(s.NodeGroups) > 0 && (s.Nodes != 0 || s.GPU != (fakegpu.Inventory{})) {
		errs = append(errs, fmt.Errorf("nodes %d and gpu %+v given with nodeGroups: give the groups only (nodes and gpu are the shorthand for one group)", s.Nodes, s.GPU))
	}
	if s.Nodes < 0 {
		errs = append(errs, fmt.Errorf("nodes: %d is negative", s.Nodes))
	}
	for i, g := range s.NodeGroups {
		field := fmt.Sprintf("nodeGroups[%d]", i)
		if g.Count < 0 {
			errs = append(errs, fmt.Errorf("%s.count: %d is negative", field, g.Count))
		}
		switch g.Kubelet {
		case "":
		case RealKubelets:
			if !c.RealKubelets {
				errs = append(errs, fmt.Errorf("%s.kubelet: %q: the %s provider has no real kubelets (accepted: %s)", field, g.Kubelet, c.Provider, SimulatedNodes))
			}
		case SimulatedNodes:
			if !c.SimulatedNodes {
				errs = append(errs, fmt.Errorf("%s.kubelet: %q: the %s provider has no simulated nodes", field, g.Kubelet, c.Provider))
			}
		default:
			errs = append(errs, fmt.Errorf("%s.kubelet: %q: accepted %s, %s", field, g.Kubelet, RealKubelets, SimulatedNodes))
		}
		if g.GPUs != nil {
			api := g.GPUs.API
			if api == "" {
				api = GPUAPIDevicePlugin
			}
			if !slices.Contains(c.GPUAPIs, api) {
				errs = append(errs, fmt.Errorf("%s.gpus.api: %q: the %s provider accepts %s", field, g.GPUs.API, c.Provider, joinNames(c.GPUAPIs)))
			}
			if err := g.GPUs.Inventory.WithDefaults().Validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s.gpus.inventory: %w", field, err))
			}
		}
		for k, v := range g.Labels {
			if k == "" {
				errs = append(errs, fmt.Errorf("%s.labels: empty key (value %q)", field, v))
			}
		}
		for j, t := range g.Taints {
			if t.Key == "" || (t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectPreferNoSchedule && t.Effect != corev1.TaintEffectNoExecute) {
				errs = append(errs, fmt.Errorf("%s.taints[%d]: key %q effect %q: want a key and NoSchedule, PreferNoSchedule or NoExecute", field, j, t.Key, t.Effect))
			}
		}
	}
	if !c.Images && !s.Images.IsZero() {
		errs = append(errs, fmt.Errorf("images %+v: the %s provider runs no node containers (no node, scheduler or plugin image)", s.Images, c.Provider))
	}
	if s.Images.Scheduler != "" && s.SchedulerBinary != "" {
		errs = append(errs, fmt.Errorf("scheduler: both an image (%s) and a binary (%s) are given; give one", s.Images.Scheduler, s.SchedulerBinary))
	}
	return errors.Join(errs...)
}

// Capabilities say what a provider's clusters can do, so that callers ask for a capability instead
// of for a provider by name, and a new provider (or a new way of publishing GPUs) needs no caller
// to change.
type Capabilities struct {
	// Provider is the provider's name, for messages only: never decide on it.
	Provider string
	// Creates says the provider creates and deletes clusters (not one that attaches to a cluster
	// someone else made).
	Creates bool
	// ComponentControl lists what Cluster.Control stops, kills and starts; Kubelet stands for
	// every node's kubelet and "kubelet/<node>" for one node's.
	ComponentControl []Component
	// RealKubelets: node groups may run real kubelets (containers with containerd, pods really run).
	RealKubelets bool
	// SimulatedNodes: node groups may be simulated by the kwok controller.
	SimulatedNodes bool
	// GPUFaults: Cluster.GPUs can mark fake GPUs unhealthy.
	GPUFaults bool
	// GPUAPIs are the ways of publishing GPUs the provider supports.
	GPUAPIs []GPUAPI
	// FeatureGates lists the components whose feature gates Spec.ComponentFeatureGates may set.
	FeatureGates []Component
	// RuntimeConfig: Spec.RuntimeConfig reaches the apiserver.
	RuntimeConfig bool
	// Images: the nodes are containers, so Spec.Images applies.
	Images bool
	// KeepRunning: a created cluster can outlive the process that created it by itself; without
	// it a cluster to keep needs a holder process (see NeedsHolder).
	KeepRunning bool
	// NeedsHolder: the cluster's components are child processes of its creator, so keeping it
	// after a run takes a process that holds it (`gangbench cluster create`).
	NeedsHolder bool
	// ProcessAccounting: Cluster.Processes tells the host processes of each component.
	ProcessAccounting bool
	// SchedulerCoverage: the scheduler runs as a process of this machine with the harness's
	// environment, so a coverage-instrumented build writes its counters where GOCOVERDIR says.
	SchedulerCoverage bool
}

// CanControl reports whether Cluster.Control of the provider's clusters stops and starts c
// ("kubelet/<node>" counts as Kubelet).
func (c Capabilities) CanControl(comp Component) bool {
	if strings.HasPrefix(string(comp), string(Kubelet)+"/") {
		comp = Kubelet
	}
	return slices.Contains(c.ComponentControl, comp)
}

// joinNames lists names for a message, "none" when there are none.
func joinNames[S ~string](names []S) string {
	if len(names) == 0 {
		return "none"
	}
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// EarlyKubeconfig is implemented by providers that write a cluster's admin kubeconfig before the
// cluster is ready, so that a progress display can count nodes while Create runs.
type EarlyKubeconfig interface {
	// EarlyKubeconfig is the path the named cluster's admin kubeconfig appears at during Create.
	EarlyKubeconfig(name string) string
}

// SimulatedNodeOptions is what every simulated node of group g carries besides its inventory: the
// group's labels and taints, how its GPUs are published, and (for DRA) its NVLink clique, which is
// the node's rack when the cluster has a topology (the rack label of the group, under the
// topology's rack key) and the node itself otherwise.
func (s Spec) SimulatedNodeOptions(g NodeGroup) fakegpu.NodeOptions {
	opts := fakegpu.NodeOptions{Labels: g.Labels, Taints: g.Taints}
	if g.GPUs != nil {
		opts.GPUAPI = g.GPUs.API
	}
	key := DefaultRackKey
	if s.Topology != nil {
		key = s.Topology.rackKey()
	}
	opts.Clique = g.Labels[key]
	return opts
}

// PublishesDRA reports whether any node group publishes its GPUs through DRA, so the provider must
// create the fake GPUs' DeviceClass.
func (s Spec) PublishesDRA() bool {
	for _, g := range s.Groups() {
		if g.GPUs != nil && g.GPUs.API.DRA() {
			return true
		}
	}
	return false
}
