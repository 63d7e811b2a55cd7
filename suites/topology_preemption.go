package suites

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// Workload-aware preemption by a gang with a topology constraint (workload-features-v1.37 §1.6).
// The preemption domain stays the whole cluster: every lower-priority pod is removed in one
// simulation, which reruns the full placement algorithm (every rack evaluated and scored with the
// victims gone), and then every victim whose return keeps the chosen rack's assignments feasible is
// reprieved. So victims go only in the rack the gang lands in. With victims of the gang's own
// priority there is nothing to remove and nothing is preempted.
//
// v1.37.2 source (k8s.io/kubernetes@v1.37.2, pkg/scheduler):
//   framework/preemption/podgrouppreemption.go:207-218  victims: lower priority only; none → "No preemption victims found for incoming preemptor"
//   framework/preemption/podgrouppreemption.go:236-239  the simulation reruns the pod group's scheduling function (the placement algorithm)
//   schedule_one_podgroup.go:1038-1043                  every placement infeasible → "0/<P> placements are available, …"

// Where the gang goes is read from its members' nominatedNodeName (set by the preemption) or, once
// they bind, their nodes (waitPlaced), not from binding alone. Once in the first three runs of the
// whole topology suite here the gang, nominated to the rack whose 2 victims were already deleted,
// did not bind within 90 s and its PodGroup kept the preempting cycle's condition. The v1.37.2 code
// that can hold it: a gang whose cycle returns to the queue before its asynchronous preemption has
// started deleting the last victim is gated by DefaultPreemption's PreEnqueue ("waiting for the
// preemption for this pod group to be finished", default_preemption.go:206-208), and the only hint
// that could release it, on an assigned pod's deletion, always answers QueueSkip
// (default_preemption.go:240-242), so it waits for the scheduler's 5-minute flush. The victims,
// which are what these assertions are about, are chosen in the preempting cycle either way.

const tasPreRef = "workload-features §1.6 (the domain is the cluster; the re-simulation runs the full placement algorithm, podgrouppreemption.go:207-239; reprieve keeps every victim the chosen rack does not need)"

// tasPreemptionLane is 2 racks of one 8-GPU node each: 2 pods × 4 GPUs fill a rack.
var tasPreemptionLane = framework.LaneSpec{Nodes: 2, GPUsPerNode: 8, Racks: 2}

// tasFillRacks fills each of the lane's 2 racks with 2 bound pods × 4 GPUs of the class, named
// <prefix>-<rack index>-<i>, and returns them per rack.
func tasFillRacks(ctx context.Context, t *testing.T, l *framework.Lane, prefix, class string) map[string][]string {
	t.Helper()
	a, b := tasRacks(t, l)
	out := map[string][]string{}
	for ri, rack := range []string{a, b} {
		for i := range 2 {
			name := fmt.Sprintf("%s-%d-%d", prefix, ri, i)
			tasFillerOf(ctx, t, l, name, l.Racks[rack][0], 4, class)
			out[rack] = append(out[rack], name)
		}
	}
	return out
}

// tasClassGang creates a PodGroup of the class constrained to the rack key and its n members × gpus
// of the same class, and returns the members' names.
func tasClassGang(ctx context.Context, t *testing.T, l *framework.Lane, name, class string, minCount int32, n int, gpus int64) []string {
	t.Helper()
	pg := l.CreatePodGroup(ctx, t, scenarios.Group{Name: name, MinCount: minCount, PriorityClassName: class, TopologyKey: tasRack})
	if pg.Spec.SchedulingConstraints == nil || len(pg.Spec.SchedulingConstraints.Topology) == 0 {
		t.Fatalf("the apiserver dropped PodGroup %s's spec.schedulingConstraints.topology (TopologyAwareWorkloadScheduling off on the apiserver?)", name)
	}
	ms := withClass(class, framework.Members(name, n, gpus)...)
	l.CreatePods(ctx, t, ms...)
	return names(ms)
}

