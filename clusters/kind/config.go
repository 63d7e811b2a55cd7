package kind

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kind/nodeimage"
	"github.com/gangbench/gangbench/fakegpu"
)

// kubeadmAPIVersion is the kubeadm config version kind renders for Kubernetes ≥ v1.36. Our patches
// name it so that kind merges extraArgs as v1beta4 name/value lists (pkg/internal/patch/
// kubeadm_merge.go): an entry with the same name as one of kind's (feature-gates) replaces it, a new
// name is appended.
const kubeadmAPIVersion = "kubeadm.k8s.io/v1beta4"

// kubeletConfigAPIVersion is the KubeletConfiguration version kind's kubeadm config renders.
const kubeletConfigAPIVersion = "kubelet.config.k8s.io/v1beta1"

// KubeadmArg is one kubeadm v1beta4 extraArgs entry.
type KubeadmArg struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// KubeadmComponent is the part of a v1beta4 ClusterConfiguration control-plane component we patch.
type KubeadmComponent struct {
	ExtraArgs []KubeadmArg `json:"extraArgs,omitempty"`
}

// KubeadmLocalEtcd is ClusterConfiguration.etcd.local as far as we patch it.
type KubeadmLocalEtcd struct {
	ExtraArgs []KubeadmArg `json:"extraArgs,omitempty"`
}

// KubeadmEtcd is ClusterConfiguration.etcd as far as we patch it.
type KubeadmEtcd struct {
	Local *KubeadmLocalEtcd `json:"local,omitempty"`
}

// ClusterConfigurationPatch is the merge patch on kubeadm's ClusterConfiguration that RenderConfig
// adds to the kind config. Exported so tests (ours and callers') can decode it strictly.
type ClusterConfigurationPatch struct {
	APIVersion        string            `json:"apiVersion"`
	Kind              string            `json:"kind"`
	ImageRepository   string            `json:"imageRepository,omitempty"`
	APIServer         *KubeadmComponent `json:"apiServer,omitempty"`
	ControllerManager *KubeadmComponent `json:"controllerManager,omitempty"`
	Scheduler         *KubeadmComponent `json:"scheduler,omitempty"`
	Etcd              *KubeadmEtcd      `json:"etcd,omitempty"`
}

// kubeadmComponent maps a component to its ClusterConfiguration key; only these three take feature
// gates in a kind cluster (etcd's are a different set, kwok has none).
func kubeadmComponent(c clusters.Component) (string, bool) {
	switch c {
	case clusters.APIServer:
		return "apiServer", true
	case clusters.ControllerManager:
		return "controllerManager", true
	case clusters.Scheduler:
		return "scheduler", true
	}
	return "", false
}

// clusterFeatureGates are the gates of every component (kind passes featureGates to the apiserver,
// controller-manager, scheduler, kubelets and kube-proxy).
func clusterFeatureGates(spec clusters.Spec) map[string]bool {
	g := clusters.GangFeatureGates(spec.KubernetesVersion)
	maps.Copy(g, spec.FeatureGates)
	return g
}

// componentFeatureGates is what one component runs with: defaults, cluster-wide gates, then its own.
func componentFeatureGates(spec clusters.Spec, c clusters.Component) map[string]bool {
	g := clusterFeatureGates(spec)
	maps.Copy(g, spec.ComponentFeatureGates[c])
	return g
}

func renderGates(g map[string]bool) string {
	parts := make([]string, 0, len(g))
	for _, k := range slices.Sorted(maps.Keys(g)) {
		parts = append(parts, k+"="+strconv.FormatBool(g[k]))
	}
	return strings.Join(parts, ",")
}

// schedulerFlags are the flags gangbench sets on kube-scheduler over kubeadm's, as a map so that
// Spec.ExtraArgs can override any of them. bind-address 0.0.0.0 (kubeadm binds 127.0.0.1) lets the
// control-plane node's port mapping and the apiserver's pod proxy reach :10259; /metrics joins the
// always-allowed paths so that reading it needs no SubjectAccessReview (anyone who can reach the port
// may read metrics, which for a loopback-published test cluster is the point).
func schedulerFlags(spec clusters.Spec) map[string]string {
	f := map[string]string{
		"bind-address":                     "0.0.0.0",
		"authorization-always-allow-paths": "/healthz,/readyz,/livez,/metrics",
	}
	if len(spec.ComponentFeatureGates[clusters.Scheduler]) > 0 {
		f["feature-gates"] = renderGates(componentFeatureGates(spec, clusters.Scheduler))
	}
	maps.Copy(f, trimmedArgs(spec.ExtraArgs[clusters.Scheduler]))
	return f
}

