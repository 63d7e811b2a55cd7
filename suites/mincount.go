package suites

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// The mincount suite: what gang.minCount means once a group is complete. It is a threshold, not a
// size (everything that fits binds once minCount can be met); below it nothing binds and the
// PodGroup says why; it is mutable; basic groups have none; and a group whose members disagree
// with it (priority, schedulerName) is rejected as a whole. Capacity is controlled with standalone
// "blocker" pods on the lane, so a test can free room by deleting them.

// Messages of the v1.37 scheduler (gang-semantics §3.4), matched as substrings.
const (
	mcMsgMinCount3      = "minCount (3) cannot be satisfied"
	mcMsgNoVictims      = "pod group preemption: No preemption victims found for incoming preemptor"
	mcMsgGroupRejected  = "pod group is unschedulable, "
	mcMsgNodesAvailable = "nodes are available"
	mcMsgPriorityFmt    = "all pods in a single pod group should have the same priority as the pod group's priority, got %d and %d"
	mcMsgSchedulerName  = "should have the same .spec.schedulerName set"
	// mcMsgPreemptionPolicy is the part both of validatePodGroup's preemption-policy messages share.
	mcMsgPreemptionPolicy = "all pods in a single pod group should have the same preemption policy"
	mcOtherScheduler      = "other-scheduler"
	mcFastRejectBound     = 30 * time.Second
	mcPriorityClassVal    = 1000
)

