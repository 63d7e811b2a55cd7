package suites

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// lastTransitionTime moves only when the condition's status does (gang-semantics §4). v1.37.2's
// updatePodGroupCondition (pkg/scheduler/schedule_one_podgroup.go:943-964) merges the cycle's
// condition into a copy of the stored status with apimeta.SetStatusCondition (L957), which keeps
// lastTransitionTime unless the status flips and rewrites reason, message and observedGeneration in
// place (k8s.io/apimachinery@v0.37.2 pkg/api/meta/conditions.go:31-68); an unchanged condition is
// not written at all (L957-959, and util.PatchPodGroupStatus skips an empty patch, utils.go:183-185).
//
// One gang goes through five cycles: two that end unschedulable with the same message, one that
// ends unschedulable with another message, one that turns it True, and one more successful cycle.
// Condition times have whole seconds, so each cycle after the first is started at least a second
// after the time it is compared with; otherwise a writer that stamps every write with "now" could
// write the very same second and go unnoticed.

const sttRef = "gang-semantics §4 (apimeta.SetStatusCondition: lastTransitionTime changes only when the status flips); §11.D.23; "

// sttClockPast waits until the local clock is past when. It is not a delay in place of an event: the
// next cycle must start in a later second than the condition time it is compared with, and the
// local clock is the scheduler's (same host).
func sttClockPast(ctx context.Context, t *testing.T, l *framework.Lane, when time.Time) {
	t.Helper()
	framework.Eventually(ctx, t, l.Env.Scaled(10*time.Second)+time.Until(when), "the clock past "+when.Format(time.RFC3339Nano), func(context.Context) (bool, string, error) {
		now := time.Now()
		return now.After(when), "now " + now.Format(time.RFC3339Nano), nil
	})
}

// sttEventTime is when an event happened first (eventTime of the events.k8s.io recorder, else the
// core/v1 timestamps).
func sttEventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.LastTimestamp.Time
}

// sttNewCycle creates member name of the gang (1 GPU), waits for its FailedScheduling event, which
// only a cycle that started after the member existed can emit, and checks that this cycle came at
// least a second after since (a whole-second condition time).
func sttNewCycle(ctx context.Context, t *testing.T, l *framework.Lane, name string, since metav1.Time) corev1.Event {
	t.Helper()
	sttClockPast(ctx, t, l, since.Add(1500*time.Millisecond))
	l.CreatePods(ctx, t, scenarios.Member{Name: name, Group: "gang", GPUs: 1})
	e := l.WaitEvent(ctx, t, l.Env.Scaled(45*time.Second), name, "FailedScheduling")
	if at := sttEventTime(e); at.Before(since.Add(time.Second)) {
		t.Fatalf("inconclusive: the cycle for %s failed at %s, within a second of the lastTransitionTime %s it is compared with", name, at.Format(time.RFC3339Nano), since.Format(time.RFC3339))
	}
	t.Logf("cycle for %s: FailedScheduling at %s: %q", name, sttEventTime(e).Format(time.RFC3339Nano), e.Message)
	return e
}

// sttSame is a condition for Consistently and polls: the gang's condition has status and the
// lastTransitionTime of want.
func sttSame(l *framework.Lane, status metav1.ConditionStatus, want *metav1.Condition) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		pg, err := l.PodGroup(ctx, "gang")
		if err != nil {
			return false, "", err
		}
		c := framework.GroupCondition(pg)
		ok := c != nil && c.Status == status && c.LastTransitionTime.Equal(&want.LastTransitionTime)
		return ok, fmt.Sprintf("condition %s (first %s)", framework.DescribeCondition(c), framework.DescribeCondition(want)), nil
	}
}

