package suites

import (
	"context"
	"errors"
	"fmt"
	"github.com/gangbench/gangbench/suites/framework"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gangbench/gangbench/scenarios"
)

// The barriers suite: when a gang-aware scheduler must NOT start placing a group (PodGroup missing,
// quorum not reached, a member gated, a member owned by another scheduler), and that it places the
// group as one unit once the barrier is gone. Every "stays Pending" window is followed by proof that
// the scheduler was alive and had the pods in the expected queue (a canary and, where the metrics
// endpoint is reachable, scheduler_pending_pods), so a crashed or idle scheduler cannot pass.

const bmSemRef = "gang-semantics §11."

// bmHoldWindow is the negative observation window of the barrier checks (the upstream e2e uses 10s).
const bmHoldWindow = 10 * time.Second

// bmMaxBindSpread bounds the time between the first and the last bind of one gang. The scheduler
// binds the members of one cycle back to back; the bound is generous for a loaded 2-core machine.
// Like every pass threshold it is not scaled by -timeout-scale, which lengthens waits only: a
// slower machine must not make a scheduler that binds members seconds apart pass.
const bmMaxBindSpread = 5 * time.Second

// bmForeignScheduler is a schedulerName no profile of the scheduler under test serves.
const bmForeignScheduler = "gangbench-unknown-scheduler"

