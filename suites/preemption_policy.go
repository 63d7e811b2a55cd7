package suites

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// A PodGroup's own preemption policy (PodGroupPreemptionPolicy, alpha, off by default:
// workload-features-v1.37 §4). With the gate on, spec.preemptionPolicy is defaulted to
// PreemptLowerPriority, Priority admission computes it from the group's PriorityClass and refuses a
// different one, the scheduler requires every member to share it, and only the group's policy
// decides whether the group may preempt. Whether a group may be preempted never depends on it.
// The suite runs where the apiserver and the scheduler both have the gate (`--features
// preemption-policy`).

const (
	ppolRef = "workload-features §4"
	// ppolMsgMismatch is validatePodGroup's message with the gate on (schedule_one_podgroup.go:237-243).
	ppolMsgMismatch = "all pods in a single pod group should have the same preemption policy as the pod group's preemption policy, got PreemptLowerPriority and Never"
	// ppolMsgAdmission is Priority admission's refusal of a group whose policy is not its class's.
	ppolMsgAdmission = "must not be provided in pod group spec; priority admission controller computed Never"
)

var ppolGates = []string{"PodGroupPreemptionPolicy"}

func preemptionPolicyFeatures() []framework.Feature {
	one := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	return []framework.Feature{
		{
			Suite: "preemption-policy", Name: "preemption-policy: the API", Lane: one, NeedsGates: ppolGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "PPOL-01", Statement: "a PodGroup created without spec.preemptionPolicy reads back PreemptLowerPriority", Ref: ppolRef + ".1 (defaulting at decode, pkg/apis/scheduling/v1beta1/defaults.go:40-47)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						pg := l.CreatePodGroup(ctx, t, scenarios.Group{Name: "defaulted", MinCount: 1})
						if pg.Spec.PreemptionPolicy == nil || *pg.Spec.PreemptionPolicy != schedv1beta1.PreemptLowerPriority {
							t.Errorf("PodGroup defaulted: spec.preemptionPolicy %v, want PreemptLowerPriority", pg.Spec.PreemptionPolicy)
						}
					}},
				{A: framework.Assertion{ID: "PPOL-02", Statement: fmt.Sprintf("a PodGroup whose PriorityClass has preemptionPolicy Never but that leaves spec.preemptionPolicy to its default is refused: %q", ppolMsgAdmission), Ref: ppolRef + ".1-4.2 (Priority admission, admission.go:225-238, 266-280; the default is set before admission sees it)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						never := l.PriorityClass(ctx, t, "never", highValue, true)
						_, err := l.Gang.PodGroups(l.Name).Create(ctx, scenarios.PodGroup(l.Name, scenarios.Group{Name: "trap", MinCount: 1, PriorityClassName: never}), metav1.CreateOptions{})
						if err == nil {
							t.Fatalf("PodGroup of class %s (Never) without spec.preemptionPolicy was accepted", never)
						}
						if !strings.Contains(err.Error(), ppolMsgAdmission) {
							t.Errorf("refused with %q, want it to contain %q", err, ppolMsgAdmission)
						}
					}},
			},
		},
		{
			Suite: "preemption-policy", Name: "preemption-policy: members must have the group's policy", Lane: one, NeedsGates: ppolGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "PPOL-03", Statement: fmt.Sprintf("a PodGroup of a priority-1000 class with preemptionPolicy Never (spec.preemptionPolicy Never) whose 2 members use a priority-1000 class with PreemptLowerPriority: every member gets FailedScheduling %q and PodScheduled=False/SchedulerError, none binds, and the PodGroup is False/SchedulerError", ppolMsgMismatch), Ref: ppolRef + ".3 (validatePodGroup, schedule_one_podgroup.go:237-243)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						never := l.PriorityClass(ctx, t, "never", highValue, true)
						preempt := l.PriorityClass(ctx, t, "preempt", highValue, false)
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "mixed", MinCount: 2, PriorityClassName: never, PreemptionPolicy: schedv1beta1.PreemptNever})
						ms := withClass(preempt, framework.Members("mixed", 2, 2)...)
						l.CreatePods(ctx, t, ms...)
						mcWaitGroupError(ctx, t, l, "mixed", names(ms), ppolMsgMismatch)
					}},
			},
		},
		ppolNeverFeature(one),
		ppolGateFeature(one),
	}
}

