package suites

import (
	"context"
	"fmt"
	"github.com/gangbench/gangbench/suites/framework"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/scenarios"
)

// The status suite checks the PodGroup condition the scheduler writes (gang-semantics §4): who writes
// it, that it carries the generation it was computed from, that once True it stays True whatever
// happens to the group later, and the controller-manager's protection finalizer (§8).

// ProtectionFinalizer is the finalizer PodGroupProtection admission adds to every PodGroup.
const ProtectionFinalizer = "scheduling.k8s.io/podgroup-protection"

// staSettle is how long a condition is watched after the scheduler showed it acted (an event
// appeared): the event is emitted before the group's status patch, so a wrong write would land in
// this window.
const staSettle = 3 * time.Second

// staOccurrences is how many times an event happened: the events.k8s.io recorder folds repeats into a
// series, which core/v1 shows as series.count (or count on older recorders).
func staOccurrences(e corev1.Event) int {
	n := int(e.Count)
	if e.Series != nil && int(e.Series.Count) > n {
		n = int(e.Series.Count)
	}
	return max(n, 1)
}

// staFailures sums the FailedScheduling occurrences on the named pods and describes them.
func staFailures(ctx context.Context, l *framework.Lane, pods []string) (int, string, error) {
	evs, err := l.Events(ctx, "")
	if err != nil {
		return 0, "", err
	}
	n := 0
	var seen []string
	for _, e := range evs {
		if e.Reason != "FailedScheduling" || !slices.Contains(pods, e.InvolvedObject.Name) {
			continue
		}
		n += staOccurrences(e)
		seen = append(seen, fmt.Sprintf("%s×%d %q", e.InvolvedObject.Name, staOccurrences(e), e.Message))
	}
	return n, fmt.Sprintf("%d FailedScheduling occurrence(s): %s", n, strings.Join(seen, "; ")), nil
}

// staUnchanged is a condition for Consistently: the group's condition is still True with the
// lastTransitionTime of want.
func staUnchanged(l *framework.Lane, group string, want *metav1.Condition) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		pg, err := l.PodGroup(ctx, group)
		if err != nil {
			return false, "", err
		}
		c := framework.GroupCondition(pg)
		ok := c != nil && c.Status == metav1.ConditionTrue && c.LastTransitionTime.Equal(&want.LastTransitionTime)
		return ok, fmt.Sprintf("condition %s (was %s)", framework.DescribeCondition(c), framework.DescribeCondition(want)), nil
	}
}

// staWaitFailuresWhileTrue waits until the named pods have at least n FailedScheduling occurrences
// and fails at once if the group's condition leaves True or its lastTransitionTime moves meanwhile.
func staWaitFailuresWhileTrue(ctx context.Context, t *testing.T, l *framework.Lane, group string, want *metav1.Condition, n int, pods ...string) {
	t.Helper()
	unchanged := staUnchanged(l, group, want)
	var broken string
	l.EventuallySettled(ctx, t, l.Env.Scaled(45*time.Second), fmt.Sprintf("%d FailedScheduling occurrence(s) on %v", n, pods), func(ctx context.Context) (bool, string, error) {
		if ok, state, err := unchanged(ctx); err == nil && !ok {
			broken = state
			return true, "", nil
		}
		got, state, err := staFailures(ctx, l, pods)
		return got >= n, state, err
	})
	if broken != "" {
		t.Fatalf("PodGroup %s left True while its extra members were failing: %s", group, broken)
	}
	if _, state, err := staFailures(ctx, l, pods); err == nil {
		t.Logf("%s", state)
	}
}

// staGroupReady creates a gang of n members × gpus with minCount n, waits until all are bound and the
// group is True/Scheduled, and returns the condition.
func staGroupReady(ctx context.Context, t *testing.T, l *framework.Lane, group string, n int, gpus int64) *metav1.Condition {
	t.Helper()
	l.CreatePodGroup(ctx, t, scenarios.Group{Name: group, MinCount: int32(n)})
	ms := framework.Members(group, n, gpus)
	l.CreatePods(ctx, t, ms...)
	l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), names(ms)...)
	return l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), group, metav1.ConditionTrue, "Scheduled")
}

// genWrites are the scheduler's condition writes with the PodGroup generation they were read at.
type genWrites []struct {
	what          string
	observed, gen int64
}

func (w *genWrites) add(what string, c *metav1.Condition, gen int64) {
	if c != nil {
		*w = append(*w, struct {
			what          string
			observed, gen int64
		}{what, c.ObservedGeneration, gen})
	}
}

