package suites

import (
	"context"
	"fmt"
	"github.com/gangbench/gangbench/suites/framework"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/scenarios"
)

// What one group cycle does with members that were all waiting when it ran, and how soon a
// minCount change is acted on (gang-semantics §3.3 requeue hints, §3.4, §3.6).

// mcRequeueBound is how long after a minCount PATCH that lowers it the waiting gang must be bound.
// The PodGroup update requeues the group at once (§3.3); the entity's backoff is at most 10s. A
// scheduler that only notices on its periodic flush of unschedulable entities (5 minutes) fails.
// A threshold, so not scaled by -timeout-scale.
const mcRequeueBound = 15 * time.Second

func minCountCycleFeatures() []framework.Feature {
	one := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	return []framework.Feature{
		{
			Suite: "mincount", Name: "mincount: a basic group whose members all wait for its first cycle", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "MIN-17", Statement: "6 members of a basic group created before their PodGroup, room for 4: once it exists 4 bind in one cycle, 2 get their own fit error \"0/N nodes are available\" (not the group's), and the PodGroup is seen True/Scheduled", Ref: bmSemRef + "B.12; §3.2 (incomplete pods join at PodGroup add); §3.4; §3.6"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						ms := framework.Members("batch", 6, 2)
						l.CreatePods(ctx, t, ms...)
						// They must be waiting for the PodGroup, not placed one by one as they came.
						bmHoldFor(ctx, t, l, l.Env.Scaled(3*time.Second), bmHold{Untouched: names(ms)})
						r := startRecorder(ctx, t, l, false)
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "batch"})
						o := l.WaitDecided(ctx, t, l.Env.Scaled(30*time.Second), names(ms)...)
						var bound, rejected []string
						for _, m := range ms {
							switch o.Pods[m.Name] {
							case framework.Bound:
								bound = append(bound, m.Name)
							case framework.Unschedulable:
								rejected = append(rejected, m.Name)
							}
						}
						if len(bound) != 4 || len(rejected) != 2 {
							t.Fatalf("want 4 bound and 2 unschedulable; got %s", o)
						}
						if spread := l.WaitBound(ctx, t, l.Env.Scaled(10*time.Second), bound...); spread > bmMaxBindSpread {
							t.Errorf("the 4 members bound %s apart, want one cycle (at most %s)", spread, bmMaxBindSpread)
						}
						for _, n := range rejected {
							e := l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), n, "FailedScheduling", "0/", mcMsgNodesAvailable)
							if strings.HasPrefix(e.Message, mcMsgGroupRejected) {
								t.Errorf("pod %s got the group's message %q, want its own fit error", n, e.Message)
							}
						}
						// The watch, not a poll: on v1.37.2 the race KNOWN-01 describes can turn the
						// condition False milliseconds later (the run-wide monitor judges that).
						seen := r.groupConditions("batch")
						if !slices.ContainsFunc(seen, func(c string) bool { return strings.HasPrefix(c, "True/Scheduled") }) {
							t.Errorf("PodGroup batch was never True/Scheduled; the watch saw %v", seen)
						}
					}},
			},
		},
		{
			Suite: "mincount", Name: "mincount: lowering minCount of a gang short of room", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "MIN-18", Statement: fmt.Sprintf("5 members of minCount 5 on room for 4 are False/Unschedulable; lowering minCount to 4 binds 4 within %s of the PATCH, the fifth stays unbound with its own fit error", mcRequeueBound), Ref: bmSemRef + "B.11; §3.3 (PodGroup update with a lower minCount requeues); §3.6"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "short", MinCount: 5})
						ms := framework.Members("short", 5, 2)
						l.CreatePods(ctx, t, ms...)
						l.WaitCondition(ctx, t, l.Env.Scaled(45*time.Second), "short", metav1.ConditionFalse, "Unschedulable")
						if o, err := l.Observe(ctx); err != nil || o.Bound("short") != 0 {
							t.Fatalf("before the PATCH no member may be bound: %s %v", o, err)
						}
						patched := time.Now()
						mcPatchMinCount(ctx, t, l, "short", 4)
						var o framework.Outcome
						l.EventuallySettled(ctx, t, l.Env.Scaled(60*time.Second), "4 of the 5 members bound", func(ctx context.Context) (bool, string, error) {
							var err error
							o, err = l.Observe(ctx)
							return err == nil && o.Bound("short") >= 4, o.String(), err
						})
						took := time.Since(patched)
						t.Logf("measurement bindAfterPatchSeconds=%.3f", took.Seconds())
						if took > mcRequeueBound {
							t.Errorf("the gang bound %s after the minCount PATCH, want within %s (the update must requeue it)", took.Round(time.Millisecond), mcRequeueBound)
						}
						o = l.WaitDecided(ctx, t, l.Env.Scaled(30*time.Second), names(ms)...)
						if o.Bound("short") != 4 || o.Count("short", framework.Unschedulable) != 1 {
							t.Fatalf("want 4 bound and 1 unschedulable; got %s", o)
						}
						for name, s := range o.Pods {
							if s == framework.Unschedulable {
								l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), name, "FailedScheduling", "0/", mcMsgNodesAvailable)
							}
						}
					}},
			},
		},
		{
			Suite: "mincount", Name: "mincount: raising minCount of a gang short of room", Lane: one,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "MIN-20", Statement: fmt.Sprintf("4 members of minCount 3 on room for 1 are False/Unschedulable; after raising minCount to 4, room for 3 binds none (the next cycle reports \"minCount (4)\" within %s and nothing binds for 5s), and room for all 4 binds them within %s", mcRequeueBound, mcRequeueBound), Ref: bmSemRef + "§3.3 (a raised minCount does not requeue, but the next cycle reads it); §3.4 PlacementFeasible"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						// Two walls leave 2 of 8 GPUs: removing the first leaves room for 3 members
						// (enough for the old minCount, not the new one), the second for all 4.
						walls := []scenarios.Member{{Name: "wall-a", GPUs: 4}, {Name: "wall-b", GPUs: 2}}
						l.CreatePods(ctx, t, walls...)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), names(walls)...)
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "rise", MinCount: 3})
						ms := framework.Members("rise", 4, 2)
						l.CreatePods(ctx, t, ms...)
						l.WaitCondition(ctx, t, l.Env.Scaled(45*time.Second), "rise", metav1.ConditionFalse, "Unschedulable")
						mcPatchMinCount(ctx, t, l, "rise", 4)

						freed := time.Now()
						bmRemovePod(ctx, t, l, walls[0].Name)
						// Any member's FailedScheduling naming the new minCount proves the cycle after
						// the room appeared read it (the message of the old one says minCount (3)).
						l.EventuallySettled(ctx, t, l.Env.Scaled(mcRequeueBound), "a FailedScheduling of a member naming minCount (4)", func(ctx context.Context) (bool, string, error) {
							evs, err := l.Events(ctx, "")
							if err != nil {
								return false, "", err
							}
							var seen []string
							for _, e := range evs {
								if e.Reason != "FailedScheduling" || !strings.HasPrefix(e.InvolvedObject.Name, "rise-") {
									continue
								}
								if strings.Contains(e.Message, "minCount (4)") {
									return true, "", nil
								}
								seen = append(seen, e.Message)
							}
							return false, fmt.Sprintf("FailedScheduling messages: %q", seen), nil
						})
						t.Logf("measurement rejectedAfterRoomSeconds=%.3f", time.Since(freed).Seconds())
						bmHoldFor(ctx, t, l, l.Env.Scaled(5*time.Second), bmHold{Unbound: names(ms)})

						freed = time.Now()
						bmRemovePod(ctx, t, l, walls[1].Name)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), names(ms)...)
						took := time.Since(freed)
						t.Logf("measurement bindAfterRoomSeconds=%.3f", took.Seconds())
						if took > mcRequeueBound {
							t.Errorf("the gang bound %s after room for all 4 appeared, want within %s", took.Round(time.Millisecond), mcRequeueBound)
						}
					}},
			},
		},
	}
}
