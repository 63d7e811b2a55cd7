package plugin

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// What Allocate gives a container. Nothing real is mounted: the values only let a workload (or a
// test looking at the container) see which fake GPUs it got.
const (
	// EnvVisibleDevices is what the NVIDIA container toolkit reads; real GPU plugins set it the same
	// way, so workloads that parse it work unchanged.
	EnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES"
	// EnvProduct is the GPU product of the allocated devices.
	EnvProduct = "GANGBENCH_GPU_PRODUCT"
	// EnvNVLinkDomains lists the NVLink domains (comma-separated, ascending) the devices are in, so a
	// gang member can report whether its GPUs share a domain.
	EnvNVLinkDomains = "GANGBENCH_NVLINK_DOMAINS"

	// AnnotationDeviceIDs, AnnotationProduct, AnnotationMemoryMiB and AnnotationNVLinkDomains are
	// CRI container annotations with the same facts, visible to the runtime (crictl inspect) rather
	// than the workload.
	AnnotationDeviceIDs     = "gangbench.dev/fake-gpu-ids"
	AnnotationProduct       = "gangbench.dev/gpu-product"
	AnnotationMemoryMiB     = "gangbench.dev/gpu-memory-mib"
	AnnotationNVLinkDomains = "gangbench.dev/fake-gpu-nvlink-domains"
)

// service implements the kubelet-facing DevicePlugin gRPC API on top of a Plugin.
type service struct {
	pluginapi.UnimplementedDevicePluginServer
	p *Plugin
}

func (s *service) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return pluginOptions(), nil
}

// ListAndWatch sends the full device list at once and again after every health change, until the
// kubelet hangs up or the plugin stops. Changes that happen while a send is in flight are coalesced
// into the next list, which always reflects the latest state.
func (s *service) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		devs, changed := s.p.deviceList()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		case <-s.p.done:
			return nil
		}
	}
}

// deviceList is the current device list and a channel closed at the next health change. Each
// device's NUMA node is its NVLink domain: the kubelet's topology manager then treats a domain as a
// locality unit, the closest analogue it has. With its default policy (none, kind's) the IDs are
// only recorded; a restrictive policy (single-numa-node) on a host with fewer NUMA nodes than
// domains would refuse the devices of the missing nodes.
func (p *Plugin) deviceList() ([]*pluginapi.Device, <-chan struct{}) {
	unhealthy, changed := p.health.snapshot()
	devs := make([]*pluginapi.Device, len(p.ids))
	for i, id := range p.ids {
		h := pluginapi.Healthy
		if unhealthy[id] != 0 {
			h = pluginapi.Unhealthy
		}
		devs[i] = &pluginapi.Device{
			ID:       id,
			Health:   h,
			Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(p.inv.DomainOf(i))}}},
		}
	}
	return devs, changed
}

// indices maps device IDs to indices, rejecting unknown and duplicate IDs with InvalidArgument.
func (p *Plugin) indices(what string, ids []string) ([]int, error) {
	out := make([]int, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	var unknown, dup []string
	for _, id := range ids {
		i, ok := p.index[id]
		switch {
		case !ok:
			unknown = append(unknown, id)
		case seen[id]:
			dup = append(dup, id)
		default:
			seen[id] = true
			out = append(out, i)
		}
	}
	if len(unknown) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "%s: unknown device IDs %q: node %q has %s devices %s..%s",
			what, unknown, p.opts.NodeName, p.inv.ResourceName, p.ids[0], p.ids[len(p.ids)-1])
	}
	if len(dup) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "%s: duplicate device IDs %q", what, dup)
	}
	return out, nil
}

// Allocate answers each container request with the env vars and annotations describing its
// devices, in the order the kubelet listed them. A granted call is recorded (recordAllocation); a
// rejected one is not, since no container gets devices from it.
func (s *service) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p := s.p
	resp := &pluginapi.AllocateResponse{ContainerResponses: make([]*pluginapi.ContainerAllocateResponse, 0, len(req.GetContainerRequests()))}
	for n, cr := range req.GetContainerRequests() {
		ids := cr.GetDevicesIds()
		what := fmt.Sprintf("allocate container request %d", n)
		if len(ids) == 0 {
			return nil, status.Errorf(codes.InvalidArgument, "%s: no device IDs", what)
		}
		idx, err := p.indices(what, ids)
		if err != nil {
			return nil, err
		}
		domains := make([]int, 0, len(idx))
		for _, i := range idx {
			domains = append(domains, p.inv.DomainOf(i))
		}
		slices.Sort(domains)
		domains = slices.Compact(domains)
		domainStrs := make([]string, len(domains))
		for i, d := range domains {
			domainStrs[i] = strconv.Itoa(d)
		}
		joinedIDs, joinedDomains := strings.Join(ids, ","), strings.Join(domainStrs, ",")
		annotations := map[string]string{
			AnnotationDeviceIDs:     joinedIDs,
			AnnotationProduct:       p.inv.Product,
			AnnotationNVLinkDomains: joinedDomains,
		}
		if p.inv.MemoryMiB > 0 {
			annotations[AnnotationMemoryMiB] = strconv.Itoa(p.inv.MemoryMiB)
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{
				EnvVisibleDevices: joinedIDs,
				EnvProduct:        p.inv.Product,
				EnvNVLinkDomains:  joinedDomains,
			},
			Annotations: annotations,
		})
	}
	p.recordAllocation(req.GetContainerRequests())
	return resp, nil
}

// GetPreferredAllocation answers with the devices preferAllocation picks for each container.
func (s *service) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p := s.p
	resp := &pluginapi.PreferredAllocationResponse{}
	for n, cr := range req.GetContainerRequests() {
		what := fmt.Sprintf("preferred allocation container request %d", n)
		avail, err := p.indices(what+" available", cr.GetAvailableDeviceIDs())
		if err != nil {
			return nil, err
		}
		must, err := p.indices(what+" must-include", cr.GetMustIncludeDeviceIDs())
		if err != nil {
			return nil, err
		}
		picked, err := preferAllocation(p.inv.DomainOf, avail, must, int(cr.GetAllocationSize()))
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%s: %v", what, err)
		}
		ids := make([]string, len(picked))
		for i, idx := range picked {
			ids[i] = p.ids[idx]
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// PreStartContainer is never called (PreStartRequired is false) and has nothing to do.
func (s *service) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