func barrierFeatures() []framework.Feature {
	one := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	var winner, loser string
	return bmReadyLanes(append([]framework.Feature{
		{
			Suite: "barriers", Name: "barriers: gang API served and schedulingGroup kept", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 1},
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "BAR-01", Statement: "the apiserver serves scheduling.k8s.io/v1beta1 (v1alpha2 on v1.36) workloads, podgroups and podgroups/status", Ref: bmSemRef + "A.1; §1.3"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						gv := l.Gang.API().GroupVersion()
						res, err := l.Client.Discovery().ServerResourcesForGroupVersion(gv)
						if err != nil {
							t.Fatalf("discover %s: %v", gv, err)
						}
						var served []string
						for _, r := range res.APIResources {
							served = append(served, r.Name)
						}
						for _, want := range []string{"workloads", "podgroups", "podgroups/status"} {
							if !slices.Contains(served, want) {
								t.Errorf("%s lacks %q; serves %v", gv, want, served)
							}
						}
					}},
				{A: framework.Assertion{ID: "BAR-02", Statement: "a pod created with spec.schedulingGroup.podGroupName keeps it on read-back", Ref: bmSemRef + "A.2; §2.6"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						// The PodGroup is never created, so the pod waits in the incomplete queue and
						// never takes the lane's GPU.
						l.CreatePods(ctx, t, scenarios.Member{Name: "readback-0", Group: "readback", GPUs: 1})
						got, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, "readback-0", metav1.GetOptions{})
						if err != nil {
							t.Fatalf("read back pod: %v", err)
						}
						sg := got.Spec.SchedulingGroup
						if sg == nil || sg.PodGroupName == nil || *sg.PodGroupName != "readback" {
							t.Errorf("spec.schedulingGroup = %s on read-back, want podGroupName \"readback\" (the apiserver's GenericWorkload gate drops it silently)", bmDescribeSchedulingGroup(sg))
						}
						bmDeletePod(ctx, t, l, "readback-0")
					}},
			},
		},
		{
			Suite: "barriers", Name: "barriers: pods wait for their missing PodGroup", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "BAR-03", Statement: "members of a PodGroup that does not exist stay Pending for 10s with no PodScheduled condition and no events", Ref: bmSemRef + "A.3; §3.2; §3.6"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						ms := framework.Members("late", 3, 2)
						l.CreatePods(ctx, t, ms...)
						bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: names(ms), NoEvents: true})
						bmProveLooking(ctx, t, l, "incomplete", len(ms))
					}},
				{A: framework.Assertion{ID: "BAR-04", Statement: "creating the missing gang PodGroup (minCount 3) binds all 3 waiting members", Ref: bmSemRef + "A.3"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "late", MinCount: 3})
						l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), names(framework.Members("late", 3, 2))...)
						l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "late", metav1.ConditionTrue, "Scheduled")
					}},
			},
		},
		{
			Suite: "barriers", Name: "barriers: quorum", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "BAR-05", Statement: "2 members of a gang with minCount 3 stay Pending for 10s: no PodScheduled condition, no FailedScheduling, no PodGroup condition", Ref: bmSemRef + "A.4; §3.3; §3.6"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "quorum", MinCount: 3})
						ms := framework.Members("quorum", 3, 2)
						l.CreatePods(ctx, t, ms[:2]...)
						bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: names(ms[:2]), Group: "quorum"})
						bmProveLooking(ctx, t, l, "gated", 2)
					}},
				{A: framework.Assertion{ID: "BAR-06", Statement: "the member that completes the quorum makes all 3 bind within 15s", Ref: bmSemRef + "A.4"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						ms := framework.Members("quorum", 3, 2)
						start := time.Now()
						l.CreatePods(ctx, t, ms[2])
						l.WaitBound(ctx, t, l.Env.Scaled(15*time.Second), names(ms)...)
						t.Logf("all 3 bound %s after the third member was created", time.Since(start).Round(time.Millisecond))
					}},
				{A: framework.Assertion{ID: "BAR-07", Statement: "all members of a gang bind within 5s of each other", Ref: bmSemRef + "A.4; §3.4; §3.5"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						spread := l.WaitBound(ctx, t, l.Env.Scaled(15*time.Second), names(framework.Members("quorum", 3, 2))...)
						t.Logf("measurement bindSpreadSeconds=%.3f", spread.Seconds())
						if spread > bmMaxBindSpread {
							t.Errorf("the gang's members bound %s apart, want at most %s", spread, bmMaxBindSpread)
						}
					}},
			},
		},
		{
			Suite: "barriers", Name: "barriers: quorum counts bound members", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "BAR-08", Statement: "a gang with minCount 2 and 2 members binds both and becomes True/Scheduled", Ref: bmSemRef + "A.5; §4"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "grow", MinCount: 2})
						ms := framework.Members("grow", 2, 2)
						l.CreatePods(ctx, t, ms...)
						l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), names(ms)...)
						l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "grow", metav1.ConditionTrue, "Scheduled")
					}},
				{A: framework.Assertion{ID: "BAR-09", Statement: "once the gang is Scheduled, an extra member that fits binds alone: bound members count toward the quorum", Ref: bmSemRef + "A.5; §3.3"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						extra := scenarios.Member{Name: "grow-2", Group: "grow", GPUs: 2, Labels: map[string]string{"group": "grow"}}
						l.CreatePods(ctx, t, extra)
						l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), extra.Name)
					}},
			},
		},
		bmGateFeature("gang", 3, "BAR-10", "BAR-11"),
		bmGateFeature("basic", 0, "BAR-12", "BAR-13"),
		bmGateJoinsFeature(),
		{
			Suite: "barriers", Name: "barriers: members of other schedulers are ignored", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "BAR-14", Statement: "a member with an unknown schedulerName does not count: a gang (minCount 3) that needs it stays Pending for 10s with no FailedScheduling", Ref: bmSemRef + "A.7; §3.2; §3.6"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "mixed", MinCount: 3})
						ms := framework.Members("mixed", 2, 1)
						foreign := scenarios.Member{Name: "mixed-foreign", Group: "mixed", GPUs: 1, SchedulerName: bmForeignScheduler}
						l.CreatePods(ctx, t, append(ms, foreign)...)
						bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: append(names(ms), foreign.Name), Group: "mixed"})
						bmProveLooking(ctx, t, l, "gated", len(ms))
					}},
				{A: framework.Assertion{ID: "BAR-15", Statement: "a third default-scheduler member completes the quorum: the 3 bind and the foreign member stays unbound", Ref: bmSemRef + "A.7; §3.2"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						third := scenarios.Member{Name: "mixed-2", Group: "mixed", GPUs: 1, Labels: map[string]string{"group": "mixed"}}
						l.CreatePods(ctx, t, third)
						l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), "mixed-0", "mixed-1", third.Name)
						p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, "mixed-foreign", metav1.GetOptions{})
						if err != nil {
							t.Fatalf("get foreign member: %v", err)
						}
						if p.Spec.NodeName != "" || bmHasPodScheduled(p) {
							t.Errorf("the member of scheduler %q was touched: nodeName %q, conditions %v", bmForeignScheduler, p.Spec.NodeName, p.Status.Conditions)
						}
					}},
			},
		},
		{
			// 6 GPUs hold exactly one gang of 3 × 2 GPUs.
			Suite: "barriers", Name: "barriers: two gangs on room for one", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 6},
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "BAR-16", Statement: "two equal-priority gangs of 3 on room for 3: within 60s one gang is fully bound and the other fully unbound", Ref: bmSemRef + "B.13; §3.6"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						o := experiment1(ctx, t, l, 3) // interleaved a-0, b-0, a-1, …: the order that splits a naive scheduler
						winner, loser = "team-a", "team-b"
						if o.Bound("team-b") > o.Bound("team-a") {
							winner, loser = loser, winner
						}
						t.Logf("%s", o)
						if o.Bound(winner) != 3 || o.Bound(loser) != 0 {
							t.Fatalf("want one team 3/3 bound and the other 0/3; got %s", o)
						}
					}},
				{A: framework.Assertion{ID: "BAR-17", Statement: "the all-or-nothing split holds while the losing gang is retried (never 2+1)", Ref: bmSemRef + "B.13"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						if winner == "" {
							t.Fatal("BAR-16 did not decide a winner")
						}
						framework.Consistently(ctx, t, l.Env.Scaled(5*time.Second), "the split "+winner+" 3/3, "+loser+" 0/3", func(ctx context.Context) (bool, string, error) {
							o, err := l.Observe(ctx)
							if err != nil {
								return false, "", err
							}
							return o.Bound(winner) == 3 && o.Bound(loser) == 0, o.String(), nil
						})
						// The losing gang was looked at and rejected, not forgotten.
						for _, m := range interleaved([]string{loser}, 3, 2) {
							l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), m.Name, "FailedScheduling")
						}
					}},
			},
		},
		{
			Suite: "barriers", Name: "a gang and an individual pod on room for one of them", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 4},
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "BAR-18", Statement: "a gang of 2 × 2 GPUs and a 4-GPU pod created together on 4 GPUs: one of them is placed whole and the other not at all, and it stays so for 5s (never one gang member beside nothing)", Ref: bmSemRef + "B.13; §3.4 (a group is one queue entity, a pod another)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "gang", MinCount: 2})
						all := append(framework.Members("gang", 2, 2), scenarios.Member{Name: "solo", GPUs: 4})
						l.CreatePods(ctx, t, all...)
						o := l.WaitDecided(ctx, t, l.Env.Scaled(30*time.Second), names(all)...)
						t.Logf("%s", o)
						split := func(o framework.Outcome) string {
							gang, solo := o.Bound("gang"), o.Pods["solo"] == framework.Bound
							switch {
							case gang == 2 && !solo, gang == 0 && solo:
								return ""
							}
							return fmt.Sprintf("gang %d of 2 bound, solo bound %v", gang, solo)
						}
						if bad := split(o); bad != "" {
							t.Fatalf("want the gang whole or the pod, not both and not a part: %s", bad)
						}
						framework.Consistently(ctx, t, l.Env.Scaled(5*time.Second), "the same winner", func(ctx context.Context) (bool, string, error) {
							now, err := l.Observe(ctx)
							if err != nil {
								return false, "", err
							}
							return split(now) == "" && now.Bound("gang") == o.Bound("gang"), now.String(), nil
						})
					}},
			},
		},
	}, append(append(barrierMemberFeatures(), barrierBindingFeatures()...), barrierHintFeatures()...)...))
}

