package perf

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/perf/slo"
	"github.com/gangbench/gangbench/results"
)

// ItemFaultDevicePlugin is added for every kubelet fault (kind): Value is the seconds from the
// kubelet being back (healthy) to the last device plugin node having registered again with its
// kubelet and showing its full allocatable nvidia.com/gpu; Registered is 1 when every one did;
// FromFaultSeconds counts from the fault instead; MinAllocatable is the lowest allocatable GPU count
// seen on those nodes from the fault on (a restarted kubelet reports 0 until the plugin is back).
const ItemFaultDevicePlugin = "faultDevicePlugin"

// defaultGPUWait bounds each wait for a node's allocatable to follow a GPU health change or a
// kubelet restart. A kubelet reports a device health change at its next node status update
// (nodeStatusUpdateFrequency, 10 s by default), so a minute is several of them.
const defaultGPUWait = 2 * time.Minute

func (fr *faultRun) gpuWaitTimeout() time.Duration {
	if fr.gpuWait > 0 {
		return fr.gpuWait
	}
	return defaultGPUWait
}

// gpuPollInterval is how often node status and plugin registrations are read while waiting.
const gpuPollInterval = 250 * time.Millisecond

// faultObjectives are FaultObjectives plus, when a fault restarts kubelets, the device plugin's
// re-registration.
func faultObjectives(faults []Fault) []slo.Objective {
	objs := FaultObjectives()
	if slices.ContainsFunc(faults, Fault.IsKubelet) {
		objs = append(objs, slo.Objective{Expr: ItemFaultDevicePlugin + ".Registered == 1", Item: ItemFaultDevicePlugin, Bucket: "Registered", Op: "==", Value: 1,
			Source: "fault tolerance: after a kubelet restart the fake GPU device plugin registers again and the node's GPUs come back (issue 7)", File: "built-in"})
	}
	return objs
}

// sourceCapabilities is implemented by the ClusterSources that know their provider's capabilities
// before any cluster exists, so faults it cannot inject are refused up front.
type sourceCapabilities interface {
	Capabilities() clusters.Capabilities
}

// Capabilities implements sourceCapabilities: a cluster gangbench did not create (or one it did,
// reached through --kubeconfig) is not gangbench's to break, so it can do nothing; its messages
// call it what the user chose, --kubeconfig's existing provider.
func (s *ExistingSource) Capabilities() clusters.Capabilities {
	return clusters.Capabilities{Provider: "existing"}
}

// CheckFaults refuses, before any cluster starts, faults the provider cannot inject and GPU faults
// larger than a scenario's nodes. Every error names the fault and the provider.
func CheckFaults(faults []Fault, caps clusters.Capabilities, scs []*scenario.Scenario) error {
	var errs []error
	for _, f := range faults {
		if err := faultSupported(caps, f); err != nil {
			errs = append(errs, fmt.Errorf("fault %s: %w", f.Spec, err))
			continue
		}
		if f.Action != FaultUnhealthy {
			continue
		}
		for _, sc := range scs {
			if f.GPUs != AllGPUs && f.GPUs > sc.Cluster.GPUsPerNode {
				errs = append(errs, fmt.Errorf("fault %s: %d unhealthy GPUs per node, but scenario %s has %d GPUs per node", f.Spec, f.GPUs, sc.Name, sc.Cluster.GPUsPerNode))
			}
			if f.Nodes > sc.Cluster.Nodes {
				errs = append(errs, fmt.Errorf("fault %s: GPUs on %d nodes, but scenario %s has %d nodes", f.Spec, f.Nodes, sc.Name, sc.Cluster.Nodes))
			}
		}
	}
	return errors.Join(errs...)
}

// faultSupported says whether the provider's clusters can take the fault: what its
// ComponentControl stops and starts, and whether it has a GPUControl.
func faultSupported(caps clusters.Capabilities, f Fault) error {
	p := caps.Provider
	switch {
	case !caps.Creates:
		return fmt.Errorf("the %s provider (--kubeconfig) runs on a cluster gangbench did not create: its components and nodes are not gangbench's to break: %w", p, ErrFaultsNeedControl)
	case f.IsKubelet() && !caps.RealKubelets:
		// --provider kind is the user's way to real kubelets today; the hint names it.
		return fmt.Errorf("the %s provider has no kubelets (kwok simulates its nodes); kubelet faults need --provider kind", p)
	case f.Component == FaultGPU:
		if !caps.GPUFaults {
			return fmt.Errorf("the %s provider cannot change its GPUs' health: %w", p, ErrFaultsNeedControl)
		}
		return nil
	case len(caps.ComponentControl) == 0:
		return fmt.Errorf("the %s provider cannot inject faults: %w", p, ErrFaultsNeedControl)
	case !caps.CanControl(f.Component):
		return fmt.Errorf("the %s provider cannot stop and start %s (it can: %s)", p, f.Component, controllable(caps))
	}
	return nil
}

