package gangapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

func gangPG() *schedv1beta1.PodGroup {
	return &schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns", Labels: map[string]string{"a": "b"}},
		Spec: schedv1beta1.PodGroupSpec{
			WorkloadRef:       &schedv1beta1.WorkloadReference{WorkloadName: "w", TemplateName: "t"},
			SchedulingPolicy:  schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: 3}},
			DisruptionMode:    &schedv1beta1.DisruptionMode{All: &schedv1beta1.AllDisruptionMode{}},
			PriorityClassName: "high",
		},
		Status: schedv1beta1.PodGroupStatus{Conditions: []metav1.Condition{{
			Type: ConditionInitiallyScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled",
			LastTransitionTime: metav1.NewTime(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)),
		}}},
	}
}

func TestPodGroupToV1alpha2Fields(t *testing.T) {
	u, err := PodGroupToV1alpha2(V1alpha2(), gangPG())
	if err != nil {
		t.Fatal(err)
	}
	if u.GetAPIVersion() != "scheduling.k8s.io/v1alpha2" || u.GetKind() != "PodGroup" {
		t.Errorf("apiVersion/kind = %s/%s", u.GetAPIVersion(), u.GetKind())
	}
	want := map[string]string{
		"spec.podGroupTemplateRef.workload.workloadName":         "w",
		"spec.podGroupTemplateRef.workload.podGroupTemplateName": "t",
		"spec.disruptionMode":                                    "PodGroup",
		"spec.priorityClassName":                                 "high",
	}
	for path, v := range want {
		got, ok, err := unstructured.NestedString(u.Object, strings.Split(path, ".")...)
		if err != nil || !ok || got != v {
			t.Errorf("%s = %q (found %v, err %v), want %q", path, got, ok, err, v)
		}
	}
	if mc, _, _ := unstructured.NestedInt64(u.Object, "spec", "schedulingPolicy", "gang", "minCount"); mc != 3 {
		t.Errorf("minCount = %d, want 3", mc)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "workloadRef"); ok {
		t.Error("spec.workloadRef must not be sent to v1alpha2")
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	if len(conds) != 1 || conds[0].(map[string]any)["type"] != ConditionScheduledV1alpha2 {
		t.Errorf("conditions = %v, want type %s", conds, ConditionScheduledV1alpha2)
	}
}

func TestPodGroupRoundTrip(t *testing.T) {
	for name, pg := range map[string]*schedv1beta1.PodGroup{
		"gang with workload": gangPG(),
		"basic single": {
			ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"},
			Spec: schedv1beta1.PodGroupSpec{
				SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{Basic: &schedv1beta1.BasicSchedulingPolicy{}},
				DisruptionMode:   &schedv1beta1.DisruptionMode{Single: &schedv1beta1.SingleDisruptionMode{}},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			u, err := PodGroupToV1alpha2(V1alpha2(), pg)
			if err != nil {
				t.Fatal(err)
			}
			back, err := PodGroupFromV1alpha2(V1alpha2(), u)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(pg, back); d != "" {
				t.Errorf("round trip changed the PodGroup (-want +got):\n%s", d)
			}
		})
	}
}

func TestNotExpressible(t *testing.T) {
	never := schedv1beta1.PreemptNever
	pg := gangPG()
	pg.Spec.PreemptionPolicy = &never
	_, err := PodGroupToV1alpha2(V1alpha2(), pg)
	if !errors.Is(err, ErrNotExpressible) || !strings.Contains(err.Error(), "spec.preemptionPolicy") {
		t.Errorf("PodGroup with preemptionPolicy: err = %v, want ErrNotExpressible naming spec.preemptionPolicy", err)
	}
	w := &schedv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "w"}, Spec: schedv1beta1.WorkloadSpec{
		PodGroupTemplates: []schedv1beta1.PodGroupTemplate{{Name: "a"}, {Name: "b", PreemptionPolicy: &never}},
	}}
	_, err = WorkloadToV1alpha2(V1alpha2(), w)
	if !errors.Is(err, ErrNotExpressible) || !strings.Contains(err.Error(), "spec.podGroupTemplates[1].preemptionPolicy") {
		t.Errorf("Workload template with preemptionPolicy: err = %v", err)
	}
	w.Spec.PodGroupTemplates[1].PreemptionPolicy = nil
	w.Spec.CompositePodGroupTemplates = []schedv1beta1.CompositePodGroupTemplate{{Name: "c"}}
	if _, err = WorkloadToV1alpha2(V1alpha2(), w); !errors.Is(err, ErrNotExpressible) {
		t.Errorf("Workload with compositePodGroupTemplates: err = %v", err)
	}
	w.Spec.CompositePodGroupTemplates = nil
	u, err := WorkloadToV1alpha2(V1alpha2(), w)
	if err != nil {
		t.Fatalf("plain Workload: %v", err)
	}
	back, err := WorkloadFromV1alpha2(V1alpha2(), u)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(w, back); d != "" {
		t.Errorf("Workload round trip (-want +got):\n%s", d)
	}
}