func minCountFeatures() []framework.Feature {
	one := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	var rejected *metav1.Condition
	return bmReadyLanes(append([]framework.Feature{
		{
			// 10 GPUs and a 2-GPU blocker: room for exactly 4 members of 2 GPUs.
			//
			// Every member that cannot fit arrives after the PodGroup is True. Had it come with the
			// others, it would be left over from the cycle that binds them, requeued straight to
			// activeQ and retried at once; the stock v1.37.2 scheduler then judges "already True?"
			// on its informer's copy of the PodGroup, which has not yet seen its own True, and
			// overwrites True with False/Unschedulable for good (reproduced: 4 members at once on
			// room for 3). That regression is the status suite's to report (§11.D.23); here it
			// would only hide what minCount does.
			Suite: "mincount", Name: "mincount: minCount is a threshold", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 10},
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "MIN-01", Statement: "minCount 3 with 4 members and room for 4: all 4 bind, not just minCount, and the PodGroup is True/Scheduled", Ref: bmSemRef + "B.8; §3.4; §3.6"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						mcBlocker(ctx, t, l, "blocker", 2)
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "thr", MinCount: 3})
						ms := framework.Members("thr", 4, 2)
						l.CreatePods(ctx, t, ms...)
						l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), names(ms)...)
						l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "thr", metav1.ConditionTrue, "Scheduled")
					}},
				{A: framework.Assertion{ID: "MIN-02", Statement: "a further member with no room left gets FailedScheduling \"0/N nodes are available\", exactly 4 stay bound and the PodGroup stays True/Scheduled", Ref: bmSemRef + "B.8; §3.6; §4"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						extra := scenarios.Member{Name: "thr-4", Group: "thr", GPUs: 2, Labels: map[string]string{"group": "thr"}}
						l.CreatePods(ctx, t, extra)
						o := l.WaitDecided(ctx, t, l.Env.Scaled(30*time.Second), extra.Name)
						if o.Bound("thr") != 4 || o.Count("thr", framework.Unschedulable) != 1 {
							t.Fatalf("want 4 bound and 1 unschedulable; got %s", o)
						}
						l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), extra.Name, "FailedScheduling", "0/", mcMsgNodesAvailable)
						mcStillTrue(ctx, t, l, "thr")
					}},
				{A: framework.Assertion{ID: "MIN-03", Statement: "freeing capacity binds that member alone, and the PodGroup stays True/Scheduled", Ref: bmSemRef + "B.8; §3.3"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						bmDeletePod(ctx, t, l, "blocker")
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "thr-4")
						mcStillTrue(ctx, t, l, "thr")
					}},
			},
		},
		{
			// 8 GPUs, a 4-GPU blocker: room for 2 of the 3 members of 2 GPUs. The PodGroup has
			// priority 0 and nothing in the cluster has less, so preemption finds no victims.
			Suite: "mincount", Name: "mincount: nothing binds below minCount", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "MIN-04", Statement: "with room for 2 of minCount 3 the PodGroup becomes False/Unschedulable within 30s of the last member's creation", Ref: bmSemRef + "B.9; §3.4; §4"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						mcBlocker(ctx, t, l, "blocker", 4)
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "short", MinCount: 3})
						l.CreatePods(ctx, t, framework.Members("short", 3, 2)...)
						created := time.Now()
						rejected = l.WaitCondition(ctx, t, l.Env.Scaled(mcFastRejectBound), "short", metav1.ConditionFalse, "Unschedulable")
						t.Logf("measurement rejectSeconds=%.3f", time.Since(created).Seconds())
					}},
				{A: framework.Assertion{ID: "MIN-05", Statement: "no member binds, and every member gets FailedScheduling and PodScheduled=False/Unschedulable", Ref: bmSemRef + "B.9; §3.6"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						ms := framework.Members("short", 3, 2)
						o := l.WaitDecided(ctx, t, l.Env.Scaled(30*time.Second), names(ms)...)
						if o.Bound("short") != 0 {
							t.Fatalf("want 0 bound; got %s", o)
						}
						l.EventuallySettled(ctx, t, l.Env.Scaled(30*time.Second), "FailedScheduling and PodScheduled=False/Unschedulable on every member", func(ctx context.Context) (bool, string, error) {
							fs, err := bmFailedScheduling(ctx, l)
							if err != nil {
								return false, "", err
							}
							for _, m := range ms {
								if len(fs[m.Name]) == 0 {
									return false, bmDescribeMessages(fs), nil
								}
							}
							return true, "", nil
						})
						for _, m := range ms {
							p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, m.Name, metav1.GetOptions{})
							if err != nil {
								t.Fatal(err)
							}
							if r := framework.PodScheduledReason(p); r != corev1.PodReasonUnschedulable {
								t.Errorf("%s: PodScheduled=False reason %q, want %q", m.Name, r, corev1.PodReasonUnschedulable)
							}
						}
						// All or nothing holds across the retries that follow.
						framework.Consistently(ctx, t, l.Env.Scaled(5*time.Second), "no member of short bound", func(ctx context.Context) (bool, string, error) {
							o, err := l.Observe(ctx)
							if err != nil {
								return false, "", err
							}
							return o.Bound("short") == 0, o.String(), nil
						})
					}},
				{A: framework.Assertion{ID: "MIN-06", Statement: "the PodGroup message says \"minCount (3) cannot be satisfied\" and \"pod group preemption: No preemption victims found for incoming preemptor\"", Ref: bmSemRef + "B.9; §3.4"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						l.EventuallySettled(ctx, t, l.Env.Scaled(30*time.Second), "the PodGroup message to name minCount and the preemption result", func(ctx context.Context) (bool, string, error) {
							pg, err := l.PodGroup(ctx, "short")
							if err != nil {
								return false, "", err
							}
							c := framework.GroupCondition(pg)
							ok := c != nil && c.Status == metav1.ConditionFalse && framework.ContainsAll(c.Message, []string{mcMsgMinCount3, mcMsgNoVictims})
							if ok {
								rejected = c
							}
							return ok, framework.DescribeCondition(c), nil
						})
					}},
				{A: framework.Assertion{ID: "MIN-07", Statement: "the 2 members that fit in simulation get FailedScheduling \"pod group is unschedulable, …\", the third \"0/N nodes are available\"", Ref: bmSemRef + "B.9; §3.4; §7"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						l.EventuallySettled(ctx, t, l.Env.Scaled(30*time.Second), "2 members with the group message and 1 with a fit error", func(ctx context.Context) (bool, string, error) {
							fs, err := bmFailedScheduling(ctx, l)
							if err != nil {
								return false, "", err
							}
							var group, fit int
							for _, m := range framework.Members("short", 3, 2) {
								g, f := false, false
								for _, msg := range fs[m.Name] {
									g = g || (strings.HasPrefix(msg, mcMsgGroupRejected) && strings.Contains(msg, mcMsgMinCount3))
									f = f || (strings.HasPrefix(msg, "0/") && strings.Contains(msg, mcMsgNodesAvailable))
								}
								if g {
									group++
								}
								if f {
									fit++
								}
							}
							return group >= 2 && fit >= 1, fmt.Sprintf("%d pods with the group message, %d with a fit error: %s", group, fit, bmDescribeMessages(fs)), nil
						})
					}},
				{A: framework.Assertion{ID: "MIN-08", Statement: "removing the blocker binds all 3 within 5s of each other and the PodGroup turns from False to True/Scheduled", Ref: bmSemRef + "B.10; §4"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						if rejected == nil {
							t.Fatal("the PodGroup was never seen False/Unschedulable (MIN-04)")
						}
						bmDeletePod(ctx, t, l, "blocker")
						spread := l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), names(framework.Members("short", 3, 2))...)
						t.Logf("measurement bindSpreadSeconds=%.3f", spread.Seconds())
						if spread > bmMaxBindSpread {
							t.Errorf("the members bound %s apart, want at most %s", spread, bmMaxBindSpread)
						}
						c := l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "short", metav1.ConditionTrue, "Scheduled")
						if c.LastTransitionTime.Before(&rejected.LastTransitionTime) {
							t.Errorf("True condition (at %s) is older than the False one (at %s)", c.LastTransitionTime, rejected.LastTransitionTime)
						}
					}},
			},
		},
		{
			Suite: "mincount", Name: "mincount: lowering minCount releases a waiting gang", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "MIN-09", Statement: "lowering gang.minCount from 5 to 4 (PATCH) while 4 members wait binds all 4", Ref: bmSemRef + "B.11; §2.4; §3.3"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "lower", MinCount: 5})
						ms := framework.Members("lower", 4, 2)
						l.CreatePods(ctx, t, ms...)
						// First the members must be seen waiting: binding before the PATCH proves nothing.
						bmHoldFor(ctx, t, l, l.Env.Scaled(5*time.Second), bmHold{Untouched: names(ms), Group: "lower"})
						mcPatchMinCount(ctx, t, l, "lower", 4)
						l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), names(ms)...)
						l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "lower", metav1.ConditionTrue, "Scheduled")
					}},
			},
		},
		{
			Suite: "mincount", Name: "mincount: raising minCount keeps a gang waiting", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "MIN-10", Statement: "raising gang.minCount from 5 to 6 while 4 members wait keeps them Pending for 10s with no FailedScheduling", Ref: bmSemRef + "B.11; §3.3; §3.6"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "raise", MinCount: 5})
						ms := framework.Members("raise", 4, 2)
						l.CreatePods(ctx, t, ms...)
						mcPatchMinCount(ctx, t, l, "raise", 6)
						bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: names(ms), Group: "raise"})
						bmProveLooking(ctx, t, l, "gated", len(ms))
					}},
			},
		},
		{
			Suite: "mincount", Name: "mincount: basic groups have no quorum", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "MIN-11", Statement: "members of a basic PodGroup bind one by one as they arrive, and the PodGroup becomes True/Scheduled with the first", Ref: bmSemRef + "B.12; §3.6; §4"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "solo"})
						for i, m := range framework.Members("solo", 2, 2) {
							l.CreatePods(ctx, t, m)
							l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), m.Name)
							if i == 0 {
								l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "solo", metav1.ConditionTrue, "Scheduled")
							}
						}
					}},
				{A: framework.Assertion{ID: "MIN-12", Statement: "4 more members of that basic PodGroup on room for 2: 2 bind, 2 get their own fit error \"0/N nodes are available\", and it stays True/Scheduled", Ref: bmSemRef + "B.12; §3.6"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						// One at a time, each after the previous was decided: a member left over
						// from a successful cycle trips the stock scheduler's stale-True bug (see
						// MIN-01's feature).
						for _, m := range framework.Members("solo", 6, 2)[2:] {
							l.CreatePods(ctx, t, m)
							l.WaitDecided(ctx, t, l.Env.Scaled(30*time.Second), m.Name)
						}
						o, err := l.Observe(ctx)
						if err != nil {
							t.Fatal(err)
						}
						t.Logf("%s", o)
						if o.Bound("solo") != 4 || o.Count("solo", framework.Unschedulable) != 2 {
							t.Fatalf("want 4 bound (2 earlier, 2 now) and 2 unschedulable; got %s", o)
						}
						for name, s := range o.Pods {
							if s == framework.Unschedulable {
								l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), name, "FailedScheduling", "0/", mcMsgNodesAvailable)
							}
						}
						mcStillTrue(ctx, t, l, "solo")
					}},
			},
		},
		{
			Suite: "mincount", Name: "mincount: member priority must match the PodGroup's", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "MIN-13", Statement: "PodGroup of priority 1000 with members of priority 0: every member gets FailedScheduling \"…same priority as the pod group's priority, got 0 and 1000\" and PodScheduled=False/SchedulerError; none binds", Ref: bmSemRef + "B.14; §3.4"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						pc := l.PriorityClass(ctx, t, fmt.Sprintf("p%d", mcPriorityClassVal), mcPriorityClassVal, false)
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "prio", MinCount: 3, PriorityClassName: pc})
						ms := framework.Members("prio", 3, 2)
						l.CreatePods(ctx, t, ms...)
						want := fmt.Sprintf(mcMsgPriorityFmt, 0, mcPriorityClassVal)
						for _, m := range ms {
							l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), m.Name, "FailedScheduling", want)
						}
						mcWaitPodReasons(ctx, t, l, names(ms), corev1.PodReasonSchedulerError)
					}},
				{A: framework.Assertion{ID: "MIN-14", Statement: "that PodGroup is False/SchedulerError with the priority message", Ref: bmSemRef + "B.14; §4"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						c := l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "prio", metav1.ConditionFalse, corev1.PodReasonSchedulerError)
						if want := fmt.Sprintf(mcMsgPriorityFmt, 0, mcPriorityClassVal); !strings.Contains(c.Message, want) {
							t.Errorf("condition message %q lacks %q", c.Message, want)
						}
					}},
			},
		},
		{
			Suite: "mincount", Name: "mincount: a PodGroup without priority and members with one", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "MIN-19", Statement: "PodGroup without a priority class (0) with members of priority 1000: every member gets FailedScheduling \"…same priority as the pod group's priority, got 1000 and 0\" and PodScheduled=False/SchedulerError, none binds, and the PodGroup is False/SchedulerError", Ref: bmSemRef + "B.14; §3.4; §4"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						pc := l.PriorityClass(ctx, t, fmt.Sprintf("p%d", mcPriorityClassVal), mcPriorityClassVal, false)
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "prio", MinCount: 3})
						ms := framework.Members("prio", 3, 2)
						for i := range ms {
							ms[i].PriorityClassName = pc
						}
						l.CreatePods(ctx, t, ms...)
						mcWaitGroupError(ctx, t, l, "prio", names(ms), fmt.Sprintf(mcMsgPriorityFmt, mcPriorityClassVal, 0))
					}},
			},
		},
		{
			// Two PriorityClasses of the same value that differ only in preemptionPolicy: the
			// priority check passes, so only the preemption-policy check can reject the group
			// (validatePodGroup, schedule_one_podgroup.go:237-251: without the alpha gate
			// PodGroupPreemptionPolicy the first member's policy is the group's; with it, the
			// group's own; the message starts the same either way).
			Suite: "mincount", Name: "mincount: members must share a preemption policy", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "MIN-30", Statement: "PodGroup of priority 1000 whose 2 members use two priority-1000 classes, one PreemptLowerPriority and one Never: every member gets FailedScheduling \"…should have the same preemption policy…\" and PodScheduled=False/SchedulerError, none binds, and the PodGroup is False/SchedulerError", Ref: bmSemRef + "B.14; §3.4; schedule_one_podgroup.go:237-251"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						preempt := l.PriorityClass(ctx, t, fmt.Sprintf("p%d", mcPriorityClassVal), mcPriorityClassVal, false)
						never := l.PriorityClass(ctx, t, fmt.Sprintf("p%d-never", mcPriorityClassVal), mcPriorityClassVal, true)
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "policy", MinCount: 2, PriorityClassName: preempt})
						ms := framework.Members("policy", 2, 2)
						ms[0].PriorityClassName, ms[1].PriorityClassName = preempt, never
						l.CreatePods(ctx, t, ms...)
						mcWaitGroupError(ctx, t, l, "policy", names(ms), mcMsgPreemptionPolicy)
					}},
			},
		},
		{
			Suite: "mincount", Name: "mincount: members must share a schedulerName", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "MIN-15", Statement: "a pre-bound member of \"other-scheduler\" makes the default-scheduler members fail with \"…should have the same .spec.schedulerName set\" (SchedulerError); none binds", Ref: bmSemRef + "B.15; §3.4; §3.6"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "split", MinCount: 3})
						l.CreatePods(ctx, t, scenarios.Member{Name: "split-pre", Group: "split", GPUs: 2, SchedulerName: mcOtherScheduler, NodeName: l.Nodes[0]})
						ms := framework.Members("split", 2, 2)
						l.CreatePods(ctx, t, ms...)
						for _, m := range ms {
							l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), m.Name, "FailedScheduling", mcMsgSchedulerName)
						}
						mcWaitPodReasons(ctx, t, l, names(ms), corev1.PodReasonSchedulerError)
					}},
				{A: framework.Assertion{ID: "MIN-16", Statement: "that PodGroup is False/SchedulerError with the schedulerName message", Ref: bmSemRef + "B.15; §3.4; §4"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						c := l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "split", metav1.ConditionFalse, corev1.PodReasonSchedulerError)
						if !strings.Contains(c.Message, mcMsgSchedulerName) {
							t.Errorf("condition message %q lacks %q", c.Message, mcMsgSchedulerName)
						}
					}},
			},
		},
	}, slices.Concat(minCountCycleFeatures(), minCountBackoffFeatures(), minCountHintFeatures())...))
}

