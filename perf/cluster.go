package perf

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strconv"
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
	"github.com/gangbench/gangbench/clusters/local"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/perf/scenario"
)

// Shape is what a scenario needs of a cluster. Scenarios of equal shape share one cluster.
type Shape struct {
	Nodes, GPUsPerNode int
	Product            string
	KubeAPIQPS         int
	KubeAPIBurst       int
}

// ShapeOf is the shape a scenario asks for.
func ShapeOf(s *scenario.Scenario) Shape {
	return Shape{Nodes: s.Cluster.Nodes, GPUsPerNode: s.Cluster.GPUsPerNode, Product: s.Cluster.Product,
		KubeAPIQPS: s.Scheduler.KubeAPIQPS, KubeAPIBurst: s.Scheduler.KubeAPIBurst}
}

// ClusterInfo is what a source says about the cluster it handed out, for the record.
type ClusterInfo struct {
	// SchedulerQPS and SchedulerBurst are the scheduler's effective client limits, or "unknown".
	SchedulerQPS, SchedulerBurst string
	// Notes explain differences between the shape asked for and what the cluster is.
	Notes []string
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

// LocalSource creates local-provider clusters, one per shape.
type LocalSource struct {
	Provider *local.Provider
	// Base is the spec every cluster starts from (name, version, gates, scheduler binary, and the
	// user's --scheduler-arg overrides, which win over a scenario's scheduler settings).
	Base clusters.Spec
	// StateDir is the provider's state directory; it is where the progress display finds the
	// kubeconfig of a cluster still being created. Empty disables node progress.
	StateDir string
}

var _ ClusterSource = (*LocalSource)(nil)

// Persistent implements ClusterSource.
func (s *LocalSource) Persistent() bool { return false }

// SchedulerArgs are the scheduler flags a shape sets, under the user's overrides.
func (s *LocalSource) schedulerArgs(shape Shape) map[string]string {
	args := map[string]string{"kube-api-qps": strconv.Itoa(shape.KubeAPIQPS), "kube-api-burst": strconv.Itoa(shape.KubeAPIBurst)}
	maps.Copy(args, s.Base.ExtraArgs[clusters.Scheduler])
	return args
}

// Create implements ClusterSource.
func (s *LocalSource) Create(ctx context.Context, shape Shape, nodes func(int)) (*clusters.Cluster, ClusterInfo, error) {
	spec := s.Base
	spec.Nodes = shape.Nodes
	spec.GPU = fakegpu.Inventory{Count: shape.GPUsPerNode, Product: shape.Product}
	spec.ExtraArgs = map[clusters.Component]map[string]string{}
	for c, a := range s.Base.ExtraArgs {
		spec.ExtraArgs[c] = maps.Clone(a)
	}
	sargs := s.schedulerArgs(shape)
	spec.ExtraArgs[clusters.Scheduler] = sargs
	if spec.ReadyTimeout == 0 {
		// Node creation is ~40 nodes/s on 2 cores; a fixed 3 minutes would fail 10 000 nodes.
		spec.ReadyTimeout = 3*time.Minute + time.Duration(shape.Nodes)*20*time.Millisecond
	}
	info := ClusterInfo{SchedulerQPS: sargs["kube-api-qps"], SchedulerBurst: sargs["kube-api-burst"]}
	if nodes != nil && s.StateDir != "" {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go watchNodes(wctx, filepath.Join(s.StateDir, spec.Name, "kubeconfig-admin"), nodes)
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

// watchNodes reports the number of simulated nodes while a local cluster is created. The provider
// offers no progress hook, but it writes the admin kubeconfig before it starts the apiserver, so
// this waits for the file and the apiserver (polling every 300 ms, for display only) and then
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
	info := ClusterInfo{SchedulerQPS: orUnknown(s.SchedulerQPS), SchedulerBurst: orUnknown(s.SchedulerBurst)}
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
