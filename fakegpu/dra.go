package fakegpu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// API is how a node's fake GPUs are published to the scheduler.
type API string

const (
	// APIDevicePlugin publishes the GPUs as the extended resource nvidia.com/gpu: through the device
	// plugin on real kubelets, in the node status on simulated nodes.
	APIDevicePlugin API = "device-plugin"
	// APIDRA publishes them through dynamic resource allocation: one ResourceSlice per node with one
	// device per GPU, and no extended resource, so pods reach them only through ResourceClaims.
	APIDRA API = "dra"
	// APIBoth publishes them both ways, as a node does while a real cluster moves from the device
	// plugin to a DRA driver. The two are not reconciled: a pod can take a GPU each way.
	APIBoth API = "both"
)

// APIs lists the accepted GPU APIs, the default first.
func APIs() []API { return []API{APIDevicePlugin, APIDRA, APIBoth} }

// ParseAPI accepts a GPU API's name; "" is the default, APIDevicePlugin.
func ParseAPI(s string) (API, error) {
	if s == "" {
		return APIDevicePlugin, nil
	}
	if slices.Contains(APIs(), API(s)) {
		return API(s), nil
	}
	names := make([]string, 0, len(APIs()))
	for _, a := range APIs() {
		names = append(names, string(a))
	}
	return "", fmt.Errorf("GPU API %q: accepted %s", s, strings.Join(names, ", "))
}

// LabelGPUAPI is set on GPU nodes whose GPUs are not (only) the device plugin's, to the API
// (dra or both): a DRA-only node has no nvidia.com/gpu to wait for, so readiness checks read it.
const LabelGPUAPI = "gangbench.dev/gpu-api"

// ExtendedResource reports whether the GPUs are counted in the node's extended resource.
func (a API) ExtendedResource() bool { return a == "" || a == APIDevicePlugin || a == APIBoth }

// DRA reports whether the GPUs are published in a ResourceSlice.
func (a API) DRA() bool { return a == APIDRA || a == APIBoth }

// The DRA driver of the fake GPUs. Its name is a domain of ours (a real driver's is its vendor's,
// gpu.nvidia.com), so a cluster that also runs a real driver never confuses the two.
const (
	// DRADriver is the driver name in every ResourceSlice and allocation result.
	DRADriver = "gpu.fakegpu.gangbench.dev"
	// DeviceClassName is the DeviceClass that selects every fake GPU, by driver, as real drivers
	// ship theirs (NVIDIA's gpu.nvidia.com class selects on device.driver the same way).
	DeviceClassName = "gpu.fakegpu.gangbench.dev"
)

// Device attributes and capacity, named as NVIDIA's DRA driver names them where it has the
// attribute (uuid, productName, index, minor, type, brand) so CEL written for real GPUs selects fake
// ones unchanged. nvlinkDomain and cliqueID are ours: the NVLink domain within the node and the
// NVLink clique across nodes (a rack, when the cluster has a topology).
const (
	AttrType         = "type"
	AttrUUID         = "uuid"
	AttrProduct      = "productName"
	AttrBrand        = "brand"
	AttrIndex        = "index"
	AttrMinor        = "minor"
	AttrNVLinkDomain = "nvlinkDomain"
	AttrCliqueID     = "cliqueID"
	CapacityMemory   = "memory"
)

// SliceOptions are what a node's ResourceSlice carries besides its inventory.
type SliceOptions struct {
	// Clique is the NVLink clique the node's GPUs belong to: the rack when the cluster has a
	// topology; "" makes each node its own clique.
	Clique string
	// Unhealthy withdraws the last Unhealthy devices from the slice, as a driver withdraws devices
	// it finds unhealthy: a device not in any slice is never allocated.
	Unhealthy int
	// Generation is the pool's generation; a republished slice must carry a higher one than before
	// so the scheduler drops the old. Zero means 1.
	Generation int64
	// Owner, when set, is the slice's owner (its node), so that the garbage collector removes the
	// slice with the node.
	Owner *metav1.OwnerReference
}

// SliceName is the name of the ResourceSlice gangbench publishes for a node's fake GPUs.
func SliceName(node string) string { return node + "-fakegpu" }

// DeviceName is the name of GPU index in its slice, as NVIDIA's driver names them.
func DeviceName(index int) string { return "gpu-" + strconv.Itoa(index) }

// Devices returns the DRA devices of a node with inventory inv: one per GPU, in index order, minus
// the last opts.Unhealthy. Their uuid attribute is the device plugin's device ID for the same GPU
// (DeviceIDs), so both APIs name a GPU alike.
func Devices(node string, inv Inventory, opts SliceOptions) []resourcev1.Device {
	inv = inv.WithDefaults()
	ids := inv.DeviceIDs(node)
	clique := opts.Clique
	if clique == "" {
		clique = node
	}
	n := max(len(ids)-max(opts.Unhealthy, 0), 0)
	out := make([]resourcev1.Device, 0, n)
	for i := range n {
		attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			AttrType:         {StringValue: ptr.To("gpu")},
			AttrUUID:         {StringValue: ptr.To(ids[i])},
			AttrProduct:      {StringValue: ptr.To(inv.Product)},
			AttrBrand:        {StringValue: ptr.To("Nvidia")},
			AttrIndex:        {IntValue: ptr.To(int64(i))},
			AttrMinor:        {IntValue: ptr.To(int64(i))},
			AttrNVLinkDomain: {IntValue: ptr.To(int64(inv.DomainOf(i)))},
			AttrCliqueID:     {StringValue: ptr.To(clique)},
		}
		d := resourcev1.Device{Name: DeviceName(i), Attributes: attrs}
		if inv.MemoryMiB > 0 {
			d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				CapacityMemory: {Value: *resource.NewQuantity(int64(inv.MemoryMiB)*1024*1024, resource.BinarySI)},
			}
		}
		out = append(out, d)
	}
	return out
}

// ResourceSlice renders the slice of a node's fake GPUs: one pool named after the node, one slice
// in it, node-local (spec.nodeName), as a kubelet DRA plugin publishes its node's devices. A node
// without GPUs gets a slice without devices, which tells the scheduler the pool is empty.
func ResourceSlice(node string, inv Inventory, opts SliceOptions) *resourcev1.ResourceSlice {
	gen := opts.Generation
	if gen == 0 {
		gen = 1
	}
	s := &resourcev1.ResourceSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   SliceName(node),
			Labels: map[string]string{LabelManaged: "true"},
		},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   DRADriver,
			Pool:     resourcev1.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
			Devices:  Devices(node, inv, opts),
		},
	}
	if opts.Owner != nil {
		s.OwnerReferences = []metav1.OwnerReference{*opts.Owner}
	}
	return s
}

// NodeOwner is the owner reference that ties a slice to its node.
func NodeOwner(node *corev1.Node) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
}

// DeviceClass renders the class that selects every fake GPU by its driver.
func DeviceClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   DeviceClassName,
			Labels: map[string]string{LabelManaged: "true"},
		},
		Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == %q", DRADriver),
			}}},
		},
	}
}
