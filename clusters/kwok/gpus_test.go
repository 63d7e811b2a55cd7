package kwok

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
)

func TestStatusGPUs(t *testing.T) {
	ctx := context.Background()
	sim := fakegpu.SimulatedNode("gpu-node-0", fakegpu.Inventory{Count: 8}.WithDefaults(), fakegpu.NodeOptions{})
	kubeletNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kind-worker"}, Status: *sim.Status.DeepCopy()}
	cs := fake.NewClientset(sim, kubeletNode)
	g := NewStatusGPUs(cs)
	gpus := func(name string) (alloc, capa int64) {
		t.Helper()
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a, c := n.Status.Allocatable[fakegpu.DefaultResourceName], n.Status.Capacity[fakegpu.DefaultResourceName]
		return a.Value(), c.Value()
	}

	for _, step := range []struct {
		n                int
		alloc, wantCapac int64
	}{{3, 5, 8}, {3, 5, 8}, {8, 0, 8}, {0, 8, 8}} {
		if err := g.SetUnhealthyGPUs(ctx, "gpu-node-0", step.n); err != nil {
			t.Fatalf("SetUnhealthyGPUs(%d): %v", step.n, err)
		}
		// What a kubelet does: allocatable drops by the unhealthy devices, capacity keeps them.
		if a, c := gpus("gpu-node-0"); a != step.alloc || c != step.wantCapac {
			t.Errorf("after %d unhealthy: allocatable %d capacity %d, want %d and %d", step.n, a, c, step.alloc, step.wantCapac)
		}
		// Other resources are not touched by the patch.
		n, _ := cs.CoreV1().Nodes().Get(ctx, "gpu-node-0", metav1.GetOptions{})
		if cpu := n.Status.Allocatable[corev1.ResourceCPU]; cpu.Cmp(sim.Status.Allocatable[corev1.ResourceCPU]) != 0 {
			t.Errorf("cpu allocatable changed to %s", cpu.String())
		}
	}

	for _, tc := range []struct {
		node string
		n    int
		want string
	}{
		{"gpu-node-0", 9, "it has 8"},
		{"gpu-node-0", -1, "negative"},
		{"kind-worker", 1, "not simulated by kwok"},
		{"nope", 1, "not found"},
	} {
		if err := g.SetUnhealthyGPUs(ctx, tc.node, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.node) {
			t.Errorf("SetUnhealthyGPUs(%s, %d) = %v, want an error naming the node and %q", tc.node, tc.n, err, tc.want)
		}
	}
	if a, _ := gpus("kind-worker"); a != 8 {
		t.Errorf("a node kwok does not manage was changed: allocatable %d", a)
	}

	if ns, err := g.PluginNodes(ctx); err != nil || len(ns) != 0 {
		t.Errorf("PluginNodes = %v, %v; simulated nodes have no device plugin", ns, err)
	}
	if _, err := g.PluginRegistrations(ctx, "gpu-node-0"); !errors.Is(err, clusters.ErrNoDevicePlugin) {
		t.Errorf("PluginRegistrations: %v, want ErrNoDevicePlugin", err)
	}
}