// componentFlags are the flags our patch sets on one component; nil when there are none.
func componentFlags(spec clusters.Spec, c clusters.Component) map[string]string {
	if c == clusters.Scheduler {
		return schedulerFlags(spec)
	}
	f := map[string]string{}
	if _, ok := kubeadmComponent(c); ok && len(spec.ComponentFeatureGates[c]) > 0 {
		f["feature-gates"] = renderGates(componentFeatureGates(spec, c))
	}
	if g := clusters.NodeMonitorGracePeriod(spec.NodeLeaseSeconds); c == clusters.ControllerManager && g != "" {
		f["node-monitor-grace-period"] = g
	}
	maps.Copy(f, trimmedArgs(spec.ExtraArgs[c]))
	if len(f) == 0 {
		return nil
	}
	return f
}

// trimmedArgs drops leading dashes from flag names ("--v" and "v" mean the same flag).
func trimmedArgs(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.TrimLeft(k, "-")] = v
	}
	return out
}

// kubeadmArgs renders flags as a v1beta4 list sorted by name, for stable output.
func kubeadmArgs(f map[string]string) []KubeadmArg {
	if len(f) == 0 {
		return nil
	}
	out := make([]KubeadmArg, 0, len(f))
	for _, k := range slices.Sorted(maps.Keys(f)) {
		out = append(out, KubeadmArg{Name: k, Value: f[k]})
	}
	return out
}

// clusterConfigurationPatch builds the kubeadm patch from a resolved spec.
func clusterConfigurationPatch(spec clusters.Spec) ClusterConfigurationPatch {
	p := ClusterConfigurationPatch{APIVersion: kubeadmAPIVersion, Kind: "ClusterConfiguration"}
	comp := func(c clusters.Component) *KubeadmComponent {
		if a := kubeadmArgs(componentFlags(spec, c)); a != nil {
			return &KubeadmComponent{ExtraArgs: a}
		}
		return nil
	}
	p.APIServer = comp(clusters.APIServer)
	p.ControllerManager = comp(clusters.ControllerManager)
	p.Scheduler = comp(clusters.Scheduler)
	if a := kubeadmArgs(componentFlags(spec, clusters.Etcd)); a != nil {
		p.Etcd = &KubeadmEtcd{Local: &KubeadmLocalEtcd{ExtraArgs: a}}
	}
	return p
}

// InitConfigurationPatch is the merge patch on kubeadm's InitConfiguration: a gangbench node image
// has no CoreDNS (see package nodeimage), so its addon phase is skipped with kind's preflight skip.
type InitConfigurationPatch struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	SkipPhases []string `json:"skipPhases"`
}

// KubeletConfigurationPatch is the merge patch on every kubelet's configuration.
type KubeletConfigurationPatch struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// FailCgroupV1 false lets a v1.35+ kubelet run on a cgroup v1 host (it exits there by default);
	// on a cgroup v2 host it changes nothing.
	FailCgroupV1 *bool `json:"failCgroupV1,omitempty"`
}

// workerLabels are set by each worker's kubelet: ours, so the DaemonSet and readiness waits find the
// workers, and GPU feature discovery's, which a real GPU node would carry and gang workloads select on.
func workerLabels(inv fakegpu.Inventory) map[string]string {
	l := inv.Labels()
	l[LabelWorker] = "true"
	l[fakegpu.LabelManaged] = "true"
	return l
}

// gpuWorkerLabels are workerLabels plus the index of the worker's inventory, which the device
// plugin DaemonSet of that inventory selects on.
func gpuWorkerLabels(inv fakegpu.Inventory, index int) map[string]string {
	l := workerLabels(inv)
	l[LabelGPUInventory] = strconv.Itoa(index)
	return l
}

