package suites

import (
	"context"
	"errors"
	"fmt"
	"github.com/gangbench/gangbench/suites/framework"
	"strings"
	"testing"

	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gangbench/gangbench/scenarios"
)

// The validation suite checks what the apiserver accepts and rejects (gang-semantics §2, §1.4). These
// are API checks: they hold whatever scheduler runs, so they are the suite that must still pass when
// the scheduler's gate is off, and must stop the run in preflight when the API is not served.

// valRejection names the HTTP status a rejection must carry.
type valRejection struct {
	name string
	is   func(error) bool
}

var (
	valInvalid   = valRejection{"422 Invalid", apierrors.IsInvalid}
	valForbidden = valRejection{"403 Forbidden", apierrors.IsForbidden}
)

// valExpectRejected fails unless err is an API error of kind whose text contains every substring.
// cleanup is called when the request was wrongly accepted, so the lane does not keep the object.
func valExpectRejected(t *testing.T, what string, err error, kind valRejection, cleanup func(), subs ...string) {
	t.Helper()
	// Errorf, not Fatalf: a wrongly accepted request must not stop the feature's later checks.
	if err == nil {
		if cleanup != nil {
			cleanup()
		}
		t.Errorf("%s: accepted, want %s containing %q", what, kind.name, subs)
		return
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Errorf("%s: want %s, got a non-API error: %v", what, kind.name, err)
		return
	}
	if !kind.is(err) {
		t.Errorf("%s: want %s, got %d %s: %v", what, kind.name, se.ErrStatus.Code, se.ErrStatus.Reason, err)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: error lacks %q: %v", what, s, err)
		}
	}
	t.Logf("%s rejected as expected: %v", what, err)
}

// valCreatePG sends a PodGroup and returns the stored object or the error.
func valCreatePG(ctx context.Context, l *framework.Lane, pg *schedv1beta1.PodGroup) (*schedv1beta1.PodGroup, error) {
	return l.Gang.PodGroups(l.Name).Create(ctx, pg, metav1.CreateOptions{})
}

func valDeletePG(ctx context.Context, l *framework.Lane, name string) func() {
	return func() {
		_ = l.Gang.PodGroups(l.Name).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	}
}

// valPatchPG sends a JSON merge patch of a PodGroup's spec.
func valPatchPG(ctx context.Context, l *framework.Lane, name, patch string) (*schedv1beta1.PodGroup, error) {
	return l.Gang.PodGroups(l.Name).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
}

func valInt32(v int32) *int32 { return &v }

