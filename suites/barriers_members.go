package suites

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/internal/poll"
	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// Which members count toward a gang's quorum (gang-semantics §3.3: AllPodsCount counts the
// unscheduled, assumed and assigned members the scheduler knows): a member created already bound
// counts, and its arrival must wake a gang waiting at the barrier; a member that is deleted or
// finishes (Succeeded, Failed: the scheduler's pod informer leaves terminal pods out, so they look
// deleted to it) stops counting, also across a PodGroup deleted and re-created under the same name.

// bmPreboundBound is how long after a pre-bound member completes a waiting gang's quorum the
// others must be bound. Its Add wakes the gang through GangScheduling's queueing hint (§3.3); a
// scheduler that misses it only notices when it flushes long-waiting groups, every 5 minutes
// (§3.2). A pass threshold, so not scaled by -timeout-scale.
const bmPreboundBound = bhWakeBound

func barrierMemberFeatures() []framework.Feature {
	one := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	preboundRef := bmSemRef + "A.4; §3.3 (requeue hint: an assigned pod's Add with the same PodGroup, gangscheduling.go:80; AllPodsCount counts assigned members); §3.2 (5-minute flush)"
	goneRef := bmSemRef + "A.4; §3.3 AllPodsCount (terminated pods do not count: the pod informer's field selector, scheduler.go:654; cache.go:603 removes a deleted member)"

	// A gang waiting at its quorum whose last member arrives bound.
	var preboundAt time.Time
	prebound := framework.Feature{
		Suite: "barriers", Name: "barriers: a pre-bound member completes the quorum", Lane: one,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "BAR-21", Statement: fmt.Sprintf("2 members of a gang (minCount 3) wait at the quorum; a third created already bound (spec.nodeName on a lane node) wakes it: the 2 bind within %s of its creation, not at the scheduler's 5-minute flush", bmPreboundBound), Ref: preboundRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "pre", MinCount: 3})
					ms := framework.Members("pre", 2, 2)
					l.CreatePods(ctx, t, ms...)
					// Seen waiting first: a gang bound before its last member proves nothing.
					bmHoldFor(ctx, t, l, l.Env.Scaled(5*time.Second), bmHold{Untouched: names(ms), Group: "pre"})
					preboundAt = time.Now()
					l.CreatePods(ctx, t, bmPrebound("pre-bound", "pre", 2, l.Nodes[0]))
					bhWaitBoundWithin(ctx, t, l, preboundAt, "the pre-bound member's creation", "boundAfterPrebound", names(ms)...)
				}},
			{A: framework.Assertion{ID: "BAR-22", Statement: fmt.Sprintf("that PodGroup becomes True/Scheduled within %s of the pre-bound member's creation", bmPreboundBound), Ref: preboundRef + "; §4"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if preboundAt.IsZero() {
						t.Fatal("the pre-bound member was not created (BAR-21 failed early)")
					}
					l.WaitCondition(ctx, t, l.Env.Scaled(2*bmPreboundBound), "pre", metav1.ConditionTrue, "Scheduled")
					took := time.Since(preboundAt)
					t.Logf("measurement scheduledAfterPreboundSeconds=%.3f", took.Seconds())
					if took > bmPreboundBound {
						t.Errorf("PodGroup pre became True/Scheduled %s after its pre-bound member, want within %s", took.Round(time.Millisecond), bmPreboundBound)
					}
				}},
		},
	}

	// Pre-bound members count one by one: one is not the quorum, the second is.
	countOne := framework.Feature{
		Suite: "barriers", Name: "barriers: pre-bound members count toward the quorum one by one", Lane: one,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "BAR-23", Statement: "a gang (minCount 3) with 1 pending member and 1 member created already bound is short of its quorum: the pending member stays Pending for 10s with no PodScheduled condition, no FailedScheduling and no PodGroup condition", Ref: preboundRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "part", MinCount: 3})
					l.CreatePods(ctx, t, framework.Members("part", 1, 2)...)
					l.CreatePods(ctx, t, bmPrebound("part-bound-0", "part", 2, l.Nodes[0]))
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: []string{"part-0"}, Group: "part"})
					bmProveLooking(ctx, t, l, "gated", 1)
				}},
			{A: framework.Assertion{ID: "BAR-24", Statement: fmt.Sprintf("a second member created already bound completes the quorum: the pending member binds within %s of it and the PodGroup becomes True/Scheduled", bmPreboundBound), Ref: preboundRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					at := time.Now()
					l.CreatePods(ctx, t, bmPrebound("part-bound-1", "part", 2, l.Nodes[0]))
					bhWaitBoundWithin(ctx, t, l, at, "the second pre-bound member's creation", "boundAfterPrebound", "part-0")
					l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "part", metav1.ConditionTrue, "Scheduled")
				}},
		},
	}

	// Deleted members: the whole gang is deleted, one replacement comes.
	deleted := framework.Feature{
		Suite: "barriers", Name: "barriers: deleted members stop counting", Lane: one,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "BAR-25", Statement: "all 3 members of a Scheduled gang (minCount 3) are deleted; one replacement waits for the quorum again: it stays Pending for 10s with no PodScheduled condition and no FailedScheduling, not bound alone", Ref: goneRef + "; §3.2 (deletePod removes the member from its group)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					old := bmScheduledGang(ctx, t, l, "del", 3, 2)
					for _, n := range old {
						bmDeletePod(ctx, t, l, n)
					}
					bmWaitPodsGone(ctx, t, l, old...)
					l.CreatePods(ctx, t, bmMember("del-r0", "del", 2))
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: []string{"del-r0"}})
					bmProveLooking(ctx, t, l, "gated", 1)
				}},
			{A: framework.Assertion{ID: "BAR-26", Statement: "two more replacements complete the quorum again: the 3 bind within 5s of each other", Ref: goneRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					l.CreatePods(ctx, t, bmMember("del-r1", "del", 2), bmMember("del-r2", "del", 2))
					spread := l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), "del-r0", "del-r1", "del-r2")
					t.Logf("measurement bindSpreadSeconds=%.3f", spread.Seconds())
					if spread > bmMaxBindSpread {
						t.Errorf("the replacements bound %s apart, want at most %s", spread, bmMaxBindSpread)
					}
				}},
		},
	}

	// Finished members: the kubelet would report them Succeeded or Failed. Lane nodes are
	// simulated (kwok), whose stages never complete a pod and only act on Pending or deleted
	// ones, so the status written here stays (checked, not assumed).
	finished := framework.Feature{
		Suite: "barriers", Name: "barriers: finished members stop counting", Lane: one,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "BAR-27", Statement: "the 2 members of a Scheduled gang (minCount 2, 4 GPUs each on 8) finish, one Succeeded and one Failed (pod status as a kubelet writes it); one replacement stays Pending for 10s with no PodScheduled condition and no FailedScheduling, not bound alone", Ref: goneRef + "; §1.4 (terminated = Succeeded or Failed)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					old := bmScheduledGang(ctx, t, l, "fin", 2, 4)
					bmFinish(ctx, t, l, old[0], corev1.PodSucceeded)
					bmFinish(ctx, t, l, old[1], corev1.PodFailed)
					// The phases must stick (no simulated kubelet may revert them), or the window below
					// would test nothing.
					framework.Consistently(ctx, t, l.Env.Scaled(2*time.Second), fmt.Sprintf("pods %v finished", old), func(ctx context.Context) (bool, string, error) {
						return bmAllFinished(ctx, l, old...)
					})
					l.CreatePods(ctx, t, bmMember("fin-r0", "fin", 4))
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: []string{"fin-r0"}})
					if ok, state, err := bmAllFinished(ctx, l, old...); err != nil || !ok {
						t.Fatalf("the finished members changed during the window: %s %v", state, err)
					}
					bmProveLooking(ctx, t, l, "gated", 1)
				}},
			{A: framework.Assertion{ID: "BAR-28", Statement: "a second replacement completes the quorum: both bind, on the GPUs the finished members held", Ref: goneRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					l.CreatePods(ctx, t, bmMember("fin-r1", "fin", 4))
					l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), "fin-r0", "fin-r1")
				}},
		},
	}

	// A PodGroup deleted with its members and created again under the same name.
	var recreated bool
	recreate := framework.Feature{
		Suite: "barriers", Name: "barriers: a PodGroup re-created under its old name starts without members", Lane: one,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "BAR-29", Statement: "a Scheduled gang (minCount 2) and its PodGroup are deleted, and the PodGroup is re-created under the same name: its first new member stays Pending for 10s with no PodScheduled condition, no FailedScheduling and no PodGroup condition (the old members do not count)", Ref: goneRef + "; §3.2 (DeletePodGroup, AddPodGroup); §1.4, §8 (the protection finalizer goes with the last member)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					old := bmScheduledGang(ctx, t, l, "again", 2, 2)
					// As a Job's deletion does: the PodGroup first (held by its finalizer), then
					// the members, after which the controller-manager lets it go.
					if err := l.Gang.PodGroups(l.Name).Delete(ctx, "again", metav1.DeleteOptions{}); err != nil {
						t.Fatalf("delete PodGroup again: %v", err)
					}
					for _, n := range old {
						bmDeletePod(ctx, t, l, n)
					}
					bmWaitPodsGone(ctx, t, l, old...)
					staWaitGone(ctx, t, l, l.Env.Scaled(45*time.Second), "again")
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "again", MinCount: 2})
					l.CreatePods(ctx, t, bmMember("again-n0", "again", 2))
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: []string{"again-n0"}, Group: "again"})
					bmProveLooking(ctx, t, l, "gated", 1)
					recreated = true
				}},
			{A: framework.Assertion{ID: "BAR-30", Statement: "a second new member completes its quorum: both bind and the re-created PodGroup becomes True/Scheduled", Ref: goneRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !recreated {
						t.Skip("needs the re-created PodGroup BAR-29 establishes")
					}
					l.CreatePods(ctx, t, bmMember("again-n1", "again", 2))
					l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), "again-n0", "again-n1")
					l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "again", metav1.ConditionTrue, "Scheduled")
				}},
		},
	}
	return []framework.Feature{prebound, countOne, deleted, finished, recreate}
}