// JoinConfigurationPatch is the merge patch on one worker's kubeadm JoinConfiguration: its node
// group's taints, which kubeadm hands the kubelet as --register-with-taints, so the node is tainted
// from its first registration and no pod lands there before the taint does.
type JoinConfigurationPatch struct {
	APIVersion       string                    `json:"apiVersion"`
	Kind             string                    `json:"kind"`
	NodeRegistration JoinNodeRegistrationPatch `json:"nodeRegistration"`
}

// JoinNodeRegistrationPatch is JoinConfiguration.nodeRegistration as far as we patch it.
type JoinNodeRegistrationPatch struct {
	Taints []corev1.Taint `json:"taints"`
}

// workerNode is one kind worker of a node group: its labels through kind (the kubelet's
// --node-labels) and its taints through a node-level kubeadm patch (kind applies a node's patches
// to that node's kubeadm config only).
func workerNode(image string, labels map[string]string, taints []corev1.Taint) (v1alpha4.Node, error) {
	n := v1alpha4.Node{Role: v1alpha4.WorkerRole, Image: image, Labels: labels}
	if len(taints) > 0 {
		b, err := yaml.Marshal(JoinConfigurationPatch{
			APIVersion: kubeadmAPIVersion, Kind: "JoinConfiguration",
			NodeRegistration: JoinNodeRegistrationPatch{Taints: taints},
		})
		if err != nil {
			return v1alpha4.Node{}, fmt.Errorf("kind config: render a worker's taints: %w", err)
		}
		n.KubeadmConfigPatches = []string{string(b)}
	}
	return n, nil
}

// groupLabels are a node group's own labels under ours: ours identify the workers to the device
// plugin's DaemonSet and the readiness waits, so a group label cannot move a node out of them.
func groupLabels(group, ours map[string]string) map[string]string {
	if len(group) == 0 {
		return ours
	}
	l := maps.Clone(group)
	maps.Copy(l, ours)
	return l
}

// configHeader opens the rendered file, so that a config found in a state dir explains itself.
const configHeader = "# kind cluster config rendered by gangbench (clusters/kind.RenderConfig).\n"

// RenderConfig renders the kind v1alpha4 Cluster config for spec: one control-plane node and the
// workers, the node image pinned on each, the feature gates and runtime config of the spec (over
// GenericWorkload=true and scheduling.k8s.io/v1beta1=true), a kubeadm v1beta4 ClusterConfiguration
// patch with the components' own gates and flags (the scheduler always binds 0.0.0.0 and serves
// /metrics without authorization), and the scheduler's 10259 published on 127.0.0.1:
// o.SchedulerMetricsPort when that is set. The result is checked by decoding it strictly back into
// v1alpha4.Cluster.
func RenderConfig(spec clusters.Spec, o Options) ([]byte, error) {
	pl, err := resolve(spec)
	if err != nil {
		return nil, err
	}
	return renderPlan(pl, o.SchedulerMetricsPort)
}