// check fails on any write whose observedGeneration differs from the generation, and skips when
// all matched at generation 0: the v1.37.2 apiserver never sets PodGroup generation, so a scheduler
// that copies it cannot be told from one that never sets observedGeneration.
func (w genWrites) check(t *testing.T) {
	t.Helper()
	if len(w) == 0 {
		t.Skip("needs the condition writes STA-03 and STA-05 observe")
	}
	testable := false
	for _, x := range w {
		if x.observed != x.gen {
			t.Errorf("%s: observedGeneration %d, metadata.generation %d", x.what, x.observed, x.gen)
		}
		testable = testable || x.gen != 0
	}
	if !t.Failed() && !testable {
		t.Skipf("not testable on this apiserver: PodGroup metadata.generation stayed 0 through create and a spec PATCH, so observedGeneration 0 (%d writes seen) cannot tell a scheduler that copies it from one that never sets it", len(w))
	}
}

// staRequire skips a step whose set-up step failed, so one failure is reported once.
func staRequire(t *testing.T, c *metav1.Condition, setup string) {
	t.Helper()
	if c == nil {
		t.Skipf("needs the True condition %s establishes, which it did not", setup)
	}
}

func statusFeatures() []framework.Feature {
	const suite = "status"
	lane := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	ref := func(item, section string) string { return "gang-semantics §11.D." + item + "; " + section }

	// D.23: a True condition survives later unschedulable members.
	var stayTrue *metav1.Condition
	stays := framework.Feature{
		Suite: suite, Name: "condition stays True while later members fail", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "STA-01", Statement: "a gang that fits becomes True/Scheduled", Ref: ref("24", "§4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					stayTrue = staGroupReady(ctx, t, l, "gang", 2, 4)
				}},
			{A: framework.Assertion{ID: "STA-02", Statement: "members added after True that cannot fit get FailedScheduling in ≥2 cycles while the condition stays True with the same lastTransitionTime", Ref: ref("23", "§4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					staRequire(t, stayTrue, "STA-01")
					// The node is full. Each extra member wakes the group, so two members added one
					// after the other give at least two cycles that end unschedulable.
					extra := []scenarios.Member{
						{Name: "gang-extra-0", Group: "gang", GPUs: 4},
						{Name: "gang-extra-1", Group: "gang", GPUs: 4},
					}
					l.CreatePods(ctx, t, extra[0])
					staWaitFailuresWhileTrue(ctx, t, l, "gang", stayTrue, 1, extra[0].Name)
					l.CreatePods(ctx, t, extra[1])
					staWaitFailuresWhileTrue(ctx, t, l, "gang", stayTrue, 1, extra[1].Name)
					staWaitFailuresWhileTrue(ctx, t, l, "gang", stayTrue, 2, names(extra)...)
					framework.Consistently(ctx, t, l.Env.Scaled(staSettle), "PodGroup gang True with its first lastTransitionTime", staUnchanged(l, "gang", stayTrue))
				}},
		},
	}

	// D.24: observedGeneration follows spec changes the scheduler acted on.
	var gen1 int64
	var unschedulable bool
	var writes genWrites
	generation := framework.Feature{
		Suite: suite, Name: "observedGeneration follows a minCount change", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "STA-03", Statement: "a gang that cannot fit is False/Unschedulable", Ref: ref("24", "§4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "gang", MinCount: 3})
					l.CreatePods(ctx, t, framework.Members("gang", 3, 4)...)
					c := l.WaitCondition(ctx, t, l.Env.Scaled(45*time.Second), "gang", metav1.ConditionFalse, "Unschedulable")
					pg, err := l.PodGroup(ctx, "gang")
					if err != nil {
						t.Fatal(err)
					}
					writes.add("False/Unschedulable", c, pg.Generation)
					gen1, unschedulable = pg.Generation, true
				}},
			{A: framework.Assertion{ID: "STA-04", Statement: "a minCount PATCH is accepted and metadata.generation does not go backwards (v1.37.2 leaves PodGroup generation at 0)", Ref: ref("24", "§2.4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !unschedulable {
						t.Skip("needs the unschedulable gang STA-03 establishes")
					}
					pg, err := l.Gang.PodGroups(l.Name).Patch(ctx, "gang", types.MergePatchType,
						[]byte(`{"spec":{"schedulingPolicy":{"gang":{"minCount":2}}}}`), metav1.PatchOptions{})
					if err != nil {
						t.Fatalf("patch minCount 3→2: %v", err)
					}
					// §11.D.24 expects a bump, but the v1.37.2 PodGroup strategy never sets
					// generation (no PrepareForCreate/PrepareForUpdate handling), so it stays 0 on
					// create and on spec changes. The scheduler cannot be blamed for that; STA-05
					// still checks that it copies whatever the apiserver keeps.
					t.Logf("metadata.generation %d → %d", gen1, pg.Generation)
					if pg.Generation < gen1 {
						t.Errorf("metadata.generation went back from %d to %d", gen1, pg.Generation)
					}
					if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 2 {
						t.Errorf("read-back policy %+v, want gang minCount 2", pg.Spec.SchedulingPolicy)
					}
				}},
			{A: framework.Assertion{ID: "STA-05", Statement: "the scheduler's next write after the minCount PATCH is True/Scheduled with 2 of 3 bound", Ref: ref("24", "§4; §3.6")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !unschedulable {
						t.Skip("needs the unschedulable gang STA-03 establishes")
					}
					// The lowered minCount requeues the group at once (§3.6); 2 of the 3 fit.
					var c *metav1.Condition
					var gen int64
					l.EventuallySettled(ctx, t, l.Env.Scaled(45*time.Second), "PodGroup gang True/Scheduled", func(ctx context.Context) (bool, string, error) {
						pg, err := l.PodGroup(ctx, "gang")
						if err != nil {
							return false, "", err
						}
						c, gen = framework.GroupCondition(pg), pg.Generation
						ok := c != nil && c.Status == metav1.ConditionTrue && c.Reason == "Scheduled"
						return ok, fmt.Sprintf("generation %d, %s", pg.Generation, framework.DescribeCondition(c)), nil
					})
					writes.add("True/Scheduled after the PATCH", c, gen)
					// The cycle writes the condition right after it hands its pods to their own
					// asynchronous binding cycles (§3.4 step 6), so the True can be read before the
					// binds are (the likely cause of one STA-05 failure on kind under load). Wait for them.
					var o framework.Outcome
					framework.Eventually(ctx, t, l.Env.Scaled(15*time.Second), "2 of the gang's 3 members bound after the True", func(ctx context.Context) (bool, string, error) {
						var err error
						o, err = l.Observe(ctx)
						return err == nil && o.Bound("gang") >= 2, o.String(), err
					})
					if o.Bound("gang") != 2 {
						t.Errorf("want 2 of 3 bound after minCount 2; got %s", o)
					}
				}},
			{A: framework.Assertion{ID: "STA-15", Statement: "each condition the scheduler wrote (STA-03, STA-05) carries the PodGroup's metadata.generation as observedGeneration; not testable while the apiserver leaves generation at 0", Ref: ref("24", "§4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					writes.check(t)
				}},
		},
	}

	// D.25: the scheduler is the writer, through PATCH on podgroups/status.
	var writer *metav1.Condition
	var patchesBefore float64
	var apiErr error
	writerFeature := framework.Feature{
		Suite: suite, Name: "the scheduler writes the condition through podgroups/status", Lane: lane,
		// Serial: the apiserver's request counter is cluster-wide.
		Serial: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "STA-06", Statement: "the condition write shows in apiserver_request_total{resource=podgroups,subresource=status,verb=PATCH} (delta > 0)", Ref: ref("25", "§4; §6.2")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					before, err := l.Env.APIServerMetrics(ctx)
					if err == nil {
						patchesBefore = obsSum(before, "apiserver_request_total", staStatusPatch)
					}
					apiErr = err
					writer = staGroupReady(ctx, t, l, "gang", 2, 2)
					if apiErr != nil {
						t.Skipf("apiserver metrics: %v", apiErr)
					}
					var delta float64
					framework.Eventually(ctx, t, l.Env.Scaled(15*time.Second), "a PodGroup status PATCH counted by the apiserver", func(ctx context.Context) (bool, string, error) {
						after, err := l.Env.APIServerMetrics(ctx)
						if err != nil {
							return false, "", err
						}
						delta = obsSum(after, "apiserver_request_total", staStatusPatch) - patchesBefore
						return delta > 0, fmt.Sprintf("delta %g", delta), nil
					})
					t.Logf("PodGroup status PATCH requests: +%g", delta)
				}},
			{A: framework.Assertion{ID: "STA-07", Statement: "managedFields name the kube-scheduler as the manager of status.conditions (subresource status)", Ref: ref("25", "§4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					staRequire(t, writer, "STA-06")
					pg, err := l.PodGroup(ctx, "gang")
					if err != nil {
						t.Fatal(err)
					}
					var owners []string
					for _, mf := range pg.ManagedFields {
						if mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:conditions"`) {
							owners = append(owners, fmt.Sprintf("%s (%s, subresource %q)", mf.Manager, mf.Operation, mf.Subresource))
							if !strings.Contains(mf.Manager, "scheduler") || mf.Subresource != "status" {
								t.Errorf("status.conditions managed by %s (%s, subresource %q); want the scheduler through status", mf.Manager, mf.Operation, mf.Subresource)
							}
						}
					}
					if len(owners) == 0 {
						t.Fatalf("no managedFields entry owns status.conditions; entries: %v", staManagers(pg.ManagedFields))
					}
					t.Logf("status.conditions managers: %v", owners)
				}},
		},
	}

	// D.26: the protection finalizer holds a PodGroup while members live.
	var protected bool
	protection := framework.Feature{
		Suite: suite, Name: "podgroup-protection finalizer", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "STA-08", Statement: "deleting a PodGroup with live members leaves it with a deletionTimestamp and the podgroup-protection finalizer", Ref: ref("26", "§1.4; §8")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					// Only bound members are needed: the finalizer is the controller-manager's, so this
					// holds whatever the scheduler does with the group.
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "gang", MinCount: 2})
					ms := framework.Members("gang", 2, 1)
					l.CreatePods(ctx, t, ms...)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), names(ms)...)
					if err := l.Gang.PodGroups(l.Name).Delete(ctx, "gang", metav1.DeleteOptions{}); err != nil {
						t.Fatalf("delete PodGroup: %v", err)
					}
					framework.Consistently(ctx, t, l.Env.Scaled(5*time.Second), "PodGroup gang present, terminating, with "+ProtectionFinalizer, func(ctx context.Context) (bool, string, error) {
						pg, err := l.PodGroup(ctx, "gang")
						if apierrors.IsNotFound(err) {
							return false, "PodGroup is gone although its members live", nil
						}
						if err != nil {
							return false, "", err
						}
						ok := pg.DeletionTimestamp != nil && slices.Contains(pg.Finalizers, ProtectionFinalizer)
						return ok, fmt.Sprintf("deletionTimestamp %v, finalizers %v", pg.DeletionTimestamp, pg.Finalizers), nil
					})
					protected = true
				}},
			{A: framework.Assertion{ID: "STA-16", Statement: "a member created for that terminating PodGroup is still scheduled: the scheduler ignores the deletionTimestamp and the two bound members make the quorum", Ref: ref("26", "§8 (the scheduler ignores PodGroup deletionTimestamps); §3.3 AllPodsCount")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !protected {
						t.Skip("needs the terminating PodGroup STA-08 establishes")
					}
					late := scenarios.Member{Name: "gang-2", Group: "gang", GPUs: 1}
					l.CreatePods(ctx, t, late)
					l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), late.Name)
					pg, err := l.PodGroup(ctx, "gang")
					if err != nil {
						t.Fatalf("PodGroup gang after its new member bound: %v", err)
					}
					if pg.DeletionTimestamp == nil {
						t.Errorf("PodGroup gang lost its deletionTimestamp")
					}
				}},
			{A: framework.Assertion{ID: "STA-09", Statement: "deleting the members lets the terminating PodGroup disappear", Ref: ref("26", "§8")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !protected {
						t.Skip("needs the terminating PodGroup STA-08 establishes")
					}
					for _, n := range []string{"gang-0", "gang-1", "gang-2"} {
						if err := l.Client.CoreV1().Pods(l.Name).Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil && !apierrors.IsNotFound(err) {
							t.Fatalf("delete pod %s: %v", n, err)
						}
					}
					staWaitGone(ctx, t, l, l.Env.Scaled(45*time.Second), "gang")
				}},
		},
	}

	// A PodGroup that is really gone while its members live (its finalizer removed by hand, as a
	// user does to unstick a deletion): the scheduler's DeletePodGroup sends new members back to
	// the incomplete queue, and a PodGroup of the same name picks up the bound ones again.
	var orphaned bool
	gone := framework.Feature{
		Suite: suite, Name: "podgroup deleted under its bound members", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "STA-17", Statement: "after a PodGroup is removed (finalizer stripped) under its 2 bound members, a new member referencing it stays Pending untouched for 10s (no event, no condition) in the incomplete queue", Ref: ref("26", "§3.2 (DeletePodGroup sends pods back to incomplete); §1.4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "gone", MinCount: 2})
					ms := framework.Members("gone", 2, 1)
					l.CreatePods(ctx, t, ms...)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), names(ms)...)
					if err := l.Gang.PodGroups(l.Name).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
						t.Fatalf("delete PodGroup: %v", err)
					}
					// kubectl patch podgroup gone --type=merge -p '{"metadata":{"finalizers":null}}'
					if _, err := l.Gang.PodGroups(l.Name).Patch(ctx, "gone", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
						t.Fatalf("remove the finalizers of PodGroup gone: %v", err)
					}
					staWaitGone(ctx, t, l, l.Env.Scaled(30*time.Second), "gone")
					late := scenarios.Member{Name: "gone-2", Group: "gone", GPUs: 1}
					l.CreatePods(ctx, t, late)
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: []string{late.Name}})
					bmProveLooking(ctx, t, l, "incomplete", 1)
					orphaned = true
				}},
			{A: framework.Assertion{ID: "STA-18", Statement: "recreating the PodGroup with minCount 3 binds the new member: the 2 members still bound count toward its quorum", Ref: ref("26", "§3.2 (AddPodGroup); §3.3 AllPodsCount counts assigned members")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !orphaned {
						t.Skip("needs the orphaned member STA-17 establishes")
					}
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "gone", MinCount: 3})
					l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), "gone-2")
					l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "gone", metav1.ConditionTrue, "Scheduled")
				}},
		},
	}

	// Monotonicity when members go away.
	var depleted *metav1.Condition
	losses := framework.Feature{
		Suite: suite, Name: "condition stays True when members are lost", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "STA-10", Statement: "after True, evicting one member and deleting another leaves the condition True with the same lastTransitionTime", Ref: "gang-semantics §4; §11.D.23"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					c := staGroupReady(ctx, t, l, "gang", 3, 2)
					ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "gang-0", Namespace: l.Name}, DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: new(int64)}}
					if err := l.Client.PolicyV1().Evictions(l.Name).Evict(ctx, ev); err != nil {
						t.Fatalf("evict gang-0: %v", err)
					}
					if err := l.Client.CoreV1().Pods(l.Name).Delete(ctx, "gang-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
						t.Fatalf("delete gang-1: %v", err)
					}
					framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), "gang-0 and gang-1 gone", func(ctx context.Context) (bool, string, error) {
						o, err := l.Observe(ctx)
						if err != nil {
							return false, "", err
						}
						_, a := o.Pods["gang-0"]
						_, b := o.Pods["gang-1"]
						return !a && !b, o.String(), nil
					})
					framework.Consistently(ctx, t, l.Env.Scaled(staSettle), "PodGroup gang True with its first lastTransitionTime", staUnchanged(l, "gang", c))
					l.Canary(ctx, t)
					if ok, state, err := staUnchanged(l, "gang", c)(ctx); err != nil || !ok {
						t.Fatalf("after losing 2 of 3 members: %s %v", state, err)
					}
					depleted = c
				}},
			{A: framework.Assertion{ID: "STA-11", Statement: "a later unschedulable cycle of the depleted gang (below minCount) still leaves the condition True", Ref: "gang-semantics §4; §11.D.23"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					staRequire(t, depleted, "STA-10")
					// One member of 2 GPUs is left on 8; two replacements of 8 GPUs each bring the
					// gang to quorum but cannot fit, so the cycle ends below minCount.
					repl := []scenarios.Member{
						{Name: "gang-r0", Group: "gang", GPUs: 8},
						{Name: "gang-r1", Group: "gang", GPUs: 8},
					}
					l.CreatePods(ctx, t, repl...)
					staWaitFailuresWhileTrue(ctx, t, l, "gang", depleted, 2, names(repl)...)
					framework.Consistently(ctx, t, l.Env.Scaled(staSettle), "PodGroup gang True with its first lastTransitionTime", staUnchanged(l, "gang", depleted))
				}},
		},
	}

	// Monotonicity across a scheduler restart: the new process starts from the stored condition.
	var restarted *metav1.Condition
	restart := framework.Feature{
		Suite: suite, Name: "condition stays True across a scheduler restart", Lane: lane,
		Serial: true, NeedsControl: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "STA-12", Statement: "restarting the scheduler leaves a True condition unchanged and the new scheduler binds a canary", Ref: "gang-semantics §4; §11.D.23"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					c := staGroupReady(ctx, t, l, "gang", 2, 2)
					startedBefore, startErr := staSchedulerStart(ctx, l)
					rctx, cancel := context.WithTimeout(ctx, l.Env.Scaled(120*time.Second))
					defer cancel()
					start := time.Now()
					if err := l.Env.Cluster.Control.Restart(rctx, clusters.Scheduler); err != nil {
						t.Fatalf("restart %s: %v", clusters.Scheduler, err)
					}
					t.Logf("scheduler restarted in %s", time.Since(start).Round(time.Millisecond))
					l.Canary(ctx, t)
					// A restart that did not happen would make this step vacuous: the process start
					// time the scheduler reports must have moved.
					if startErr == nil {
						startedAfter, err := staSchedulerStart(ctx, l)
						if err != nil {
							t.Fatalf("scheduler metrics after the restart: %v", err)
						}
						if startedAfter <= startedBefore {
							t.Fatalf("scheduler process_start_time_seconds %v before and %v after the restart: it did not restart", startedBefore, startedAfter)
						}
					} else {
						t.Logf("cannot confirm the restart through metrics: %v", startErr)
					}
					if ok, state, err := staUnchanged(l, "gang", c)(ctx); err != nil || !ok {
						t.Fatalf("after the restart: %s %v", state, err)
					}
					restarted = c
				}},
			{A: framework.Assertion{ID: "STA-13", Statement: "after the restart, an unschedulable cycle of that gang leaves the condition True", Ref: "gang-semantics §4; §11.D.23"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					staRequire(t, restarted, "STA-12")
					// Created after the restart, so only the new process can have emitted its events.
					l.CreatePods(ctx, t, scenarios.Member{Name: "gang-late", Group: "gang", GPUs: 8})
					staWaitFailuresWhileTrue(ctx, t, l, "gang", restarted, 1, "gang-late")
					framework.Consistently(ctx, t, l.Env.Scaled(staSettle), "PodGroup gang True with its first lastTransitionTime", staUnchanged(l, "gang", restarted))
				}},
		},
	}

	basic := framework.Feature{
		Suite: suite, Name: "basic group with nothing that fits", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "STA-14", Statement: "a basic group of which no pod fits is False/Unschedulable with minCount (1) cannot be satisfied", Ref: "gang-semantics §4; §3.4 (basic counts as minCount 1); the incomplete-but-Scheduled case is EXP-2a"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "basic"})
					l.CreatePods(ctx, t, framework.Members("basic", 2, 16)...)
					c := l.WaitCondition(ctx, t, l.Env.Scaled(45*time.Second), "basic", metav1.ConditionFalse, "Unschedulable")
					if !strings.Contains(c.Message, "minCount (1) cannot be satisfied") {
						t.Errorf("message %q lacks %q", c.Message, "minCount (1) cannot be satisfied")
					}
				}},
		},
	}
	return append([]framework.Feature{stays, generation, writerFeature, protection, gone, losses, restart, basic}, statusTransitionFeatures()...)
}

