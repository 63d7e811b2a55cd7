package kwok

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gangbench/gangbench/fakegpu"
)

// A DRA node is created with its slice (owned by it, its clique, no nvidia.com/gpu), and marking
// GPUs unhealthy republishes the slice without them at a higher pool generation; healthy again
// brings them back.
func TestCreateNodesPublishesSlices(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	inv := fakegpu.Inventory{Count: 8, Product: "NVIDIA-A100-SXM4-80GB"}.WithDefaults()
	opts := fakegpu.NodeOptions{GPUAPI: fakegpu.APIDRA, Clique: "rack-1"}
	if err := CreateNodes(ctx, cs, []string{"n-0", "n-1"}, inv, opts, 2); err != nil {
		t.Fatal(err)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, "n-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := node.Status.Capacity[fakegpu.DefaultResourceName]; ok {
		t.Errorf("a DRA-only node has %s in its capacity: %v", fakegpu.DefaultResourceName, node.Status.Capacity)
	}
	if node.Labels[fakegpu.LabelGPUAPI] != "dra" {
		t.Errorf("node label %s = %q, want dra", fakegpu.LabelGPUAPI, node.Labels[fakegpu.LabelGPUAPI])
	}
	if st := readiness(node); !st.ready {
		t.Errorf("a Ready DRA node without nvidia.com/gpu is judged %+v", st)
	}
	s, err := cs.ResourceV1().ResourceSlices().Get(ctx, fakegpu.SliceName("n-0"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Node" || s.OwnerReferences[0].Name != "n-0" {
		t.Errorf("slice owners %v, want the node n-0", s.OwnerReferences)
	}
	if len(s.Spec.Devices) != 8 || s.Spec.Pool.Name != "n-0" || *s.Spec.NodeName != "n-0" || s.Spec.Driver != fakegpu.DRADriver {
		t.Fatalf("slice: %d devices, pool %q, node %v, driver %q", len(s.Spec.Devices), s.Spec.Pool.Name, s.Spec.NodeName, s.Spec.Driver)
	}
	if c := *s.Spec.Devices[0].Attributes[fakegpu.AttrCliqueID].StringValue; c != "rack-1" {
		t.Errorf("clique %q, want rack-1", c)
	}
	if p := *s.Spec.Devices[0].Attributes[fakegpu.AttrProduct].StringValue; p != "NVIDIA-A100-SXM4-80GB" {
		t.Errorf("product %q, want the inventory's", p)
	}

	g := NewStatusGPUs(cs)
	for _, step := range []struct {
		unhealthy, devices int
		generation         int64
	}{{3, 5, 2}, {0, 8, 3}} {
		if err := g.SetUnhealthyGPUs(ctx, "n-0", step.unhealthy); err != nil {
			t.Fatalf("SetUnhealthyGPUs(%d): %v", step.unhealthy, err)
		}
		s, err := cs.ResourceV1().ResourceSlices().Get(ctx, fakegpu.SliceName("n-0"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Spec.Devices) != step.devices || s.Spec.Pool.Generation != step.generation {
			t.Errorf("%d unhealthy: %d devices at generation %d, want %d at %d", step.unhealthy, len(s.Spec.Devices), s.Spec.Pool.Generation, step.devices, step.generation)
		}
		if step.devices > 0 && s.Spec.Devices[step.devices-1].Name != fakegpu.DeviceName(step.devices-1) {
			t.Errorf("%d unhealthy: last device %s, want the last ones withdrawn", step.unhealthy, s.Spec.Devices[step.devices-1].Name)
		}
	}
	if err := g.SetUnhealthyGPUs(ctx, "n-0", 9); err == nil {
		t.Error("9 unhealthy GPUs of 8 was accepted")
	}
	// A device-plugin node gets no slice.
	if err := CreateNodes(ctx, cs, []string{"dp-0"}, inv, fakegpu.NodeOptions{}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ResourceV1().ResourceSlices().Get(ctx, fakegpu.SliceName("dp-0"), metav1.GetOptions{}); err == nil {
		t.Error("a device-plugin node got a ResourceSlice")
	}
	if err := EnsureDeviceClass(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if err := EnsureDeviceClass(ctx, cs); err != nil {
		t.Fatalf("a second EnsureDeviceClass: %v", err)
	}
}
