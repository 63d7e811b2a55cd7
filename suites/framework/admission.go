package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/scenarios"
)

// RefusedBindingMessage is what the apiserver answers when it refuses a binding RefuseBindings
// asked it to refuse; the scheduler's FailedScheduling event for the pod carries it.
const RefusedBindingMessage = "gangbench refuses the binding of this pod"

// refuseProbe names a pod that never exists: binding it answers NotFound once admission lets it
// through and the policy's message while the policy is in force, so it shows the policy is active
// without binding anything.
const refuseProbe = "gangbench-refuse-probe"

// RefuseBindings makes the apiserver refuse the binding (pods/binding) of the named pods of the
// lane, as an admission webhook or a policy engine refusing a placement does: the scheduler's
// binding cycle then fails after the pod was assumed and reserved. It uses a
// ValidatingAdmissionPolicy (GA since v1.30, on by default) and its binding, both cluster-scoped,
// named after the lane, labelled managed and confined to the lane's namespace. It returns once the
// policy is in force (policies load through an informer, so a fresh one is not yet enforced). The
// refusal lasts across steps until LiftBindingRefusal, or until the lane is deleted.
func (l *Lane) RefuseBindings(ctx context.Context, t testing.TB, pods ...string) {
	t.Helper()
	name := l.refusalName()
	quoted := make([]string, 0, len(pods)+1)
	for _, p := range append([]string{refuseProbe}, pods...) {
		quoted = append(quoted, "'"+p+"'")
	}
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{scenarios.ManagedLabel: "true"}},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LaneLabel: l.Name}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding"}},
				}}},
			},
			// The Binding's name is its pod's (pods/binding of pod P is a Binding named P).
			Validations: []admissionv1.Validation{{
				Expression: "!(object.metadata.name in [" + strings.Join(quoted, ", ") + "])",
				Message:    RefusedBindingMessage,
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{scenarios.ManagedLabel: "true"}},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	api := l.Client.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ValidatingAdmissionPolicy %s: %v", name, err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ValidatingAdmissionPolicyBinding %s: %v", name, err)
	}
	Eventually(ctx, t, l.Env.Scaled(30*time.Second), "the apiserver to enforce ValidatingAdmissionPolicy "+name, func(ctx context.Context) (bool, string, error) {
		refused, msg := l.probeRefusal(ctx)
		return refused, msg, nil
	})
}

// LiftBindingRefusal removes what RefuseBindings created and returns once bindings go through again.
func (l *Lane) LiftBindingRefusal(ctx context.Context, t testing.TB) {
	t.Helper()
	if err := l.deleteRefusal(ctx); err != nil {
		t.Fatal(err)
	}
	Eventually(ctx, t, l.Env.Scaled(30*time.Second), "the apiserver to accept bindings again", func(ctx context.Context) (bool, string, error) {
		refused, msg := l.probeRefusal(ctx)
		return !refused, msg, nil
	})
}

func (l *Lane) refusalName() string { return l.Name + "-refuse-binding" }

// deleteRefusal deletes the lane's refusal policy and its binding; absent ones are fine (most
// lanes never have one: Lane.Delete calls this for every lane).
func (l *Lane) deleteRefusal(ctx context.Context) error {
	api := l.Client.AdmissionregistrationV1()
	name := l.refusalName()
	// The binding first, so the policy is never left bound to nothing.
	if err := api.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ValidatingAdmissionPolicyBinding %s: %w", name, err)
	}
	if err := api.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ValidatingAdmissionPolicy %s: %w", name, err)
	}
	return nil
}

// probeRefusal binds the pod that never exists and says whether the policy refused it, with what
// the apiserver answered.
func (l *Lane) probeRefusal(ctx context.Context) (bool, string) {
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: refuseProbe, Namespace: l.Name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: refuseProbe},
	}
	err := l.Client.CoreV1().Pods(l.Name).Bind(ctx, b, metav1.CreateOptions{})
	if err == nil {
		return false, "binding a pod that does not exist succeeded"
	}
	return strings.Contains(err.Error(), RefusedBindingMessage), err.Error()
}
