package measure

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/observe/monitor"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/results"
)

// monitorSyncTimeout bounds the PodGroup monitor's initial list.
const monitorSyncTimeout = time.Minute

type invariants struct {
	env *Env
	mon *monitor.Monitor
}

func newInvariants(env *Env) Measurement { return &invariants{env: env} }

// Start begins watching PodGroup status for monotonicity: a PodGroupInitiallyScheduled that goes
// from True back to anything else is a scheduler bug, and load is where races show.
func (m *invariants) Start(ctx context.Context) error {
	m.mon = monitor.New(m.env.Client, monitor.Options{Gang: m.env.Gang})
	sctx, cancel := context.WithTimeout(ctx, monitorSyncTimeout)
	defer cancel()
	if err := m.mon.Start(sctx); err != nil {
		return fmt.Errorf("invariants: %w", err)
	}
	return nil
}

func (m *invariants) Gather(ctx context.Context) ([]results.DataItem, error) {
	m.mon.Stop()
	events := m.env.Timeline.Events()
	grace := m.env.PartialGrace
	if grace <= 0 {
		grace = timeline.DefaultPartialGrace
	}
	pr := timeline.CheckPartial(events, grace)
	for _, p := range pr.Partial {
		m.env.note("partial placement: %s", p)
	}
	for _, p := range pr.ByPreemption {
		m.env.note("partially preempted (disruptionMode single, allowed): %s", p)
	}
	fit, err := m.fit(ctx, events)
	if err != nil {
		return nil, err
	}
	if fit.Fitting > 0 {
		m.env.note("pods that fit were left unbound: %s", fit)
	}
	violations := m.mon.Violations()
	for _, v := range violations {
		m.env.note("PodGroup status regression: %s", v)
	}
	st := m.mon.Stats()
	return []results.DataItem{
		{Name: ItemPartialGangs, Unit: "gangs", Data: map[string]float64{
			Value:                   float64(len(pr.Partial)),
			"ByPreemption":          float64(len(pr.ByPreemption)),
			"Gangs":                 float64(pr.Gangs),
			"LongestStallSeconds":   pr.LongestStall.Seconds(),
			"LongestPartialSeconds": pr.LongestPartial.Seconds(),
			"GraceSeconds":          grace.Seconds(),
		}},
		{Name: ItemUnboundFitting, Unit: "pods", Data: map[string]float64{Value: float64(fit.Fitting), "Pending": float64(fit.Pending)}},
		{Name: ItemStatusRegressions, Unit: "podgroups", Data: map[string]float64{
			Value: float64(len(violations)), "PodGroupsWatched": float64(st.PodGroups), "Transitions": float64(st.Transitions), "WatchErrors": float64(st.WatchErrors),
		}},
	}, nil
}

// fit lists the cluster's nodes and pods and runs UnboundFitting over the namespace's groups, in
// the order they were created.
func (m *invariants) fit(ctx context.Context, events []timeline.Event) (FitReport, error) {
	nodes, err := m.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return FitReport{}, fmt.Errorf("invariants: list nodes: %w", err)
	}
	// Every pod, not only ours: anything bound to a node takes capacity.
	pods, err := m.env.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return FitReport{}, fmt.Errorf("invariants: list pods: %w", err)
	}
	// With DRA the GPUs are devices in ResourceSlices, claimed by the pods (fit_dra.go).
	var dra *DRAInventory
	if m.env.GPUAPI.DRA() {
		inv, err := ListDRA(ctx, m.env.Client)
		if err != nil {
			return FitReport{}, fmt.Errorf("invariants: %w", err)
		}
		dra = &inv
	}
	var fn []FitNode
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable || !ready(&n) {
			continue
		}
		alloc := n.Status.Allocatable
		if dra != nil {
			alloc = alloc.DeepCopy()
			alloc[FitGPUDevices] = *resource.NewQuantity(dra.NodeDevices[n.Name], resource.DecimalSI)
		}
		fn = append(fn, FitNode{Name: n.Name, Allocatable: alloc})
	}
	var fp []FitPod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		mine := p.Namespace == m.env.Namespace
		if p.Spec.NodeName == "" && (!mine || p.DeletionTimestamp != nil) {
			continue // someone else's pending pod, or one of ours on its way out
		}
		group := ""
		if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil && mine {
			group = *sg.PodGroupName
		}
		req := requests(&p)
		if dra != nil {
			if d := dra.PodDevices(&p); d > 0 {
				req[FitGPUDevices] = *resource.NewQuantity(d, resource.DecimalSI)
			}
		}
		fp = append(fp, FitPod{Name: p.Name, Group: group, Node: p.Spec.NodeName, Requests: req})
	}
	var groups []FitGroup
	for _, e := range timeline.Sorted(events) {
		if e.Kind == timeline.PodGroupCreated {
			groups = append(groups, FitGroup{Name: e.Group, Gang: e.Policy == "gang", MinCount: e.MinCount})
		}
	}
	return UnboundFitting(fn, fp, groups), nil
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// requests sums the containers' requests (the pods here have no init containers or overhead).
func requests(p *corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		for r, q := range c.Resources.Requests {
			cur := out[r]
			cur.Add(q)
			out[r] = cur
		}
	}
	return out
}
