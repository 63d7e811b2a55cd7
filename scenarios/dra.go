package scenarios

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/fakegpu"
)

// Claim is one DRA claim of a pod or a PodGroup: its name in the spec and where the ResourceClaim
// comes from, a template (one claim made per pod, or per group for a group's claim) or an existing
// claim. Exactly one of Template and ClaimName is set.
type Claim struct {
	Name      string
	Template  string
	ClaimName string
}

func (c Claim) podClaim() corev1.PodResourceClaim {
	pc := corev1.PodResourceClaim{Name: c.Name}
	if c.Template != "" {
		pc.ResourceClaimTemplateName = &c.Template
	}
	if c.ClaimName != "" {
		pc.ResourceClaimName = &c.ClaimName
	}
	return pc
}

func (c Claim) podGroupClaim() schedv1beta1.PodGroupResourceClaim {
	pc := schedv1beta1.PodGroupResourceClaim{Name: c.Name}
	if c.Template != "" {
		pc.ResourceClaimTemplateName = &c.Template
	}
	if c.ClaimName != "" {
		pc.ResourceClaimName = &c.ClaimName
	}
	return pc
}

// GPURequest is a claim's request of count fake GPUs of the fake GPUs' DeviceClass; selectors are
// CEL expressions each device must also meet (e.g. on device.attributes["gpu.fakegpu.gangbench.dev"].productName).
func GPURequest(count int64, selectors ...string) resourcev1.DeviceRequest {
	r := resourcev1.DeviceRequest{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: fakegpu.DeviceClassName,
		AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
		Count:           count,
	}}
	for _, s := range selectors {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: s}})
	}
	return r
}

// ClaimTemplate builds a ResourceClaimTemplate whose claims ask for req.
func ClaimTemplate(namespace, name string, req resourcev1.DeviceRequest) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels(nil)},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{req}},
		}},
	}
}

// ResourceClaim builds a ResourceClaim that asks for req.
func ResourceClaim(namespace, name string, req resourcev1.DeviceRequest) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels(nil)},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{req}}},
	}
}