// bmGateFeature checks that one member with spec.schedulingGates blocks its whole group (gang when
// minCount > 0, else basic) and that removing the gate releases all of it.
func bmGateFeature(kind string, minCount int32, holdID, releaseID string) framework.Feature {
	group := "gated-" + kind
	// The gated member comes first: a basic group's first ungated member would otherwise be
	// scheduled, rightly, before its gated sibling exists.
	ms := framework.Members(group, 3, 2)
	ms[0].Gated = true
	label := "a gang (minCount 3)"
	if minCount == 0 {
		label = "a basic group"
	}
	return framework.Feature{
		Suite: "barriers", Name: "barriers: a gated member blocks " + label, Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 8},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: holdID, Statement: "one member with spec.schedulingGates blocks all of " + label + " for 10s; the others have no PodScheduled condition", Ref: bmSemRef + "A.6; §3.2"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: group, MinCount: minCount})
					l.CreatePods(ctx, t, ms...)
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: names(ms[1:]), Unbound: []string{ms[0].Name}, Group: group})
					bmProveLooking(ctx, t, l, "gated", len(ms))
				}},
			{A: framework.Assertion{ID: releaseID, Statement: "removing the scheduling gate binds every member of " + label, Ref: bmSemRef + "A.6"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					patch := []byte(`[{"op":"replace","path":"/spec/schedulingGates","value":[]}]`)
					if _, err := l.Client.CoreV1().Pods(l.Name).Patch(ctx, ms[0].Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
						t.Fatalf("remove the scheduling gate of %s: %v", ms[0].Name, err)
					}
					l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), names(ms)...)
					l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), group, metav1.ConditionTrue, "Scheduled")
				}},
		},
	}
}

