// Package fakegpu is the one model of the fake GPUs gangbench gives a node. The local provider renders
// it into simulated (kwok) node status and labels; the kind provider's device plugin advertises the
// same devices to a real kubelet. It imports no other gangbench package.
package fakegpu

// Inventory describes the GPUs of one node.
type Inventory struct {
	// Count is the number of GPUs per node.
	Count int `json:"count"`
	// ResourceName is the extended resource advertised; default "nvidia.com/gpu".
	ResourceName string `json:"resourceName,omitempty"`
	// Product is the GPU model as GPU feature discovery labels it, e.g. "NVIDIA-H100-80GB-HBM3".
	Product string `json:"product,omitempty"`
	// MemoryMiB is the memory of one GPU in MiB (the unit of the nvidia.com/gpu.memory label).
	MemoryMiB int `json:"memoryMiB,omitempty"`
	// NVLinkDomainSize is how many GPUs share one NVLink domain; 0 means all of them.
	NVLinkDomainSize int `json:"nvlinkDomainSize,omitempty"`
}