// staWaitGone waits until the PodGroup no longer exists, reporting its finalizers while it does.
func staWaitGone(ctx context.Context, t *testing.T, l *framework.Lane, timeout time.Duration, group string) {
	t.Helper()
	framework.Eventually(ctx, t, timeout, "PodGroup "+group+" gone", func(ctx context.Context) (bool, string, error) {
		pg, err := l.PodGroup(ctx, group)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("still present, finalizers %v", pg.Finalizers), nil
	})
}

// staStatusPatch selects PodGroup status patches in apiserver_request_total.
var staStatusPatch = map[string]string{"group": "scheduling.k8s.io", "resource": "podgroups", "subresource": "status", "verb": "PATCH"}

// staSchedulerStart is the scheduler's process_start_time_seconds.
func staSchedulerStart(ctx context.Context, l *framework.Lane) (float64, error) {
	s, err := l.Env.SchedulerMetrics(ctx)
	if err != nil {
		return 0, err
	}
	v, ok := s.Sum("process_start_time_seconds", nil)
	if !ok {
		return 0, fmt.Errorf("process_start_time_seconds not exposed")
	}
	return v, nil
}

func staManagers(mfs []metav1.ManagedFieldsEntry) []string {
	out := make([]string, 0, len(mfs))
	for _, mf := range mfs {
		out = append(out, fmt.Sprintf("%s/%s/%q", mf.Manager, mf.Operation, mf.Subresource))
	}
	return out
}
