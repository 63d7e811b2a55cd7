package kwok

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/gangbench/gangbench/fakegpu"
)

// Simulated nodes have no kubelet, so no DRA plugin publishes their GPUs: gangbench publishes each
// node's ResourceSlice itself, as the plugin would (workload-features §5.3: the scheduler reads only
// the slices; nothing prepares a device on a node without a kubelet). The slice is owned by its
// node, so the garbage collector removes it with the node wherever the node is deleted from.

// AnnotationSliceGPUs records on a simulated node the inventory (JSON) its slice was rendered from,
// so a later change of the slice (SetUnhealthyGPUs) renders the same devices without being told them.
const AnnotationSliceGPUs = "gangbench.dev/dra-gpus"

// AnnotationSliceClique records the node's NVLink clique for the same reason.
const AnnotationSliceClique = "gangbench.dev/dra-clique"

// EnsureDeviceClass creates the fake GPUs' DeviceClass, or sets the spec of one that exists to
// gangbench's (an older gangbench may have left a different one). The class is cluster-wide and
// carries the managed label, so DeleteManaged-style sweeps find it.
func EnsureDeviceClass(ctx context.Context, cs kubernetes.Interface) error {
	want := fakegpu.DeviceClass()
	classes := cs.ResourceV1().DeviceClasses()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := classes.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = classes.Create(ctx, want, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(resourcev1.Resource("deviceclasses"), want.Name, err)
			}
			return err
		}
		if err != nil || equality.Semantic.DeepEqual(cur.Spec, want.Spec) {
			return err
		}
		cur.Spec = want.Spec
		_, err = classes.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("DeviceClass %s: %w", fakegpu.DeviceClassName, err)
	}
	return nil
}

// publishSlice creates (or replaces) node's ResourceSlice with inv's devices, owned by the node.
func publishSlice(ctx context.Context, cs kubernetes.Interface, node *corev1.Node, inv fakegpu.Inventory, opts fakegpu.SliceOptions) error {
	opts.Owner = fakegpu.NodeOwner(node)
	want := fakegpu.ResourceSlice(node.Name, inv, opts)
	slices := cs.ResourceV1().ResourceSlices()
	// Conflicts are retried: two health changes of one node may race.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := slices.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("node %s: create ResourceSlice %s: %w", node.Name, want.Name, err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("node %s: ResourceSlice %s: %w", node.Name, want.Name, err)
		}
		// A republished pool carries a higher generation, so the scheduler never mixes old and new.
		next := want.DeepCopy()
		next.ResourceVersion = cur.ResourceVersion
		next.Spec.Pool.Generation = cur.Spec.Pool.Generation + 1
		if _, err := slices.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s: update ResourceSlice %s: %w", node.Name, want.Name, err)
		}
		return nil
	})
}

// sliceAnnotations are what a simulated node records of its slice: the inventory as JSON
// (AnnotationSliceGPUs) and the clique (AnnotationSliceClique).
func sliceAnnotations(inv fakegpu.Inventory, clique string) (map[string]string, error) {
	b, err := json.Marshal(inv)
	if err != nil {
		return nil, err
	}
	return map[string]string{AnnotationSliceGPUs: string(b), AnnotationSliceClique: clique}, nil
}

// republishSlice renders node's slice again from what the node records, with unhealthy devices
// withdrawn. It is the DRA half of StatusGPUs.SetUnhealthyGPUs.
func republishSlice(ctx context.Context, cs kubernetes.Interface, node *corev1.Node, unhealthy int) error {
	var inv fakegpu.Inventory
	if err := json.Unmarshal([]byte(node.Annotations[AnnotationSliceGPUs]), &inv); err != nil {
		return fmt.Errorf("node %s: annotation %s=%q: not a GPU inventory: %w", node.Name, AnnotationSliceGPUs, node.Annotations[AnnotationSliceGPUs], err)
	}
	if unhealthy > inv.Count {
		return fmt.Errorf("node %s: %d unhealthy GPUs, but its slice has %d", node.Name, unhealthy, inv.Count)
	}
	return publishSlice(ctx, cs, node, inv, fakegpu.SliceOptions{Clique: node.Annotations[AnnotationSliceClique], Unhealthy: unhealthy})
}
