package perf

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/clusters/request"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/perf/scenario"
)

// Shape is what a scenario needs of a cluster. Scenarios of equal shape share one cluster.
type Shape struct {
	Nodes, GPUsPerNode int
	Product            string
	KubeAPIQPS         int
	KubeAPIBurst       int
	// NodesPerRack and RacksPerBlock lay the nodes out in racks (scenario.Cluster); 0 for none.
	NodesPerRack, RacksPerBlock int
	// Features are the clusters.FeatureSets the cluster hosts, comma-separated and sorted (a
	// string, so that a Shape stays comparable and can key a map).
	Features string
	// GPUAPI is how the nodes publish their GPUs (scenario.Cluster.GPUAPI); "" leaves it to the
	// source's base spec.
	GPUAPI clusters.GPUAPI
}

// ShapeOf is the shape a scenario asks for.
func ShapeOf(s *scenario.Scenario) Shape {
	return Shape{Nodes: s.Cluster.Nodes, GPUsPerNode: s.Cluster.GPUsPerNode, Product: s.Cluster.Product,
		KubeAPIQPS: s.Scheduler.KubeAPIQPS, KubeAPIBurst: s.Scheduler.KubeAPIBurst,
		NodesPerRack: s.Cluster.NodesPerRack, RacksPerBlock: s.Cluster.RacksPerBlock,
		Features: strings.Join(s.Features(), ","), GPUAPI: s.Cluster.GPUAPI}
}

// ClusterInfo is what a source says about the cluster it handed out, for the record.
type ClusterInfo struct {
	// SchedulerQPS and SchedulerBurst are the scheduler's effective client limits, or "unknown".
	SchedulerQPS, SchedulerBurst string
	// Notes explain differences between the shape asked for and what the cluster is.
	Notes []string
	// GPUAPI is how the cluster's GPU nodes publish their GPUs, and so how the load generator's
	// pods ask for them: the shape's, or the base spec's where the shape names none.
	GPUAPI clusters.GPUAPI
}

// ClusterSource hands the runner clusters.
type ClusterSource interface {
	// Create returns a cluster of the shape. nodes, when set, is told how many nodes exist while
	// the cluster is being made (progress display).
	Create(ctx context.Context, shape Shape, nodes func(n int)) (*clusters.Cluster, ClusterInfo, error)
	// Persistent reports whether clusters outlive the run (an existing cluster): the runner must
	// then clean up after every repetition instead of deleting the cluster.
	Persistent() bool
}

// DefaultRealWorkers is the number of real-kubelet GPU nodes a ProviderSource gives each cluster
// on a provider with real kubelets when not told: enough for a kubelet fault on one node while
// another keeps serving, few enough for one machine.
const DefaultRealWorkers = request.DefaultRealWorkers

// ProviderSource creates one cluster per shape with one provider, built by the caller through the
// one constructor (request.Factory). On a provider with real kubelets, Workers of a shape's nodes
// run them (with the fake GPU device plugin) and the rest are simulated by kwok, because hundreds
// of node containers do not fit on one machine; that is what kubelet faults need. Elsewhere every
// node is simulated.
type ProviderSource struct {
	Provider clusters.Provider
	// Base is the spec every cluster starts from (name, version, gates, images, scheduler binary,
	// and the user's --scheduler-arg overrides, which win over a scenario's scheduler settings).
	// Its node shape is replaced by each scenario's.
	Base clusters.Spec
	// Workers is the number of real-kubelet nodes per shape, at most the shape's nodes; 0 means
	// DefaultRealWorkers. Unused on a provider without real kubelets.
	Workers int
}

var _ ClusterSource = (*ProviderSource)(nil)

// Capabilities implements sourceCapabilities: faults are checked against them before any cluster.
func (s *ProviderSource) Capabilities() clusters.Capabilities { return s.Provider.Capabilities() }

// Persistent implements ClusterSource.
func (s *ProviderSource) Persistent() bool { return false }

