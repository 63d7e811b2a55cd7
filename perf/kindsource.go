package perf

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/fakegpu"
)

// DefaultKindWorkers is the number of kind worker nodes (real kubelets with the fake GPU device
// plugin) a KindSource gives each cluster when not told: enough for a kubelet fault on one node
// while another keeps serving, few enough for one machine.
const DefaultKindWorkers = 2

// KindSource creates kind clusters, one per shape: Workers worker nodes with real kubelets and the
// fake GPU device plugin, and the rest of the shape's nodes simulated by kwok, because hundreds of
// node containers do not fit on one machine. It is what kubelet faults need.
type KindSource struct {
	// Options configure the kind provider (engine, node image, scheduler image, state dir, …);
	// the worker and kwok node counts are set per shape on top of them.
	Options []kind.Option
	// Workers is the number of kind worker nodes, at most the shape's nodes; 0 means
	// DefaultKindWorkers.
	Workers int
	// Base is the spec every cluster starts from, as in LocalSource.
	Base clusters.Spec
	// NewProvider makes the provider of one shape; nil means kind.New. Tests replace it.
	NewProvider func(opts ...kind.Option) (clusters.Provider, error)
}

var _ ClusterSource = (*KindSource)(nil)

// ProviderName implements sourceProvider.
func (s *KindSource) ProviderName() string { return kind.ProviderName }

// Persistent implements ClusterSource.
func (s *KindSource) Persistent() bool { return false }

// Create implements ClusterSource.
func (s *KindSource) Create(ctx context.Context, shape Shape, nodes func(int)) (*clusters.Cluster, ClusterInfo, error) {
	workers := s.Workers
	if workers <= 0 {
		workers = DefaultKindWorkers
	}
	workers = max(1, min(workers, shape.Nodes))
	spec := s.Base
	spec.Nodes = shape.Nodes
	spec.GPU = fakegpu.Inventory{Count: shape.GPUsPerNode, Product: shape.Product}
	spec.ExtraArgs = map[clusters.Component]map[string]string{}
	for c, a := range s.Base.ExtraArgs {
		spec.ExtraArgs[c] = maps.Clone(a)
	}
	sargs := (&LocalSource{Base: s.Base}).schedulerArgs(shape)
	spec.ExtraArgs[clusters.Scheduler] = sargs
	if spec.ReadyTimeout == 0 {
		// kind's own node containers take a few minutes on a cold machine; the kwok nodes then
		// go as fast as on the local provider.
		spec.ReadyTimeout = 5*time.Minute + time.Duration(shape.Nodes)*20*time.Millisecond
	}
	info := ClusterInfo{SchedulerQPS: sargs["kube-api-qps"], SchedulerBurst: sargs["kube-api-burst"],
		Notes: []string{fmt.Sprintf("kind: %d worker node(s) with real kubelets and the fake GPU device plugin, %d kwok node(s)", workers, shape.Nodes-workers)}}
	newProvider := s.NewProvider
	if newProvider == nil {
		newProvider = func(opts ...kind.Option) (clusters.Provider, error) { return kind.New(opts...) }
	}
	opts := append(slices.Clone(s.Options), kind.WithWorkers(workers), kind.WithKwokNodes(shape.Nodes-workers))
	p, err := newProvider(opts...)
	if err != nil {
		return nil, info, err
	}
	cl, err := p.Create(ctx, spec)
	if err != nil {
		return nil, info, err
	}
	if nodes != nil {
		nodes(shape.Nodes)
	}
	return cl, info, nil
}
