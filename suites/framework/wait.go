package framework

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/internal/poll"
	"github.com/gangbench/gangbench/scenarios"
)

// ConditionType is the only PodGroup condition the v1.37 scheduler writes.
const ConditionType = "PodGroupInitiallyScheduled"

// pollInterval is how often conditions are re-read. The API is cheap on loopback and a fast poll
// keeps bind-time measurements honest.
const PollInterval = 100 * time.Millisecond

// Eventually polls cond until it returns true or timeout passes, then fails the test with what it
// waited for and the last state cond described.
func Eventually(ctx context.Context, t testing.TB, timeout time.Duration, what string, cond func(context.Context) (bool, string, error)) {
	t.Helper()
	if err := Poll(ctx, timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}

// Poll is Eventually returning an error instead of failing a test.
func Poll(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, string, error)) error {
	return poll.Until(ctx, what, PollInterval, timeout, cond)
}

// Consistently checks cond for the whole window and fails the test the first time it is false. It
// is for negative assertions; callers must also prove the scheduler looked (Canary, metrics, events).
func Consistently(ctx context.Context, t testing.TB, window time.Duration, what string, cond func(context.Context) (bool, string, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, window+10*time.Second)
	defer cancel()
	start := time.Now()
	end := start.Add(window)
	tick := time.NewTicker(PollInterval * 2)
	defer tick.Stop()
	// A window in which the state could not be read is no evidence that it held: it passes only if
	// reads succeeded throughout, with no gap longer than a quarter of the window.
	maxGap := window / 4
	lastRead := start
	var lastErr error
	for {
		ok, state, err := cond(ctx)
		now := time.Now()
		if err == nil && !ok {
			t.Fatalf("expected %s throughout %s, but after %s: %s", what, window, time.Since(start).Round(time.Millisecond), state)
		}
		if err == nil {
			lastRead = now
		} else {
			lastErr = err
			if now.Sub(lastRead) > maxGap {
				t.Fatalf("could not check %s for %s of its %s window: %v", what, now.Sub(lastRead).Round(time.Millisecond), window, err)
			}
		}
		if now.After(end) {
			if lastRead.Before(end.Add(-maxGap)) {
				t.Fatalf("could not check %s in the last %s of its %s window: %v", what, now.Sub(lastRead).Round(time.Millisecond), window, lastErr)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("context ended while checking %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// PodState classifies a pod for gang assertions.
type PodState string

const (
	Bound         PodState = "bound"
	Unschedulable PodState = "unschedulable" // PodScheduled=False: the scheduler looked and said no
	Untouched     PodState = "untouched"     // no PodScheduled condition: the scheduler has not decided
)

// StateOf classifies one pod.
func StateOf(p *corev1.Pod) PodState {
	if p.Spec.NodeName != "" {
		return Bound
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return Unschedulable
		}
	}
	return Untouched
}

// Outcome counts pods per group and state.
type Outcome struct {
	ByGroup map[string]map[PodState]int
	GPUs    int64 // GPUs held by bound pods
	Pods    map[string]PodState
}

// Bound returns how many pods of group are bound.
func (o Outcome) Bound(group string) int { return o.ByGroup[group][Bound] }

// Count returns the pods of group in state s.
func (o Outcome) Count(group string, s PodState) int { return o.ByGroup[group][s] }

func (o Outcome) String() string {
	groups := make([]string, 0, len(o.ByGroup))
	for g := range o.ByGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	var b strings.Builder
	for _, g := range groups {
		fmt.Fprintf(&b, "%s: %d bound, %d unschedulable, %d untouched; ", g, o.ByGroup[g][Bound], o.ByGroup[g][Unschedulable], o.ByGroup[g][Untouched])
	}
	fmt.Fprintf(&b, "GPUs allocated %d", o.GPUs)
	return b.String()
}

// Observe summarises the lane's pods (canaries excluded).
func (l *Lane) Observe(ctx context.Context) (Outcome, error) {
	pods, err := l.Pods(ctx)
	if err != nil {
		return Outcome{}, err
	}
	o := Outcome{ByGroup: map[string]map[PodState]int{}, Pods: map[string]PodState{}}
	for i := range pods {
		p := &pods[i]
		if strings.HasPrefix(p.Name, "canary-") {
			continue
		}
		g := "-"
		if p.Spec.SchedulingGroup != nil && p.Spec.SchedulingGroup.PodGroupName != nil {
			g = *p.Spec.SchedulingGroup.PodGroupName
		}
		if o.ByGroup[g] == nil {
			o.ByGroup[g] = map[PodState]int{}
		}
		s := StateOf(p)
		o.ByGroup[g][s]++
		o.Pods[p.Name] = s
		if s == Bound {
			for _, c := range p.Spec.Containers {
				o.GPUs += c.Resources.Limits.Name(scenarios.GPUResource, "").Value()
			}
		}
	}
	return o, nil
}

// WaitDecided waits until each of the named pods is bound or marked unschedulable, i.e. the
// scheduler has made a decision about every one, and returns the outcome.
func (l *Lane) WaitDecided(ctx context.Context, t testing.TB, timeout time.Duration, names ...string) Outcome {
	t.Helper()
	var out Outcome
	Eventually(ctx, t, timeout, fmt.Sprintf("the scheduler to decide on pods %v", names), func(ctx context.Context) (bool, string, error) {
		o, err := l.Observe(ctx)
		if err != nil {
			return false, "", err
		}
		out = o
		for _, n := range names {
			if s, ok := o.Pods[n]; !ok || s == Untouched {
				return false, o.String(), nil
			}
		}
		return true, o.String(), nil
	})
	return out
}

// WaitBound waits until all named pods are bound and returns their bind spread: the time between
// the first and the last member's Scheduled event. Events carry microsecond eventTimes; the pods'
// PodScheduled condition has only whole seconds, too coarse for a spread that is usually milliseconds.
func (l *Lane) WaitBound(ctx context.Context, t testing.TB, timeout time.Duration, names ...string) time.Duration {
	t.Helper()
	var spread time.Duration
	var hopeless string
	var certain Certainty
	Eventually(ctx, t, timeout, fmt.Sprintf("pods %v bound and their Scheduled events recorded", names), func(ctx context.Context) (bool, string, error) {
		pods, err := l.Pods(ctx)
		if err != nil {
			return false, "", err
		}
		var missing []string
		for _, n := range names {
			i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == n })
			if i < 0 || pods[i].Spec.NodeName == "" {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			// A red run should take about as long as a green one: once the outcome is certain the
			// wait stops instead of running to its timeout (the stop only ends this poll; Eventually
			// is told it is done and the caller fails below).
			if why := l.CannotBind(pods, missing); certain.Held(why) {
				hopeless = why
				return true, "", nil
			}
			return false, fmt.Sprintf("not bound: %v", missing), nil
		}
		evs, err := l.Events(ctx, "")
		if err != nil {
			return false, "", err
		}
		at := map[string]time.Time{}
		for _, e := range evs {
			if e.Reason != "Scheduled" || !slices.Contains(names, e.InvolvedObject.Name) {
				continue
			}
			ts := e.EventTime.Time
			if ts.IsZero() {
				ts = e.FirstTimestamp.Time
			}
			at[e.InvolvedObject.Name] = ts
		}
		if len(at) < len(names) {
			return false, fmt.Sprintf("bound, but only %d of %d Scheduled events recorded yet", len(at), len(names)), nil
		}
		var first, last time.Time
		for _, ts := range at {
			if first.IsZero() || ts.Before(first) {
				first = ts
			}
			if ts.After(last) {
				last = ts
			}
		}
		spread = last.Sub(first)
		return true, "", nil
	})
	if hopeless != "" {
		t.Fatalf("pods %v cannot be bound any more, so the wait stopped early: %s", names, hopeless)
	}
	return spread
}

// certainFor is how long the state that makes a wait hopeless must hold before the wait stops: a
// preemption or a deletion in flight shows for less than that.
const certainFor = 3 * time.Second

// certainty tracks, across the polls of one wait, how long a reason for hopelessness has held.
type Certainty struct{ since time.Time }

// held records this poll's reason ("" while the wait can still succeed) and reports whether a
// reason has held without a break for certainFor.
func (c *Certainty) Held(why string) bool {
	switch {
	case why == "":
		c.since = time.Time{}
	case c.since.IsZero():
		c.since = time.Now()
	default:
		return time.Since(c.since) >= certainFor
	}
	return false
}

// cannotBind says why the named unbound pods cannot all bind any more, or "" while they might: the
// scheduler decided each of them unschedulable (PodScheduled=False, not a gate), together they need
// more GPUs than the lane has free, and nothing can free any: no pod of the lane is terminating and
// none is nominated (a preemption under way).
func (l *Lane) CannotBind(pods []corev1.Pod, unbound []string) string {
	capacity := int64(len(l.Nodes) * l.GPUs)
	if capacity == 0 {
		return ""
	}
	used := int64(0)
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || p.Status.NominatedNodeName != "" {
			return ""
		}
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			used += podGPUs(p)
		}
	}
	free := capacity - used
	var why []string
	need := int64(0)
	for _, n := range unbound {
		i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == n })
		if i < 0 {
			return ""
		}
		p := &pods[i]
		reason := PodScheduledReason(p)
		if StateOf(p) != Unschedulable || reason == corev1.PodReasonSchedulingGated {
			return ""
		}
		need += podGPUs(p)
		why = append(why, fmt.Sprintf("%s PodScheduled=False/%s", n, reason))
	}
	if need <= free {
		return ""
	}
	return fmt.Sprintf("%s, needing %d GPUs together; the lane has %d of %d GPUs free, nothing is terminating or nominated", strings.Join(why, ", "), need, free, capacity)
}