// mcStillTrue checks that a PodGroup is True/Scheduled now and after a few more scheduling
// attempts of its unschedulable members (their backoff starts at 1s).
func mcStillTrue(ctx context.Context, t *testing.T, l *framework.Lane, group string) {
	t.Helper()
	l.WaitCondition(ctx, t, l.Env.Scaled(10*time.Second), group, metav1.ConditionTrue, "Scheduled")
	framework.Consistently(ctx, t, l.Env.Scaled(3*time.Second), "PodGroup "+group+" True/Scheduled", func(ctx context.Context) (bool, string, error) {
		pg, err := l.PodGroup(ctx, group)
		if err != nil {
			return false, "", err
		}
		c := framework.GroupCondition(pg)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "Scheduled", framework.DescribeCondition(c), nil
	})
}

// mcBlocker creates a standalone pod holding gpus on the lane and waits until it is bound.
func mcBlocker(ctx context.Context, t *testing.T, l *framework.Lane, name string, gpus int64) {
	t.Helper()
	l.CreatePods(ctx, t, scenarios.Member{Name: name, GPUs: gpus})
	l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), name)
}

// mcPatchMinCount changes a gang's minCount with a merge patch (mutable since v1.37) and checks
// the stored value.
func mcPatchMinCount(ctx context.Context, t *testing.T, l *framework.Lane, group string, minCount int32) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"schedulingPolicy":{"gang":{"minCount":%d}}}}`, minCount)
	pg, err := l.Gang.PodGroups(l.Name).Patch(ctx, group, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch PodGroup %s minCount to %d: %v", group, minCount, err)
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != minCount {
		t.Fatalf("PodGroup %s after the patch: schedulingPolicy %+v, want gang.minCount %d", group, pg.Spec.SchedulingPolicy, minCount)
	}
}

// mcWaitGroupError waits for what the scheduler does with a group it refuses before any placement
// (validatePodGroup: handlePodGroupFailureBeforeScheduling): a FailedScheduling event with msg on
// every member, each member PodScheduled=False/SchedulerError, and the PodGroup False/SchedulerError
// with msg in its message.
func mcWaitGroupError(ctx context.Context, t *testing.T, l *framework.Lane, group string, pods []string, msg string) {
	t.Helper()
	for _, p := range pods {
		l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), p, "FailedScheduling", msg)
	}
	mcWaitPodReasons(ctx, t, l, pods, corev1.PodReasonSchedulerError)
	c := l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), group, metav1.ConditionFalse, corev1.PodReasonSchedulerError)
	if !strings.Contains(c.Message, msg) {
		t.Errorf("condition message %q lacks %q", c.Message, msg)
	}
}

// mcWaitPodReasons waits until every named pod is PodScheduled=False with reason and checks that
// none of them is bound.
func mcWaitPodReasons(ctx context.Context, t *testing.T, l *framework.Lane, pods []string, reason string) {
	t.Helper()
	l.EventuallySettled(ctx, t, l.Env.Scaled(30*time.Second), fmt.Sprintf("pods %v PodScheduled=False/%s", pods, reason), func(ctx context.Context) (bool, string, error) {
		all, err := l.Pods(ctx)
		if err != nil {
			return false, "", err
		}
		var state []string
		ok := true
		for _, n := range pods {
			for i := range all {
				p := &all[i]
				if p.Name != n {
					continue
				}
				if p.Spec.NodeName != "" {
					t.Fatalf("pod %s was bound to %s", n, p.Spec.NodeName)
				}
				r := framework.PodScheduledReason(p)
				ok = ok && r == reason
				state = append(state, n+"="+r)
			}
		}
		return ok && len(state) == len(pods), strings.Join(state, ", "), nil
	})
}