// tasPreemptionFeature is §7 item 13: victims only in the rack the gang lands in.
func tasPreemptionFeature() framework.Feature {
	return framework.Feature{
		Suite: "topology", Name: "topology: a gang preempts only in the rack it lands in", Lane: tasPreemptionLane, NeedsGates: tasGates,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "TAS-12", Statement: "2 racks of one 8-GPU node, each full with 2 pods × 4 GPUs of priority 100: a gang of priority 1000 (2 × 4 GPUs, minCount 2) constrained to the rack key is placed whole in one rack within 90s (its members bound or nominated there); exactly the 2 pods of that rack are preempted (DisruptionTarget PreemptionByScheduler), and the 2 in the other rack keep running", Ref: tasPreRef + "; workload-features §7 item 13; upstream tas_test.go:249-300"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					low := l.PriorityClass(ctx, t, "low", lowValue, false)
					high := l.PriorityClass(ctx, t, "high", highValue, false)
					victims := tasFillRacks(ctx, t, l, "low", low)
					r := startRecorder(ctx, t, l, false)
					gang := tasClassGang(ctx, t, l, "high", high, 2, 2, 4)
					where := waitPlaced(ctx, t, l, r, l.Env.Scaled(90*time.Second), gang...)
					racks := map[string]bool{}
					for _, n := range where {
						racks[l.RackOf(n)] = true
					}
					if len(racks) != 1 || racks[""] {
						t.Fatalf("the gang's members are bound or nominated across racks: %v", where)
					}
					var rack, other string
					for k := range racks {
						rack = k
					}
					for k := range victims {
						if k != rack {
							other = k
						}
					}
					t.Logf("the gang is placed in rack %s (%v); %s", rack, where, r.describe(slices.Concat(gang, victims[rack], victims[other])...))
					pvExactly(ctx, t, l, r, victims[rack]...)
					keepRunning(ctx, t, l, r, l.Env.Scaled(6*time.Second), victims[other]...)
				}},
		},
	}
}

// tasEqualPriorityFeature is §7 item 14 (upstream tas_test.go:875-906, whose name promises
// preemption but whose blocker has the gang's own priority). The shared priority is 0, the lowest
// any pod of the cluster has, so "no victims" holds cluster-wide (group preemption looks
// cluster-wide), as in PRE-14.
func tasEqualPriorityFeature() framework.Feature {
	return framework.Feature{
		Suite: "topology", Name: "topology: equal priority in every rack preempts nothing", Lane: tasPreemptionLane, NeedsGates: tasGates,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "TAS-13", Statement: fmt.Sprintf("2 racks of one 8-GPU node, each full with 2 pods × 4 GPUs of priority 0: a gang of the same priority (2 × 4 GPUs, minCount 2) constrained to the rack key is False/Unschedulable saying \"placements are available\" and %q, and for 10s none of its members binds and none of the 4 pods is preempted", msgGroupPreemption+" "+msgNoVictims), Ref: tasPreRef + "; workload-features §1.4, §7 item 14; upstream tas_test.go:875-906"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					eq := l.PriorityClass(ctx, t, "eq", 0, false)
					blockers := tasFillRacks(ctx, t, l, "eq", eq)
					var all []string
					for _, ps := range blockers {
						all = append(all, ps...)
					}
					r := startRecorder(ctx, t, l, false)
					gang := tasClassGang(ctx, t, l, "gang", eq, 2, 2, 4)
					waitGroupMessage(ctx, t, l, l.Env.Scaled(60*time.Second), "gang", metav1.ConditionFalse, "Unschedulable", "placements are available", msgGroupPreemption+" "+msgNoVictims)
					framework.Consistently(ctx, t, l.Env.Scaled(bmHoldWindow), fmt.Sprintf("blockers %v intact and gang %v unbound", all, gang), func(ctx context.Context) (bool, string, error) {
						for _, p := range all {
							if ok, why, err := intact(ctx, l, p); !ok || err != nil {
								return ok, why, err
							}
						}
						for _, n := range gang {
							p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, n, metav1.GetOptions{})
							if err != nil {
								return false, "", err
							}
							if p.Spec.NodeName != "" {
								return false, fmt.Sprintf("gang member %s bound to %s", n, p.Spec.NodeName), nil
							}
						}
						return true, "", nil
					})
					l.Canary(ctx, t)
					if p := r.preempted(); len(p) > 0 {
						t.Errorf("pods preempted although none has a lower priority than the gang: %v; %s", p, r.describe(p...))
					}
					neverDisrupted(ctx, t, l, r, all...)
					pg, err := l.PodGroup(ctx, "gang")
					if err != nil {
						t.Fatalf("get PodGroup gang: %v", err)
					}
					if c := framework.GroupCondition(pg); c == nil || c.Status != metav1.ConditionFalse {
						t.Errorf("PodGroup gang after the window: %s, want False", framework.DescribeCondition(c))
					}
				}},
		},
	}
}
