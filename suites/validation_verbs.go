package suites

import (
	"context"
	"fmt"
	"github.com/gangbench/gangbench/suites/framework"
	"testing"
	"time"

	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gangbench/gangbench/scenarios"
)

// The gang API's verbs as upstream's CRUD specs exercise them (test/e2e/scheduling/workload.go and
// the apiserver's generic registry): every verb a client may use on podgroups, and a client's
// write of podgroups/status. These judge the apiserver, like the rest of the validation suite.

const verbLabel = "gangbench.dev/verbs"

func verbFeatures() []framework.Feature {
	const suite = "validation"
	lane := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	ref := "gang-semantics §1.3 (the API and its subresources); upstream test/e2e/scheduling/workload.go"
	native := func(t *testing.T, l *framework.Lane) {
		t.Helper()
		if !l.Gang.API().Native() {
			t.Skipf("exercises %s; this cluster serves %s", "scheduling.k8s.io/v1beta1", l.Gang.API())
		}
	}
	return []framework.Feature{{
		Suite: suite, Name: "podgroups: every verb", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "VAL-22", Statement: "podgroups answer create, get, list, update, patch, delete and watch, and the watch sees ADDED, MODIFIED and DELETED for them", Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					native(t, l)
					api := l.Client.SchedulingV1beta1().PodGroups(l.Name)
					w, err := api.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=crud"})
					if err != nil {
						t.Fatalf("watch: %v", err)
					}
					defer w.Stop()
					pg := scenarios.PodGroup(l.Name, scenarios.Group{Name: "crud", MinCount: 2})
					if _, err := api.Create(ctx, pg, metav1.CreateOptions{}); err != nil {
						t.Fatalf("create: %v", err)
					}
					got, err := api.Get(ctx, "crud", metav1.GetOptions{})
					if err != nil || got.Spec.SchedulingPolicy.Gang == nil || got.Spec.SchedulingPolicy.Gang.MinCount != 2 {
						t.Fatalf("get: %v %+v", err, got)
					}
					list, err := api.List(ctx, metav1.ListOptions{})
					if err != nil || !verbListed(list, "crud") {
						t.Fatalf("list does not hold crud: %v", err)
					}
					got.Labels = map[string]string{verbLabel: "updated"}
					if got, err = api.Update(ctx, got, metav1.UpdateOptions{}); err != nil || got.Labels[verbLabel] != "updated" {
						t.Fatalf("update: %v", err)
					}
					if got, err = api.Patch(ctx, "crud", types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:"patched"}}}`, verbLabel), metav1.PatchOptions{}); err != nil || got.Labels[verbLabel] != "patched" {
						t.Fatalf("patch: %v", err)
					}
					if err := api.Delete(ctx, "crud", metav1.DeleteOptions{}); err != nil {
						t.Fatalf("delete: %v", err)
					}
					// No members, so the protection finalizer lets it go at once.
					seen := map[watch.EventType]bool{}
					wctx, cancel := context.WithTimeout(ctx, l.Env.Scaled(30*time.Second))
					defer cancel()
					for !seen[watch.Added] || !seen[watch.Modified] || !seen[watch.Deleted] {
						select {
						case ev, ok := <-w.ResultChan():
							if !ok {
								t.Fatalf("the watch closed; saw %v", seen)
							}
							seen[ev.Type] = true
						case <-wctx.Done():
							t.Fatalf("the watch saw %v, want ADDED, MODIFIED and DELETED", seen)
						}
					}
				}},
			{A: framework.Assertion{ID: "VAL-23", Statement: "deletecollection with a label selector removes exactly the PodGroups it selects", Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					native(t, l)
					api := l.Client.SchedulingV1beta1().PodGroups(l.Name)
					for i, v := range []string{"a", "a", "b"} {
						g := scenarios.Group{Name: fmt.Sprintf("coll-%d", i), MinCount: 1, Labels: map[string]string{verbLabel: v}}
						if _, err := api.Create(ctx, scenarios.PodGroup(l.Name, g), metav1.CreateOptions{}); err != nil {
							t.Fatalf("create %s: %v", g.Name, err)
						}
					}
					if err := api.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: verbLabel + "=a"}); err != nil {
						t.Fatalf("deletecollection: %v", err)
					}
					framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), "coll-0 and coll-1 gone, coll-2 kept", func(ctx context.Context) (bool, string, error) {
						list, err := api.List(ctx, metav1.ListOptions{LabelSelector: verbLabel})
						if err != nil {
							return false, "", err
						}
						var left []string
						for _, pg := range list.Items {
							left = append(left, pg.Name)
						}
						return len(left) == 1 && left[0] == "coll-2", fmt.Sprintf("left: %v", left), nil
					})
				}},
			{A: framework.Assertion{ID: "VAL-24", Statement: "a client can write podgroups/status: its condition reads back, and a spec change sent with it is not applied", Ref: ref + "; §4 (external clients can overwrite the condition through /status)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					native(t, l)
					api := l.Client.SchedulingV1beta1().PodGroups(l.Name)
					pg, err := api.Create(ctx, scenarios.PodGroup(l.Name, scenarios.Group{Name: "status-writer", MinCount: 3}), metav1.CreateOptions{})
					if err != nil {
						t.Fatalf("create: %v", err)
					}
					defer func() { _ = api.Delete(context.WithoutCancel(ctx), "status-writer", metav1.DeleteOptions{}) }()
					pg.Status.Conditions = []metav1.Condition{{Type: "GangbenchExternal", Status: metav1.ConditionTrue, Reason: "Written", Message: "by a client", LastTransitionTime: metav1.Now()}}
					pg.Spec.SchedulingPolicy.Gang.MinCount = 7
					if _, err := api.UpdateStatus(ctx, pg, metav1.UpdateOptions{}); err != nil {
						if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
							t.Fatalf("podgroups/status is not writable by a client: %v", err)
						}
						t.Fatalf("update status: %v", err)
					}
					got, err := api.Get(ctx, "status-writer", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					var found *metav1.Condition
					for i := range got.Status.Conditions {
						if got.Status.Conditions[i].Type == "GangbenchExternal" {
							found = &got.Status.Conditions[i]
						}
					}
					if found == nil || found.Reason != "Written" {
						t.Errorf("the client's condition did not read back: %+v", got.Status.Conditions)
					}
					if g := got.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 3 {
						t.Errorf("the spec change sent through /status was applied: %+v", got.Spec.SchedulingPolicy)
					}
				}},
		},
	}}
}

func verbListed(list *schedv1beta1.PodGroupList, name string) bool {
	for _, pg := range list.Items {
		if pg.Name == name {
			return true
		}
	}
	return false
}
