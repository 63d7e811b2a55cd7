// Package scenario is the perf scenario file format (apiVersion gangbench.dev/v1alpha1, kind
// Scenario): a cluster shape, scheduler settings and workload phases, decoded strictly and resolved
// into concrete counts. It talks to no cluster.
package scenario

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gangbench/gangbench/clusters"
)

// APIVersion and Kind head every scenario file.
const (
	APIVersion = "gangbench.dev/v1alpha1"
	Kind       = "Scenario"
)

// Defaults a file may leave out.
const (
	// DefaultKubeAPIQPS and DefaultKubeAPIBurst are the scheduler's client limits. High, because the
	// question a throughput benchmark asks is how fast the algorithm is: with the stock 50/100 the
	// scheduler's own client limiter sets gang throughput (DESIGN.md: ~27 vs ~49 pods/s on 2 cores).
	DefaultKubeAPIQPS   = 5000
	DefaultKubeAPIBurst = 5000
	// StockKubeAPIQPS and StockKubeAPIBurst are kube-scheduler's own defaults, for "how does a stock
	// cluster behave" scenarios.
	StockKubeAPIQPS    = 50
	StockKubeAPIBurst  = 100
	DefaultGPUsPerNode = 8
	DefaultTimeout     = 10 * time.Minute
	DefaultSettle      = 30 * time.Second
	// NodeCPU, NodeMemory and NodePods are what a simulated node of the local provider offers besides
	// GPUs (fakegpu.NodeOptions defaults); a pod asking more can never be placed.
	NodeCPU    = "32"
	NodeMemory = "256Gi"
	NodePods   = 110
)

// Scenario is one decoded, validated and resolved scenario file.
type Scenario struct {
	// Name is metadata.name; it names results, namespaces and benchmark lines.
	Name        string
	Labels      []string
	Description string
	// Source says where the shape comes from (e.g. an upstream scheduler_perf workload).
	Source string
	// Reference names the upstream scheduler_perf workload this scenario reproduces, when it does:
	// `perf reference` runs that workload in-process as the yardstick for this scenario's figures.
	Reference   *Reference
	Cluster     Cluster
	Scheduler   Scheduler
	Phases      []Phase
	Repetitions int
	// Timeout bounds one repetition from its first create to its last bind.
	Timeout time.Duration
	// Settle ends a repetition early when pods remain unbound and nothing was bound for this long:
	// the pods that are left do not fit, or the scheduler is stuck; the invariants tell which.
	Settle time.Duration
	// Measurements are the names of the measurements to take, in file order.
	Measurements []string
	// Params are the effective $param values (defaults with overrides applied), for the record.
	Params map[string]string
	// File is where the scenario was read from; Hash identifies its content, the params and the node
	// count it was resolved for, so two runs with equal hashes ran the same workload.
	File string
	Hash string
}

// Reference is an upstream scheduler_perf workload.
type Reference struct {
	// Package is below test/integration/scheduler_perf, e.g. podgroup/gangscheduling.
	Package string
	// Config is the workload file in that package, e.g. performance-config.yaml.
	Config string
	// TestCase and Workload name the workload in Config: GangScheduling, 5000Nodes_1000Gangs_3000Pods.
	TestCase, Workload string
}

// Benchmark is the benchmark name scheduler_perf gives the workload.
func (r Reference) Benchmark() string {
	return "BenchmarkPerfScheduling/" + r.TestCase + "/" + r.Workload
}

// Cluster is the shape of the cluster a scenario needs.
type Cluster struct {
	Nodes       int
	GPUsPerNode int
	// Product is the nvidia.com/gpu.product label; empty means the provider's default.
	Product string
	// NodesPerRack, when set, lays the nodes out in racks of this many, in node order (the last rack
	// takes what is left), as scheduler_perf's topology shapes do: node i is in rack i/NodesPerRack.
	// RacksPerBlock groups racks into blocks the same way (1 when unset: each rack its own block).
	// The labels are clusters.Topology's: the rack under its rack key, the block under its block key
	// and topology.kubernetes.io/zone.
	NodesPerRack  int
	RacksPerBlock int
	// GPUAPI is how the nodes publish their GPUs and so how the pods ask for them: the device
	// plugin's nvidia.com/gpu count, or DRA (a ResourceSlice per node, a ResourceClaim per pod from
	// a ResourceClaimTemplate). The file's cluster.gpuAPI, else --gpu-api (Options.GPUAPI), else ""
	// for the cluster source's (the device plugin unless its base spec says otherwise: a caller
	// that does not resolve the flag into scenarios, such as compare, leaves it to the source).
	GPUAPI clusters.GPUAPI
}

// Racks is the number of racks the nodes are laid out in; 0 without a topology.
func (c Cluster) Racks() int {
	if c.NodesPerRack < 1 {
		return 0
	}
	return (c.Nodes + c.NodesPerRack - 1) / c.NodesPerRack
}