// ppolGateFeature runs whatever the gate: which of the two behaviours is right is read from the
// apiserver's own kubernetes_feature_enabled metric (as Feature.NeedsGates reads it), so the
// default cluster, gate off, checks the drop and a --features preemption-policy cluster the
// default.
func ppolGateFeature(lane framework.LaneSpec) framework.Feature {
	return framework.Feature{
		Suite: "preemption-policy", Name: "preemption-policy: the field follows the apiserver's gate", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "PPOL-06", Statement: "with PodGroupPreemptionPolicy off on the apiserver (its kubernetes_feature_enabled metric), a PodGroup created with spec.preemptionPolicy Never reads back without it; with it on, one created without the field reads back PreemptLowerPriority", Ref: ppolRef + ".1 (gate off: dropped on create, podgroup/strategy.go:222-228, and not defaulted; gate on: defaulted at decode, pkg/apis/scheduling/v1beta1/defaults.go:40-47); workload-features §7 item 41"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					on := l.APIServerGate(ctx, t, ppolGates[0])
					if !on {
						pg := l.CreatePodGroup(ctx, t, scenarios.Group{Name: "never", MinCount: 1, PreemptionPolicy: schedv1beta1.PreemptNever})
						if pg.Spec.PreemptionPolicy != nil {
							t.Errorf("gate off: PodGroup never created with spec.preemptionPolicy Never reads back %q, want the field dropped", *pg.Spec.PreemptionPolicy)
						}
						got, err := l.PodGroup(ctx, "never")
						if err != nil {
							t.Fatalf("get PodGroup never: %v", err)
						}
						if got.Spec.PreemptionPolicy != nil {
							t.Errorf("gate off: PodGroup never as stored has spec.preemptionPolicy %q, want the field dropped", *got.Spec.PreemptionPolicy)
						}
						return
					}
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "unset", MinCount: 1})
					got, err := l.PodGroup(ctx, "unset")
					if err != nil {
						t.Fatalf("get PodGroup unset: %v", err)
					}
					if got.Spec.PreemptionPolicy == nil || *got.Spec.PreemptionPolicy != schedv1beta1.PreemptLowerPriority {
						t.Errorf("gate on: PodGroup unset created without spec.preemptionPolicy reads back %v, want PreemptLowerPriority", got.Spec.PreemptionPolicy)
					}
				}},
		},
	}
}

// ppolNeverFeature: a Never group does not preempt, and is itself preempted.
func ppolNeverFeature(lane framework.LaneSpec) framework.Feature {
	var neverPods []string
	return framework.Feature{
		Suite: "preemption-policy", Name: "preemption-policy: a Never group never evicts and can be evicted", Lane: lane, NeedsGates: ppolGates,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "PPOL-04", Statement: "2 pods of priority 10 fill the 8-GPU node; a gang of priority 1000 whose PodGroup and members have preemptionPolicy Never (2 × 4 GPUs) preempts none of them: its PodGroup says \"not eligible due to preemptionPolicy=Never.\" and the 2 pods keep running", Ref: ppolRef + ".4 (the group's own policy decides, preemption/types.go:76-90; podgrouppreemption.go:384-390)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					low := l.PriorityClass(ctx, t, "p10", 10, false)
					never := l.PriorityClass(ctx, t, "never", highValue, true)
					l.CreatePods(ctx, t, standalone("victim", 2, 4, low)...)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "victim-0", "victim-1")
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "never", MinCount: 2, PriorityClassName: never, PreemptionPolicy: schedv1beta1.PreemptNever})
					ms := withClass(never, framework.Members("never", 2, 4)...)
					l.CreatePods(ctx, t, ms...)
					neverPods = names(ms)
					waitGroupMessage(ctx, t, l, l.Env.Scaled(60*time.Second), "never", metav1.ConditionFalse, "Unschedulable", msgNeverEligible)
					keepRunning(ctx, t, l, nil, l.Env.Scaled(6*time.Second), "victim-0", "victim-1")
				}},
			{A: framework.Assertion{ID: "PPOL-05", Statement: fmt.Sprintf("the 2 pods of priority 10 are deleted, so the Never gang binds; a gang of priority 2000 (PreemptLowerPriority, 2 × 4 GPUs) then preempts it and binds within %s: a group's own Never policy does not protect it", 60*time.Second), Ref: ppolRef + ".4 (victims are chosen by priority alone, podgrouppreemption.go:376-379)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if len(neverPods) == 0 {
						t.Fatal("the Never gang was not created (PPOL-04 failed early)")
					}
					bmRemovePod(ctx, t, l, "victim-0")
					bmRemovePod(ctx, t, l, "victim-1")
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), neverPods...)
					top := l.PriorityClass(ctx, t, "top", blockerValue, false)
					high := createGang(ctx, t, l, scenarios.Group{Name: "high", MinCount: 2, PriorityClassName: top}, 2, 4)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), high...)
					bmWaitPodsGone(ctx, t, l, neverPods...)
				}},
		},
	}
}
