package fakegpu

import (
	"fmt"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Label keys. The nvidia.com ones are those NVIDIA GPU feature discovery (GFD) sets, so workloads and
// schedulers written against real clusters select fake nodes unchanged.
const (
	LabelProduct = "nvidia.com/gpu.product"
	LabelCount   = "nvidia.com/gpu.count"
	LabelMemory  = "nvidia.com/gpu.memory"
	LabelPresent = "nvidia.com/gpu.present"
	// LabelNVLinkDomains is ours: GFD has no topology label, and gang-placement tests need to know how
	// many NVLink domains a node has.
	LabelNVLinkDomains = "gangbench.dev/nvlink-domains"
)

// Domains is how many NVLink domains the GPUs form: Count/NVLinkDomainSize, or 1 when the size is 0
// ("all GPUs in one domain"), or 0 without GPUs.
func (i Inventory) Domains() int {
	switch {
	case i.Count <= 0:
		return 0
	case i.NVLinkDomainSize <= 0:
		return 1
	default:
		return i.Count / i.NVLinkDomainSize
	}
}

// Labels returns the GFD-style labels of a node with this inventory (after WithDefaults). A node
// without GPUs gets none, as GFD labels only nodes where it finds a GPU. The memory label is left out
// when MemoryMiB is unknown (0) rather than claiming 0 MiB. The map is new on every call.
func (i Inventory) Labels() map[string]string {
	i = i.WithDefaults()
	if i.Count <= 0 {
		return map[string]string{}
	}
	l := map[string]string{
		LabelPresent:       "true",
		LabelProduct:       i.Product,
		LabelCount:         strconv.Itoa(i.Count),
		LabelNVLinkDomains: strconv.Itoa(i.Domains()),
	}
	if i.MemoryMiB > 0 {
		l[LabelMemory] = strconv.Itoa(i.MemoryMiB)
	}
	return l
}

// DeviceIDs returns Count stable device IDs for the node, shaped like NVIDIA's "GPU-<uuid>" IDs:
// GPU-<8 hex of FNV-32a(node)>-<index>. They depend only on the node name and index, so a device
// plugin restart or a re-created node advertises the same IDs, and IDs differ between nodes.
func (i Inventory) DeviceIDs(node string) []string {
	if i.Count <= 0 {
		return nil
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(node)) // hash.Hash.Write never returns an error
	sum := h.Sum32()
	ids := make([]string, i.Count)
	for idx := range ids {
		ids[idx] = fmt.Sprintf("GPU-%08x-%d", sum, idx)
	}
	return ids
}

// DomainOf returns the NVLink domain (0-based) of GPU index, GPUs being packed into domains in index
// order. It returns -1 for an index outside 0..Count-1.
func (i Inventory) DomainOf(index int) int {
	if index < 0 || index >= i.Count {
		return -1
	}
	if i.NVLinkDomainSize <= 0 {
		return 0
	}
	return index / i.NVLinkDomainSize
}

// Resources returns the GPU resource (after WithDefaults) with quantity Count, or an empty list for a
// node without GPUs: a kwok node has no device plugin that would advertise a zero.
func (i Inventory) Resources() corev1.ResourceList {
	i = i.WithDefaults()
	if i.Count <= 0 {
		return corev1.ResourceList{}
	}
	return corev1.ResourceList{
		corev1.ResourceName(i.ResourceName): *resource.NewQuantity(int64(i.Count), resource.DecimalSI),
	}
}
