package deploy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/fakegpu/plugin"
)

const (
	// ContainerName is the plugin's container in the DaemonSet's pods (a test keeps the template in
	// step with it).
	ContainerName = "device-plugin"
	// nameLabel, with the value Name, selects the DaemonSet's pods (the template sets it).
	nameLabel = "app.kubernetes.io/name"
)

// ReadAllocations returns the allocation records (plugin.Allocation) the device plugin on nodeName
// wrote to its logs: for each of its pods on the node, oldest first, the previous container's
// records (when the container restarted) and then the current one's. A record is written only when
// the kubelet calls Allocate, so a record naming a pod's devices proves the kubelet allocated them.
//
// Records live as long as the logs do: a deleted pod (a rollout) takes its records with it, and a
// container restarted more than once keeps only the records of its last two runs.
func ReadAllocations(ctx context.Context, cs kubernetes.Interface, nodeName string) ([]plugin.Allocation, error) {
	pods, err := pluginPods(ctx, cs, nodeName)
	if err != nil {
		return nil, err
	}
	var out []plugin.Allocation
	for _, pod := range pods {
		if restarted(pod) {
			a, err := readAllocationLog(ctx, cs, pod, true)
			if err != nil && !isNoPreviousContainer(err) {
				return nil, err
			}
			out = append(out, a...)
		}
		a, err := readAllocationLog(ctx, cs, pod, false)
		if err != nil {
			return nil, err
		}
		out = append(out, a...)
	}
	return out, nil
}

// pluginPods lists the DaemonSet's pods on nodeName, oldest first (normally one; during a rollout a
// terminating pod may still be there, with records of its own).
func pluginPods(ctx context.Context, cs kubernetes.Interface, nodeName string) ([]corev1.Pod, error) {
	if nodeName == "" {
		return nil, errors.New("deploy: reading allocations: node name is empty")
	}
	selector := nameLabel + "=" + Name
	list, err := cs.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: selector,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("deploy: listing device plugin pods (%s) in %s on node %s: %w", selector, Namespace, nodeName, err)
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		// The API server applied the field selector already; the fake clientset ignores it.
		if p.Spec.NodeName == nodeName {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("deploy: no device plugin pod (%s) in %s on node %s: is the DaemonSet applied and the node eligible?", selector, Namespace, nodeName)
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	return pods, nil
}

// restarted reports whether the plugin container of pod has a previous instance whose logs the
// kubelet may still have.
func restarted(pod corev1.Pod) bool {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == ContainerName {
			return s.RestartCount > 0 || s.LastTerminationState.Terminated != nil
		}
	}
	return false
}

// isNoPreviousContainer reports the kubelet's answer for previous logs it no longer has (or never
// had): the pod status said the container restarted, but the kubelet's own view is what counts.
// Only the message identifies it; the API server relays it as a plain 400.
func isNoPreviousContainer(err error) bool {
	return strings.Contains(err.Error(), "previous terminated container") && strings.Contains(err.Error(), "not found")
}

// readAllocationLog parses the current or previous logs of pod's plugin container. Its errors name
// the pod and the node.
func readAllocationLog(ctx context.Context, cs kubernetes.Interface, pod corev1.Pod, previous bool) ([]plugin.Allocation, error) {
	which := "logs"
	if previous {
		which = "previous logs"
	}
	fail := func(err error) error {
		return fmt.Errorf("deploy: reading allocations from %s of pod %s/%s on node %s: %w", which, pod.Namespace, pod.Name, pod.Spec.NodeName, err)
	}
	rc, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: ContainerName, Previous: previous}).Stream(ctx)
	if err != nil {
		return nil, fail(err)
	}
	defer func() { _ = rc.Close() }()
	a, err := plugin.ParseAllocations(rc)
	if err != nil {
		return nil, fail(err)
	}
	return a, nil
}