// controllable lists what a provider's faults can reach, as the fault forms name them.
func controllable(caps clusters.Capabilities) string {
	var out []string
	for _, c := range caps.ComponentControl {
		if c == clusters.Kubelet {
			out = append(out, "kubelet and kubelet/NODE")
			continue
		}
		out = append(out, string(c))
	}
	if caps.GPUFaults {
		out = append(out, "gpu-unhealthy")
	}
	return strings.Join(out, "; ")
}

// faultsPossible checks a cluster handle against the faults: component faults need its
// ComponentControl, GPU faults its GPUControl.
func faultsPossible(faults []Fault, cl *clusters.Cluster) error {
	for _, f := range faults {
		if f.Action == FaultUnhealthy && cl.GPUs == nil {
			return fmt.Errorf("fault %s: the cluster cannot change its GPUs' health: %w", f.Spec, ErrFaultsNeedControl)
		}
		if f.Action != FaultUnhealthy && cl.Control == nil {
			return fmt.Errorf("fault %s: %w", f.Spec, ErrFaultsNeedControl)
		}
	}
	return nil
}

// gpuFault is what a gpu-unhealthy fault did, for its items.
type gpuFault struct {
	nodes    map[string]int // node → GPUs marked unhealthy
	lowered  time.Time      // every node's allocatable showed the loss
	healedAt time.Time      // the GPUs were marked healthy again
}

// pluginResult is what the device plugins did after a kubelet fault.
type pluginResult struct {
	nodes        []string
	registered   bool
	registeredAt time.Time // the last node re-registered with its GPUs back
	minAlloc     int64
	detail       string
}

// nodeGPUs reads a node's GPU capacity and allocatable.
func (fr *faultRun) nodeGPUs(ctx context.Context, node string) (alloc, capa int64, err error) {
	n, err := fr.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	a, c := n.Status.Allocatable[fr.gpuResource()], n.Status.Capacity[fr.gpuResource()]
	return a.Value(), c.Value(), nil
}

func (fr *faultRun) gpuResource() corev1.ResourceName {
	if fr.gpuInv.ResourceName != "" {
		return corev1.ResourceName(fr.gpuInv.ResourceName)
	}
	return fakegpu.DefaultResourceName
}

// pickGPUNodes chooses the nodes a gpu-unhealthy fault hits: device plugin nodes first (on kind,
// the real kubelets: the fault then goes through the plugin), then kwok nodes with GPUs, each in
// name order so that repetitions hit the same nodes.
func (fr *faultRun) pickGPUNodes(ctx context.Context, want int) ([]string, error) {
	out, err := fr.gpus.PluginNodes(ctx)
	if err != nil {
		return nil, err
	}
	list, err := fr.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var sim []string
	for _, n := range list.Items {
		c := n.Status.Capacity[fr.gpuResource()]
		if n.Annotations[fakegpu.AnnotationKwokNode] == fakegpu.AnnotationKwokNodeValue && c.Value() > 0 && !slices.Contains(out, n.Name) {
			sim = append(sim, n.Name)
		}
	}
	slices.Sort(sim)
	out = append(out, sim...)
	if len(out) < want {
		return nil, fmt.Errorf("wants GPUs on %d nodes, the cluster has %d GPU nodes gangbench can change", want, len(out))
	}
	return out[:want], nil
}

