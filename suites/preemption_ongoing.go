package suites

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/observe/metrics"
	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// A gang whose victims are slow to go (Terminating through their grace period) is retried while
// its preemption is still under way. It must wait for those victims, not preempt again:
// PodGroupEvaluator.Preempt returns the members' current nominations when a nominated node still
// holds a lower-priority pod terminating by preemption (podgrouppreemption.go:113-115,
// isOngoingPreemption :388-412). What shows a second preemption from outside is the scheduler's
// count of preemptions carried out (scheduler_workload_preemption_victims observes once per
// preemption, executor.go:200, before it skips victims already being deleted), so the feature is
// serial: that histogram is cluster-wide.
//
// The victims have a grace period and are labelled kwok.SlowTerminationLabel, so the simulated
// kubelet leaves them Terminating until the feature deletes them with grace period 0.

const (
	metricWAPVictims = "scheduler_workload_preemption_victims"
	// poWindow is how long the gang is watched while its victims are Terminating. A gang waiting on
	// its preemption is parked until an event may help it (measured: no retry in 20 s without one),
	// so the feature deletes a pod on the node at the window's start; the attempt counter proves the
	// retry happened.
	poWindow = 15 * time.Second
)

func preemptionOngoingFeatures() []framework.Feature {
	ref := "gang-semantics §5.1; podgrouppreemption.go:113-115, 388-425 (an ongoing preemption is not started again); executor.go:199-218"
	var (
		before   *metrics.Snapshot
		waiting  bool
		skipped  string
		victims  = []string{"slow-0", "slow-1"}
		gangPods []string
	)
	release := func(ctx context.Context, t *testing.T, l *framework.Lane) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, v := range victims {
			err := l.Client.CoreV1().Pods(l.Name).Delete(ctx, v, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete victim %s with grace period 0 (the lane's namespace waits for it): %v", v, err)
			}
		}
	}
	return []framework.Feature{{
		Suite: "preemption", Name: "a preemption still under way is not started again", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}, Serial: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "PRE-33", Statement: fmt.Sprintf("a gang of priority 1000 (2 × 3 GPUs) preempts the 2 pods of priority 10 (4 and 3 GPUs) beside a 1-GPU pod of priority 2000 on one 8-GPU node; while the victims stay Terminating for %s and the 1-GPU pod is deleted, the gang is retried (scheduler_workload_preemption_attempts_total rises again) but preempts nothing more: scheduler_workload_preemption_victims counts exactly 1 preemption, and no member binds", poWindow), Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					defer func() {
						if !waiting {
							release(ctx, t, l)
						}
					}()
					low := l.PriorityClass(ctx, t, "p10", 10, false)
					high := l.PriorityClass(ctx, t, "high", highValue, false)
					// A pod the gang cannot preempt (priority above its own) takes the node's last GPU;
					// deleting it later is the event that retries the gang while its victims are
					// still Terminating (a gang waiting on its preemption is not retried on a timer).
					l.CreatePods(ctx, t, scenarios.Member{Name: "nudge", GPUs: 1, PriorityClassName: l.PriorityClass(ctx, t, "blocker", blockerValue, false)})
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "nudge")
					for i, v := range victims {
						// A grace period, unlike the suites' other pods (0, so deletions are immediate):
						// the apiserver only marks a bound pod Terminating when it has one.
						p := l.Pod(scenarios.Member{Name: v, GPUs: int64(4 - i), PriorityClassName: low, Labels: map[string]string{kwok.SlowTerminationLabel: "true"}})
						grace := int64(30)
						p.Spec.TerminationGracePeriodSeconds = &grace
						if _, err := l.Client.CoreV1().Pods(l.Name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
							t.Fatalf("create pod %s: %v", v, err)
						}
					}
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), victims...)
					var err error
					before, err = l.Env.SchedulerMetrics(ctx)
					if errors.Is(err, framework.ErrNoSchedulerMetrics) {
						skipped = fmt.Sprintf("not judged: %v, so the scheduler's preemption counts cannot be read", err)
						t.Skip(skipped)
					}
					if err != nil {
						t.Fatalf("scrape the scheduler: %v", err)
					}
					gangPods = createGang(ctx, t, l, scenarios.Group{Name: "later", MinCount: 2, PriorityClassName: high}, 2, 3)
					framework.Eventually(ctx, t, l.Env.Scaled(60*time.Second), fmt.Sprintf("victims %v Terminating", victims), func(ctx context.Context) (bool, string, error) {
						var state []string
						all := true
						for _, v := range victims {
							p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, v, metav1.GetOptions{})
							if err != nil {
								return false, "", err
							}
							all = all && p.DeletionTimestamp != nil
							state = append(state, fmt.Sprintf("%s deletionTimestamp=%v", v, p.DeletionTimestamp))
						}
						if pg, err := l.PodGroup(ctx, "later"); err == nil {
							state = append(state, "PodGroup later: "+framework.DescribeCondition(framework.GroupCondition(pg)))
						}
						if evs, err := l.Events(ctx, gangPods[0]); err == nil {
							for _, e := range evs {
								state = append(state, fmt.Sprintf("%s event on %s: %s", e.Reason, gangPods[0], e.Message))
							}
						}
						return all, fmt.Sprint(state), nil
					})
					started, _ := before.Sum(metricWAPAttempts, nil)
					bmRemovePod(ctx, t, l, "nudge")
					framework.Consistently(ctx, t, poWindow, fmt.Sprintf("members %v unbound", gangPods), func(ctx context.Context) (bool, string, error) {
						o, err := l.Observe(ctx)
						if err != nil {
							return false, "", err
						}
						return o.Bound("later") == 0, o.String(), nil
					})
					// The gang waited for its victims: PRE-34 builds on that whatever the counts say.
					waiting = true
					after, err := l.Env.SchedulerMetrics(ctx)
					if err != nil {
						t.Fatalf("scrape the scheduler: %v", err)
					}
					attempts, _ := after.Sum(metricWAPAttempts, nil)
					b, _ := before.HistogramCount(metricWAPVictims, nil)
					a, ok := after.HistogramCount(metricWAPVictims, nil)
					if !ok {
						t.Fatalf("the scheduler does not export %s", metricWAPVictims)
					}
					t.Logf("while the victims were Terminating: %s rose by %.0f, %s counted %d preemptions", metricWAPAttempts, attempts-started, metricWAPVictims, a-b)
					if attempts-started < 2 {
						t.Errorf("%s rose by %.0f, want at least 2 (the preemption and a retry while its victims were Terminating): the window proves nothing without a retry", metricWAPAttempts, attempts-started)
					}
					if a-b != 1 {
						t.Errorf("%s counted %d preemptions while the gang waited for its 2 Terminating victims, want exactly 1: a retry started the preemption again", metricWAPVictims, a-b)
					}
				}},
			{A: framework.Assertion{ID: "PRE-34", Statement: fmt.Sprintf("once the Terminating victims are gone, the gang binds on that node within %s", bhWakeBound), Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if skipped != "" {
						t.Skip(skipped)
					}
					if !waiting {
						t.Fatal("the gang did not wait for its Terminating victims (PRE-33 failed early)")
					}
					at := time.Now()
					release(ctx, t, l)
					bhWaitBoundWithin(ctx, t, l, at, "its victims' deletion", "boundAfterVictimsGone", gangPods...)
				}},
		},
	}}
}
