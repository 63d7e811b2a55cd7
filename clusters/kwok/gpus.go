package kwok

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
)

// StatusGPUs is clusters.GPUControl for kwok-simulated nodes. A real kubelet answers a device
// plugin that reports unhealthy devices by lowering the node's allocatable (capacity keeps counting
// them); simulated nodes have no kubelet and no plugin, so StatusGPUs writes that outcome into the
// node status directly. kwok keeps a node's allocatable as it finds it (its stages never rewrite
// it), so the patch stays until the next one.
type StatusGPUs struct {
	Client kubernetes.Interface
	// Resource is the GPU resource; empty means fakegpu.DefaultResourceName.
	Resource corev1.ResourceName
}

var _ clusters.GPUControl = (*StatusGPUs)(nil)

// NewStatusGPUs returns a StatusGPUs for the default GPU resource.
func NewStatusGPUs(cs kubernetes.Interface) *StatusGPUs { return &StatusGPUs{Client: cs} }

func (s *StatusGPUs) resource() corev1.ResourceName {
	if s.Resource == "" {
		return fakegpu.DefaultResourceName
	}
	return s.Resource
}

// SetUnhealthyGPUs implements clusters.GPUControl: allocatable becomes capacity - n, and a node
// whose GPUs are in a ResourceSlice gets its slice republished without its last n devices. Only nodes kwok
// manages are changed: a real kubelet would overwrite the patch at its next status update, and a
// node gangbench did not make is not its to change.
func (s *StatusGPUs) SetUnhealthyGPUs(ctx context.Context, node string, n int) error {
	res := s.resource()
	if n < 0 {
		return fmt.Errorf("node %s: %d unhealthy %s is negative", node, n, res)
	}
	nd, err := s.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	if nd.Annotations[fakegpu.AnnotationKwokNode] != fakegpu.AnnotationKwokNodeValue {
		return fmt.Errorf("node %s is not simulated by kwok (no %s=%s annotation): its %s comes from a kubelet, which would overwrite a status patch",
			node, fakegpu.AnnotationKwokNode, fakegpu.AnnotationKwokNodeValue, res)
	}
	_, published := nd.Annotations[AnnotationSliceGPUs]
	if published {
		// The GPUs are in a ResourceSlice: a driver withdraws an unhealthy device from it.
		if err := republishSlice(ctx, s.Client, nd, n); err != nil {
			return err
		}
	}
	capQ, ok := nd.Status.Capacity[res]
	if !ok {
		if published {
			return nil // DRA only: no extended resource to lower
		}
		return fmt.Errorf("node %s has no %s in its capacity", node, res)
	}
	total := capQ.Value()
	if int64(n) > total {
		return fmt.Errorf("node %s: %d unhealthy %s, but it has %d", node, n, res, total)
	}
	want := resource.NewQuantity(total-int64(n), resource.DecimalSI)
	if cur, ok := nd.Status.Allocatable[res]; ok && cur.Cmp(*want) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"allocatable": map[corev1.ResourceName]string{res: want.String()}}})
	if err != nil {
		return err
	}
	if _, err := s.Client.CoreV1().Nodes().PatchStatus(ctx, node, patch); err != nil {
		return fmt.Errorf("node %s: set allocatable %s=%s: %w", node, res, want, err)
	}
	return nil
}

// PluginNodes implements clusters.GPUControl: simulated nodes have no device plugin.
func (s *StatusGPUs) PluginNodes(context.Context) ([]string, error) { return nil, nil }

// PluginRegistrations implements clusters.GPUControl: it always fails, there is no plugin.
func (s *StatusGPUs) PluginRegistrations(_ context.Context, node string) (int, error) {
	return 0, fmt.Errorf("node %s is simulated by kwok: %w", node, clusters.ErrNoDevicePlugin)
}