// schedulerArgs are the scheduler flags a shape sets, under the user's overrides.
func (s *ProviderSource) schedulerArgs(shape Shape) map[string]string {
	args := map[string]string{"kube-api-qps": strconv.Itoa(shape.KubeAPIQPS), "kube-api-burst": strconv.Itoa(shape.KubeAPIBurst)}
	maps.Copy(args, s.Base.ExtraArgs[clusters.Scheduler])
	return args
}

// Resolve implements the runner's shapeResolver: the GPU API a shape's cluster gets.
func (s *ProviderSource) Resolve(shape Shape) Shape {
	shape.GPUAPI = EffectiveGPUAPI(shape.GPUAPI, s.Base.GPUAPI)
	return shape
}

// Spec is the spec of the cluster for a shape, and what the record says about it.
func (s *ProviderSource) Spec(shape Shape) (clusters.Spec, ClusterInfo, error) {
	caps := s.Provider.Capabilities()
	spec := s.Base
	inv := fakegpu.Inventory{Count: shape.GPUsPerNode, Product: shape.Product}
	api := EffectiveGPUAPI(shape.GPUAPI, s.Base.GPUAPI)
	spec.Nodes, spec.GPU, spec.NodeGroups, spec.GPUAPI = shape.Nodes, inv, nil, api
	spec.ExtraArgs = map[clusters.Component]map[string]string{}
	for c, a := range s.Base.ExtraArgs {
		spec.ExtraArgs[c] = maps.Clone(a)
	}
	sargs := s.schedulerArgs(shape)
	spec.ExtraArgs[clusters.Scheduler] = sargs
	info := ClusterInfo{SchedulerQPS: sargs["kube-api-qps"], SchedulerBurst: sargs["kube-api-burst"], GPUAPI: api}
	// Node creation is ~40 nodes/s on 2 cores; a fixed 3 minutes would fail 10 000 nodes.
	timeout := 3*time.Minute + time.Duration(shape.Nodes)*20*time.Millisecond
	if caps.RealKubelets {
		workers := s.Workers
		if workers <= 0 {
			workers = DefaultRealWorkers
		}
		workers = max(1, min(workers, shape.Nodes))
		spec.Nodes, spec.GPU, spec.GPUAPI = 0, fakegpu.Inventory{}, ""
		spec.NodeGroups = []clusters.NodeGroup{{Count: workers, Kubelet: clusters.RealKubelets, GPUs: &clusters.GroupGPUs{Inventory: inv, API: api}}}
		if shape.Nodes > workers {
			spec.NodeGroups = append(spec.NodeGroups, clusters.NodeGroup{Count: shape.Nodes - workers, Kubelet: clusters.SimulatedNodes, GPUs: &clusters.GroupGPUs{Inventory: inv, API: api}})
		}
		info.Notes = append(info.Notes, fmt.Sprintf("%s: %d worker node(s) with real kubelets and the fake GPU device plugin, %d kwok node(s)", caps.Provider, workers, shape.Nodes-workers))
		// Node containers take a few minutes on a cold machine; the kwok nodes then go as fast as
		// on a provider without real kubelets.
		timeout = 5*time.Minute + time.Duration(shape.Nodes)*20*time.Millisecond
	}
	if shape.NodesPerRack > 0 {
		// Racked keeps each group's GPUs, their API with them; the simulated nodes of a rack are
		// one NVLink clique in their slices (clusters.Spec.SimulatedNodeOptions).
		groups := spec.Groups()
		spec.Nodes, spec.GPU, spec.GPUAPI = 0, fakegpu.Inventory{}, ""
		spec.NodeGroups = clusters.Racked(groups, shape.NodesPerRack, shape.RacksPerBlock)
		racks := scenario.Cluster{Nodes: shape.Nodes, NodesPerRack: shape.NodesPerRack}.Racks()
		info.Notes = append(info.Notes, fmt.Sprintf("nodes in racks of %d (%d racks), %d racks to a block, labelled %s, %s and %s",
			shape.NodesPerRack, racks, max(1, shape.RacksPerBlock), clusters.DefaultRackKey, clusters.DefaultBlockKey, clusters.ZoneLabel))
	}
	if spec.ReadyTimeout == 0 {
		spec.ReadyTimeout = timeout
	}
	if err := addFeatures(&spec, shape); err != nil {
		return spec, info, err
	}
	if api.DRA() {
		if kcm := spec.ExtraArgs[clusters.ControllerManager]; kcm["controllers"] != "" {
			kcm["controllers"] = withControllers(kcm["controllers"], GPUAPIControllers(api))
		}
		info.Notes = append(info.Notes, fmt.Sprintf("GPUs published through DRA: a ResourceSlice per node (driver %s, DeviceClass %s) and no %s; each pod claims its GPUs through a ResourceClaimTemplate, the controller-manager's resourceclaim-controller making one ResourceClaim per pod",
			fakegpu.DRADriver, fakegpu.DeviceClassName, fakegpu.DefaultResourceName))
	}
	return spec, info, nil
}