// bmGateJoinsFeature: a gated member joins a gang the scheduler has already tried and found short
// of room. The entity must become gated as a whole (gang-semantics §3.2: PreEnqueue runs per pod and
// one gated pod gates the entity; upstream's queueing case "an active group becomes gated when a
// gated member is added"), so room appearing afterwards must not place the others.
func bmGateJoinsFeature() framework.Feature {
	const group = "busy"
	ms := framework.Members(group, 3, 2)
	late := scenarios.Member{Name: group + "-3", Group: group, GPUs: 2, Labels: map[string]string{"group": group}, Gated: true}
	all := append(names(ms), late.Name)
	return framework.Feature{
		Suite: "barriers", Name: "barriers: a gated member joins a gang already being scheduled", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 8},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "BAR-19", Statement: "a gang (minCount 3) found short of room is joined by a member with spec.schedulingGates; once room appears none of the 4 binds for 10s and all wait as gated", Ref: bmSemRef + "A.6; §3.2; upstream queueing_test \"active group becomes gated\""},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					wall := scenarios.Member{Name: "wall", GPUs: 8}
					l.CreatePods(ctx, t, wall)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), wall.Name)
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: group, MinCount: 3})
					l.CreatePods(ctx, t, ms...)
					l.WaitCondition(ctx, t, l.Env.Scaled(45*time.Second), group, metav1.ConditionFalse, "Unschedulable")
					// One pod informer carries both changes, so the scheduler sees the gated member
					// join before it sees the room.
					l.CreatePods(ctx, t, late)
					bmRemovePod(ctx, t, l, wall.Name)
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Unbound: all})
					bmProveLooking(ctx, t, l, "gated", len(all))
				}},
			{A: framework.Assertion{ID: "BAR-20", Statement: "removing that member's scheduling gate binds all 4 and the PodGroup becomes True/Scheduled", Ref: bmSemRef + "A.6"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					patch := []byte(`[{"op":"replace","path":"/spec/schedulingGates","value":[]}]`)
					if _, err := l.Client.CoreV1().Pods(l.Name).Patch(ctx, late.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
						t.Fatalf("remove the scheduling gate of %s: %v", late.Name, err)
					}
					l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), all...)
					l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), group, metav1.ConditionTrue, "Scheduled")
				}},
		},
	}
}

// bmReadyLanes makes the first step of every feature wait until the lane's nodes carry no taint
// but the lane's own. NewLane waits for Ready=True, but the apiserver's TaintNodesByCondition
// admission gives every new node node.kubernetes.io/not-ready, which the node lifecycle controller
// removes only a moment later; a gang tried in that moment is rejected for a reason that has
// nothing to do with gangs.
func bmReadyLanes(fs []framework.Feature) []framework.Feature {
	for i := range fs {
		if len(fs[i].Steps) == 0 {
			continue
		}
		steps := slices.Clone(fs[i].Steps)
		first := steps[0].Fn
		steps[0].Fn = func(ctx context.Context, t *testing.T, l *framework.Lane) {
			t.Helper()
			bmWaitUntainted(ctx, t, l)
			first(ctx, t, l)
		}
		fs[i].Steps = steps
	}
	return fs
}

