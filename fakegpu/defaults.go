package fakegpu

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
)

const (
	// DefaultResourceName is the extended resource the NVIDIA device plugin advertises.
	DefaultResourceName = "nvidia.com/gpu"
	// DefaultProduct is what GPU feature discovery puts in nvidia.com/gpu.product for an H100 SXM.
	DefaultProduct = "NVIDIA-H100-80GB-HBM3"
	// DefaultMemoryMiB is the memory nvidia-smi (and so GFD's nvidia.com/gpu.memory) reports for
	// DefaultProduct: 80 GiB less the part the driver reserves.
	DefaultMemoryMiB = 81559
	// DefaultCount is the GPUs of one HGX H100 board.
	DefaultCount = 8
	// DefaultNVLinkDomainSize makes all eight GPUs of a board one NVLink (NVSwitch) domain.
	DefaultNVLinkDomainSize = 8

	// MaxCount bounds Count. Real nodes carry at most 16 GPUs; 64 leaves room for fractional or MIG-like
	// experiments while still catching a node count passed as a GPU count.
	MaxCount = 64
)

// Default is one HGX H100 node: 8 × NVIDIA-H100-80GB-HBM3 in one NVLink domain.
func Default() Inventory {
	return Inventory{
		Count:            DefaultCount,
		ResourceName:     DefaultResourceName,
		Product:          DefaultProduct,
		MemoryMiB:        DefaultMemoryMiB,
		NVLinkDomainSize: DefaultNVLinkDomainSize,
	}
}

// WithDefaults returns a copy with empty fields filled from Default, except:
//   - Count, which is the caller's choice (0 is a node without GPUs);
//   - NVLinkDomainSize, because 0 already means "all GPUs share one domain", which is what the
//     default (8 GPUs, domains of 8) amounts to anyway, and a fixed 8 would be invalid for Count 4;
//   - MemoryMiB, which is filled only together with Product: a caller who names another product
//     must not silently get an H100's memory.
func (i Inventory) WithDefaults() Inventory {
	d := Default()
	if i.ResourceName == "" {
		i.ResourceName = d.ResourceName
	}
	if i.Product == "" {
		i.Product = d.Product
		if i.MemoryMiB == 0 {
			i.MemoryMiB = d.MemoryMiB
		}
	}
	return i
}

// Validate checks the inventory as it will be rendered, i.e. after WithDefaults, so a zero
// ResourceName or Product is fine. Every problem is reported (joined), each naming its JSON field
// and the offending value.
func (i Inventory) Validate() error {
	i = i.WithDefaults()
	var errs []error
	if i.Count < 0 || i.Count > MaxCount {
		errs = append(errs, fmt.Errorf("fakegpu: count must be between 0 and %d, got %d", MaxCount, i.Count))
	}
	if msgs := extendedResourceNameErrors(i.ResourceName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("fakegpu: resourceName %q is not a valid extended resource name (domain/name): %s",
			i.ResourceName, strings.Join(msgs, "; ")))
	}
	if msgs := content.IsLabelValue(i.Product); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("fakegpu: product %q must be a valid label value (it becomes nvidia.com/gpu.product): %s",
			i.Product, strings.Join(msgs, "; ")))
	}
	if i.MemoryMiB < 0 {
		errs = append(errs, fmt.Errorf("fakegpu: memoryMiB must be >= 0, got %d", i.MemoryMiB))
	}
	switch {
	case i.NVLinkDomainSize < 0 || i.NVLinkDomainSize > max(i.Count, 0):
		errs = append(errs, fmt.Errorf("fakegpu: nvlinkDomainSize must be between 0 and count (%d), got %d",
			i.Count, i.NVLinkDomainSize))
	case i.NVLinkDomainSize > 0 && i.Count%i.NVLinkDomainSize != 0:
		errs = append(errs, fmt.Errorf("fakegpu: nvlinkDomainSize %d must divide count %d so every domain is full",
			i.NVLinkDomainSize, i.Count))
	}
	return errors.Join(errs...)
}

// extendedResourceNameErrors mirrors k8s.io/kubernetes' IsExtendedResourceName (which we cannot
// import): the name needs a domain that is not kubernetes.io (those are native resources), must not
// use the quota "requests." prefix, and "requests.<name>" must still be a qualified name because the
// ResourceQuota admission builds exactly that key from it.
func extendedResourceNameErrors(name string) []string {
	domain, _, found := strings.Cut(name, "/")
	if !found {
		return []string{"must have a domain prefix, e.g. nvidia.com/gpu"}
	}
	if domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") {
		return []string{"the kubernetes.io domain is reserved for native resources"}
	}
	if strings.HasPrefix(name, "requests.") {
		return []string{`must not start with "requests."`}
	}
	if msgs := content.IsQualifiedName(name); len(msgs) > 0 {
		return msgs
	}
	return content.IsQualifiedName("requests." + name)
}