// EffectiveGPUAPI is the GPU API a cluster gets: the shape's, else the base spec's, else the
// device plugin's.
func EffectiveGPUAPI(shape, base clusters.GPUAPI) clusters.GPUAPI {
	switch {
	case shape != "":
		return shape
	case base != "":
		return base
	}
	return clusters.GPUAPIDevicePlugin
}

// addFeatures switches a shape's features on in spec, beside the user's (--features, whose gates
// Base already holds): the scenario needs them whatever the user asked, and so a controllers list
// the profile set gets the controllers they need. The gate and runtime-config maps are copied first,
// so Base, which every shape starts from, is left as it was (ExtraArgs is already a copy).
func addFeatures(spec *clusters.Spec, shape Shape) error {
	if shape.Features == "" {
		return nil
	}
	spec.FeatureGates, spec.RuntimeConfig = maps.Clone(spec.FeatureGates), maps.Clone(spec.RuntimeConfig)
	kcm := spec.ExtraArgs[clusters.ControllerManager]
	var names []string
	for _, f := range strings.Split(shape.Features, ",") {
		if kcm["controllers"] != "" {
			kcm["controllers"] = withControllers(kcm["controllers"], FeatureControllers(f))
		}
		if !slices.Contains(spec.Features, f) {
			names = append(names, f)
		}
	}
	spec.Features = slices.Clone(spec.Features)
	return clusters.ApplyFeatures(spec, names)
}

// Create implements ClusterSource.
func (s *ProviderSource) Create(ctx context.Context, shape Shape, nodes func(int)) (*clusters.Cluster, ClusterInfo, error) {
	spec, info, err := s.Spec(shape)
	if err != nil {
		return nil, info, err
	}
	if ek, ok := s.Provider.(clusters.EarlyKubeconfig); ok && nodes != nil {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go watchNodes(wctx, ek.EarlyKubeconfig(spec.Name), nodes)
	}
	cl, err := s.Provider.Create(ctx, spec)
	if err != nil {
		return nil, info, err
	}
	if nodes != nil {
		nodes(shape.Nodes)
	}
	return cl, info, nil
}

// watchNodes reports the number of simulated nodes while a cluster is created. The provider offers
// no progress hook, but it writes the admin kubeconfig before it starts the apiserver
// (clusters.EarlyKubeconfig), so this waits for the file and the apiserver (polling every 300 ms, for display only) and then
// counts nodes on one watch. It gives up silently: a missing bar is not worth failing a run for.
func watchNodes(ctx context.Context, kubeconfig string, report func(int)) {
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	var cs kubernetes.Interface
	for cs == nil {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := os.Stat(kubeconfig); err != nil {
			continue
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			continue
		}
		cfg.WarningHandler = rest.NoWarnings{}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			continue
		}
		if _, err := c.Discovery().ServerVersion(); err != nil {
			continue
		}
		cs = c
	}
	seen := map[string]bool{}
	for ctx.Err() == nil {
		w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: fakegpu.LabelManaged + "=true"})
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				continue
			}
		}
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added {
				continue
			}
			if m, err := metaOf(ev.Object); err == nil && !seen[m] {
				seen[m] = true
				report(len(seen))
			}
		}
		w.Stop()
	}
}

