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
	"k8s.io/client-go/util/retry"

	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// How soon a waiting gang is woken by the events that can complete its quorum or give it room
// (gang-semantics §3.2, §3.3, §3.7). Each feature first shows the gang waiting and the scheduler
// looking at it, then makes one change and bounds the time to the binding: far below the 5 minutes
// after which the scheduler flushes entities left in its unschedulable pool (scheduling_queue.go:65,
// checked every 30 s, :512-514), so a scheduler that misses the event fails.
//
// Two different mechanisms wake a gang in v1.37.2, and the features cover both:
//   - A gang held before its first cycle (PodGroup missing, quorum short) waits in the queue's
//     incomplete pods or, gated by GangScheduling's PreEnqueue, in the unschedulable pool, where
//     only the events of its gating plugin re-evaluate it (scheduling_queue.go:1930). A PodGroup
//     add releases incomplete members directly (eventhandlers.go:479-481 then
//     scheduling_queue.go:1563-1598); a minCount decrease goes through GangScheduling's
//     PodGroup/Update hint (gangscheduling.go:84, :137).
//   - A gang rejected for room is not parked to wait for a node or pod event: its group entity has
//     no rejector plugins of its own, so AddAttemptedPodGroupIfNeeded puts it in the (error)
//     backoff queue (scheduling_queue.go:1250-1256; backoff_queue.go:304-316), and it is retried
//     when the backoff ends, 1 s doubling up to 10 s × √(members) (backoff_queue.go:249-266). A
//     node added, uncordoned or untainted (eventhandlers.go:66, :93) finds it there, not in the
//     pool MoveAllToActiveOrBackoffQueue searches; the next retry sees the room. The bound holds
//     for both; what it rules out is a gang left for the flush.

// bhWakeBound is how long after the event a waiting gang must be bound (and its PodGroup
// True/Scheduled). A 3-member gang rejected for room retries at most 10 s × √3 ≈ 17 s apart, and an
// added node first waits out its not-ready taint (at most ~5 s here, see Lane.AddNode), so a correct
// scheduler needs up to ~23 s; the 5-minute flush is ten times the bound. A pass threshold: not
// scaled by -timeout-scale.
const bhWakeBound = 30 * time.Second

// bhBlockerTaint is the NoSchedule taint that keeps a gang off one node in the taint feature.
const bhBlockerTaint = "gangbench.dev/hint-blocker"