// bmMember is one member of group named name.
func bmMember(name, group string, gpus int64) scenarios.Member {
	return scenarios.Member{Name: name, Group: group, GPUs: gpus, Labels: map[string]string{"group": group}}
}

// bmPrebound is a member created bound to node (spec.nodeName): it bypasses the scheduler.
func bmPrebound(name, group string, gpus int64, node string) scenarios.Member {
	m := bmMember(name, group, gpus)
	m.NodeName = node
	return m
}

// bmScheduledGang creates a gang of n members with minCount n, waits until all are bound and the
// PodGroup is True/Scheduled, and returns the members' names.
func bmScheduledGang(ctx context.Context, t *testing.T, l *framework.Lane, group string, n int, gpus int64) []string {
	t.Helper()
	l.CreatePodGroup(ctx, t, scenarios.Group{Name: group, MinCount: int32(n)})
	ms := framework.Members(group, n, gpus)
	l.CreatePods(ctx, t, ms...)
	l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), names(ms)...)
	l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), group, metav1.ConditionTrue, "Scheduled")
	return names(ms)
}

// bmWaitPodsGone waits until none of the pods exists any more.
func bmWaitPodsGone(ctx context.Context, t *testing.T, l *framework.Lane, pods ...string) {
	t.Helper()
	framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), fmt.Sprintf("pods %v gone", pods), func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, n := range pods {
			_, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, n, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return false, "", err
			default:
				left = append(left, n)
			}
		}
		return len(left) == 0, fmt.Sprintf("still present: %v", left), nil
	})
}