// GPUs is the cluster's total GPU count.
func (c Cluster) GPUs() int { return c.Nodes * c.GPUsPerNode }

// Scheduler is the scheduler settings a scenario asks for (the local provider applies them).
type Scheduler struct {
	KubeAPIQPS   int
	KubeAPIBurst int
}

// Policy is a PodGroup's scheduling policy.
type Policy string

const (
	Gang  Policy = "gang"
	Basic Policy = "basic"
)

// Start says when a phase begins relative to the phases before it.
type Start string

const (
	// AfterCreated starts once the previous phase's objects are all created (the default).
	AfterCreated Start = "afterCreated"
	// AfterBound starts once every pod of every earlier phase is bound (or the wait settles).
	AfterBound Start = "afterBound"
	// WithPrevious starts together with the previous phase, so their arrivals interleave.
	WithPrevious Start = "withPrevious"
)

// Phase is one batch of PodGroups of one shape.
type Phase struct {
	Name string
	// Groups is the resolved number of PodGroups; Fill is the fraction of the cluster's GPUs it was
	// computed from (0 when the file gave groups directly).
	Groups       int
	Fill         float64
	PodsPerGroup int
	GPUsPerPod   int
	// CPU and Memory are optional requests per pod (upstream scheduler_perf shapes use 100m/100Mi).
	CPU, Memory resource.Quantity
	Policy      Policy
	// MinCount is the gang quorum; 0 for basic groups.
	MinCount int
	// PriorityClass is created with Priority if set; pods and PodGroups use it.
	PriorityClass string
	Priority      int32
	// DisruptionAll makes the group one preemption victim (disruptionMode all).
	DisruptionAll bool
	// GroupsPerSecond paces arrival; 0 means burst (as fast as the load generator can create).
	GroupsPerSecond float64
	// InOrder creates the phase the way scheduler_perf's createPodGroups and createPods ops do
	// (`arrival: schedulerPerf`): every PodGroup before the measured window, then the pods in index
	// order, group after group, InOrderParallelism at a time. A gang is then whole before the next
	// one starts, so the scheduler places it while the next is being created. The default burst
	// creates many groups at once, each PodGroup right before its pods.
	InOrder bool
	// TopologyKey, when set, is the node label key every group of the phase must fit under one
	// value of (PodGroup spec.schedulingConstraints.topology; TopologyAwareWorkloadScheduling). The
	// file says rack, block or zone for the cluster's topology labels, or any label key.
	TopologyKey string
	// ViaJob creates each group as a batch/v1 Job with spec.scheduling (WorkloadWithJob): the job
	// controller then creates the Workload, the PodGroup and the pods, so its cost and latency are in
	// the figures. Off: the load generator creates PodGroups and pods itself.
	ViaJob bool
	// Prefill phases build the starting state; they are created and bound before measuring starts,
	// and excluded from the figures (but not from the invariants).
	Prefill bool
	Start   Start
}

// Pods is the phase's pod count.
func (p Phase) Pods() int { return p.Groups * p.PodsPerGroup }

// GPUs is the phase's GPU demand.
func (p Phase) GPUs() int { return p.Pods() * p.GPUsPerPod }

// InOrderParallelism is how many pods an in-order phase creates at once: scheduler_perf's
// createPods op creates through CreatePod (scheduler_perf/runners.go), which hands pod indexes
// in order to 30 workers (workqueue.ParallelizeUntil).
const InOrderParallelism = 30

// Arrival describes the arrival pattern for humans.
func (p Phase) Arrival() string {
	switch {
	case p.InOrder:
		return fmt.Sprintf("schedulerPerf (PodGroups first, then pods in index order, %d at a time)", InOrderParallelism)
	case p.GroupsPerSecond == 0:
		return "burst"
	}
	return fmt.Sprintf("%g groups/s", p.GroupsPerSecond)
}

// Features are the clusters.FeatureSets the scenario's phases need: tas for a topology constraint,
// jobs for Job-driven groups. Sorted, once each.
func (s *Scenario) Features() []string {
	var tas, jobs bool
	for _, p := range s.Phases {
		tas = tas || p.TopologyKey != ""
		jobs = jobs || p.ViaJob
	}
	var out []string
	if jobs {
		out = append(out, "jobs")
	}
	if tas {
		out = append(out, "tas")
	}
	return out
}

// MeasuredPods is the number of pods in phases that are not prefill.
func (s *Scenario) MeasuredPods() int {
	n := 0
	for _, p := range s.Phases {
		if !p.Prefill {
			n += p.Pods()
		}
	}
	return n
}

// TotalPods is the pod count of all phases.
func (s *Scenario) TotalPods() int {
	n := 0
	for _, p := range s.Phases {
		n += p.Pods()
	}
	return n
}

// TotalGroups is the PodGroup count of all phases.
func (s *Scenario) TotalGroups() int {
	n := 0
	for _, p := range s.Phases {
		n += p.Groups
	}
	return n
}
