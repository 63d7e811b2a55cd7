package draplugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gangbench/gangbench/fakegpu"
)

// driver is the kubeletplugin.DRAPlugin of a Plugin: what the helper calls for the kubelet. It is
// apart from Plugin so that these methods, which only the helper may call, are not Plugin's API.
type driver struct {
	p *Plugin
	// fatal receives the first error the helper reports as not recoverable (its gRPC servers
	// failed); Run returns it.
	fatal chan<- error
}

var _ kubeletplugin.DRAPlugin = (*driver)(nil)

// PrepareResourceClaims keeps the node's CDI spec, writes one spec per request of each claim and
// returns each device of ours with its GPU's CDI device (and, on the first device of each request,
// the request's). A claim whose devices are not this node's, or are prepared for another claim,
// fails alone; the others are prepared. The helper serializes the calls.
func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	p := d.p
	// The spec may have been removed (a node whose /var/run was cleared); the devices need it.
	if err := p.writeNodeSpec(); err != nil {
		return nil, err
	}
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, c := range claims {
		res, err := p.prepare(c)
		if err != nil {
			p.log.Warn("cannot prepare claim", "claim", c.Namespace+"/"+c.Name, "uid", c.UID, "err", err)
			out[c.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		out[c.UID] = res
	}
	return out, nil
}

// prepare prepares one claim.
func (p *Plugin) prepare(c *resourcev1.ResourceClaim) (kubeletplugin.PrepareResult, error) {
	if c.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{}, errors.New("not allocated")
	}
	uid := string(c.UID)
	type request struct {
		name    string
		results []resourcev1.DeviceRequestAllocationResult
		indices []int
	}
	var reqs []*request
	byName := map[string]*request{}
	var indices []int
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != fakegpu.DRADriver {
			continue // another driver's device in the same claim: its plugin prepares it
		}
		if r.Pool != p.opts.NodeName {
			return kubeletplugin.PrepareResult{}, fmt.Errorf("device %s/%s is in pool %q, not this node's (%s)", r.Pool, r.Device, r.Pool, p.opts.NodeName)
		}
		i, ok := p.byName[r.Device]
		if !ok {
			return kubeletplugin.PrepareResult{}, fmt.Errorf("device %s/%s: node %s has devices %s..%s", r.Pool, r.Device, p.opts.NodeName,
				fakegpu.DeviceName(0), fakegpu.DeviceName(len(p.ids)-1))
		}
		// Subrequests share their request's spec: the container asks for the request.
		name := resourceclaim.BaseRequestRef(r.Request)
		rq := byName[name]
		if rq == nil {
			rq = &request{name: name}
			byName[name] = rq
			reqs = append(reqs, rq)
		}
		rq.results = append(rq.results, r)
		rq.indices = append(rq.indices, i)
		indices = append(indices, i)
	}

	p.mu.Lock()
	var busy []string
	for other, idx := range p.prepared {
		if other == uid {
			continue
		}
		for _, i := range idx {
			if slices.Contains(indices, i) {
				busy = append(busy, fmt.Sprintf("%s (claim %s)", fakegpu.DeviceName(i), other))
			}
		}
	}
	p.mu.Unlock()
	if len(busy) > 0 {
		// The scheduler never allocates a device twice; this is the last line of defence the
		// kubeletplugin contract asks of a driver.
		slices.Sort(busy)
		return kubeletplugin.PrepareResult{}, fmt.Errorf("devices already prepared for another claim: %v", busy)
	}

	var res kubeletplugin.PrepareResult
	for _, rq := range reqs {
		spec, err := claimSpec(uid, rq.name, p.inv, p.ids, rq.indices)
		if err != nil {
			return kubeletplugin.PrepareResult{}, err
		}
		if err := writeSpec(claimSpecPath(p.opts.CDIDir, uid, rq.name), spec); err != nil {
			return kubeletplugin.PrepareResult{}, err
		}
		for n, r := range rq.results {
			ids := []string{GPUCDIDevice(r.Device)}
			if n == 0 {
				// Once per request: the kubelet gives a container every CDI device of the requests
				// it uses, and one of each is enough.
				ids = append(ids, CDIKind+"="+claimDeviceName(uid, rq.name))
			}
			res.Devices = append(res.Devices, kubeletplugin.Device{
				Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device, CDIDeviceIDs: ids,
			})
		}
	}
	p.mu.Lock()
	p.prepared[uid] = indices
	p.mu.Unlock()
	p.log.Info("prepared claim", "claim", c.Namespace+"/"+c.Name, "uid", uid, "devices", len(indices))
	return res, nil
}

// UnprepareResourceClaims forgets each claim and removes its specs. A claim this process never
// prepared (a restart came between) is cleaned up from its spec files all the same.
func (d *driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	p := d.p
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		err := removeClaimSpecs(p.opts.CDIDir, string(c.UID))
		p.mu.Lock()
		delete(p.prepared, string(c.UID))
		p.mu.Unlock()
		if err != nil {
			err = fmt.Errorf("remove the claim's CDI specs: %w", err)
		} else {
			p.log.Info("unprepared claim", "claim", c.Namespace+"/"+c.Name, "uid", c.UID)
		}
		out[c.UID] = err
	}
	return out, nil
}

// Prepared returns the UIDs of the claims prepared and not unprepared since the process started.
func (p *Plugin) Prepared() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.prepared))
}

// HandleError logs what the helper met in the background. Publishing errors are recoverable (the
// helper retries); anything else means its gRPC servers failed, and Run returns it.
func (d *driver) HandleError(_ context.Context, err error, msg string) {
	if errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.p.log.Warn(msg, "err", err)
		return
	}
	d.p.log.Error(msg, "err", err)
	select {
	case d.fatal <- fmt.Errorf("%s: %w", msg, err):
	default: // one is enough to stop
	}
}

// WatchHealthStatus reports every device's health to the kubelet now, after every change and every
// healthResend, until ctx ends.
func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	p := d.p
	t := time.NewTicker(healthResend)
	defer t.Stop()
	for {
		// The channel first: a change after it is taken closes it, so none is missed.
		_, changed := p.health.Unhealthy()
		devs := p.health.Devices()
		report := kubeletplugin.DeviceHealthReport{Devices: make([]kubeletplugin.DeviceHealth, len(devs))}
		now := time.Now()
		for i, dev := range devs {
			h := kubeletplugin.HealthStatusHealthy
			if dev.Health == pluginapi.Unhealthy {
				h = kubeletplugin.HealthStatusUnhealthy
			}
			report.Devices[i] = kubeletplugin.DeviceHealth{
				PoolName: p.opts.NodeName, DeviceName: fakegpu.DeviceName(dev.Index), Health: h, LastUpdated: now,
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case reports <- report:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-t.C:
		}
	}
}