func barrierHintFeatures() []framework.Feature {
	one := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	roomRef := bmSemRef + "B.10; §3.4 (PlacementFeasible rejects the gang); §3.7 and scheduling_queue.go:1166-1268 (a rejected gang is requeued to backoff, not parked for hints); backoff_queue.go:249-266 (10 s × √members at most); scheduling_queue.go:65, :1306-1329 (the 5-minute flush it must not wait for)"

	// A node with room is added to the lane.
	var nodeAt time.Time
	nodeAdded := framework.Feature{
		Suite: "barriers", Name: "barriers: a node added wakes a gang short of room", Lane: one,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "BAR-31", Statement: "a gang (minCount 3) of 3 members × 4 GPUs on one 8-GPU lane node is rejected for room: its PodGroup becomes False/Unschedulable with \"minCount (3) cannot be satisfied\", each member gets a FailedScheduling event, and no member binds for 10s", Ref: roomRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					bhRejectedGang(ctx, t, l, "grow", 3, 4)
				}},
			{A: framework.Assertion{ID: "BAR-32", Statement: fmt.Sprintf("a second 8-GPU node added to the lane wakes it: all 3 members bind within %s of the node's creation, not at the scheduler's 5-minute flush", bhWakeBound), Ref: roomRef + "; eventhandlers.go:54-67 (Node/Add); Lane.AddNode"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					nodeAt = time.Now()
					node, err := l.AddNode(ctx)
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("node %s Ready and schedulable %s after its creation", node, time.Since(nodeAt).Round(time.Millisecond))
					bhWaitBoundWithin(ctx, t, l, nodeAt, "the node's creation", "boundAfterNodeAdded", names(framework.Members("grow", 3, 4))...)
				}},
			{A: framework.Assertion{ID: "BAR-33", Statement: fmt.Sprintf("that PodGroup turns True/Scheduled within %s of the node's creation", bhWakeBound), Ref: roomRef + "; §4"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if nodeAt.IsZero() {
						t.Fatal("no node was added (BAR-32 failed early)")
					}
					bhWaitScheduledWithin(ctx, t, l, nodeAt, "the node's creation", "scheduledAfterNodeAdded", "grow")
				}},
		},
	}

	// The room is on a cordoned node. The lane's second node stays schedulable: it holds one member
	// (not the gang) and the canary that proves the scheduler is alive.
	cordoned := bhBlockedNodeFeature("BAR-34", "BAR-35", "uncordoning a node", "cordoned (spec.unschedulable=true)", "uncordoning it (spec.unschedulable=false)",
		roomRef+"; §3.1; eventhandlers.go:69-97 (Node/Update, UpdateNodeUnschedulable)",
		func(n *corev1.Node) { n.Spec.Unschedulable = true },
		func(n *corev1.Node) { n.Spec.Unschedulable = false })

	// The room is on a node with a NoSchedule taint the members do not tolerate.
	tainted := bhBlockedNodeFeature("BAR-36", "BAR-37", "removing a NoSchedule taint", "tainted "+bhBlockerTaint+":NoSchedule (not tolerated)", "removing that taint",
		roomRef+"; eventhandlers.go:69-97 (Node/Update, UpdateNodeTaint)",
		func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: bhBlockerTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		},
		func(n *corev1.Node) {
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == bhBlockerTaint })
		})

	// A gang's members all exist before their PodGroup (MIN-17 is the basic group, without a time
	// bound; BAR-03/04 bound the wait by 30 s scaled, not a threshold).
	lateRef := bmSemRef + "A.3; §3.2 (incomplete pods; eventhandlers.go:479-481: cache, then queue AddPodGroup, then the PodGroup/Add hint; scheduling_queue.go:1563-1598 moves the incomplete members into the queue; gangscheduling.go:82 PodGroup/Add hint); §3.3 (PreEnqueue reads the PodGroup from the cache, gangscheduling.go:250-280)"
	var lateAt time.Time
	late := framework.Feature{
		Suite: "barriers", Name: "barriers: a gang's PodGroup created after all its members", Lane: one,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "BAR-38", Statement: "3 members (2 GPUs each) of a gang whose PodGroup does not exist yet stay Pending for 10s with no PodScheduled condition and no events, held as incomplete (scheduler_pending_pods{queue=\"incomplete\"} >= 3)", Ref: lateRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					ms := framework.Members("late", 3, 2)
					l.CreatePods(ctx, t, ms...)
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: names(ms), NoEvents: true})
					bmProveLooking(ctx, t, l, "incomplete", len(ms))
				}},
			{A: framework.Assertion{ID: "BAR-39", Statement: fmt.Sprintf("creating the PodGroup (gang, minCount 3) binds all 3 within %s of its creation, not at the scheduler's 5-minute flush", bhWakeBound), Ref: lateRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					lateAt = time.Now()
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "late", MinCount: 3})
					bhWaitBoundWithin(ctx, t, l, lateAt, "the PodGroup's creation", "boundAfterPodGroupCreated", names(framework.Members("late", 3, 2))...)
				}},
			{A: framework.Assertion{ID: "BAR-40", Statement: fmt.Sprintf("that PodGroup becomes True/Scheduled within %s of its creation", bhWakeBound), Ref: lateRef + "; §4"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if lateAt.IsZero() {
						t.Fatal("the PodGroup was not created (BAR-39 failed early)")
					}
					bhWaitScheduledWithin(ctx, t, l, lateAt, "the PodGroup's creation", "scheduledAfterPodGroupCreated", "late")
				}},
		},
	}

	// The same for a basic group: no quorum, but its members wait for the PodGroup all the same
	// (PreEnqueue needs the object before it knows the policy, gangscheduling.go:258-268).
	lateBasic := framework.Feature{
		Suite: "barriers", Name: "barriers: a basic group's PodGroup created after its members", Lane: one,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "BAR-41", Statement: "2 members (2 GPUs each) of a basic group whose PodGroup does not exist yet stay Pending for 10s with no PodScheduled condition and no events, held as incomplete", Ref: lateRef + "; §3.6"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					ms := framework.Members("lateb", 2, 2)
					l.CreatePods(ctx, t, ms...)
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: names(ms), NoEvents: true})
					bmProveLooking(ctx, t, l, "incomplete", len(ms))
				}},
			{A: framework.Assertion{ID: "BAR-42", Statement: fmt.Sprintf("creating the basic PodGroup binds both within %s of its creation, and it becomes True/Scheduled within %s", bhWakeBound, bhWakeBound), Ref: lateRef + "; §3.6; §4"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					at := time.Now()
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "lateb"})
					bhWaitBoundWithin(ctx, t, l, at, "the PodGroup's creation", "boundAfterBasicPodGroupCreated", names(framework.Members("lateb", 2, 2))...)
					bhWaitScheduledWithin(ctx, t, l, at, "the PodGroup's creation", "scheduledAfterBasicPodGroupCreated", "lateb")
				}},
		},
	}

	return []framework.Feature{nodeAdded, cordoned, tainted, late, lateBasic}
}