func podGPUs(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		n += c.Resources.Limits.Name(scenarios.GPUResource, "").Value()
	}
	return n
}

// GroupCondition returns the PodGroupInitiallyScheduled condition, or nil.
func GroupCondition(pg *schedv1beta1.PodGroup) *metav1.Condition {
	for i := range pg.Status.Conditions {
		if pg.Status.Conditions[i].Type == ConditionType {
			return &pg.Status.Conditions[i]
		}
	}
	return nil
}

func DescribeCondition(c *metav1.Condition) string {
	if c == nil {
		return "no " + ConditionType + " condition"
	}
	return fmt.Sprintf("%s/%s %q (observedGeneration %d, at %s)", c.Status, c.Reason, c.Message, c.ObservedGeneration, c.LastTransitionTime.Format(time.RFC3339))
}

// WaitCondition waits until the group's condition has status and reason, and returns it. It stops
// early, and fails, once the lane has settled without it (see settle).
func (l *Lane) WaitCondition(ctx context.Context, t testing.TB, timeout time.Duration, group string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	l.EventuallySettled(ctx, t, timeout, fmt.Sprintf("PodGroup %s %s=%s/%s", group, ConditionType, status, reason), func(ctx context.Context) (bool, string, error) {
		pg, err := l.PodGroup(ctx, group)
		if err != nil {
			return false, "", err
		}
		got = GroupCondition(pg)
		return got != nil && got.Status == status && got.Reason == reason, DescribeCondition(got), nil
	})
	return got
}

// WaitEvent waits for an event about object with reason and a message containing every substring.
// Like WaitCondition it stops early, and fails, once the lane has settled without the event.
func (l *Lane) WaitEvent(ctx context.Context, t testing.TB, timeout time.Duration, object, reason string, substrings ...string) corev1.Event {
	t.Helper()
	var found corev1.Event
	l.EventuallySettled(ctx, t, timeout, fmt.Sprintf("a %s event on %s containing %q", reason, object, substrings), func(ctx context.Context) (bool, string, error) {
		evs, err := l.Events(ctx, object)
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, e := range evs {
			if e.Reason != reason {
				continue
			}
			seen = append(seen, e.Message)
			if ContainsAll(e.Message, substrings) {
				found = e
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d %s events: %q", len(seen), reason, seen), nil
	})
	return found
}

func ContainsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// podScheduledReason returns the reason of a pod's PodScheduled=False condition.
func PodScheduledReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Reason
		}
	}
	return ""
}