func validationFeatures() []framework.Feature {
	const suite = "validation"
	lane := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	ref := func(item, section string) string { return "gang-semantics §11.E." + item + "; " + section }

	// gangPG builds a gang PodGroup whose policy a test then breaks.
	gangPG := func(l *framework.Lane, name string, minCount int32) *schedv1beta1.PodGroup {
		pg := scenarios.PodGroup(l.Name, scenarios.Group{Name: name, MinCount: 1})
		pg.Spec.SchedulingPolicy.Gang.MinCount = minCount
		return pg
	}

	createRules := framework.Feature{
		Suite: suite, Name: "PodGroup create validation", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "VAL-01", Statement: "a gang minCount of 0 is rejected 422 with Required value", Ref: ref("27", "§2.3")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					_, err := valCreatePG(ctx, l, gangPG(l, "mincount-zero", 0))
					valExpectRejected(t, "minCount 0", err, valInvalid, valDeletePG(ctx, l, "mincount-zero"), "spec.schedulingPolicy.gang.minCount", "Required value")
				}},
			{A: framework.Assertion{ID: "VAL-02", Statement: "a gang minCount of -1 is rejected 422 with must be greater than or equal to 1", Ref: ref("27", "§2.3")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					_, err := valCreatePG(ctx, l, gangPG(l, "mincount-negative", -1))
					valExpectRejected(t, "minCount -1", err, valInvalid, valDeletePG(ctx, l, "mincount-negative"), "must be greater than or equal to 1")
				}},
			{A: framework.Assertion{ID: "VAL-03", Statement: "a policy with both basic and gang is rejected 422 with must specify exactly one of", Ref: ref("27", "§2.3")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					pg := gangPG(l, "both-policies", 2)
					pg.Spec.SchedulingPolicy.Basic = &schedv1beta1.BasicSchedulingPolicy{}
					_, err := valCreatePG(ctx, l, pg)
					valExpectRejected(t, "basic and gang", err, valInvalid, valDeletePG(ctx, l, pg.Name), "must specify exactly one of")
				}},
			{A: framework.Assertion{ID: "VAL-04", Statement: "a policy with neither basic nor gang is rejected 422 with must specify one of", Ref: ref("27", "§2.3")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					pg := gangPG(l, "no-policy", 2)
					pg.Spec.SchedulingPolicy.Gang = nil
					_, err := valCreatePG(ctx, l, pg)
					valExpectRejected(t, "neither basic nor gang", err, valInvalid, valDeletePG(ctx, l, pg.Name), "must specify one of")
				}},
			{A: framework.Assertion{ID: "VAL-05", Statement: "disruptionMode all with a basic policy is accepted and read back as all", Ref: ref("29", "§2.3")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					got, err := valCreatePG(ctx, l, scenarios.PodGroup(l.Name, scenarios.Group{Name: "basic-all", DisruptionAll: true}))
					if err != nil {
						t.Fatalf("basic PodGroup with disruptionMode all: %v, want accepted", err)
					}
					if dm := got.Spec.DisruptionMode; dm == nil || dm.All == nil || dm.Single != nil {
						t.Errorf("read-back disruptionMode %+v, want {all: {}}", dm)
					}
				}},
			{A: framework.Assertion{ID: "VAL-06", Statement: "a PodGroup created without disruptionMode reads back disruptionMode single", Ref: ref("29", "§2.1")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if _, err := valCreatePG(ctx, l, gangPG(l, "default-mode", 2)); err != nil {
						t.Fatalf("create: %v", err)
					}
					got, err := l.PodGroup(ctx, "default-mode")
					if err != nil {
						t.Fatal(err)
					}
					if dm := got.Spec.DisruptionMode; dm == nil || dm.Single == nil || dm.All != nil {
						t.Errorf("read-back disruptionMode %+v, want {single: {}}", dm)
					}
				}},
			{A: framework.Assertion{ID: "VAL-07", Statement: "a raw spec.priority 1000 without a class is rejected 403 by Priority admission (must match the priority computed (0))", Ref: ref("30", "§1.4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					pg := gangPG(l, "raw-priority", 2)
					pg.Spec.Priority = valInt32(1000)
					_, err := valCreatePG(ctx, l, pg)
					valExpectRejected(t, "raw priority 1000", err, valForbidden, valDeletePG(ctx, l, pg.Name),
						"priority set in the pod group (1000) must match the priority computed (0)")
				}},
			{A: framework.Assertion{ID: "VAL-08", Statement: "with a priorityClassName, admission sets spec.priority to the class value", Ref: ref("30", "§1.4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					const value = 4242
					pc := l.PriorityClass(ctx, t, "val08", value, false)
					got, err := valCreatePG(ctx, l, scenarios.PodGroup(l.Name, scenarios.Group{Name: "with-class", MinCount: 2, PriorityClassName: pc}))
					if err != nil {
						t.Fatalf("create with class %s: %v", pc, err)
					}
					if got.Spec.Priority == nil || *got.Spec.Priority != value {
						t.Errorf("read-back spec.priority %v, want %d (class %s)", valPtr(got.Spec.Priority), value, pc)
					}
				}},
			{A: framework.Assertion{ID: "VAL-09", Statement: "a workloadRef to a Workload that does not exist is accepted", Ref: ref("33", "§1.4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					got, err := valCreatePG(ctx, l, scenarios.PodGroup(l.Name, scenarios.Group{Name: "dangling-ref", MinCount: 2, Workload: "no-such-workload", Template: "t0"}))
					if err != nil {
						t.Fatalf("PodGroup with a dangling workloadRef: %v, want accepted", err)
					}
					if got.Spec.WorkloadRef == nil || got.Spec.WorkloadRef.WorkloadName != "no-such-workload" {
						t.Errorf("read-back workloadRef %+v, want no-such-workload/t0", got.Spec.WorkloadRef)
					}
				}},
		},
	}

	// The update rules act on one PodGroup with every immutable field set; every patch is rejected,
	// so each step starts from the same stored object.
	const immutable = "immutable"
	updateRules := framework.Feature{
		Suite: suite, Name: "PodGroup update validation", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "VAL-10", Statement: "gang.minCount is mutable: a PATCH from 3 to 2 is accepted", Ref: ref("28", "§2.4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					// The class only has to exist at create time (Priority admission runs on create).
					pc := l.PriorityClass(ctx, t, "val10", 500, false)
					// The Workloads the PodGroup refers to (and VAL-13 points it at) exist, so the
					// update rules are checked on v1.36 too, whose admission rejects PodGroups of a
					// missing Workload (VAL-09); v1.37 does not care either way.
					for _, w := range []string{"wl-a", "wl-b"} {
						if _, err := valCreateWorkload(ctx, l, w, 1, nil); err != nil {
							t.Fatalf("create Workload %s: %v", w, err)
						}
					}
					if _, err := valCreatePG(ctx, l, scenarios.PodGroup(l.Name, scenarios.Group{Name: immutable, MinCount: 3, Workload: "wl-a", Template: "t0", PriorityClassName: pc})); err != nil {
						t.Fatalf("create: %v", err)
					}
					got, err := valPatchPG(ctx, l, immutable, `{"spec":{"schedulingPolicy":{"gang":{"minCount":2}}}}`)
					if err != nil {
						// Errorf, not Fatalf: the update rules below check the same stored object.
						t.Errorf("minCount 3→2: %v, want accepted", err)
						return
					}
					if got.Spec.SchedulingPolicy.Gang == nil || got.Spec.SchedulingPolicy.Gang.MinCount != 2 {
						t.Errorf("read-back policy %+v, want gang minCount 2", got.Spec.SchedulingPolicy)
					}
				}},
			{A: framework.Assertion{ID: "VAL-25", Statement: "lowering gang.minCount below 1 on update (PATCH to -1) is rejected 422 with must be greater than or equal to 1", Ref: ref("27", "§2.3, §2.4 (the minimum holds on update: the declarative Minimum does not ratchet a changed value)")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					_, err := valPatchPG(ctx, l, immutable, `{"spec":{"schedulingPolicy":{"gang":{"minCount":-1}}}}`)
					valExpectRejected(t, "minCount →-1", err, valInvalid, nil, "spec.schedulingPolicy.gang.minCount", "must be greater than or equal to 1")
				}},
			{A: framework.Assertion{ID: "VAL-11", Statement: "changing gang to basic is rejected 422 with field is immutable and field cannot be cleared once set", Ref: ref("28", "§2.4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					_, err := valPatchPG(ctx, l, immutable, `{"spec":{"schedulingPolicy":{"gang":null,"basic":{}}}}`)
					valExpectRejected(t, "gang→basic", err, valInvalid, nil, "field is immutable", "field cannot be cleared once set")
				}},
			{A: framework.Assertion{ID: "VAL-12", Statement: "changing disruptionMode is rejected 422 with field is immutable", Ref: ref("28", "§2.4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					_, err := valPatchPG(ctx, l, immutable, `{"spec":{"disruptionMode":{"single":null,"all":{}}}}`)
					valExpectRejected(t, "disruptionMode single→all", err, valInvalid, nil, "spec.disruptionMode", "field is immutable")
				}},
			{A: framework.Assertion{ID: "VAL-13", Statement: "changing workloadRef is rejected 422 with field is immutable", Ref: ref("28", "§2.4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					_, err := valPatchPG(ctx, l, immutable, `{"spec":{"workloadRef":{"workloadName":"wl-b"}}}`)
					valExpectRejected(t, "workloadRef wl-a→wl-b", err, valInvalid, nil, "spec.workloadRef", "field is immutable")
				}},
			{A: framework.Assertion{ID: "VAL-14", Statement: "changing priorityClassName is rejected 422 with field is immutable", Ref: ref("28", "§2.4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					classB := l.PriorityClass(ctx, t, "val14", 500, false)
					_, err := valPatchPG(ctx, l, immutable, fmt.Sprintf(`{"spec":{"priorityClassName":%q}}`, classB))
					valExpectRejected(t, "priorityClassName →"+classB, err, valInvalid, nil, "spec.priorityClassName", "field is immutable")
				}},
			{A: framework.Assertion{ID: "VAL-15", Statement: "changing priority is rejected 422 with field is immutable", Ref: ref("28", "§2.4")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					_, err := valPatchPG(ctx, l, immutable, `{"spec":{"priority":600}}`)
					valExpectRejected(t, "priority 500→600", err, valInvalid, nil, "spec.priority", "field is immutable")
				}},
		},
	}

	workloadRules := framework.Feature{
		Suite: suite, Name: "Workload validation", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "VAL-16", Statement: "a Workload with 9 podGroupTemplates is rejected 422 with must have at most 8 items", Ref: ref("31", "§2.5")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					_, err := valCreateWorkload(ctx, l, "nine", 9, nil)
					valExpectRejected(t, "9 templates", err, valInvalid, valDeleteWorkload(ctx, l, "nine"), "must have at most 8 items")
				}},
			{A: framework.Assertion{ID: "VAL-26", Statement: "a Workload whose podGroupTemplate has gang minCount -1 is rejected 422 with must be greater than or equal to 1", Ref: ref("31", "§2.3, §2.5 (a template's schedulingPolicy is validated as a PodGroup's)")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					w := scenarios.Workload(l.Name, "negative", scenarios.Template{Name: "t0"})
					// Set by hand: the builder makes a basic policy of any minCount below 1.
					w.Spec.PodGroupTemplates[0].SchedulingPolicy = schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: -1}}
					_, err := l.Gang.Workloads(l.Name).Create(ctx, w, metav1.CreateOptions{})
					valExpectRejected(t, "template minCount -1", err, valInvalid, valDeleteWorkload(ctx, l, "negative"), "schedulingPolicy.gang.minCount", "must be greater than or equal to 1")
				}},
			{A: framework.Assertion{ID: "VAL-17", Statement: "adding a podGroupTemplate on update is rejected 422 with item may not be added", Ref: ref("31", "§2.5")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if _, err := valCreateWorkload(ctx, l, "two", 2, nil); err != nil {
						t.Fatalf("create Workload with 2 templates: %v", err)
					}
					_, err := valPatchTemplates(ctx, l, "two", 3)
					valExpectRejected(t, "2→3 templates", err, valInvalid, nil, "item may not be added")
				}},
			{A: framework.Assertion{ID: "VAL-18", Statement: "removing a podGroupTemplate on update is rejected 422 with item may not be removed", Ref: ref("31", "§2.5")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					_, err := valPatchTemplates(ctx, l, "two", 1)
					valExpectRejected(t, "2→1 templates", err, valInvalid, nil, "item may not be removed")
				}},
			{A: framework.Assertion{ID: "VAL-19", Statement: "templates with different priorityClassName are rejected 422 with detected multiple priority configurations", Ref: ref("31", "§2.5")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					_, err := valCreateWorkload(ctx, l, "mixed", 2, []string{l.Name + "-a", l.Name + "-b"})
					valExpectRejected(t, "templates with classes a and b", err, valInvalid, valDeleteWorkload(ctx, l, "mixed"), "detected multiple priority configurations")
				}},
		},
	}

	podRules := framework.Feature{
		Suite: suite, Name: "Pod schedulingGroup validation", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "VAL-20", Statement: "changing a Pod's spec.schedulingGroup is rejected 422 with pod updates may not change fields other than", Ref: ref("32", "§2.6")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					// Gated, so the scheduler never acts on it: this is an API check only.
					l.CreatePods(ctx, t, scenarios.Member{Name: "member", Group: "group-a", Gated: true})
					_, err := l.Client.CoreV1().Pods(l.Name).Patch(ctx, "member", types.MergePatchType,
						[]byte(`{"spec":{"schedulingGroup":{"podGroupName":"group-b"}}}`), metav1.PatchOptions{})
					valExpectRejected(t, "schedulingGroup group-a→group-b", err, valInvalid, nil, "pod updates may not change fields other than")
				}},
			{A: framework.Assertion{ID: "VAL-21", Statement: "a Pod with podGroupName Bad_Name is rejected 422 with the RFC 1123 subdomain message", Ref: ref("32", "§2.6")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					p := l.Pod(scenarios.Member{Name: "bad-group", Group: "Bad_Name", Gated: true})
					_, err := l.Client.CoreV1().Pods(l.Name).Create(ctx, p, metav1.CreateOptions{})
					valExpectRejected(t, "podGroupName Bad_Name", err, valInvalid, func() {
						_ = l.Client.CoreV1().Pods(l.Name).Delete(context.WithoutCancel(ctx), p.Name, metav1.DeleteOptions{})
					}, "spec.schedulingGroup.podGroupName", "a lowercase RFC 1123 subdomain must consist of")
				}},
		},
	}
	return append([]framework.Feature{createRules, updateRules, workloadRules, podRules}, verbFeatures()...)
}