// minCountHintFeatures are the mincount suite's features of the same kind: the PodGroup/Update
// hint on a lowered minCount, bounded like the events above.
func minCountHintFeatures() []framework.Feature {
	one := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	// minCount lowered to what is present (MIN-09 checks the binding with a scaled wait, not a
	// threshold; MIN-18 bounds the case of a gang rejected for room, which backoff retries anyway).
	lowerRef := bmSemRef + "B.11; §2.4; §3.3 (PodGroup/Update hint: Queue only when gang.minCount decreased, gangscheduling.go:84, :114-143; the gated group is re-evaluated for its gating plugin's events, scheduling_queue.go:1930; eventhandlers.go:484-507)"
	var lowerAt time.Time
	lower := framework.Feature{
		Suite: "mincount", Name: "mincount: lowering minCount wakes a gang waiting at its quorum", Lane: one,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "MIN-27", Statement: "3 members (2 GPUs each) of a gang with minCount 4 wait at the quorum: Pending for 10s with no PodScheduled condition, no FailedScheduling and no PodGroup condition, held as gated", Ref: lowerRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "lower", MinCount: 4})
					ms := framework.Members("lower", 3, 2)
					l.CreatePods(ctx, t, ms...)
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: names(ms), Group: "lower"})
					bmProveLooking(ctx, t, l, "gated", len(ms))
				}},
			{A: framework.Assertion{ID: "MIN-28", Statement: fmt.Sprintf("PATCHing gang.minCount from 4 to 3 binds all 3 within %s of the PATCH, not at the scheduler's 5-minute flush", bhWakeBound), Ref: lowerRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					lowerAt = time.Now()
					mcPatchMinCount(ctx, t, l, "lower", 3)
					bhWaitBoundWithin(ctx, t, l, lowerAt, "the minCount PATCH", "boundAfterMinCountLowered", names(framework.Members("lower", 3, 2))...)
				}},
			{A: framework.Assertion{ID: "MIN-29", Statement: fmt.Sprintf("that PodGroup becomes True/Scheduled within %s of the PATCH", bhWakeBound), Ref: lowerRef + "; §4"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if lowerAt.IsZero() {
						t.Fatal("minCount was not patched (MIN-28 failed early)")
					}
					bhWaitScheduledWithin(ctx, t, l, lowerAt, "the minCount PATCH", "scheduledAfterMinCountLowered", "lower")
				}},
		},
	}
	return []framework.Feature{lower}
}

// bhBlockedNodeFeature: a gang of 2 members × 4 GPUs (minCount 2) on two 4-GPU lane nodes, the first
// made unusable by block before the gang exists, so only one member fits; unblock makes the room
// usable again. holdID checks the rejection, releaseID the wake-up.
func bhBlockedNodeFeature(holdID, releaseID, what, blocked, unblocking, ref string, block, unblock func(*corev1.Node)) framework.Feature {
	group := "blocked"
	ms := framework.Members(group, 2, 4)
	return framework.Feature{
		Suite: "barriers", Name: "barriers: " + what + " wakes a gang short of room", Lane: framework.LaneSpec{Nodes: 2, GPUsPerNode: 4},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: holdID, Statement: "a gang (minCount 2) of 2 members × 4 GPUs on two 4-GPU lane nodes, one " + blocked + ", is rejected for room: its PodGroup becomes False/Unschedulable with \"minCount (2) cannot be satisfied\", each member gets a FailedScheduling event, and no member binds for 10s", Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					// Blocked first and seen by the scheduler through the gang's rejection below:
					// the PodGroup condition is written by the cycle that found one node unusable.
					bhUpdateNode(ctx, t, l, l.Nodes[0], block)
					bhRejectedGang(ctx, t, l, group, 2, 4)
				}},
			{A: framework.Assertion{ID: releaseID, Statement: fmt.Sprintf("%s binds both members within %s of the change and the PodGroup turns True/Scheduled within %s, not at the scheduler's 5-minute flush", unblocking, bhWakeBound, bhWakeBound), Ref: ref + "; §4"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					at := time.Now()
					bhUpdateNode(ctx, t, l, l.Nodes[0], unblock)
					measure := "boundAfterUncordon"
					if strings.Contains(what, "taint") {
						measure = "boundAfterTaintRemoved"
					}
					bhWaitBoundWithin(ctx, t, l, at, "the node change", measure, names(ms)...)
					bhWaitScheduledWithin(ctx, t, l, at, "the node change", strings.Replace(measure, "bound", "scheduled", 1), group)
				}},
		},
	}
}

