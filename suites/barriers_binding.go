package suites

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// A member whose binding fails after the pod-group cycle assumed it: the apiserver refuses its
// pods/binding (an admission policy, as a webhook or policy engine refusing a placement does). The
// binding cycle runs per member (gang-semantics §5), so the members whose bindings go through are
// bound; the refused one is forgotten, which must also take it out of its group's assumed members
// (cache.go:601, forgetPodGroupMember :968-980, podGroupState.forgetPod, podgroupstate.go:131-151),
// and retried. A scheduler that keeps it counted as assumed judges its gang's quorum with a member
// it does not hold: a later cycle that cannot place the whole gang then lets the refused member
// through to Permit, where it waits for minutes holding its GPUs.

// brBindRef is the reference of the feature's assertions.
const brBindRef = bmSemRef + "A.4; §5 (binding cycle per member); schedule_one.go:507-538 (handleBindingCycleError: unreserve, ForgetPod, requeue); cache.go:601, 968-980 and podgroupstate.go:131-151 (the member back from assumed to unscheduled); schedule_one_podgroup.go:584-640 (PlacementFeasible counts ScheduledPodsCount)"

func barrierBindingFeatures() []framework.Feature {
	one := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	var refusedLifted bool
	refused := framework.Feature{
		Suite: "barriers", Name: "barriers: a member whose binding the apiserver refuses", Lane: one,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "BAR-49", Statement: "a gang (minCount 3, 3 members × 2 GPUs on one 8-GPU node) whose third member's binding the apiserver refuses (a ValidatingAdmissionPolicy on pods/binding): the other two bind, and the third gets a FailedScheduling event carrying the refusal, not a node", Ref: brBindRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					l.RefuseBindings(ctx, t, "refused-2")
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "refused", MinCount: 3})
					ms := framework.Members("refused", 3, 2)
					l.CreatePods(ctx, t, ms...)
					l.WaitEvent(ctx, t, l.Env.Scaled(60*time.Second), "refused-2", "FailedScheduling", framework.RefusedBindingMessage)
					l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), "refused-0", "refused-1")
					if o, err := l.Observe(ctx); err != nil {
						t.Fatal(err)
					} else if o.Pods["refused-2"] == framework.Bound {
						t.Fatalf("refused-2 is bound although the apiserver refuses its binding: %s", o)
					}
				}},
			{A: framework.Assertion{ID: "BAR-50", Statement: "one bound member is deleted (2 of minCount 3 left) and the refusal lifted: the refused member does not bind alone for 10s", Ref: brBindRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					// The deletion first: lifted while the gang still had its quorum, the refused
					// member would rightly bind on its next retry.
					bmRemovePod(ctx, t, l, "refused-0")
					l.LiftBindingRefusal(ctx, t)
					refusedLifted = true
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Unbound: []string{"refused-2"}})
					l.Canary(ctx, t)
				}},
			{A: framework.Assertion{ID: "BAR-51", Statement: fmt.Sprintf("a third member that fits no node (16 GPUs) makes the gang whole in count: the gang is rejected, the refused member holds no GPUs, and a standalone 6-GPU pod binds beside the one bound member within %s (a pod of priority 1 that cannot preempt, so that a nomination the refused member may keep, reported when seen, does not count)", bhWakeBound), Ref: brBindRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !refusedLifted {
						t.Fatal("the refusal was not lifted (BAR-50 failed early)")
					}
					// Priority 1, above the gang's 0, so that a nomination the refused member may keep
					// does not count against it (nominated pods count only for pods of their priority
					// or lower); preemptionPolicy Never, so that it cannot make room by evicting.
					// What can still keep it out is a member the scheduler holds as assumed.
					class := l.PriorityClass(ctx, t, "beside", 1, true)
					brSkipIfHeldBefore(ctx, t, l, class)
					l.CreatePods(ctx, t, bmMember("refused-3", "refused", 16))
					l.WaitEvent(ctx, t, l.Env.Scaled(60*time.Second), "refused-3", "FailedScheduling")
					brReportStaleNomination(ctx, t, l, "refused-2")
					at := time.Now()
					l.CreatePods(ctx, t, scenarios.Member{Name: "beside", GPUs: 6, PriorityClassName: class})
					bhWaitBoundWithin(ctx, t, l, at, "the standalone pod's creation", "boundBesideRejectedGang", "beside")
					if o, err := l.Observe(ctx); err != nil {
						t.Fatal(err)
					} else if o.Pods["refused-2"] == framework.Bound || o.Pods["refused-3"] == framework.Bound {
						t.Errorf("a member of a gang 1 short of its quorum was bound: %s", o)
					}
				}},
		},
	}
	return []framework.Feature{refused}
}

// brSkipIfHeldBefore checks BAR-51's premise before its third member exists: the 6 GPUs beside the
// one bound member are free. A probe pod of the standalone pod's size and class must bind there
// (and is then removed). v1.37.2 sometimes breaks the premise itself: while the refused member's
// binding is retried in a tight loop (BAR-49), one retry can count its gang's members short at
// Permit (ScheduledPodsCount < minCount while a bound member moves from assumed to bound), and the
// refused member then waits at Permit for the full 5 minutes, holding its GPUs, with no event. That
// is a finding about the scheduler, reported here, but not the wrong build BAR-51 judges (a
// member held as assumed after its failed binding gets to Permit only in the cycle the third
// member starts), so the step is skipped rather than failed: seen about once in ten loaded runs.
func brSkipIfHeldBefore(ctx context.Context, t *testing.T, l *framework.Lane, class string) {
	t.Helper()
	l.CreatePods(ctx, t, scenarios.Member{Name: "probe", GPUs: 6, PriorityClassName: class})
	err := framework.Poll(ctx, l.Env.Scaled(15*time.Second), "pod probe bound", func(ctx context.Context) (bool, string, error) {
		o, err := l.Observe(ctx)
		if err != nil {
			return false, "", err
		}
		return o.Pods["probe"] == framework.Bound, o.String(), nil
	})
	if err != nil {
		p, gerr := l.Client.CoreV1().Pods(l.Name).Get(ctx, "refused-2", metav1.GetOptions{})
		nominated := ""
		if gerr == nil {
			nominated = p.Status.NominatedNodeName
		}
		t.Logf("finding: before the third member existed, a 6-GPU pod could not bind beside the one bound member (%v); refused-2 is nominated to %q: it waits at Permit since its refused bindings, holding its GPUs (v1.37.2's race, not the wrong build this step judges)", err, nominated)
		t.Skip("the refused member already holds its GPUs at Permit from the refusal loop of BAR-49 (a scheduler race, reported above), so BAR-51 cannot judge this run")
	}
	bmRemovePod(ctx, t, l, "probe")
}

// brReportStaleNomination reports a nominatedNodeName the refused member keeps after its gang was
// rejected. v1.37.2 sometimes leaves one (about one run in five on this machine under load, with
// TopologyAwareWorkloadScheduling on or off): it reserves the member's GPUs for pods of its priority
// or lower, which is why BAR-51's standalone pod has a higher one. Reported, not judged: the race is
// upstream's, and its cause is not pinned down yet.
func brReportStaleNomination(ctx context.Context, t *testing.T, l *framework.Lane, pod string) {
	t.Helper()
	p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", pod, err)
	}
	if p.Status.NominatedNodeName != "" {
		t.Logf("finding: %s keeps status.nominatedNodeName=%s after its gang was rejected (a stale nomination that reserves its GPUs for pods of priority 0)", pod, p.Status.NominatedNodeName)
	}
}
