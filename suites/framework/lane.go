package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/scenarios/gangapi"
)

// LaneLabel and the taint of the same key give each test nodes no other test can use. Tests then run
// in parallel without one test's pods filling another's GPUs, and an assertion about "8 GPUs" means 8.
const LaneLabel = "gangbench.dev/lane"

// Lane is a namespace plus simulated nodes that only its pods tolerate.
type Lane struct {
	Env    *Env
	Name   string // also the namespace
	Nodes  []string
	GPUs   int // per node
	Client kubernetes.Interface
	// Gang reaches PodGroups and Workloads in the version the cluster serves.
	Gang      *gangapi.Client
	createdAt time.Time
	// Racks maps each rack of a lane made with LaneSpec.Racks (its clusters.DefaultRackKey value)
	// to its nodes.
	Racks map[string][]string
	// borrowed: the nodes are the cluster's own (kind workers with the device plugin), lent to
	// the lane; Delete gives them back instead of deleting them.
	borrowed bool
	// gpuAPI is how the lane's simulated nodes publish their GPUs (LaneSpec.GPUAPI).
	gpuAPI fakegpu.API
}

// LaneSpec is the capacity a feature needs.
type LaneSpec struct {
	Nodes       int
	GPUsPerNode int
	// PluginNodes asks for nodes with a real kubelet and the fake GPU device plugin where the
	// cluster has them (kind workers): the lane then borrows them and GPUsPerNode is what they
	// have. Elsewhere the lane gets kwok nodes as usual.
	PluginNodes bool
	// Racks, when set, splits the lane's Nodes evenly into that many racks of one block, labelled
	// as clusters.Topology labels a cluster's racks (clusters.DefaultRackKey and DefaultBlockKey),
	// with values of the lane's own, so that no other lane's nodes share a domain with them.
	Racks int
	// Unlabelled nodes are added to a lane with Racks without any topology label.
	Unlabelled int
	// GPUAPI is how the lane's simulated nodes publish their GPUs; "" is the device plugin's
	// nvidia.com/gpu. With DRA each node gets its ResourceSlice (its rack is its NVLink clique)
	// and the cluster the fake GPUs' DeviceClass.
	GPUAPI fakegpu.API
	// Products, when set, are the GPU products of the lane's nodes in turn (node i has
	// Products[i % len]); unset, every node has fakegpu's default.
	Products []string
}

// NewLane creates the namespace and nodes and waits until the nodes are Ready with their GPUs.
func (e *Env) NewLane(ctx context.Context, prefix string, spec LaneSpec) (*Lane, error) {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := fmt.Sprintf("gb-%s-%s", prefix, hex.EncodeToString(b))
	if len(name) > 50 {
		name = name[:50]
	}
	l := &Lane{Env: e, Name: name, GPUs: spec.GPUsPerNode, Client: e.Client, Gang: e.Gang, createdAt: time.Now(), gpuAPI: spec.GPUAPI}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{scenarios.ManagedLabel: "true", LaneLabel: name}}}
	if _, err := e.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("lane %s: create namespace: %w", name, err)
	}
	if err := clusters.WaitDefaultServiceAccount(ctx, e.Client, name, e.Scaled(60*time.Second)); err != nil {
		return l, fmt.Errorf("lane %s: %w", name, err)
	}
	if spec.PluginNodes {
		if ok, err := e.borrowPluginNodes(ctx, l, spec.Nodes); ok || err != nil {
			return l, err
		}
	}
	if spec.GPUAPI.DRA() {
		if err := kwok.EnsureDeviceClass(ctx, e.Client); err != nil {
			return l, fmt.Errorf("lane %s: %w", name, err)
		}
	}
	l.Nodes = kwok.NodeNames(name, spec.Nodes+spec.Unlabelled)
	if err := l.createNodes(ctx, spec); err != nil {
		return l, err
	}
	if err := kwok.WaitNodesReady(ctx, e.Client, LaneLabel+"="+name, len(l.Nodes), e.Scaled(60*time.Second)); err != nil {
		return l, fmt.Errorf("lane %s: %w (lanes need a kwok controller managing nodes annotated kwok.x-k8s.io/node=fake)", name, err)
	}
	// Ready is not enough: a new node keeps the not-ready taint until the node lifecycle controller
	// re-evaluates it, and a pod scheduled in between fails with "untolerated taint".
	if err := kwok.WaitSchedulable(ctx, e.Client, LaneLabel+"="+name, len(l.Nodes), e.Scaled(60*time.Second), 5*time.Second, nil, LaneLabel); err != nil {
		return l, fmt.Errorf("lane %s: %w", name, err)
	}
	return l, nil
}

