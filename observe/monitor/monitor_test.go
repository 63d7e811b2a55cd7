package monitor

import (
	"context"
	"strings"
	"testing"
	"time"

	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// waitFor polls cond (bounded) because informer delivery is asynchronous.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func waitTransitions(t *testing.T, m *Monitor, n int) []Transition {
	t.Helper()
	var ts []Transition
	waitFor(t, "transitions", func() bool {
		ts = m.Transitions()
		return len(ts) >= n
	})
	if len(ts) != n {
		t.Fatalf("want %d transitions, got %d: %+v", n, len(ts), ts)
	}
	return ts
}

func podGroup(ns, name string, uid types.UID) *schedv1beta1.PodGroup {
	return &schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Generation: 1},
		Spec: schedv1beta1.PodGroupSpec{SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: 3},
		}},
	}
}

func setStatus(t *testing.T, cs *fake.Clientset, pg *schedv1beta1.PodGroup, c *metav1.Condition) *schedv1beta1.PodGroup {
	t.Helper()
	pg = pg.DeepCopy()
	pg.Status.Conditions = nil
	if c != nil {
		pg.Status.Conditions = []metav1.Condition{*c}
	}
	out, err := cs.SchedulingV1beta1().PodGroups(pg.Namespace).UpdateStatus(context.Background(), pg, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMonitorLive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := fake.NewClientset()
	// A PodGroup that exists before Start must be picked up by the initial list.
	pre := podGroup("other", "pre-existing", "uid-pre")
	pre.Status.Conditions = []metav1.Condition{*cond(metav1.ConditionTrue, "Scheduled", "", 1, t0)}
	if _, err := cs.SchedulingV1beta1().PodGroups("other").Create(ctx, pre, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	m := New(cs, Options{})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	if err := m.Start(ctx); err == nil {
		t.Error("second Start succeeded")
	}
	ts := m.Transitions() // synced: the pre-existing object is there without waiting
	if len(ts) != 1 || ts[0].Name != "pre-existing" || ts[0].Event != EventAdded || ts[0].To == nil || ts[0].To.Status != metav1.ConditionTrue {
		t.Fatalf("initial list not observed: %+v", ts)
	}

	pg, err := cs.SchedulingV1beta1().PodGroups("team").Create(ctx, podGroup("team", "gang-a", "uid-a"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts = waitTransitions(t, m, 2)
	if ts[1].Event != EventAdded || ts[1].UID != "uid-a" || ts[1].To != nil || ts[1].Generation != 1 {
		t.Fatalf("add: %+v", ts[1])
	}

	falseC := cond(metav1.ConditionFalse, "Unschedulable", "0/4 nodes are available", 1, t0)
	pg = setStatus(t, cs, pg, falseC)
	ts = waitTransitions(t, m, 3)
	if ts[2].Event != EventModified || ts[2].From != nil || ts[2].To.Status != metav1.ConditionFalse {
		t.Fatalf("False: %+v", ts[2])
	}

	trueC := cond(metav1.ConditionTrue, "Scheduled", "", 1, t0.Add(3*time.Second))
	pg = setStatus(t, cs, pg, trueC)
	ts = waitTransitions(t, m, 4)
	if ts[3].From == nil || ts[3].From.Status != metav1.ConditionFalse || ts[3].To.Status != metav1.ConditionTrue {
		t.Fatalf("True: %+v", ts[3])
	}
	if vs := m.Violations(); len(vs) != 0 {
		t.Fatalf("False -> True is allowed, got %v", vs)
	}

	// Identical writes (the scheduler re-asserting True) produce watch events but no transitions.
	// A second object's creation is the barrier: events arrive in order, so once it is recorded
	// the identical updates have been handled.
	pg = setStatus(t, cs, pg, trueC)
	pg = setStatus(t, cs, pg, trueC)
	if _, err := cs.SchedulingV1beta1().PodGroups("team").Create(ctx, podGroup("team", "barrier", "uid-barrier"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ts = waitTransitions(t, m, 5)
	if ts[4].Name != "barrier" {
		t.Fatalf("identical updates were recorded: %+v", ts[4])
	}

	pg = setStatus(t, cs, pg, cond(metav1.ConditionFalse, "Unschedulable", "node lost", 1, t0.Add(9*time.Second)))
	waitTransitions(t, m, 6)
	vs := m.Violations()
	if len(vs) != 1 {
		t.Fatalf("want exactly 1 violation, got %d: %v", len(vs), vs)
	}
	msg := vs[0].Error()
	for _, want := range []string{"podgroup team/gang-a:", "PodGroupInitiallyScheduled went True (Scheduled, ", `-> False (Unschedulable "node lost", `} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if vs[0].UID != "uid-a" || vs[0].Kind != KindRegression {
		t.Errorf("violation %+v", vs[0])
	}

	// Deleting the object is not a violation.
	if err := cs.SchedulingV1beta1().PodGroups("team").Delete(ctx, pg.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ts = waitTransitions(t, m, 7)
	if ts[6].Event != EventDeleted || ts[6].UID != "uid-a" {
		t.Fatalf("delete: %+v", ts[6])
	}
	if vs := m.Violations(); len(vs) != 1 {
		t.Fatalf("deletion changed the verdict: %v", vs)
	}

	// Recreated under the same name with a new UID: its False is its own, not a regression.
	re, err := cs.SchedulingV1beta1().PodGroups("team").Create(ctx, podGroup("team", "gang-a", "uid-a2"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setStatus(t, cs, re, cond(metav1.ConditionFalse, "Unschedulable", "", 1, t0.Add(20*time.Second)))
	waitTransitions(t, m, 9)
	if vs := m.Violations(); len(vs) != 1 {
		t.Fatalf("recreated object inherited history: %v", vs)
	}

	s := m.Stats()
	if s.PodGroups != 4 || s.Transitions != 9 || s.EverTrue != 2 || s.Deleted != 1 {
		t.Errorf("stats %+v", s)
	}

	m.Stop()
	m.Stop() // idempotent
	if len(m.Transitions()) != 9 {
		t.Error("timeline not readable after Stop")
	}
}

func TestObserveDedupAndFrom(t *testing.T) {
	n := 0
	m := New(nil, Options{Clock: func() time.Time { n++; return t0.Add(time.Duration(n) * time.Second) }})
	falseC := cond(metav1.ConditionFalse, "Unschedulable", "a", 1, t0)
	obs := func(event string, c *metav1.Condition) {
		m.Observe(Transition{Namespace: "team", Name: "a", UID: "u", Event: event, To: c})
	}
	obs(EventAdded, nil)
	obs(EventModified, nil) // absent -> absent: nothing
	obs(EventModified, falseC)
	same := *falseC
	// equal by value, though a different pointer: nothing
	obs(EventModified, &same)
	obs(EventModified, cond(metav1.ConditionFalse, "Unschedulable", "b", 1, t0))  // message change
	obs(EventModified, cond(metav1.ConditionFalse, "Unschedulable", "b", 2, t0))  // observedGeneration change
	obs(EventModified, cond(metav1.ConditionFalse, "SchedulerError", "b", 2, t0)) // reason change
	obs(EventModified, cond(metav1.ConditionFalse, "SchedulerError", "b", 2, t0.Add(time.Hour)))
	obs(EventDeleted, cond(metav1.ConditionFalse, "SchedulerError", "b", 2, t0.Add(time.Hour))) // deletions always count

	ts := m.Transitions()
	if len(ts) != 7 {
		t.Fatalf("want 7 transitions, got %d", len(ts))
	}
	if ts[0].From != nil || ts[1].From != nil || ts[2].From.Message != "a" || ts[2].To.Message != "b" {
		t.Errorf("From not chained: %+v", ts[:3])
	}
	if !ts[0].Time.Equal(t0.Add(time.Second)) || !ts[6].Time.Equal(t0.Add(7*time.Second)) {
		t.Errorf("clock: dropped observations must not consume stamps: %v .. %v", ts[0].Time, ts[6].Time)
	}
	// Only the lastTransitionTime change without a flip is a violation.
	if vs := m.Violations(); len(vs) != 1 || vs[0].Kind != KindTransitionTime {
		t.Errorf("violations %v", vs)
	}

	// The timeline is a copy: mutating it must not reach the monitor.
	ts[2].To.Status = metav1.ConditionTrue
	if m.Transitions()[2].To.Status != metav1.ConditionFalse {
		t.Error("Transitions aliases internal state")
	}
	// Nor may the caller's condition, mutated after Observe.
	c := cond(metav1.ConditionTrue, "Scheduled", "", 2, t0)
	m.Observe(Transition{UID: "v", Event: EventAdded, To: c})
	c.Status = metav1.ConditionFalse
	if last := m.Transitions()[7]; last.To.Status != metav1.ConditionTrue {
		t.Error("Observe aliases the caller's condition")
	}
}

func TestMonitorConcurrentObserve(t *testing.T) {
	m := New(nil, Options{})
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			uid := types.UID(rune('a' + g))
			for i := range 50 {
				m.Observe(Transition{UID: uid, Event: EventModified, To: cond(metav1.ConditionFalse, "Unschedulable", "", int64(i), t0)})
				_ = m.Violations()
				_ = m.Stats()
			}
		}()
	}
	for range 4 {
		<-done
	}
	if s := m.Stats(); s.PodGroups != 4 || s.Transitions != 200 {
		t.Errorf("stats %+v", s)
	}
}

func TestStartAPINotServed(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "scheduling.k8s.io", Resource: "podgroups"}, "")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := New(cs, Options{})
	err := m.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "not served") {
		t.Fatalf("want a not-served error, got %v", err)
	}
	m.Stop()
}

func TestStartSyncTimeout(t *testing.T) {
	cs := fake.NewClientset()
	// The probe succeeds but the informer's list keeps failing, so the cache never syncs.
	var lists int
	cs.PrependReactor("list", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		if lists == 1 {
			return true, &schedv1beta1.PodGroupList{}, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "scheduling.k8s.io", Resource: "podgroups"}, "", nil)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	m := New(cs, Options{})
	if err := m.Start(ctx); err == nil || !strings.Contains(err.Error(), "did not sync") {
		t.Fatalf("want a sync error, got %v", err)
	}
	if m.Stats().WatchErrors == 0 {
		t.Error("list failures not counted")
	}
	m.Stop()
}
