package scenarios

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// GangAPI is the group/version the builders speak.
const GangAPI = "scheduling.k8s.io/v1beta1"

// ErrGangAPIUnavailable is wrapped by Preflight errors, so callers can tell a misconfigured cluster
// from a network problem.
var ErrGangAPIUnavailable = errors.New("gang scheduling API unavailable")

// Preflight checks, before any test runs, that the cluster can express gang scheduling at all: the
// apiserver serves scheduling.k8s.io/v1beta1 podgroups, and keeps spec.schedulingGroup on pods (it
// silently drops the field when its GenericWorkload gate is off). Without this check every suite
// would fail for one configuration reason, burying it under dozens of confusing failures.
func Preflight(ctx context.Context, cs kubernetes.Interface, namespace string) error {
	res, err := cs.Discovery().ServerResourcesForGroupVersion(GangAPI)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: the apiserver does not serve %s; start kube-apiserver with --runtime-config=scheduling.k8s.io/v1beta1=true and --feature-gates=GenericWorkload=true (the gate alone does not enable the API)", ErrGangAPIUnavailable, GangAPI)
		}
		return fmt.Errorf("discover %s: %w", GangAPI, err)
	}
	var names []string
	for _, r := range res.APIResources {
		names = append(names, r.Name)
	}
	for _, want := range []string{"podgroups", "podgroups/status", "workloads"} {
		if !slices.Contains(names, want) {
			return fmt.Errorf("%w: %s is served but lacks %q (has %v); kube-apiserver needs --feature-gates=GenericWorkload=true", ErrGangAPIUnavailable, GangAPI, want, names)
		}
	}
	// A server-side dry run shows what the apiserver would store, without creating anything.
	probe := Pod(namespace, Member{Name: "gangbench-preflight", Group: "gangbench-preflight"})
	got, err := cs.CoreV1().Pods(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return fmt.Errorf("dry-run create of a pod with spec.schedulingGroup in namespace %q: %w", namespace, err)
	}
	if got.Spec.SchedulingGroup == nil || got.Spec.SchedulingGroup.PodGroupName == nil {
		return fmt.Errorf("%w: the apiserver silently dropped spec.schedulingGroup from a pod, so its GenericWorkload feature gate is off; start kube-apiserver with --feature-gates=GenericWorkload=true", ErrGangAPIUnavailable)
	}
	return nil
}

// PreflightNamespace is where the dry run happens; it always exists.
const PreflightNamespace = corev1.NamespaceDefault