// createNodes creates the lane's simulated nodes: l.Nodes, the first spec.Nodes of them in
// spec.Racks racks when set, the rest (spec.Unlabelled) without topology labels.
func (l *Lane) createNodes(ctx context.Context, spec LaneSpec) error {
	opts, inv := l.kwokNodeSpec()
	if spec.Racks == 0 {
		if spec.Unlabelled > 0 {
			return fmt.Errorf("lane %s: %d unlabelled nodes without racks: every node is unlabelled then, ask for Nodes", l.Name, spec.Unlabelled)
		}
		if len(spec.Products) == 0 {
			if err := kwok.CreateNodes(ctx, l.Client, l.Nodes, inv, opts, 8); err != nil {
				return fmt.Errorf("lane %s: create nodes: %w", l.Name, err)
			}
			return nil
		}
		for i, n := range l.Nodes {
			pi := inv
			pi.Product, pi.MemoryMiB = spec.Products[i%len(spec.Products)], 0
			if err := kwok.CreateNodes(ctx, l.Client, []string{n}, pi.WithDefaults(), opts, 1); err != nil {
				return fmt.Errorf("lane %s: create node %s: %w", l.Name, n, err)
			}
		}
		return nil
	}
	if len(spec.Products) > 0 {
		return fmt.Errorf("lane %s: products %v with racks: give one or the other", l.Name, spec.Products)
	}
	if spec.Nodes%spec.Racks != 0 {
		return fmt.Errorf("lane %s: %d nodes do not split into %d racks", l.Name, spec.Nodes, spec.Racks)
	}
	per := spec.Nodes / spec.Racks
	l.Racks = map[string][]string{}
	for r := range spec.Racks {
		rack := fmt.Sprintf("%s-rack-%d", l.Name, r)
		ro := opts
		ro.Labels = map[string]string{}
		for k, v := range opts.Labels {
			ro.Labels[k] = v
		}
		ro.Labels[clusters.ZoneLabel] = l.Name + "-block-0"
		ro.Labels[clusters.DefaultBlockKey] = l.Name + "-block-0"
		ro.Labels[clusters.DefaultRackKey] = rack
		ro.Clique = rack
		names := l.Nodes[r*per : (r+1)*per]
		l.Racks[rack] = names
		if err := kwok.CreateNodes(ctx, l.Client, names, inv, ro, 8); err != nil {
			return fmt.Errorf("lane %s: create rack %s: %w", l.Name, rack, err)
		}
	}
	if spec.Unlabelled > 0 {
		if err := kwok.CreateNodes(ctx, l.Client, l.Nodes[spec.Nodes:], inv, opts, 8); err != nil {
			return fmt.Errorf("lane %s: create unlabelled nodes: %w", l.Name, err)
		}
	}
	return nil
}

// RackOf is the rack of one of the lane's nodes ("" for an unlabelled node or none of the lane's).
func (l *Lane) RackOf(node string) string {
	for rack, nodes := range l.Racks {
		if slices.Contains(nodes, node) {
			return rack
		}
	}
	return ""
}

// kwokNodeSpec is what every simulated node of the lane carries: the lane label its pods select, the
// taint of the same key only they tolerate, and the lane's GPUs per node.
func (l *Lane) kwokNodeSpec() (fakegpu.NodeOptions, fakegpu.Inventory) {
	opts := fakegpu.NodeOptions{
		Labels: map[string]string{LaneLabel: l.Name},
		Taints: []corev1.Taint{{Key: LaneLabel, Value: l.Name, Effect: corev1.TaintEffectNoSchedule}},
		GPUAPI: l.gpuAPI,
	}
	return opts, fakegpu.Inventory{Count: l.GPUs}.WithDefaults()
}