// bmFinish writes a bound pod's status as a kubelet does when its containers have exited: the
// terminal phase and terminated container states (exit code 0 for Succeeded, 1 for Failed). It
// waits until the pod is Running first: the simulated kubelet's stage that starts a bound pod acts
// on Pending ones with a patch that would overwrite a phase written before it.
func bmFinish(ctx context.Context, t *testing.T, l *framework.Lane, name string, phase corev1.PodPhase) {
	t.Helper()
	code, reason := int32(0), "Completed"
	if phase == corev1.PodFailed {
		code, reason = 1, "Error"
	}
	framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), fmt.Sprintf("pod %s Running, then written %s", name, phase), func(ctx context.Context) (bool, string, error) {
		p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Status.Phase != corev1.PodRunning {
			return false, "phase " + string(p.Status.Phase), nil
		}
		now := metav1.Now()
		p.Status.Phase = phase
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			started := now
			if cs.State.Running != nil {
				started = cs.State.Running.StartedAt
			}
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: now}}
			cs.Ready = false
			cs.Started = new(bool)
		}
		for i := range p.Status.Conditions {
			if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				c.Status, c.Reason, c.LastTransitionTime = corev1.ConditionFalse, "PodCompleted", now
			}
		}
		_, err = l.Client.CoreV1().Pods(l.Name).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, "conflict, retrying: " + err.Error(), nil
		}
		if err != nil {
			// Not a transient read error: the apiserver refused the status.
			return false, "", poll.Stop(fmt.Errorf("set pod %s %s through the status subresource: %w", name, phase, err))
		}
		return true, "", nil
	})
}

// bmAllFinished reports whether every named pod is Succeeded or Failed.
func bmAllFinished(ctx context.Context, l *framework.Lane, pods ...string) (bool, string, error) {
	var state []string
	ok := true
	for _, n := range pods {
		p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		state = append(state, fmt.Sprintf("%s=%s", n, p.Status.Phase))
		ok = ok && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	}
	return ok, fmt.Sprint(state), nil
}