// waitAllocatable polls until every node's allocatable GPUs equal want[node] and returns when it
// saw that. The error says what each node last showed.
func (fr *faultRun) waitAllocatable(ctx context.Context, what string, want map[string]int64) (time.Time, error) {
	timeout := fr.gpuWaitTimeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(gpuPollInterval)
	defer tick.Stop()
	last := map[string]string{}
	for {
		done := true
		for node, w := range want {
			a, c, err := fr.nodeGPUs(ctx, node)
			switch {
			case err != nil:
				last[node], done = err.Error(), false
			case a != w:
				last[node], done = fmt.Sprintf("allocatable %d of capacity %d", a, c), false
			default:
				last[node] = ""
			}
		}
		if done {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			var seen []string
			for _, node := range slices.Sorted(maps.Keys(last)) {
				if last[node] != "" {
					seen = append(seen, node+": "+last[node])
				}
			}
			return time.Time{}, fmt.Errorf("%s: not within %s (last seen: %s): %w", what, timeout, strings.Join(seen, "; "), context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// setGPUs marks count GPUs of each node unhealthy (0 heals), concurrently.
func (fr *faultRun) setGPUs(ctx context.Context, nodes map[string]int, heal bool) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for node, n := range nodes {
		if heal {
			n = 0
		}
		wg.Go(func() {
			if err := fr.gpus.SetUnhealthyGPUs(ctx, node, n); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// injectGPUs runs a gpu-unhealthy fault: mark, wait until the nodes' allocatable shows it, hold,
// heal, wait until it is back. "ready" is the heal made visible: the counterpart of a restarted
// component. The GPUs are healed however the fault ends (an interrupt in the hold included), so a
// repetition never leaves the cluster short of GPUs for the next one.
func (fr *faultRun) injectGPUs(ctx context.Context, fs *faultState, tl *timeline.Timeline, measured []string) {
	if fr.gpus == nil {
		fs.err = errors.New("the cluster cannot change its GPUs' health")
		return
	}
	picked, err := fr.pickGPUNodes(ctx, fs.Nodes)
	if err != nil {
		fs.err = err
		return
	}
	g := &gpuFault{nodes: map[string]int{}}
	lowered, full := map[string]int64{}, map[string]int64{}
	for _, node := range picked {
		_, c, err := fr.nodeGPUs(ctx, node)
		if err != nil {
			fs.err = fmt.Errorf("node %s: %w", node, err)
			return
		}
		n := fs.GPUs
		if n == AllGPUs || int64(n) > c {
			n = int(c)
		}
		g.nodes[node], lowered[node], full[node] = n, c-int64(n), c
	}
	fs.gpu = g
	fs.at = time.Now()
	err = fr.setGPUs(ctx, g.nodes, false)
	// Marked (even partly): from here on the GPUs must be healed whatever happens.
	healed := false
	defer func() {
		if healed {
			return
		}
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fr.gpuWaitTimeout())
		defer cancel()
		if herr := fr.setGPUs(hctx, g.nodes, true); herr != nil {
			fs.err = errors.Join(fs.err, fmt.Errorf("mark the GPUs healthy again: %w", herr))
		}
	}()
	if err != nil {
		fs.err = fmt.Errorf("mark GPUs unhealthy: %w", err)
		return
	}
	fs.injected = true
	fr.log.Info("fault injected", "fault", fs.Spec, "nodes", g.nodes, "measuredPodsCreated", fs.createdAt)
	if g.lowered, err = fr.waitAllocatable(ctx, "allocatable "+string(fr.gpuResource())+" lowered", lowered); err != nil {
		fs.err = err
		return
	}
	hold := time.NewTimer(fs.Hold)
	defer hold.Stop()
	select {
	case <-hold.C:
	case <-ctx.Done():
		fs.err = fmt.Errorf("interrupted while the GPUs were unhealthy: %w", context.Cause(ctx))
		return
	}
	g.healedAt = time.Now()
	healed = true
	if err := fr.setGPUs(ctx, g.nodes, true); err != nil {
		healed = false // the deferred heal tries once more
		fs.err = fmt.Errorf("mark the GPUs healthy again: %w", err)
		return
	}
	ready, err := fr.waitAllocatable(ctx, "allocatable "+string(fr.gpuResource())+" back", full)
	if err != nil {
		fs.err = err
		return
	}
	fs.ready = ready
	fs.boundAt = tl.BoundIn(measured...)
	fr.log.Info("GPUs healthy again", "fault", fs.Spec, "unhealthy", fs.ready.Sub(fs.at).Round(time.Millisecond))
}

// pluginWatch follows the device plugins of the nodes a kubelet fault restarts: their
// registration count before the fault, the lowest allocatable GPU count after it, and when each
// registered again with its GPUs back.
type pluginWatch struct {
	fr     *faultRun
	nodes  []string
	before map[string]int
	back   chan struct{} // closed once the kubelets are healthy again
	done   chan struct{}
	res    pluginResult
}

// kubeletNodes are the device plugin nodes a kubelet fault restarts.
func (fr *faultRun) kubeletNodes(ctx context.Context, c clusters.Component) ([]string, error) {
	if fr.gpus == nil {
		return nil, nil
	}
	all, err := fr.gpus.PluginNodes(ctx)
	if err != nil {
		return nil, err
	}
	if node, one := strings.CutPrefix(string(c), string(clusters.Kubelet)+"/"); one {
		if slices.Contains(all, node) {
			return []string{node}, nil
		}
		return nil, nil
	}
	return all, nil
}

// watchPlugins reads the registration counts (before the fault) and starts sampling. It returns
// nil when the fault restarts no kubelet with a device plugin.
func (fr *faultRun) watchPlugins(ctx context.Context, fs *faultState) (*pluginWatch, error) {
	nodes, err := fr.kubeletNodes(ctx, fs.Component)
	if err != nil || len(nodes) == 0 {
		return nil, err
	}
	w := &pluginWatch{fr: fr, nodes: nodes, before: map[string]int{}, back: make(chan struct{}), done: make(chan struct{}), res: pluginResult{nodes: nodes, minAlloc: -1}}
	for _, n := range nodes {
		if w.before[n], err = fr.gpus.PluginRegistrations(ctx, n); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// run samples until every node re-registered with its GPUs back, or the deadline after the
// kubelets came back. A node counts as back only after the kubelet's restart is over and its
// plugin registered again: before that, an allocatable equal to the full count may still be the
// old kubelet's last status.
func (w *pluginWatch) run(ctx context.Context, want int64) {
	defer close(w.done)
	tick := time.NewTicker(gpuPollInterval)
	defer tick.Stop()
	var deadline <-chan time.Time
	backAt := map[string]time.Time{}
	last := map[string]string{}
	for {
		kubeletsBack := false
		select {
		case <-w.back:
			kubeletsBack = true
		default:
		}
		for _, n := range w.nodes {
			if !backAt[n].IsZero() {
				continue
			}
			a, c, err := w.fr.nodeGPUs(ctx, n)
			if err != nil {
				last[n] = err.Error()
				continue
			}
			if w.res.minAlloc < 0 || a < w.res.minAlloc {
				w.res.minAlloc = a
			}
			last[n] = fmt.Sprintf("allocatable %d of capacity %d", a, c)
			if !kubeletsBack {
				continue
			}
			reg, err := w.fr.gpus.PluginRegistrations(ctx, n)
			if err != nil {
				last[n] += "; plugin: " + err.Error()
				continue
			}
			last[n] += fmt.Sprintf("; plugin registrations %d (before the fault %d)", reg, w.before[n])
			if reg > w.before[n] && a == want {
				backAt[n] = time.Now()
			}
		}
		if len(backAt) == len(w.nodes) {
			w.res.registered = true
			for _, t := range backAt {
				if t.After(w.res.registeredAt) {
					w.res.registeredAt = t
				}
			}
			return
		}
		if kubeletsBack && deadline == nil {
			t := time.NewTimer(w.fr.gpuWaitTimeout())
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-ctx.Done():
			w.res.detail = "interrupted: " + context.Cause(ctx).Error()
			return
		case <-deadline:
			var seen []string
			for _, n := range w.nodes {
				if backAt[n].IsZero() {
					seen = append(seen, n+": "+last[n])
				}
			}
			w.res.detail = fmt.Sprintf("not re-registered with %d GPUs within %s after the kubelets were back: %s", want, w.fr.gpuWaitTimeout(), strings.Join(seen, "; "))
			return
		case <-tick.C:
		}
	}
}

// gpuItems are the extra figures of a gpu-unhealthy fault, added to its faultRecovery item.
func gpuItems(fs *faultState, rec map[string]float64) {
	g := fs.gpu
	if g == nil {
		return
	}
	total := 0
	for _, n := range g.nodes {
		total += n
	}
	rec["UnhealthyGPUs"] = float64(total)
	rec["Nodes"] = float64(len(g.nodes))
	rec["HoldSeconds"] = fs.Hold.Seconds()
	if !g.lowered.IsZero() {
		rec["LoweredSeconds"] = g.lowered.Sub(fs.at).Seconds()
	}
	if !g.healedAt.IsZero() && !fs.ready.IsZero() {
		rec["RestoredSeconds"] = fs.ready.Sub(g.healedAt).Seconds()
	}
}

// pluginItem is the faultDevicePlugin item of a kubelet fault, or false when it restarted no
// kubelet with a device plugin.
func pluginItem(fs *faultState, labels map[string]string, note func(string, ...any)) (results.DataItem, bool) {
	p := fs.plugin
	if p == nil {
		return results.DataItem{}, false
	}
	data := map[string]float64{"Registered": b2f(p.registered), "Nodes": float64(len(p.nodes)), "MinAllocatable": float64(p.minAlloc)}
	if p.registered {
		data[measure.Value] = max(0, p.registeredAt.Sub(fs.ready).Seconds())
		data["FromFaultSeconds"] = p.registeredAt.Sub(fs.at).Seconds()
		note("fault %s: the device plugin registered again on %s and the GPUs were back %s after the kubelets (lowest allocatable seen: %d)",
			fs.Spec, strings.Join(p.nodes, ", "), max(0, p.registeredAt.Sub(fs.ready)).Round(time.Millisecond), p.minAlloc)
	} else {
		note("fault %s: the device plugin did not come back: %s", fs.Spec, p.detail)
	}
	return results.DataItem{Name: ItemFaultDevicePlugin, Unit: "s", Labels: labels, Data: data}, true
}