// AddNode adds one more simulated node to the lane while the lane is in use, like the ones NewLane
// made (same label, taint and GPUs, so the lane's capacity stays len(Nodes) × GPUs), and returns
// its name once it is Ready and schedulable (as NewLane, it waits out the not-ready taint the
// apiserver gives every new node). It is for features about room that appears while pods wait.
// The node is in Nodes from its creation on, so Delete removes it even if the wait fails. Lanes
// that borrow the cluster's plugin nodes cannot grow: their nodes are not the lane's to make.
func (l *Lane) AddNode(ctx context.Context) (string, error) {
	if l.borrowed {
		return "", fmt.Errorf("lane %s borrows the cluster's device plugin nodes; only lanes of simulated nodes can add one", l.Name)
	}
	name := fmt.Sprintf("%s-add-%d", l.Name, len(l.Nodes))
	opts, inv := l.kwokNodeSpec()
	if err := kwok.CreateNodes(ctx, l.Client, []string{name}, inv, opts, 1); err != nil {
		return name, fmt.Errorf("lane %s: add node: %w", l.Name, err)
	}
	l.Nodes = append(l.Nodes, name)
	selector := LaneLabel + "=" + l.Name
	if err := kwok.WaitNodesReady(ctx, l.Client, selector, len(l.Nodes), l.Env.Scaled(60*time.Second)); err != nil {
		return name, fmt.Errorf("lane %s: added node %s: %w", l.Name, name, err)
	}
	if err := kwok.WaitSchedulable(ctx, l.Client, selector, len(l.Nodes), l.Env.Scaled(60*time.Second), 5*time.Second, nil, LaneLabel); err != nil {
		return name, fmt.Errorf("lane %s: added node %s: %w", l.Name, name, err)
	}
	return name, nil
}

// Delete removes the lane's namespace and nodes (and a binding refusal it may hold). It does not wait for the namespace to be gone:
// pods on simulated nodes are deleted at once, and PodGroups follow when the controller-manager has
// removed their protection finalizer.
func (l *Lane) Delete(ctx context.Context) error {
	var errs []string
	if err := l.deleteRefusal(ctx); err != nil {
		errs = append(errs, err.Error())
	}
	if err := l.Client.CoreV1().Namespaces().Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err.Error())
	}
	for _, n := range l.Nodes {
		if l.borrowed {
			errs = append(errs, l.giveBack(ctx, n)...)
			continue
		}
		if err := l.Client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("lane %s cleanup: %s", l.Name, strings.Join(errs, "; "))
	}
	return nil
}

// Pod builds a member pinned to this lane's nodes.
func (l *Lane) Pod(m scenarios.Member) *corev1.Pod {
	if m.SchedulerName == "" {
		m.SchedulerName = l.Env.SchedulerName
	}
	p := scenarios.Pod(l.Name, m)
	p.Spec.NodeSelector = map[string]string{LaneLabel: l.Name}
	p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: LaneLabel, Operator: corev1.TolerationOpEqual, Value: l.Name, Effect: corev1.TaintEffectNoSchedule})
	return p
}

// CreatePodGroup creates a PodGroup in the lane, failing the test on error.
func (l *Lane) CreatePodGroup(ctx context.Context, t testing.TB, g scenarios.Group) *schedv1beta1.PodGroup {
	t.Helper()
	pg, err := l.Gang.PodGroups(l.Name).Create(ctx, scenarios.PodGroup(l.Name, g), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create PodGroup %s/%s: %v", l.Name, g.Name, err)
	}
	return pg
}

// CreatePods creates members in order, failing the test on error.
func (l *Lane) CreatePods(ctx context.Context, t testing.TB, members ...scenarios.Member) {
	t.Helper()
	for _, m := range members {
		if _, err := l.Client.CoreV1().Pods(l.Name).Create(ctx, l.Pod(m), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s/%s: %v", l.Name, m.Name, err)
		}
	}
}