func renderPlan(pl plan, schedulerPort int) ([]byte, error) {
	spec := pl.Spec
	rc := clusters.GangRuntimeConfig(spec.KubernetesVersion)
	maps.Copy(rc, spec.RuntimeConfig)

	if pl.NodeImage == "" {
		// Not built yet (RenderConfig before Create): the key is known only once it is.
		v := spec.KubernetesVersion
		if v == "" {
			v = clusters.DefaultKubernetesVersion
		}
		pl.NodeImage = nodeimage.Repository + ":" + v
	}
	own := nodeimage.IsGangbench(pl.NodeImage)
	ccp := clusterConfigurationPatch(spec)
	failV1 := false
	docs := []any{&ccp, KubeletConfigurationPatch{APIVersion: kubeletConfigAPIVersion, Kind: "KubeletConfiguration", FailCgroupV1: &failV1}}
	if own {
		ccp.ImageRepository = nodeimage.ImageRepository
		docs = append(docs, InitConfigurationPatch{APIVersion: kubeadmAPIVersion, Kind: "InitConfiguration", SkipPhases: []string{"preflight", "addon/coredns"}})
	}
	var patches []string
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("kind config: render kubeadm patch: %w", err)
		}
		patches = append(patches, string(b))
	}
	cp := v1alpha4.Node{Role: v1alpha4.ControlPlaneRole, Image: pl.NodeImage}
	if schedulerPort > 0 {
		if schedulerPort > 65535 {
			return nil, fmt.Errorf("kind config: scheduler metrics port %d is out of range", schedulerPort)
		}
		cp.ExtraPortMappings = []v1alpha4.PortMapping{{
			ContainerPort: schedulerMetricsContainerPort,
			HostPort:      int32(schedulerPort),
			// Loopback only: the scheduler's /metrics is readable without authorization.
			ListenAddress: "127.0.0.1",
			Protocol:      v1alpha4.PortMappingProtocolTCP,
		}}
	}
	cfg := v1alpha4.Cluster{
		TypeMeta:             v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Nodes:                []v1alpha4.Node{cp},
		FeatureGates:         clusterFeatureGates(spec),
		RuntimeConfig:        rc,
		KubeadmConfigPatches: patches,
	}
	// A gangbench node image carries no kindnetd (it is not on the module proxy): Create configures
	// the CNI plugins on each node itself (see cni.go).
	cfg.Networking.DisableDefaultCNI = own
	// kind names workers in config order (<name>-worker, -worker2, …), so the GPU workers come
	// first (group by group, in spec order) and keep the names they have without plain workers.
	// Every worker carries its own group's labels and taints only.
	type worker struct {
		count  int
		labels map[string]string
		taints []corev1.Taint
	}
	var workers []worker
	for _, g := range pl.GPUGroups {
		ours := gpuWorkerLabels(g.GPU, g.Inventory)
		// As a simulated node of the same API carries it (fakegpu.SimulatedNode): a worker whose
		// GPUs are not only the device plugin's says so.
		if g.API.DRA() {
			ours[fakegpu.LabelGPUAPI] = string(g.API)
		}
		workers = append(workers, worker{g.Count, groupLabels(g.Labels, ours), g.Taints})
	}
	for _, g := range pl.PlainGroups {
		workers = append(workers, worker{g.Count, groupLabels(g.Labels, map[string]string{LabelPlainWorker: "true"}), g.Taints})
	}
	for _, w := range workers {
		for range w.count {
			n, err := workerNode(pl.NodeImage, w.labels, w.taints)
			if err != nil {
				return nil, err
			}
			cfg.Nodes = append(cfg.Nodes, n)
		}
	}
	body, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("kind config: %w", err)
	}
	out := append([]byte(configHeader), body...)
	if err := checkConfig(out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkConfig decodes a rendered config strictly, as kind's own loader would, so a field we
// misspelled fails here and not inside kind after containers exist; the kubeadm patches are decoded
// strictly into the shape we meant to write.
func checkConfig(b []byte) error {
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return fmt.Errorf("kind config does not decode strictly as v1alpha4.Cluster: %w", err)
	}
	for i, p := range c.KubeadmConfigPatches {
		if err := checkPatch(p, "ClusterConfiguration", "InitConfiguration", "KubeletConfiguration"); err != nil {
			return fmt.Errorf("kind config: kubeadm patch %d: %w", i, err)
		}
	}
	for i, n := range c.Nodes {
		for j, p := range n.KubeadmConfigPatches {
			if err := checkPatch(p, "JoinConfiguration"); err != nil {
				return fmt.Errorf("kind config: node %d: kubeadm patch %d: %w", i, j, err)
			}
		}
	}
	return nil
}

// checkPatch decodes one kubeadm patch strictly into the type we write for its kind, which must be
// one of kinds.
func checkPatch(p string, kinds ...string) error {
	var meta struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal([]byte(p), &meta); err != nil {
		return err
	}
	if !slices.Contains(kinds, meta.Kind) {
		return fmt.Errorf("unexpected kind %q (accepted here: %s)", meta.Kind, strings.Join(kinds, ", "))
	}
	var into any
	switch meta.Kind {
	case "ClusterConfiguration":
		into = &ClusterConfigurationPatch{}
	case "InitConfiguration":
		into = &InitConfigurationPatch{}
	case "KubeletConfiguration":
		into = &KubeletConfigurationPatch{}
	case "JoinConfiguration":
		into = &JoinConfigurationPatch{}
	}
	return yaml.UnmarshalStrict([]byte(p), into)
}