// bhRejectedGang creates a gang of n members × gpus (minCount n) that the lane cannot hold, and
// proves it was looked at and rejected for room, not merely left alone: the PodGroup condition
// False/Unschedulable naming the minCount (written by the group cycle, §4), a FailedScheduling
// event for each member, no member bound for the whole window, and a canary that binds.
func bhRejectedGang(ctx context.Context, t *testing.T, l *framework.Lane, group string, n int, gpus int64) {
	t.Helper()
	l.CreatePodGroup(ctx, t, scenarios.Group{Name: group, MinCount: int32(n)})
	ms := framework.Members(group, n, gpus)
	l.CreatePods(ctx, t, ms...)
	c := l.WaitCondition(ctx, t, l.Env.Scaled(45*time.Second), group, metav1.ConditionFalse, "Unschedulable")
	if want := fmt.Sprintf("minCount (%d) cannot be satisfied", n); !strings.Contains(c.Message, want) {
		t.Fatalf("PodGroup %s is %s, want a message containing %q (rejected for room)", group, framework.DescribeCondition(c), want)
	}
	// The gang is retried on backoff during the window (§3.7); none of its members may bind.
	bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Unbound: names(ms)})
	for _, m := range ms {
		l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), m.Name, "FailedScheduling")
	}
	l.Canary(ctx, t)
}

// bhUpdateNode applies change to a lane node, retrying on conflicts (the node lifecycle controller
// and kwok write nodes too).
func bhUpdateNode(ctx context.Context, t *testing.T, l *framework.Lane, name string, change func(*corev1.Node)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := l.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		_, err = l.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update node %s: %v", name, err)
	}
}

// bhWaitBoundWithin waits for the pods to bind and fails if that took longer than bhWakeBound after
// since, logging the time as measurement <measure>Seconds. The wait runs to twice the bound (scaled),
// so a slow run reports how late; a wrong build that waits for the 5-minute flush is stopped there
// with the last state seen. A miss is an Error, not a Fatal: the PodGroup condition is checked after
// it on its own.
func bhWaitBoundWithin(ctx context.Context, t *testing.T, l *framework.Lane, since time.Time, after, measure string, pods ...string) {
	t.Helper()
	err := framework.Poll(ctx, l.Env.Scaled(2*bhWakeBound), fmt.Sprintf("pods %v bound", pods), func(ctx context.Context) (bool, string, error) {
		o, err := l.Observe(ctx)
		if err != nil {
			return false, "", err
		}
		for _, n := range pods {
			if o.Pods[n] != framework.Bound {
				return false, o.String(), nil
			}
		}
		return true, "", nil
	})
	took := time.Since(since)
	if err != nil {
		t.Errorf("%v (%s after %s; want within %s: the event must wake the waiting gang)", err, took.Round(time.Millisecond), after, bhWakeBound)
		return
	}
	t.Logf("measurement %sSeconds=%.3f", measure, took.Seconds())
	if took > bhWakeBound {
		t.Errorf("pods %v bound %s after %s, want within %s (the event must wake the waiting gang)", pods, took.Round(time.Millisecond), after, bhWakeBound)
	}
}

// bhWaitScheduledWithin waits for the group's PodGroup to be True/Scheduled and fails if that took
// longer than bhWakeBound after since, logging measurement <measure>Seconds.
func bhWaitScheduledWithin(ctx context.Context, t *testing.T, l *framework.Lane, since time.Time, after, measure, group string) {
	t.Helper()
	l.WaitCondition(ctx, t, l.Env.Scaled(2*bhWakeBound), group, metav1.ConditionTrue, "Scheduled")
	took := time.Since(since)
	t.Logf("measurement %sSeconds=%.3f", measure, took.Seconds())
	if took > bhWakeBound {
		t.Errorf("PodGroup %s became True/Scheduled %s after %s, want within %s", group, took.Round(time.Millisecond), after, bhWakeBound)
	}
}