// Members returns n members of a group named <group>-0 … with gpus each.
func Members(group string, n int, gpus int64) []scenarios.Member {
	out := make([]scenarios.Member, n)
	for i := range out {
		out[i] = scenarios.Member{Name: fmt.Sprintf("%s-%d", group, i), Group: group, GPUs: gpus, Labels: map[string]string{"group": group}}
	}
	return out
}

// Pods lists the lane's pods.
func (l *Lane) Pods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := l.Client.CoreV1().Pods(l.Name).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// PodGroup gets a PodGroup of the lane.
func (l *Lane) PodGroup(ctx context.Context, name string) (*schedv1beta1.PodGroup, error) {
	return l.Gang.PodGroups(l.Name).Get(ctx, name, metav1.GetOptions{})
}

// Events lists the lane's events about one object (all objects when name is empty).
func (l *Lane) Events(ctx context.Context, name string) ([]corev1.Event, error) {
	opts := metav1.ListOptions{}
	if name != "" {
		opts.FieldSelector = fields.OneTermEqualSelector("involvedObject.name", name).String()
	}
	list, err := l.Client.CoreV1().Events(l.Name).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// PriorityClass creates the cluster-scoped PriorityClass <lane>-<suffix>, deletes it when t ends,
// and returns once Priority admission knows it: admission resolves classes from an informer, so a
// class used right after its creation can be refused with "no PriorityClass with name … was found".
// A dry-run pod naming the class goes through the same admission without creating anything.
func (l *Lane) PriorityClass(ctx context.Context, t testing.TB, suffix string, value int32, never bool) string {
	t.Helper()
	name := l.Name + "-" + suffix
	if _, err := l.Client.SchedulingV1().PriorityClasses().Create(ctx, scenarios.PriorityClass(name, value, never), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PriorityClass %s: %v", name, err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := l.Client.SchedulingV1().PriorityClasses().Delete(dctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("cleanup: delete PriorityClass %s: %v", name, err)
		}
	})
	probe := l.Pod(scenarios.Member{Name: "class-probe", PriorityClassName: name, Gated: true})
	Eventually(ctx, t, l.Env.Scaled(30*time.Second), "Priority admission to know PriorityClass "+name, func(ctx context.Context) (bool, string, error) {
		_, err := l.Client.CoreV1().Pods(l.Name).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	return name
}

// Canary creates a tiny standalone pod on the lane and waits for it to bind. A negative check ("these
// pods stay Pending") passes only if the canary binds afterwards: that proves the scheduler was alive
// and serving this lane during the window, so an idle or crashed scheduler cannot pass.
func (l *Lane) Canary(ctx context.Context, t testing.TB) {
	t.Helper()
	name := fmt.Sprintf("canary-%d", time.Now().UnixNano()%1e9)
	p := l.Pod(scenarios.Member{Name: name})
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")}
	if _, err := l.Client.CoreV1().Pods(l.Name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create canary: %v", err)
	}
	Eventually(ctx, t, l.Env.Scaled(30*time.Second), "canary pod "+name+" bound (the scheduler is alive)", func(ctx context.Context) (bool, string, error) {
		got, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return got.Spec.NodeName != "", "nodeName=" + got.Spec.NodeName, nil
	})
	_ = l.Client.CoreV1().Pods(l.Name).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
}

// APIServerGate is Env.APIServerGate for a step: the step is skipped, saying why, when the
// apiserver's metrics cannot tell, and the state read is logged, so a run shows which behaviour it
// checked.
func (l *Lane) APIServerGate(ctx context.Context, t *testing.T, gate string) bool {
	t.Helper()
	on, err := l.Env.APIServerGate(ctx, gate)
	if err != nil {
		t.Skipf("cannot tell whether the apiserver has %s on: %v", gate, err)
	}
	t.Logf("the apiserver reports %s=%v", gate, on)
	return on
}