func bmWaitUntainted(ctx context.Context, t *testing.T, l *framework.Lane) {
	t.Helper()
	framework.Eventually(ctx, t, l.Env.Scaled(60*time.Second), "lane nodes without taints other than "+framework.LaneLabel, func(ctx context.Context) (bool, string, error) {
		list, err := l.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: framework.LaneLabel + "=" + l.Name})
		if err != nil {
			return false, "", err
		}
		var extra []string
		for _, n := range list.Items {
			for _, taint := range n.Spec.Taints {
				if taint.Key != framework.LaneLabel {
					extra = append(extra, n.Name+":"+taint.Key)
				}
			}
		}
		return len(list.Items) == len(l.Nodes) && len(extra) == 0, fmt.Sprintf("%d/%d nodes, extra taints %v", len(list.Items), len(l.Nodes), extra), nil
	})
}

// bmHold is what must stay true during a negative window.
type bmHold struct {
	// Untouched pods stay unbound with no PodScheduled condition and no FailedScheduling event.
	Untouched []string
	// Unbound pods only stay unbound (they may carry PodScheduled=False/SchedulingGated).
	Unbound []string
	// NoEvents makes any event about an Untouched pod a failure, not only FailedScheduling.
	NoEvents bool
	// Group, when set, is a PodGroup that must keep an empty status.conditions.
	Group string
}

// bmHoldFor checks h for the whole window. Pods are read on every tick; events and the PodGroup,
// which only accumulate, once a second and once more at the end, to keep the apiserver load low.
func bmHoldFor(ctx context.Context, t *testing.T, l *framework.Lane, window time.Duration, h bmHold) {
	t.Helper()
	var lastSlow time.Time
	check := func(ctx context.Context, slow bool) (bool, string, error) {
		pods, err := l.Pods(ctx)
		if err != nil {
			return false, "", err
		}
		byName := map[string]*corev1.Pod{}
		for i := range pods {
			byName[pods[i].Name] = &pods[i]
		}
		for _, n := range append(slices.Clone(h.Untouched), h.Unbound...) {
			p := byName[n]
			if p == nil {
				return false, "pod " + n + " is gone", nil
			}
			if p.Spec.NodeName != "" {
				return false, fmt.Sprintf("pod %s was bound to %s", n, p.Spec.NodeName), nil
			}
		}
		for _, n := range h.Untouched {
			for _, c := range byName[n].Status.Conditions {
				if c.Type == corev1.PodScheduled {
					return false, fmt.Sprintf("pod %s has condition PodScheduled=%s/%s %q", n, c.Status, c.Reason, c.Message), nil
				}
			}
		}
		if !slow {
			return true, "", nil
		}
		evs, err := l.Events(ctx, "")
		if err != nil {
			return false, "", err
		}
		for _, e := range evs {
			if !slices.Contains(h.Untouched, e.InvolvedObject.Name) {
				continue
			}
			if h.NoEvents || e.Reason == "FailedScheduling" {
				return false, fmt.Sprintf("pod %s has a %s event: %q", e.InvolvedObject.Name, e.Reason, e.Message), nil
			}
		}
		if h.Group != "" {
			pg, err := l.PodGroup(ctx, h.Group)
			if err != nil {
				return false, "", err
			}
			if len(pg.Status.Conditions) > 0 {
				return false, fmt.Sprintf("PodGroup %s has conditions: %s", h.Group, framework.DescribeCondition(&pg.Status.Conditions[0])), nil
			}
		}
		return true, "", nil
	}
	what := fmt.Sprintf("pods %v pending and untouched", h.Untouched)
	if len(h.Unbound) > 0 {
		what += fmt.Sprintf(", %v unbound", h.Unbound)
	}
	framework.Consistently(ctx, t, window, what, func(ctx context.Context) (bool, string, error) {
		slow := time.Since(lastSlow) >= time.Second
		if slow {
			lastSlow = time.Now()
		}
		return check(ctx, slow)
	})
	// A final full check: events and conditions written late in the window count too.
	framework.Eventually(ctx, t, l.Env.Scaled(10*time.Second), what+" (final check)", func(ctx context.Context) (bool, string, error) {
		ok, state, err := check(ctx, true)
		if err == nil && !ok {
			t.Fatalf("expected %s at the end of the %s window: %s", what, window, state)
		}
		return ok, state, err
	})
}

