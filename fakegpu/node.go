package fakegpu

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodImage is the image gangbench's pods run (the pause image). Simulated nodes never pull it; every
// kind node holds it under this name, preloaded in gangbench's node image and tagged from the node's
// own pause image on any other, so no node is ever asked to pull it (no registry serves the name).
const PodImage = "gangbench.dev/k8s/pause:pod"

const (
	// AnnotationKwokNode is what kwok is started with as --manage-nodes-with-annotation-selector
	// (kwok.x-k8s.io/node=fake): only nodes carrying it are simulated, so a real kubelet's node in the
	// same cluster is never touched.
	AnnotationKwokNode = "kwok.x-k8s.io/node"
	// AnnotationKwokNodeValue is the value of AnnotationKwokNode.
	AnnotationKwokNodeValue = "fake"
	// AnnotationNodeTTL is the TTL the ttl controller would set; "0" tells kubelets (and anything that
	// reads it) not to cache configmaps/secrets, and setting it up front saves the controller one
	// update per node when hundreds are created.
	AnnotationNodeTTL = "node.alpha.kubernetes.io/ttl"

	// labelOSBeta and labelArchBeta are the kubelet's beta OS and architecture labels
	// (k8s.io/kubelet/pkg/apis LabelOS, LabelArch), which the node lifecycle controller reconciles.
	labelOSBeta   = "beta.kubernetes.io/os"
	labelArchBeta = "beta.kubernetes.io/arch"

	// LabelManaged marks nodes, and every other object, gangbench created, so cleanup and selectors
	// can find them. This is its one definition: scenarios.ManagedLabel and
	// existing.ManagedLabel restate it for their callers.
	LabelManaged = "gangbench.dev/managed"
	// LabelType is the label kwok's documentation uses for simulated nodes.
	LabelType = "type"

	// DefaultInternalIP is the address a simulated node reports. Loopback, because the only thing that
	// may ever connect to a node address (the apiserver for logs/exec) must reach this machine's kwok
	// server and nothing else.
	DefaultInternalIP = "127.0.0.1"
)

// NodeOptions is what a simulated node has besides its GPUs. Zero fields get defaults.
type NodeOptions struct {
	// CPU capacity; default 32.
	CPU resource.Quantity
	// Memory capacity; default 256Gi.
	Memory resource.Quantity
	// Pods capacity; default 110 (the kubelet's).
	Pods resource.Quantity
	// InternalIP is the node's InternalIP address; default DefaultInternalIP.
	InternalIP string
	// Labels are added over the inventory labels (and may override them), but not over
	// kubernetes.io/hostname and gangbench.dev/managed, which identify the node.
	Labels map[string]string
	// Taints are the node's taints, e.g. to keep non-gang pods off.
	Taints []corev1.Taint
	// Annotations are added; the kwok and TTL annotations always win, or kwok would not manage it.
	Annotations map[string]string
	// Registered is the heartbeat and transition time of the node's conditions, the moment a kubelet
	// would have registered it; CreateNodes sets it to the creation time when zero.
	Registered metav1.Time
	// GPUAPI is how the GPUs are published; "" is APIDevicePlugin. Without the device plugin API
	// the node's status carries no GPU resource: its GPUs are reachable only through its
	// ResourceSlice (ResourceSlice renders it; clusters/kwok publishes it with the node).
	GPUAPI API
	// Clique is the NVLink clique of the node's GPUs in its ResourceSlice (SliceOptions.Clique).
	Clique string
}

// withDefaults fills zero fields.
func (o NodeOptions) withDefaults() NodeOptions {
	if o.CPU.IsZero() {
		o.CPU = resource.MustParse("32")
	}
	if o.Memory.IsZero() {
		o.Memory = resource.MustParse("256Gi")
	}
	if o.Pods.IsZero() {
		o.Pods = resource.MustParse("110")
	}
	if o.InternalIP == "" {
		o.InternalIP = DefaultInternalIP
	}
	return o
}

// SimulatedNode renders the Node object for a kwok-simulated node with inv's GPUs. It carries the
// status a kubelet posts in the create that registers its node (the apiserver keeps status given at
// create time): capacity, addresses, node info, phase Running and the conditions of a healthy node,
// Ready among them. kwok's node-initialize stage then has nothing left to write, which halves the
// writes of a 5000-node start. Whether kwok really manages the node is told by its Lease, which
// kwok takes for every node with the kwok annotation and renews: kwok.WaitNodesReady requires it,
// and the node lifecycle controller marks a node whose lease lapses NotReady.
func SimulatedNode(name string, inv Inventory, opts NodeOptions) *corev1.Node {
	opts = opts.withDefaults()

	labels := map[string]string{
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		// The beta labels too, as a kubelet registers them: without them the node lifecycle
		// controller adds them, a GET and a PATCH per node (10000 requests for 5000 nodes).
		labelOSBeta:   "linux",
		labelArchBeta: "amd64",
		LabelType:     "kwok",
	}
	maps.Copy(labels, inv.Labels())
	if inv.Count > 0 && opts.GPUAPI.DRA() {
		labels[LabelGPUAPI] = string(opts.GPUAPI)
	}
	maps.Copy(labels, opts.Labels)
	labels[corev1.LabelHostname] = name
	labels[LabelManaged] = "true"

	annotations := map[string]string{}
	maps.Copy(annotations, opts.Annotations)
	annotations[AnnotationKwokNode] = AnnotationKwokNodeValue
	annotations[AnnotationNodeTTL] = "0"

	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    opts.CPU.DeepCopy(),
		corev1.ResourceMemory: opts.Memory.DeepCopy(),
		corev1.ResourcePods:   opts.Pods.DeepCopy(),
	}
	if opts.GPUAPI.ExtendedResource() {
		maps.Copy(capacity, inv.Resources())
	}
	// Allocatable equals capacity: there is no kubelet reserving anything.
	allocatable := capacity.DeepCopy()

	var taints []corev1.Taint
	if len(opts.Taints) > 0 {
		taints = make([]corev1.Taint, len(opts.Taints))
		for i := range opts.Taints {
			opts.Taints[i].DeepCopyInto(&taints[i])
		}
	}

	return &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Phase:       corev1.NodeRunning,
			Conditions:  healthyConditions(opts.Registered),
			Capacity:    capacity,
			Allocatable: allocatable,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: opts.InternalIP},
				{Type: corev1.NodeHostName, Address: name},
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:          "fake",
				KubeProxyVersion:        "fake",
				ContainerRuntimeVersion: "fake",
				KernelVersion:           "fake",
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
		},
	}
}

// healthyConditions are the conditions of a healthy node as a kubelet (or kwok's NodeConditions)
// reports them, posted and last changed at t.
func healthyConditions(t metav1.Time) []corev1.NodeCondition {
	c := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated", Message: "RouteController created a route"},
	}
	for i := range c {
		c[i].LastHeartbeatTime, c[i].LastTransitionTime = t, t
	}
	return c
}
