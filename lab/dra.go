package lab

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/scenarios"
)

// The lab with DRA GPUs (Options.GPUAPI = fakegpu.APIDRA): the worker publishes its 8 GPUs in a
// ResourceSlice of the fake driver and has no nvidia.com/gpu, so the lab's manifests are applied
// with each container's `nvidia.com/gpu: N` turned into a claim of N GPUs from a
// ResourceClaimTemplate of the lab's (gpu-N), and the GPUs in use are the devices allocated to
// ResourceClaims from the worker's pool. Everything else of the manifests is the lab's.

// draClaimSuffix names a container's GPU claim in its pod: <container>-gpus, unique in the pod
// because container names are.
const draClaimSuffix = "-gpus"

// draResourceReason is the DRA plugin's Filter reason for a node where a pod's claims cannot all be
// allocated (dynamicresources.go, Filter: "cannot allocate all claims"); it stands where the lab's
// message says "Insufficient nvidia.com/gpu", and the scheduler counts it per node the same way.
const draResourceReason = "cannot allocate all claims"

// draTemplateName is the lab's ResourceClaimTemplate for claims of n GPUs.
func draTemplateName(n int64) string { return "gpu-" + strconv.FormatInt(n, 10) }

// withDRAGPUs returns the manifest's objects with every container's nvidia.com/gpu limit and
// request replaced by a pod-level claim of as many GPUs (spec.resourceClaims from the template
// gpu-N, used by the container through resources.claims); each template is inserted before the
// first pod that uses it, in that pod's namespace. The objects are changed in place. A container
// whose limit and request differ, or whose count is not a whole number, is an error: a claim asks
// for whole devices, and the lab's pods set limits only.
func withDRAGPUs(file string, objs []runtime.Object) ([]runtime.Object, error) {
	out := make([]runtime.Object, 0, len(objs))
	made := map[string]bool{} // namespace/template
	for _, obj := range objs {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			out = append(out, obj)
			continue
		}
		counts, err := draPod(pod)
		if err != nil {
			return nil, fmt.Errorf("%s: pod %s: %w", file, pod.Name, err)
		}
		for _, n := range counts {
			name := draTemplateName(n)
			if made[pod.Namespace+"/"+name] {
				continue
			}
			made[pod.Namespace+"/"+name] = true
			t := scenarios.ClaimTemplate(pod.Namespace, name, scenarios.GPURequest(n))
			// kubectl's line and a YAML rendering of the object read the kind from here.
			t.TypeMeta = metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"}
			out = append(out, t)
		}
		out = append(out, pod)
	}
	return out, nil
}

// draPod moves the GPU count of each of pod's containers into a claim and returns the counts, in
// container order (init containers first).
func draPod(pod *corev1.Pod) ([]int64, error) {
	var counts []int64
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			n, err := containerGPUs(c)
			if err != nil {
				return nil, fmt.Errorf("container %s: %w", c.Name, err)
			}
			if n == 0 {
				continue
			}
			delete(c.Resources.Limits, gpuResource)
			delete(c.Resources.Requests, gpuResource)
			name := c.Name + draClaimSuffix
			for _, pc := range pod.Spec.ResourceClaims {
				if pc.Name == name {
					return nil, fmt.Errorf("container %s: the pod already has a claim named %s", c.Name, name)
				}
			}
			tmpl := draTemplateName(n)
			pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: &tmpl})
			c.Resources.Claims = append(c.Resources.Claims, corev1.ResourceClaim{Name: name})
			counts = append(counts, n)
		}
	}
	return counts, nil
}

// containerGPUs is the nvidia.com/gpu a container asks for: its limit, or its request without a
// limit (the API defaults a missing request of an extended resource to the limit).
func containerGPUs(c *corev1.Container) (int64, error) {
	lim, hasLim := c.Resources.Limits[gpuResource]
	req, hasReq := c.Resources.Requests[gpuResource]
	q := lim
	switch {
	case hasLim && hasReq && lim.Cmp(req) != 0:
		return 0, fmt.Errorf("%s limit %s and request %s differ", gpuResource, lim.String(), req.String())
	case !hasLim && !hasReq:
		return 0, nil
	case !hasLim:
		q = req
	}
	n := q.Value()
	if n < 0 || q.Cmp(*resource.NewQuantity(n, resource.DecimalSI)) != 0 {
		return 0, fmt.Errorf("%s %s is not a whole number of GPUs", gpuResource, q.String())
	}
	return n, nil
}

// allocatedDevices counts the distinct devices of driver in pool that claims are allocated: what
// `kubectl get resourceclaims -A` shows allocated there (a claim shared by several pods holds its
// devices once).
func allocatedDevices(claims []resourcev1.ResourceClaim, driver, pool string) int64 {
	seen := map[string]bool{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == driver && r.Pool == pool {
				seen[r.Device] = true
			}
		}
	}
	return int64(len(seen))
}

// workerClaimedGPUs is workerGPUs with DRA GPUs: the devices allocated from the worker's pool. The
// pool is named after its node, as fakegpu.ResourceSlice names it and as kubelet DRA plugins name
// a node-local pool.
func (r *runner) workerClaimedGPUs(ctx context.Context) (int64, error) {
	claims, err := r.cs.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list ResourceClaims: %w", err)
	}
	return allocatedDevices(claims.Items, fakegpu.DRADriver, r.o.Worker), nil
}

// draGPUCommand is the kubectl command that prints the number workerClaimedGPUs counts.
func draGPUCommand(worker string) string {
	return fmt.Sprintf(`kubectl get resourceclaims -A -o jsonpath='{range .items[*].status.allocation.devices.results[*]}{.driver}/{.pool}/{.device}{"\n"}{end}' | sort -u | grep -c '^%s/%s/'`,
		fakegpu.DRADriver, worker)
}

// slicedGPUs counts, per node, the devices of the fake driver the cluster's ResourceSlices publish.
func (r *runner) slicedGPUs(ctx context.Context) (map[string]int, error) {
	list, err := r.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	out := map[string]int{}
	for _, s := range list.Items {
		if s.Spec.Driver == fakegpu.DRADriver && s.Spec.NodeName != nil {
			out[*s.Spec.NodeName] += len(s.Spec.Devices)
		}
	}
	return out, nil
}