// valCreateWorkload creates a Workload with n basic templates t0…; classes, when given, are the
// templates' priorityClassNames in order.
func valCreateWorkload(ctx context.Context, l *framework.Lane, name string, n int, classes []string) (*schedv1beta1.Workload, error) {
	ts := make([]scenarios.Template, n)
	for i := range ts {
		ts[i] = scenarios.Template{Name: fmt.Sprintf("t%d", i)}
		if i < len(classes) {
			ts[i].PriorityClassName = classes[i]
		}
	}
	return l.Gang.Workloads(l.Name).Create(ctx, scenarios.Workload(l.Name, name, ts...), metav1.CreateOptions{})
}

func valDeleteWorkload(ctx context.Context, l *framework.Lane, name string) func() {
	return func() {
		_ = l.Gang.Workloads(l.Name).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	}
}

// valPatchTemplates replaces a Workload's template list by n basic templates t0… (a merge patch
// replaces lists whole, so this adds or removes items at the end).
func valPatchTemplates(ctx context.Context, l *framework.Lane, name string, n int) (*schedv1beta1.Workload, error) {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"name":"t%d","schedulingPolicy":{"basic":{}}}`, i)
	}
	patch := `{"spec":{"podGroupTemplates":[` + strings.Join(items, ",") + `]}}`
	return l.Gang.Workloads(l.Name).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
}

func valPtr(p *int32) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}
