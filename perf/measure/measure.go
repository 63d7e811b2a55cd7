// Package measure holds the perf measurements: each starts before a scenario's measured phases and
// gathers DataItems after them (clusterloader2's Start/Gather, with typed inputs instead of a
// parameter bag), plus the timeline they share and the pure checks behind the invariants.
package measure

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/scenarios/gangapi"
)

// Measurement is one thing measured over a repetition's measured window.
type Measurement interface {
	// Start is called just before the first measured object is created.
	Start(ctx context.Context) error
	// Gather is called once the measured pods are bound (or the wait settled or timed out).
	Gather(ctx context.Context) ([]results.DataItem, error)
}

// Env is what a measurement may use. The runner fills it per repetition.
type Env struct {
	Cluster *clusters.Cluster
	Client  kubernetes.Interface
	// Gang reaches PodGroups in the version the cluster serves; nil means v1beta1 through Client.
	Gang      *gangapi.Client
	Namespace string
	Scenario  *scenario.Scenario
	// timeline.Timeline holds creates (from the load generator) and binds (from the pod watch).
	Timeline *timeline.Timeline
	// Measured are the names of the phases that are measured (not prefill).
	Measured []string
	// PartialGrace is how long a gang may be partially bound before it counts as partial.
	PartialGrace time.Duration
	// Note records a line for the run's notes (details behind a number: which gang was partial).
	Note func(format string, args ...any)
	// GPUAPI is how the cluster's nodes publish their GPUs (perf.ClusterInfo.GPUAPI): with DRA the
	// pods claim them, the claims' allocation is measured and the fit check counts devices.
	GPUAPI clusters.GPUAPI
	// Restarted holds the components a fault injection stopped and started again during the
	// window. The runner fills it after the window and before Gather: a restarted process starts
	// its counters from zero, so a measurement that diffs its metrics must not report a delta.
	Restarted map[clusters.Component]bool
}

func (e *Env) note(format string, args ...any) {
	if e.Note != nil {
		e.Note(format, args...)
	}
}

// Factory makes a measurement for one repetition.
type Factory func(env *Env) Measurement

// Names of the measurements, in the order they are started and gathered.
const (
	BindingRate      = "bindingRate"
	GangLatency      = "gangLatency"
	SchedulerMetrics = "schedulerMetrics"
	Invariants       = "invariants"
	Resources        = "resources"
	Traffic          = "apiserverTraffic"
)

// Names lists every measurement in its canonical order.
func Names() []string {
	return []string{BindingRate, ClaimAllocation, GangLatency, SchedulerMetrics, Invariants, Topology, Resources, Traffic, GoRuntime}
}

// Registry maps names to factories. It is built on each call, not kept in a package variable, so
// no caller can change what another one sees.
func Registry() map[string]Factory {
	return map[string]Factory{
		BindingRate:      newBindingRate,
		ClaimAllocation:  newClaimAllocation,
		GangLatency:      newGangLatency,
		SchedulerMetrics: newSchedulerMetrics,
		Invariants:       newInvariants,
		Topology:         newTopology,
		Resources:        newResources,
		Traffic:          newTraffic,
		GoRuntime:        newGoRuntime,
	}
}

// DataItem names. SLO expressions refer to them (bindingRate.avg, partialGangs, …).
const (
	ItemBindingRate       = "bindingRate"       // pods/s; labels source=watch|apiserver
	ItemBindCountMismatch = "bindCountMismatch" // |watch binds − apiserver binding POSTs|
	ItemGangLatency       = "gangLatency"       // s; PodGroup created → last member bound
	ItemBindSpread        = "bindSpread"        // s; first → last member bound
	ItemPartialGangs      = "partialGangs"
	ItemUnboundFitting    = "unboundFittingPods"
	ItemStatusRegressions = "statusRegressions"
	ItemCreationRate      = "creationRate" // pods/s; the load generator's achieved rate
)

// Value is the bucket of single-number items (counts such as partialGangs).
const Value = "Value"
