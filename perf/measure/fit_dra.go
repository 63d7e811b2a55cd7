package measure

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/fakegpu"
)

// "Every pod that fits is bound" on DRA nodes: the nodes have no nvidia.com/gpu and the pods request
// none, so the fit check would see only pod slots and CPU and find every pending pod fitting. Here
// the fake GPUs become one more resource of the check (FitGPUDevices): a node offers the devices of
// the fake GPU driver its ResourceSlices publish (a withdrawn, unhealthy device is not in them), and
// a pod takes the devices its claims were allocated, or, not yet allocated, those they ask for.

// FitGPUDevices is the resource name the fit check counts DRA fake GPUs under. It is no resource of
// the API: only the check's nodes and pods carry it.
const FitGPUDevices corev1.ResourceName = "devices." + fakegpu.DRADriver

// DRAInventory is what the fit check needs of a cluster's DRA objects.
type DRAInventory struct {
	// NodeDevices is the fake GPU devices each node's slices publish.
	NodeDevices map[string]int64
	// Claims is each claim's devices (namespace/name): allocated, or asked for while unallocated.
	Claims map[string]int64
	// Templates is the devices each template's claims ask for (namespace/name).
	Templates map[string]int64
}

// ListDRA reads the cluster's fake GPU slices, claims and claim templates (all namespaces: a claim
// of another namespace holds devices too).
func ListDRA(ctx context.Context, cs kubernetes.Interface) (DRAInventory, error) {
	inv := DRAInventory{Claims: map[string]int64{}, Templates: map[string]int64{}}
	slices, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, fmt.Errorf("list ResourceSlices: %w", err)
	}
	inv.NodeDevices = SliceDevices(slices.Items, fakegpu.DRADriver)
	claims, err := cs.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, fmt.Errorf("list ResourceClaims: %w", err)
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		inv.Claims[c.Namespace+"/"+c.Name] = ClaimDevices(c)
	}
	templates, err := cs.ResourceV1().ResourceClaimTemplates(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, fmt.Errorf("list ResourceClaimTemplates: %w", err)
	}
	for _, t := range templates.Items {
		inv.Templates[t.Namespace+"/"+t.Name] = RequestedDevices(t.Spec.Spec)
	}
	return inv, nil
}

// SliceDevices counts the devices of driver that node-local slices publish, per node. A pool
// republished with a higher generation replaces the old one (the scheduler ignores the older
// generation too), so only each pool's newest slices count.
func SliceDevices(slices []resourcev1.ResourceSlice, driver string) map[string]int64 {
	newest := map[string]int64{}
	for _, s := range slices {
		if s.Spec.Driver == driver {
			newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
		}
	}
	out := map[string]int64{}
	for _, s := range slices {
		if s.Spec.Driver != driver || s.Spec.NodeName == nil || s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		out[*s.Spec.NodeName] += int64(len(s.Spec.Devices))
	}
	return out
}

// ClaimDevices is a claim's fake GPUs: the devices of the driver it was allocated, or, while it is
// not allocated, those it asks for.
func ClaimDevices(c *resourcev1.ResourceClaim) int64 {
	if a := c.Status.Allocation; a != nil {
		n := int64(0)
		for _, r := range a.Devices.Results {
			if r.Driver == fakegpu.DRADriver {
				n++
			}
		}
		return n
	}
	return RequestedDevices(c.Spec)
}

// RequestedDevices is the fake GPUs a claim spec asks for: its exact-count requests of the fake
// GPUs' DeviceClass. (The load generator asks no other way; an "all" request has no count to add.)
func RequestedDevices(spec resourcev1.ResourceClaimSpec) int64 {
	n := int64(0)
	for _, r := range spec.Devices.Requests {
		if e := r.Exactly; e != nil && e.DeviceClassName == fakegpu.DeviceClassName && e.AllocationMode == resourcev1.DeviceAllocationModeExactCount {
			n += e.Count
		}
	}
	return n
}

// PodDevices is the fake GPUs a pod's claims take or ask for: a claim that exists counts its own
// devices (a template claim's generated name is in the pod's status); one the
// resourceclaim-controller has not made yet counts what its template asks for.
func (inv DRAInventory) PodDevices(p *corev1.Pod) int64 {
	generated := map[string]string{}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			generated[s.Name] = *s.ResourceClaimName
		}
	}
	n := int64(0)
	for _, pc := range p.Spec.ResourceClaims {
		name := generated[pc.Name]
		if pc.ResourceClaimName != nil {
			name = *pc.ResourceClaimName
		}
		if d, ok := inv.Claims[p.Namespace+"/"+name]; ok && name != "" {
			n += d
			continue
		}
		if pc.ResourceClaimTemplateName != nil {
			n += inv.Templates[p.Namespace+"/"+*pc.ResourceClaimTemplateName]
		}
	}
	return n
}
