package suites

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// A gang of which one member fits as the cluster stands and the other needs a preemption. The
// group's cycle fails as a whole, its preemption plans a node for every member (the one that fits
// included), and each member comes back waiting on the preemption with its planned node as its
// nomination (applyPodGroupPostFilterResult, schedule_one_podgroup.go:775-790; the member that fits
// at :863-866). The nomination is what keeps the free node for the gang while its victim goes: a
// member that comes back without one leaves that node to whoever comes next.
//
// The victim is slow to go (grace period, kwok.SlowTerminationLabel), so the nominations can be
// read while the preemption is under way.

func preemptionSplitFeatures() []framework.Feature {
	ref := "gang-semantics §5.1; schedule_one_podgroup.go:775-790 (every member gets the preemption's planned node), :863-866 (a member that fits is sent back with it); schedule_one.go:1244-1260 (the nomination written to status.nominatedNodeName)"
	var (
		victimNode string
		members    []string
		nominated  map[string]string
	)
	release := func(ctx context.Context, t *testing.T, l *framework.Lane) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err := l.Client.CoreV1().Pods(l.Name).Delete(ctx, "hog", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete victim hog with grace period 0 (the lane's namespace waits for it): %v", err)
		}
	}
	return []framework.Feature{{
		Suite: "preemption", Name: "a gang of which one member fits and one needs a preemption", Lane: framework.LaneSpec{Nodes: 2, GPUsPerNode: 8},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "PRE-35", Statement: "on 2 nodes × 8 GPUs, one full with an 8-GPU pod of priority 10 slow to terminate, a gang of priority 1000 (2 × 8 GPUs, minCount 2) preempts it; while the victim is Terminating neither member binds, and each carries status.nominatedNodeName: the member that fits the free node as it stands is nominated there, the other to the victim's node", Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					defer func() {
						if nominated == nil {
							release(ctx, t, l)
						}
					}()
					low := l.PriorityClass(ctx, t, "p10", 10, false)
					high := l.PriorityClass(ctx, t, "high", highValue, false)
					p := l.Pod(scenarios.Member{Name: "hog", GPUs: 8, PriorityClassName: low, Labels: map[string]string{kwok.SlowTerminationLabel: "true"}})
					// A grace period, unlike the suites' other pods: the apiserver only marks a bound
					// pod Terminating when it has one.
					grace := int64(30)
					p.Spec.TerminationGracePeriodSeconds = &grace
					if _, err := l.Client.CoreV1().Pods(l.Name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
						t.Fatalf("create pod hog: %v", err)
					}
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "hog")
					hog, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, "hog", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					victimNode = hog.Spec.NodeName
					free := l.Nodes[0]
					if free == victimNode {
						free = l.Nodes[1]
					}
					members = createGang(ctx, t, l, scenarios.Group{Name: "split", MinCount: 2, PriorityClassName: high}, 2, 8)
					got := map[string]string{}
					framework.Eventually(ctx, t, l.Env.Scaled(60*time.Second), fmt.Sprintf("victim hog Terminating and members %v nominated", members), func(ctx context.Context) (bool, string, error) {
						v, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, "hog", metav1.GetOptions{})
						if err != nil {
							return false, "", err
						}
						state := []string{fmt.Sprintf("hog deletionTimestamp=%v", v.DeletionTimestamp)}
						done := v.DeletionTimestamp != nil
						for _, m := range members {
							mp, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, m, metav1.GetOptions{})
							if err != nil {
								return false, "", err
							}
							if mp.Spec.NodeName != "" {
								t.Fatalf("member %s bound to %s while the victim on %s is still Terminating", m, mp.Spec.NodeName, victimNode)
							}
							got[m] = mp.Status.NominatedNodeName
							done = done && mp.Status.NominatedNodeName != ""
							state = append(state, fmt.Sprintf("%s nominatedNodeName=%q", m, mp.Status.NominatedNodeName))
						}
						return done, fmt.Sprint(state), nil
					})
					nodes := []string{got[members[0]], got[members[1]]}
					slices.Sort(nodes)
					want := []string{free, victimNode}
					slices.Sort(want)
					if !slices.Equal(nodes, want) {
						t.Fatalf("members nominated to %v, want one on the free node %s and one on the victim's node %s", got, free, victimNode)
					}
					nominated = got
				}},
			{A: framework.Assertion{ID: "PRE-36", Statement: fmt.Sprintf("once the victim is gone, both members bind within %s, each on the node it was nominated to", bhWakeBound), Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if nominated == nil {
						t.Fatal("the members were not nominated (PRE-35 failed early)")
					}
					at := time.Now()
					release(ctx, t, l)
					bhWaitBoundWithin(ctx, t, l, at, "the victim's deletion", "boundAfterSplitVictimGone", members...)
					for _, m := range members {
						mp, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, m, metav1.GetOptions{})
						if err != nil {
							t.Fatal(err)
						}
						if mp.Spec.NodeName != nominated[m] {
							t.Errorf("member %s bound to %s, nominated to %s", m, mp.Spec.NodeName, nominated[m])
						}
					}
				}},
		},
	}}
}