func TestPatchToV1alpha2(t *testing.T) {
	for _, tc := range []struct{ kind, in, want string }{
		{"PodGroup", `{"spec":{"schedulingPolicy":{"gang":{"minCount":2}}}}`, `{"spec":{"schedulingPolicy":{"gang":{"minCount":2}}}}`},
		{"PodGroup", `{"spec":{"workloadRef":{"workloadName":"w","templateName":"t"}}}`, `{"spec":{"podGroupTemplateRef":{"workload":{"podGroupTemplateName":"t","workloadName":"w"}}}}`},
		{"PodGroup", `{"spec":{"workloadRef":null}}`, `{"spec":{"podGroupTemplateRef":null}}`},
		{"PodGroup", `{"status":{"conditions":[{"type":"PodGroupInitiallyScheduled","status":"False"}]}}`, `{"status":{"conditions":[{"status":"False","type":"PodGroupScheduled"}]}}`},
		{"PodGroup", `{"spec":{"disruptionMode":{"single":null,"all":{}}}}`, `{"spec":{"disruptionMode":"PodGroup"}}`},
		{"Workload", `{"spec":{"podGroupTemplates":[{"name":"a","disruptionMode":{"single":{}}}]}}`, `{"spec":{"podGroupTemplates":[{"disruptionMode":"Pod","name":"a"}]}}`},
	} {
		got, err := PatchToV1alpha2(V1alpha2(), tc.kind, []byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
	if _, err := PatchToV1alpha2(V1alpha2(), "PodGroup", []byte(`{"spec":{"preemptionPolicy":"Never"}}`)); !errors.Is(err, ErrNotExpressible) {
		t.Errorf("patch setting preemptionPolicy: err = %v, want ErrNotExpressible", err)
	}
	if _, err := convertPatch(V1alpha2(), "PodGroup", types.JSONPatchType, []byte(`[]`)); !errors.Is(err, ErrNotExpressible) {
		t.Errorf("JSON patch: err = %v, want ErrNotExpressible", err)
	}
}

// TestConvertedClient drives the v1alpha2 client against client-go's fake dynamic client, which
// stores what it is sent: the stored object must be v1alpha2, what callers get back v1beta1.
func TestConvertedClient(t *testing.T) {
	ctx := t.Context()
	gvr := schema.GroupVersionResource{Group: Group, Version: "v1alpha2", Resource: "podgroups"}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		gvr: "PodGroupList", {Group: Group, Version: "v1alpha2", Resource: "workloads"}: "WorkloadList",
	})
	c, err := NewClient(V1alpha2(), fake.NewClientset(), dyn)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.PodGroups("ns").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got, err := c.PodGroups("ns").Create(ctx, gangPG(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.WorkloadRef == nil || got.Spec.WorkloadRef.TemplateName != "t" || got.Status.Conditions[0].Type != ConditionInitiallyScheduled {
		t.Errorf("Create returned %+v", got)
	}
	stored, err := dyn.Resource(gvr).Namespace("ns").Get(ctx, "g", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tn, _, _ := unstructured.NestedString(stored.Object, "spec", "podGroupTemplateRef", "workload", "podGroupTemplateName"); tn != "t" {
		t.Errorf("stored object is not v1alpha2: %v", stored.Object)
	}
	select {
	case e := <-w.ResultChan():
		pg, ok := e.Object.(*schedv1beta1.PodGroup)
		if e.Type != watch.Added || !ok || pg.Spec.WorkloadRef == nil {
			t.Errorf("watch event %s %T %+v, want Added *v1beta1.PodGroup", e.Type, e.Object, e.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s of the create")
	}
	patched, err := c.PodGroups("ns").Patch(ctx, "g", types.MergePatchType, []byte(`{"spec":{"schedulingPolicy":{"gang":{"minCount":1}}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.Spec.SchedulingPolicy.Gang.MinCount != 1 || patched.Spec.WorkloadRef == nil {
		t.Errorf("patched = %+v", patched.Spec)
	}
	l, err := c.PodGroups("ns").List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "g" {
		t.Fatalf("List = %+v, %v", l, err)
	}
	if _, err := c.Workloads("ns").Create(ctx, &schedv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"},
		Spec: schedv1beta1.WorkloadSpec{PodGroupTemplates: []schedv1beta1.PodGroupTemplate{{Name: "t"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.PodGroups("ns").Delete(ctx, "g", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(stored.Object)
	if strings.Contains(string(raw), "workloadRef") || strings.Contains(string(raw), ConditionInitiallyScheduled) {
		t.Errorf("v1beta1 names leaked into the v1alpha2 object: %s", raw)
	}
}

func TestNativeClientIsTyped(t *testing.T) {
	cs := fake.NewClientset()
	c, err := NewClient(V1beta1(), cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PodGroups("ns").Create(context.Background(), gangPG(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.SchedulingV1beta1().PodGroups("ns").Get(context.Background(), "g", metav1.GetOptions{}); err != nil {
		t.Errorf("v1beta1 client did not go through the typed client: %v", err)
	}
	if _, err := NewClient(V1alpha2(), cs, nil); err == nil {
		t.Error("v1alpha2 without a dynamic client: no error")
	}
}
