package request

import (
	"fmt"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
)

// DefaultRealWorkers is the number of real-kubelet GPU nodes when neither --nodes nor --workers
// says: enough for a kubelet fault on one node while another keeps serving, few enough for one
// machine.
const DefaultRealWorkers = 2

// FlagShape is the cluster shape as gangbench's flags have always said it: --nodes GPU nodes, of
// which --workers run real kubelets and --kwok-nodes are simulated, plus plain workers without
// GPUs (the seed lab's). Groups turns it into node groups once, where the flags are read, so no
// provider reconciles these numbers again.
type FlagShape struct {
	Nodes, Workers, KwokNodes, PlainWorkers int
	GPU                                     fakegpu.Inventory
	// GPUAPI is how every GPU node publishes its GPUs (--gpu-api); "" is the device plugin's.
	GPUAPI fakegpu.API
	// Topology, when set, lays the GPU nodes (the real workers where the provider has real
	// kubelets, else every node) out in blocks and racks: one node group per rack.
	Topology *clusters.Topology
}

// ForSuites is the shape the conformance suites need on a provider with real kubelets: at least
// one simulated node, which makes the provider run the kwok controller that simulates the suites'
// lanes. With --nodes and --workers both given the simulated nodes are the difference.
func (f FlagShape) ForSuites(realKubelets bool) FlagShape {
	if !realKubelets {
		return f
	}
	if f.KwokNodes == 0 && f.Nodes > 0 && f.Workers > 0 {
		f.KwokNodes = f.Nodes - f.Workers
	}
	f.KwokNodes = max(f.KwokNodes, 1)
	return f
}

// Apply sets spec's shape from the flags. On a provider without real kubelets that is the Nodes
// and GPU shorthand (every node simulated); with real kubelets, a group of real GPU workers
// (--nodes minus --kwok-nodes when --workers is not given, else DefaultRealWorkers), the plain
// workers and the simulated GPU nodes. Errors name the flags and their values.
func (f FlagShape) Apply(spec *clusters.Spec, realKubelets bool) error {
	if f.Nodes < 0 || f.Workers < 0 || f.KwokNodes < 0 || f.PlainWorkers < 0 {
		return fmt.Errorf("nodes (%d), workers (%d), kwok nodes (%d) and plain workers (%d) must not be negative", f.Nodes, f.Workers, f.KwokNodes, f.PlainWorkers)
	}
	if !realKubelets {
		if f.Workers != 0 || f.KwokNodes != 0 || f.PlainWorkers != 0 {
			return fmt.Errorf("workers (%d), kwok nodes (%d) and plain workers (%d): the provider has no real kubelets, every node is simulated (use nodes)", f.Workers, f.KwokNodes, f.PlainWorkers)
		}
		if t := f.Topology; t != nil {
			if f.Nodes != 0 && f.Nodes != t.Nodes() {
				return fmt.Errorf("nodes: %d requested, but topology %s makes %d", f.Nodes, t, t.Nodes())
			}
			spec.Nodes, spec.GPU, spec.Topology = 0, fakegpu.Inventory{}, t
			spec.NodeGroups = t.Groups(clusters.NodeGroup{GPUs: &clusters.GroupGPUs{Inventory: f.GPU, API: f.GPUAPI}})
			return nil
		}
		spec.Nodes, spec.GPU, spec.GPUAPI = f.Nodes, f.GPU, f.GPUAPI
		return nil
	}
	workers := f.Workers
	if t := f.Topology; t != nil {
		// The racks are the real workers; simulated nodes (the suites' lanes, scale) stay apart.
		switch {
		case workers > 0 && workers != t.Nodes():
			return fmt.Errorf("workers: %d requested, but topology %s makes %d", workers, t, t.Nodes())
		case workers == 0 && f.Nodes > 0 && f.Nodes != t.Nodes()+f.KwokNodes:
			return fmt.Errorf("nodes: %d requested, but topology %s makes %d workers, + %d kwok nodes = %d", f.Nodes, t, t.Nodes(), f.KwokNodes, t.Nodes()+f.KwokNodes)
		}
		workers = t.Nodes()
	}
	switch {
	case workers > 0 && f.Nodes > 0 && f.Nodes != workers+f.KwokNodes:
		return fmt.Errorf("nodes: %d requested, but %d workers + %d kwok nodes make %d", f.Nodes, workers, f.KwokNodes, workers+f.KwokNodes)
	case workers == 0 && f.Nodes > 0:
		workers = f.Nodes - f.KwokNodes
		if workers < 1 {
			return fmt.Errorf("nodes: %d requested with %d kwok nodes leaves no real worker (at least one runs the device plugin)", f.Nodes, f.KwokNodes)
		}
	case workers == 0:
		workers = DefaultRealWorkers
	}
	gpus := func() *clusters.GroupGPUs { return &clusters.GroupGPUs{Inventory: f.GPU, API: f.GPUAPI} }
	groups := []clusters.NodeGroup{{Count: workers, Kubelet: clusters.RealKubelets, GPUs: gpus()}}
	if f.Topology != nil {
		groups = f.Topology.Groups(groups[0])
		spec.Topology = f.Topology
	}
	if f.PlainWorkers > 0 {
		groups = append(groups, clusters.NodeGroup{Count: f.PlainWorkers, Kubelet: clusters.RealKubelets})
	}
	if f.KwokNodes > 0 {
		groups = append(groups, clusters.NodeGroup{Count: f.KwokNodes, Kubelet: clusters.SimulatedNodes, GPUs: gpus()})
	}
	spec.Nodes, spec.GPU, spec.NodeGroups = 0, fakegpu.Inventory{}, groups
	return nil
}
