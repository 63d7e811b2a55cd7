package scenarios

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/scenarios/gangapi"
)

// ErrGangAPIUnavailable is wrapped by Preflight errors, so callers can tell a misconfigured cluster
// from a network problem.
var ErrGangAPIUnavailable = gangapi.ErrUnavailable

// Preflight checks, before any test runs, that the cluster can express gang scheduling at all: the
// apiserver serves PodGroups and Workloads in a version gangbench speaks (v1beta1 on v1.37,
// v1alpha2 on v1.36), and keeps spec.schedulingGroup on pods (it silently drops the field when its
// GenericWorkload gate is off). It returns the version served. Without this check every suite would
// fail for one configuration reason, burying it under dozens of confusing failures.
func Preflight(ctx context.Context, cs kubernetes.Interface, namespace string) (gangapi.API, error) {
	api, err := gangapi.Discover(cs.Discovery())
	if err != nil {
		return api, err
	}
	res, err := cs.Discovery().ServerResourcesForGroupVersion(api.GroupVersion())
	if err != nil {
		return api, fmt.Errorf("discover %s: %w", api, err)
	}
	var names []string
	for _, r := range res.APIResources {
		names = append(names, r.Name)
	}
	for _, want := range []string{"podgroups", "podgroups/status", "workloads"} {
		if !slices.Contains(names, want) {
			return api, fmt.Errorf("%w: %s is served but lacks %q (has %v); kube-apiserver needs --feature-gates=GenericWorkload=true", ErrGangAPIUnavailable, api, want, names)
		}
	}
	// A server-side dry run shows what the apiserver would store, without creating anything.
	probe := Pod(namespace, Member{Name: "gangbench-preflight", Group: "gangbench-preflight"})
	got, err := cs.CoreV1().Pods(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return api, fmt.Errorf("dry-run create of a pod with spec.schedulingGroup in namespace %q: %w", namespace, err)
	}
	if got.Spec.SchedulingGroup == nil || got.Spec.SchedulingGroup.PodGroupName == nil {
		return api, fmt.Errorf("%w: the apiserver silently dropped spec.schedulingGroup from a pod, so its GenericWorkload feature gate is off; start kube-apiserver with --feature-gates=GenericWorkload=true", ErrGangAPIUnavailable)
	}
	return api, nil
}

// PreflightNamespace is where the dry run happens; it always exists.
const PreflightNamespace = corev1.NamespaceDefault