func metaOf(obj runtime.Object) (string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	return m.GetName(), nil
}

// ExistingSource hands out one existing cluster for every shape; it never deletes it.
type ExistingSource struct {
	Cluster *clusters.Cluster
	// SchedulerQPS and SchedulerBurst are recorded as given (the harness cannot read them).
	SchedulerQPS, SchedulerBurst string
}

var _ ClusterSource = (*ExistingSource)(nil)

// Persistent implements ClusterSource.
func (s *ExistingSource) Persistent() bool { return true }

// Create implements ClusterSource: the shape is not applied, only compared.
func (s *ExistingSource) Create(ctx context.Context, shape Shape, nodes func(int)) (*clusters.Cluster, ClusterInfo, error) {
	info := ClusterInfo{SchedulerQPS: orUnknown(s.SchedulerQPS), SchedulerBurst: orUnknown(s.SchedulerBurst), GPUAPI: EffectiveGPUAPI(shape.GPUAPI, "")}
	cs, err := kubernetes.NewForConfig(s.Cluster.RESTConfig)
	if err != nil {
		return nil, info, err
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, info, err
	}
	if len(list.Items) != shape.Nodes {
		info.Notes = append(info.Notes, "existing cluster has "+strconv.Itoa(len(list.Items))+" nodes; the scenario asks for "+strconv.Itoa(shape.Nodes)+" (not applied: the cluster is used as it is)")
	}
	info.Notes = append(info.Notes, "existing cluster: the scheduler's kube-api-qps/burst are not set by the harness (scenario asks "+strconv.Itoa(shape.KubeAPIQPS)+"/"+strconv.Itoa(shape.KubeAPIBurst)+")")
	if shape.NodesPerRack > 0 {
		info.Notes = append(info.Notes, fmt.Sprintf("existing cluster: its nodes keep their own labels (the scenario asks for racks of %d under %s); a rack-constrained phase binds only where nodes carry that key", shape.NodesPerRack, clusters.DefaultRackKey))
	}
	if shape.Features != "" {
		info.Notes = append(info.Notes, "existing cluster: its feature gates are its own (the scenario needs the features "+shape.Features+" on)")
	}
	if info.GPUAPI.DRA() {
		info.Notes = append(info.Notes, fmt.Sprintf("existing cluster: the scenario claims GPUs through DRA, from DeviceClass %s; the cluster must have it and ResourceSlices of driver %s", fakegpu.DeviceClassName, fakegpu.DRADriver))
	}
	if nodes != nil {
		nodes(len(list.Items))
	}
	return s.Cluster, info, nil
}

// Inventory counts the existing cluster's Ready nodes and the most GPUs any of them offers, so a
// scenario can be resolved (fill → groups) for the cluster as it is.
func (s *ExistingSource) Inventory(ctx context.Context) (nodes, gpusPerNode int, err error) {
	cs, err := kubernetes.NewForConfig(s.Cluster.RESTConfig)
	if err != nil {
		return 0, 0, err
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, 0, err
	}
	for i := range list.Items {
		n := &list.Items[i]
		// Ready and not cordoned; taints are not judged here: a fresh node's not-ready taint
		// outlives its readiness by minutes (see kwok.WaitSchedulable), and counting only clean
		// nodes would size the workload for a fraction of the cluster.
		if !kwok.ReadyNode(n) || n.Spec.Unschedulable {
			continue
		}
		nodes++
		if q, ok := n.Status.Allocatable[fakegpu.DefaultResourceName]; ok {
			gpusPerNode = max(gpusPerNode, int(q.Value()))
		}
	}
	return nodes, gpusPerNode, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