// bmProveLooking is the second half of every negative check: the scheduler under test must have
// the waiting pods in the expected queue (scheduler_pending_pods{queue} >= want, when its metrics
// are reachable) and must still bind a canary pod on the lane.
func bmProveLooking(ctx context.Context, t *testing.T, l *framework.Lane, queue string, want int) {
	t.Helper()
	bmPendingAtLeast(ctx, t, l, queue, want)
	l.Canary(ctx, t)
}

// bmPendingAtLeast checks scheduler_pending_pods{queue} >= want. The gauge is cluster-wide, so
// parallel lanes can only raise it; a scheduler that lost our pods cannot reach the count through
// them alone unless other lanes wait too, which is why the canary is checked as well. A cluster
// that gives no endpoint (an existing one) has the metric half skipped, logged, and the canary half
// still runs; an endpoint that does not answer fails the check, so a scheduler whose metrics went
// away cannot pass it on the canary alone.
func bmPendingAtLeast(ctx context.Context, t *testing.T, l *framework.Lane, queue string, want int) {
	t.Helper()
	snap, err := l.Env.SchedulerMetrics(ctx)
	if errors.Is(err, framework.ErrNoSchedulerMetrics) {
		// Reported, not passed: without the queue metric nothing shows the scheduler saw the pods.
		t.Skipf("not judged: the pods stayed as expected, but %v, so scheduler_pending_pods{queue=%q} cannot show that the scheduler saw them", err, queue)
	}
	if err != nil {
		t.Errorf("scheduler_pending_pods{queue=%q}: %v", queue, err)
		return
	}
	got, ok := snap.Sum("scheduler_pending_pods", map[string]string{"queue": queue})
	if !ok {
		t.Errorf("the scheduler does not export scheduler_pending_pods")
		return
	}
	t.Logf("scheduler_pending_pods{queue=%q} = %v (this lane: %d)", queue, got, want)
	if got < float64(want) {
		t.Errorf("scheduler_pending_pods{queue=%q} = %v while %d of this lane's pods wait there, want >= %d", queue, got, want, want)
	}
}

// bmDeletePod deletes a pod of the lane at once.
func bmDeletePod(ctx context.Context, t *testing.T, l *framework.Lane, name string) {
	t.Helper()
	if err := l.Client.CoreV1().Pods(l.Name).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
}

// bmRemovePod deletes a pod at once and waits until it is gone, so that the room it held is free
// when the caller goes on.
func bmRemovePod(ctx context.Context, t *testing.T, l *framework.Lane, name string) {
	t.Helper()
	bmDeletePod(ctx, t, l, name)
	framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), "pod "+name+" gone", func(ctx context.Context) (bool, string, error) {
		_, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "still present", err
	})
}

func bmHasPodScheduled(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return true
		}
	}
	return false
}

func bmDescribeSchedulingGroup(sg *corev1.PodSchedulingGroup) string {
	if sg == nil {
		return "nil"
	}
	if sg.PodGroupName == nil {
		return "{podGroupName: nil}"
	}
	return fmt.Sprintf("{podGroupName: %q}", *sg.PodGroupName)
}

// bmFailedScheduling returns the FailedScheduling messages of the lane, per pod.
func bmFailedScheduling(ctx context.Context, l *framework.Lane) (map[string][]string, error) {
	evs, err := l.Events(ctx, "")
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, e := range evs {
		if e.Reason == "FailedScheduling" && e.InvolvedObject.Kind == "Pod" {
			out[e.InvolvedObject.Name] = append(out[e.InvolvedObject.Name], e.Message)
		}
	}
	return out, nil
}

func bmDescribeMessages(m map[string][]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %q; ", k, m[k])
	}
	if b.Len() == 0 {
		return "no FailedScheduling events"
	}
	return b.String()
}
