package framework

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/scenarios"
)

// fakeGPUs is a GPUControl with device plugin nodes, recording what it is asked.
type fakeGPUs struct {
	nodes []string
	mu    sync.Mutex
	calls []string
}

func (f *fakeGPUs) SetUnhealthyGPUs(_ context.Context, node string, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s=%d", node, n))
	return nil
}
func (f *fakeGPUs) PluginNodes(context.Context) ([]string, error)            { return f.nodes, nil }
func (f *fakeGPUs) PluginRegistrations(context.Context, string) (int, error) { return 1, nil }

func kindNode(name string, alloc int64, labels map[string]string) *corev1.Node {
	q := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{scenarios.GPUResource: q(8)},
			Allocatable: corev1.ResourceList{scenarios.GPUResource: q(alloc)},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// TestBorrowPluginNodes: a lane asking for device plugin nodes on kind borrows free workers,
// waits for their GPUs, and gives them back (healed, unlabelled, not deleted).
func TestBorrowPluginNodes(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(
		kindNode("c-worker", 8, nil),
		kindNode("c-worker2", 8, map[string]string{LaneLabel: "other"}),
		// Its kubelet was just restarted: no GPUs until its plugin registers again.
		kindNode("c-worker3", 0, nil),
		// Its GPUs go through DRA alone: never a device plugin node.
		kindNode("c-worker4", 0, map[string]string{fakegpu.LabelGPUAPI: "dra"}),
	)
	// The plugin of c-worker3 registers while the lane waits.
	gets := 0
	cs.PrependReactor("get", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == "c-worker3" {
			// Each call first reads every plugin node (for its GPU API), then the free ones: the
			// eighth get is the first of the second borrow's wait.
			if gets++; gets == 8 {
				if err := cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), kindNode("c-worker3", 8, map[string]string{LaneLabel: "gb-faults-1"}), ""); err != nil {
					t.Error(err)
				}
			}
		}
		return false, nil, nil
	})
	gpus := &fakeGPUs{nodes: []string{"c-worker", "c-worker2", "c-worker3", "c-worker4"}}
	e := &Env{Cluster: &clusters.Cluster{Provider: "kind", GPUs: gpus}, Client: cs, Scale: 1}

	if r := e.noKubelets(ctx, 3, ""); r != "" {
		t.Errorf("3 plugin nodes, 3 wanted: skip %q", r)
	}
	if r := e.noKubelets(ctx, 4, ""); !strings.Contains(r, "the cluster has 3") {
		t.Errorf("4 wanted: %q", r)
	}

	l := &Lane{Env: e, Name: "gb-faults-1", Client: cs}
	if ok, err := e.borrowPluginNodes(ctx, l, 3); !ok || err == nil || !strings.Contains(err.Error(), "2 of 3 are free") || !strings.Contains(err.Error(), "c-worker2 by other") {
		t.Fatalf("3 nodes of which one is held: %v %v", ok, err)
	}
	if ok, err := e.borrowPluginNodes(ctx, l, 2); !ok || err != nil {
		t.Fatalf("borrow: %v %v", ok, err)
	}
	if strings.Join(l.Nodes, ",") != "c-worker,c-worker3" || !l.borrowed || l.GPUs != 8 {
		t.Errorf("lane nodes %v borrowed %v GPUs %d", l.Nodes, l.borrowed, l.GPUs)
	}
	label := func(name string) string {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Labels[LaneLabel]
	}
	if label("c-worker") != l.Name || label("c-worker3") != l.Name || label("c-worker2") != "other" {
		t.Errorf("labels: %q %q %q", label("c-worker"), label("c-worker3"), label("c-worker2"))
	}
	// The lane's pods select the label; a pinned one also the node.
	p := l.PinnedPod(scenarios.Member{Name: "x", GPUs: 2}, "c-worker")
	if p.Spec.NodeSelector[LaneLabel] != l.Name || p.Spec.NodeSelector[corev1.LabelHostname] != "c-worker" {
		t.Errorf("pinned pod selector %v", p.Spec.NodeSelector)
	}

	if err := l.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"c-worker", "c-worker3"} {
		if label(n) != "" {
			t.Errorf("%s still carries the lane label", n)
		}
	}
	if label("c-worker2") != "other" {
		t.Error("another lane's node was given back")
	}
	slices.Sort(gpus.calls)
	if strings.Join(gpus.calls, " ") != "c-worker3=0 c-worker=0" {
		t.Errorf("GPU calls at give-back: %v, want both borrowed nodes healed", gpus.calls)
	}

	// Without device plugin nodes the lane is not borrowed (it gets kwok nodes), and kubelet
	// features say why they skip.
	local := &Env{Cluster: &clusters.Cluster{Provider: "local", GPUs: &fakeGPUs{}}, Client: cs, Scale: 1}
	if ok, err := local.borrowPluginNodes(ctx, &Lane{Env: local, Name: "gb-x", Client: cs}, 2); ok || err != nil {
		t.Errorf("local: borrowed %v %v", ok, err)
	}
	if r := local.noKubelets(ctx, 1, ""); !strings.Contains(r, "this local cluster has none (a kwok node has no kubelet)") || !strings.Contains(r, "device plugin") {
		t.Errorf("local skip reason %q", r)
	}
	if r := e.noKubelets(ctx, 1, fakegpu.APIDRA); r != "" {
		t.Errorf("1 DRA worker wanted, c-worker4 is one: %q", r)
	}
	if r := e.noKubelets(ctx, 2, fakegpu.APIDRA); !strings.Contains(r, "DRA kubelet plugin") || !strings.Contains(r, "the cluster has 1") {
		t.Errorf("2 DRA workers wanted, only c-worker4 is one: %q", r)
	}
}