// sttHolds checks cond for the whole window, like framework.Consistently, but reports a failure
// with t.Errorf and returns, so that the feature's later steps still run: each of them compares
// with the first False (or True) condition and is a check of its own.
func sttHolds(ctx context.Context, t *testing.T, window time.Duration, what string, cond func(context.Context) (bool, string, error)) {
	t.Helper()
	end := time.Now().Add(window)
	lastRead := time.Now()
	var lastErr error
	for {
		ok, state, err := cond(ctx)
		now := time.Now()
		switch {
		case err == nil && !ok:
			t.Errorf("expected %s throughout %s, but: %s", what, window, state)
			return
		case err == nil:
			lastRead = now
		default:
			lastErr = err
			if now.Sub(lastRead) > window/4 {
				t.Errorf("could not check %s for %s: %v", what, now.Sub(lastRead).Round(time.Millisecond), err)
				return
			}
		}
		if now.After(end) {
			if end.Sub(lastRead) > window/4 {
				t.Errorf("could not check %s at the end of its window: %v", what, lastErr)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("context ended while checking %s: %v", what, ctx.Err())
			return
		case <-time.After(2 * framework.PollInterval):
		}
	}
}

func statusTransitionFeatures() []framework.Feature {
	var (
		falseCond *metav1.Condition // the first False/Unschedulable (STA-19)
		rewritten bool              // STA-20 left the gang unschedulable with the node full
		trueCond  *metav1.Condition // the True/Scheduled after the blocker went (STA-21)
	)
	gangPods := []string{"gang-0", "gang-1", "gang-2", "gang-3", "gang-4"}
	return []framework.Feature{{
		Suite: "status", Name: "lastTransitionTime moves only when the status does", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 8},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "STA-19", Statement: "a gang (minCount 3, 1 GPU each) with 1 of 8 GPUs free is False/Unschedulable, and a second unschedulable cycle ≥1s later (a 4th member added, its FailedScheduling event seen) leaves it False with the same lastTransitionTime for 3s", Ref: sttRef + "schedule_one_podgroup.go:955-959"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					// Priority 0 for all: no pod of the cluster has less, so preemption finds no
					// victims and each cycle ends unschedulable without side effects (§5.1 step 3).
					l.CreatePods(ctx, t, scenarios.Member{Name: "blocker", GPUs: 7})
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "blocker")
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "gang", MinCount: 3})
					l.CreatePods(ctx, t, framework.Members("gang", 3, 1)...)
					c := l.WaitCondition(ctx, t, l.Env.Scaled(45*time.Second), "gang", metav1.ConditionFalse, "Unschedulable")
					t.Logf("first cycle: %s", framework.DescribeCondition(c))
					sttNewCycle(ctx, t, l, "gang-3", c.LastTransitionTime)
					falseCond = c
					// The event is emitted before the condition write of the same cycle
					// (schedule_one_podgroup.go:882 then 920): watch the condition past it.
					sttHolds(ctx, t, l.Env.Scaled(staSettle), "PodGroup gang False with its first lastTransitionTime", sttSame(l, metav1.ConditionFalse, c))
				}},
			{A: framework.Assertion{ID: "STA-20", Statement: "when the last free GPU is taken and a 5th member starts another unschedulable cycle, the condition's message is rewritten (no longer the first message) and it stays False with the first lastTransitionTime for 3s", Ref: sttRef + "schedule_one_podgroup.go:955-961; apimachinery meta/conditions.go:54-61 (reason and message rewritten in place)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if falseCond == nil {
						t.Skip("needs the False condition STA-19 establishes")
					}
					// The filler takes the free GPU, so the next cycle places no member at all and
					// its message says so ("0 scheduled" instead of "1 scheduled").
					l.CreatePods(ctx, t, scenarios.Member{Name: "filler", GPUs: 1})
					l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), "filler")
					sttNewCycle(ctx, t, l, "gang-4", falseCond.LastTransitionTime)
					var c *metav1.Condition
					l.EventuallySettled(ctx, t, l.Env.Scaled(30*time.Second), "PodGroup gang condition message rewritten", func(ctx context.Context) (bool, string, error) {
						pg, err := l.PodGroup(ctx, "gang")
						if err != nil {
							return false, "", err
						}
						c = framework.GroupCondition(pg)
						return c != nil && c.Message != falseCond.Message, framework.DescribeCondition(c), nil
					})
					t.Logf("rewritten: %s (first: %q)", framework.DescribeCondition(c), falseCond.Message)
					// The gang is unschedulable on a full node either way: STA-21 builds on that.
					rewritten = c.Status == metav1.ConditionFalse
					if c.Status != metav1.ConditionFalse || !c.LastTransitionTime.Equal(&falseCond.LastTransitionTime) {
						t.Errorf("after the message was rewritten: %s; want False with the first lastTransitionTime %s", framework.DescribeCondition(c), falseCond.LastTransitionTime.Format(time.RFC3339))
						return
					}
					sttHolds(ctx, t, l.Env.Scaled(staSettle), "PodGroup gang False with its first lastTransitionTime", sttSame(l, metav1.ConditionFalse, falseCond))
				}},
			{A: framework.Assertion{ID: "STA-21", Statement: "deleting the 7-GPU blocker lets the 5 members bind and the condition turns True/Scheduled with a lastTransitionTime strictly after the False one's", Ref: sttRef + "§3.6; apimachinery meta/conditions.go:44-50 (a flip stamps now)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !rewritten {
						t.Skip("needs the unschedulable gang STA-20 leaves")
					}
					// STA-20's cycle came more than a second after the False time, so the flip's
					// time cannot round to the same second.
					if err := l.Client.CoreV1().Pods(l.Name).Delete(ctx, "blocker", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
						t.Fatalf("delete blocker: %v", err)
					}
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), gangPods...)
					c := l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "gang", metav1.ConditionTrue, "Scheduled")
					t.Logf("False at %s, True at %s", falseCond.LastTransitionTime.Format(time.RFC3339), c.LastTransitionTime.Format(time.RFC3339))
					if !c.LastTransitionTime.After(falseCond.LastTransitionTime.Time) {
						t.Fatalf("True condition %s: lastTransitionTime not after the False one's %s", framework.DescribeCondition(c), falseCond.LastTransitionTime.Format(time.RFC3339))
					}
					trueCond = c
				}},
			{A: framework.Assertion{ID: "STA-22", Statement: "a 6th member that fits, created ≥1s after the flip, binds in a successful cycle of its own and the True condition keeps the flip's lastTransitionTime for 3s after the bind", Ref: sttRef + "schedule_one_podgroup.go:889-895, 955-959 (an unchanged True is not rewritten)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					staRequire(t, trueCond, "STA-21")
					// 2 GPUs are free (blocker gone, filler 1 and members 5 of 8). Unlike STA-02,
					// whose cycles end unschedulable and are stopped by the keep-True rule before
					// any write, this cycle succeeds and goes through SetStatusCondition.
					sttClockPast(ctx, t, l, trueCond.LastTransitionTime.Add(1500*time.Millisecond))
					l.CreatePods(ctx, t, scenarios.Member{Name: "gang-5", Group: "gang", GPUs: 1})
					l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), "gang-5")
					framework.Consistently(ctx, t, l.Env.Scaled(staSettle), "PodGroup gang True with the flip's lastTransitionTime", sttSame(l, metav1.ConditionTrue, trueCond))
				}},
		},
	}}
}
